/* gpukmm supervisor — internal interfaces (DESIGN.md §6).
 *
 * Files of supervisor/, one job each:
 *   conf.c     the service table: profile defaults, JSON config file, validation
 *   fsm.c      the state × event table of one service (s6-supervise style)
 *   policy.c   pure restart policy: backoff, healthy reset, intensity window, exit decision
 *   spawn.c    fork + immediate exec of one child with its fds, env and privileges
 *   logfwd.c   children's output pipes -> prefixed lines -> bounded non-blocking sink
 *   notify.c   sd_notify by hand (READY=1, STOPPING=1, STATUS=, WATCHDOG=1)
 *   metrics.c  Prometheus text of the service table (pure rendering)
 *   http.c     /healthz /readyz /metrics (libmicrohttpd thread, state handed over under a mutex)
 *   rundir.c   runtime directory: 0700, lock against a second instance, stale sockets
 *   sup.c      the supervisor itself: services, events, actions, stop and escalation
 *   control.c  the Control RPC service (Ready, Heartbeat, List)
 *   main.c     command line and wiring
 * Everything here except main.c is in libgpukmm-app.a, so unit tests call it directly. */
#ifndef GPUKMM_SUPERVISOR_SUP_H
#define GPUKMM_SUPERVISOR_SUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpukmm/err.h"

/* ---- configuration (conf.c) ------------------------------------------------ */

enum gk_sup_restart { GK_SUP_PERMANENT = 0, GK_SUP_TRANSIENT, GK_SUP_TEMPORARY };

#define GK_SUP_MAX_SERVICES 32
#define GK_SUP_NAME_MAX 32

typedef struct gk_sup_backoff {
	int64_t initial_ms;      /* first restart delay (0 = immediately) */
	int64_t max_ms;          /* cap */
	double jitter;           /* 0..1: delay is stretched by up to this fraction */
	int64_t reset_after_ms;  /* ready this long without dying: back to initial */
} gk_sup_backoff;

typedef struct gk_sup_svc_conf {
	char *name;              /* [a-z0-9-], unique; used in socket names and metrics labels */
	char *binary;            /* as configured */
	char *path;              /* resolved executable (conf_resolve) */
	char **args;             /* extra arguments (NULL-terminated, may be empty) */
	size_t n_args;
	char **env;              /* "KEY=VALUE" added to the child's environment */
	size_t n_env;
	enum gk_sup_restart restart;
	gk_sup_backoff backoff;
	int stop_signal;         /* default SIGTERM (SIGCONT follows) */
	int64_t stop_timeout_ms; /* then SIGKILL to the process group */
	bool required;           /* the supervisor is ready only when this service is */
	int64_t ready_timeout_ms;     /* starting longer than this: killed and restarted (0 = never) */
	int64_t heartbeat_ms;         /* interval asked of the service */
	int64_t heartbeat_timeout_ms; /* no heartbeat this long once ready: killed (0 = no check) */
	bool credentials;        /* gets GPUKMM_TOKEN_FILE / KUBECONFIG */
	long uid, gid;           /* -1 = keep the supervisor's */
} gk_sup_svc_conf;

typedef struct gk_sup_conf {
	gk_sup_svc_conf *svcs;
	size_t n_svcs;
	int intensity_max;            /* more than this many restarts ... */
	int64_t intensity_window_ms;  /* ... within this window: stop everything, exit 1 */
} gk_sup_conf;

/* Default services of a profile ("controller", "node", "all"). */
int gk_sup_conf_profile(gk_sup_conf *c, const char *profile, gk_err *err);
/* Parse a JSON config (see `gpukmm --help`). Services given there replace the
 * profile's (profile may be NULL when the file lists services). Errors name the
 * field: "services[1].backoff.max_ms: must be >= initial_ms". */
int gk_sup_conf_parse(gk_sup_conf *c, const char *profile, const char *json, size_t len, gk_err *err);
int gk_sup_conf_load(gk_sup_conf *c, const char *profile, const char *file, gk_err *err);
/* Find each service's executable: a name with '/' as is; else next to `self_dir`,
 * then in $PATH. Error names the field. */
int gk_sup_conf_resolve(gk_sup_conf *c, const char *self_dir, const char *path_env, gk_err *err);
void gk_sup_conf_free(gk_sup_conf *c);
const char *gk_sup_restart_name(enum gk_sup_restart r);
/* "SIGTERM", "TERM", "15" -> 15; -1 if unknown. */
int gk_sup_signal_parse(const char *s);

