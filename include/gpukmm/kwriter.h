/* gpukmm — the bookkeeping of an asynchronous API writer: a bounded table of
 * objects (by key) that each have at most one call in flight, one timer, the
 * API's message of their last failed call, and their 409 / failure counts.
 * The timer either starts a re-read (after a 409: never a blind retry) or
 * wakes the writer's owner (after a failure, to ask again with backoff).
 * gpukmm-gater's DaemonSet writer and gpukmm-opmgr's operand writer share it;
 * each keeps its own data per entry (data_size bytes, zeroed). */
#ifndef GPUKMM_KWRITER_H
#define GPUKMM_KWRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpukmm/kube.h"
#include "gpukmm/loop.h"

#define GK_KW_KEY_MAX 700
#define GK_KW_RETRY_MS 500       /* after a failure, doubled per failure in a row */
#define GK_KW_RETRY_MAX_MS 30000

typedef struct gk_kw gk_kw;

typedef struct gk_kw_ent {
	gk_kw *kw;
	char key[GK_KW_KEY_MAX];
	gk_kube_call *call;      /* in flight (the owner sets and clears it) */
	gk_timer_id timer;
	bool reread_due;         /* the timer starts a re-read (else it wakes the owner) */
	int conflicts, failures; /* in a row */
	char err[512];           /* the API's message of the last failed call (or a hint), "" = none */
	void *data;              /* the owner's, data_size bytes */
} gk_kw_ent;

/* The timer of e fired (e->timer already cleared): reread says which kind. */
typedef void (*gk_kw_timer_fn)(void *user, gk_kw_ent *e, bool reread);

int gk_kw_new(gk_kw **out, gk_loop *loop, size_t max, size_t data_size, gk_kw_timer_fn fn, void *user);
/* Cancels every call in flight and every timer. */
void gk_kw_free(gk_kw *kw);
gk_kw_ent *gk_kw_find(gk_kw *kw, const char *key);
/* Find or add (an idle entry makes room at the bound: it only loses its last
 * error). NULL when full of busy entries or out of memory. *created says which. */
gk_kw_ent *gk_kw_get(gk_kw *kw, const char *key, bool *created);
/* Forget e when nothing is left to remember (no call, no timer, no error). */
void gk_kw_release(gk_kw_ent *e);
void gk_kw_after(gk_kw_ent *e, int ms, bool reread);
/* A failed call: keep msg, wake the owner after the backoff. */
void gk_kw_failed(gk_kw_ent *e, const char *msg);
/* A call succeeded: error and counts cleared. */
void gk_kw_ok(gk_kw_ent *e);
/* Entries with a call in flight or a re-read due. */
uint64_t gk_kw_inflight(const gk_kw *kw);

/* A writer's connection to the API server: the config (kubeconfig NULL = the
 * usual chain, lib/kube), a client limited to qps requests per second (0 = 50,
 * burst 100; < 0 = none; 15 s per request; writes are few — reads come from the
 * watcher), and a mux attached to the service loop for its async calls. On
 * error everything opened is closed again. Closing cancels the calls in flight. */
typedef struct gk_kube_conn {
	gk_kube_config cfg;
	gk_kube_client *kc;
	gk_kube_mux *mux;
} gk_kube_conn;
int gk_kube_conn_open(gk_kube_conn *c, const char *kubeconfig, double qps, const char *user_agent, gk_loop *loop,
		      gk_err *err);
void gk_kube_conn_close(gk_kube_conn *c);

#endif