/* ---- state × event table (fsm.c) --------------------------------------------- */

enum gk_sup_state {
	GK_SUP_DOWN = 0,   /* not running, not wanted (before start, after stop, temporary done) */
	GK_SUP_STARTING,   /* spawned, waiting for Control.Ready */
	GK_SUP_READY,      /* Control.Ready received */
	GK_SUP_STOPPING,   /* stop signal sent, waiting for the exit */
	GK_SUP_BACKOFF,    /* died, restart timer running */
	GK_SUP_FAILED,     /* died and will not be restarted */
	GK_SUP_NSTATES
};

enum gk_sup_event {
	GK_SUP_EV_START = 0, /* bring it up */
	GK_SUP_EV_READY,     /* Control.Ready from the current pid */
	GK_SUP_EV_EXIT,      /* the main process was reaped */
	GK_SUP_EV_TIMEOUT,   /* this service's timer fired (backoff, stop, start, liveness) */
	GK_SUP_EV_HANG,      /* liveness lost: heartbeats stopped, or never became ready */
	GK_SUP_EV_STOP,      /* take it down (shutdown or escalation) */
	GK_SUP_NEVENTS
};

enum gk_sup_action {
	GK_SUP_A_NOP = 0,    /* nothing to do */
	GK_SUP_A_SPAWN,      /* start the process, arm the ready timeout */
	GK_SUP_A_UP,         /* mark ready, arm liveness */
	GK_SUP_A_DIED,       /* account the death, then backoff / failed / down (policy.c) */
	GK_SUP_A_TERM,       /* stop signal + SIGCONT, arm the stop timeout */
	GK_SUP_A_KILL,       /* SIGKILL to the process group (the exit follows) */
	GK_SUP_A_STOPPED,    /* exit after a requested stop: down */
	GK_SUP_A_CANCEL,     /* drop the restart timer: down */
	GK_SUP_A_LIVENESS,   /* timer while starting/ready: check ready timeout / heartbeat age */
};

typedef struct gk_sup_trans {
	enum gk_sup_action action;
	int next;            /* the next state, or -1: the action decides */
} gk_sup_trans;

gk_sup_trans gk_sup_fsm(enum gk_sup_state s, enum gk_sup_event e);
const char *gk_sup_state_name(enum gk_sup_state s);
const char *gk_sup_event_name(enum gk_sup_event e);
const char *gk_sup_action_name(enum gk_sup_action a);

/* ---- restart policy (policy.c) ----------------------------------------------- */

/* Delay before restart number `failures` (1 = first consecutive failure).
 * u in [0,1) is the random draw for the jitter. */
int64_t gk_sup_backoff_delay(const gk_sup_backoff *b, unsigned failures, double u);

enum gk_sup_exit_verdict { GK_SUP_RESTART = 0, GK_SUP_DONE, GK_SUP_GIVE_UP };
/* What to do after the process died on its own (not asked to stop).
 * clean = exit code 0. */
enum gk_sup_exit_verdict gk_sup_exit_decide(enum gk_sup_restart r, bool clean);

/* Consecutive-failure count after a death: reset when the service was ready
 * for at least reset_after_ms. */
unsigned gk_sup_failures_after(unsigned failures, int64_t ready_for_ms, int64_t reset_after_ms);

/* Restart intensity: a rolling window of restart times. */
#define GK_SUP_INTENSITY_CAP 256
typedef struct gk_sup_intensity {
	int max;
	int64_t window_ms;
	int64_t t[GK_SUP_INTENSITY_CAP];  /* ring of the last restart times */
	unsigned head, count;
} gk_sup_intensity;
void gk_sup_intensity_init(gk_sup_intensity *w, int max, int64_t window_ms);
/* Record a restart at now_ms; true when more than max restarts fall in the window. */
bool gk_sup_intensity_add(gk_sup_intensity *w, int64_t now_ms);
/* Restarts currently inside the window. */
int gk_sup_intensity_count(const gk_sup_intensity *w, int64_t now_ms);

/* xorshift64* for the jitter; state lives in the supervisor, never global. */
double gk_sup_rand01(uint64_t *state);

#endif
