/* gpukmm — what every service binary shares: command line, logging, the
 * supervisor's Control service (Ready, Heartbeat with the process's metrics,
 * gpukmm/metrics.h), SIGTERM.
 *
 * A service's main() looks like:
 *
 *     gk_svc svc;
 *     if (gk_svc_init(&svc, "watcher", argc, argv, extra_opts, &err)) ...
 *     ... open its sockets from svc.addr.* and register their fds on svc.loop ...
 *     gk_svc_ready(&svc);                // after its initial sync
 *     int rc = gk_loop_run(svc.loop);    // returns on SIGTERM/SIGINT
 *     ... close sockets ...
 *     gk_svc_fini(&svc);
 *     gk_ipc_fini();                     // last: joins nng's threads (ASan builds)
 *     return rc;
 *
 * gk_ipc_fini() is not optional: without it nng's ~14 threads are still alive
 * when exit() runs, and under ASan LeakSanitizer's exit-time check (which
 * stops every thread with ptrace) can then wait forever on one of them — the
 * service hangs at exit with its Control calls in flight, and the supervisor
 * has to SIGKILL it (tests/ipc/svc_test.c sigterm_with_control_calls_...).
 * In other builds it does nothing: nng 1.5.2's nng_fini can race its own
 * threads and abort (see gk_ipc_fini).
 *
 * Without a supervisor (no --control and no $GPUKMM_CONTROL) Ready and
 * heartbeats are skipped, so every service also runs standalone. */
#ifndef GPUKMM_SVC_H
#define GPUKMM_SVC_H

#include <stdint.h>

#include "gpukmm/err.h"
#include "gpukmm/ipc.h"
#include "gpukmm/loop.h"

/* Socket addresses, from flags or env (flag wins). Unset = NULL.
 * Defaults derive from --runtime-dir / $GPUKMM_RUNTIME_DIR when given:
 *   control   ipc://<dir>/control.sock     (supervisor Control)
 *   listen    ipc://<dir>/<service>.sock   (this service's RPC server)
 *   watcher   ipc://<dir>/watcher.sock     (Watcher RPC)
 *   events    ipc://<dir>/events.sock      (watcher bus)
 *   statusd   ipc://<dir>/statusd.sock     (Status RPC) */
typedef struct gk_svc_addrs {
	const char *runtime_dir;
	const char *control;
	const char *listen;
	const char *watcher;
	const char *events;
	const char *statusd;
} gk_svc_addrs;

/* Legacy (before include/gpukmm/metrics.h): a variable exported as
 * gpukmm_<name>, a counter when the name ends in _total, else a gauge. Use
 * gk_metric_counter_var / gk_metric_gauge_var in new code. */
typedef struct gk_svc_counter {
	const char *name;
	const char *help;
	const uint64_t *value;   /* read at each heartbeat */
} gk_svc_counter;

/* Extra command-line options of a service: getopt_long style, handled by
 * `fn` (return 0 ok, else an error message is printed and exit 2). */
typedef struct gk_svc_opt {
	const char *name;        /* long option name */
	int has_arg;             /* 0 / 1 */
	const char *help;        /* one line for --help */
	int (*fn)(void *user, const char *arg);
	void *user;
} gk_svc_opt;

typedef struct gk_svc {
	const char *name;
	gk_loop *loop;
	gk_svc_addrs addr;
	int heartbeat_ms;                /* default 1000, --heartbeat-ms / $GPUKMM_HEARTBEAT_MS */
	const char *kubeconfig;          /* --kubeconfig / $KUBECONFIG, NULL = in-cluster */
	const char *token_file;          /* --token-file / $GPUKMM_TOKEN_FILE */
	const char *ns;                  /* --namespace / $OPERATOR_NAMESPACE, default intel-gpu-base-operator */
	int stopping;                    /* set when SIGTERM/SIGINT arrived */
	/* private */
	gk_ipc_client *control;
	gk_timer_id hb_timer;
	int ready_sent;
	void (*on_stop)(void *user);
	void *on_stop_user;
	int ready_inflight, hb_inflight, finishing;
	uint64_t heartbeats_ok, heartbeats_failed;
	char *owned[8];                  /* strings built from --runtime-dir */
} gk_svc;

/* Parses common flags (--help, --log-format, --log-level, --runtime-dir,
 * --control, --listen, --watcher, --events, --statusd, --kubeconfig,
 * --token-file, --namespace, --heartbeat-ms) plus `extra` (terminated by a
 * zeroed entry, may be NULL); creates the loop; installs SIGTERM/SIGINT to stop
 * the loop (or call on_stop if set; a second signal stops at once); connects
 * to Control if configured. Environment fallbacks: $GPUKMM_RUNTIME_DIR,
 * $GPUKMM_CONTROL, $GPUKMM_LISTEN, $GPUKMM_WATCHER, $GPUKMM_EVENTS,
 * $GPUKMM_STATUSD, $GPUKMM_HEARTBEAT_MS, $KUBECONFIG, $GPUKMM_TOKEN_FILE,
 * $OPERATOR_NAMESPACE, $GPUKMM_LOG_FORMAT, $GPUKMM_LOG_LEVEL.
 * --help prints usage and exits 0. Returns 0, or 2 after printing a usage
 * error (caller exits with it); on 2 nothing needs gk_svc_fini.
 * The stop is bounded: from the first stop request (signal, or a heartbeat
 * reply asking to stop) the process has 3 s ($GPUKMM_STOP_BOUND_MS) to exit;
 * then a watchdog thread logs one line and _exits 0, so a teardown hung in
 * nng (nng#1543) ends cleanly before the supervisor's SIGKILL. */
int gk_svc_init(gk_svc *svc, const char *name, int argc, char **argv,
		const gk_svc_opt *extra, gk_err *err);
/* Legacy: registers the variables in the default metrics registry (what
 * every heartbeat sends: gpukmm/metrics.h). The variables must outlive the
 * service. */
void gk_svc_set_counters(gk_svc *svc, const gk_svc_counter *c, size_t n);
/* Called on SIGTERM/SIGINT instead of stopping the loop at once (to drain). */
void gk_svc_on_stop(gk_svc *svc, void (*fn)(void *user), void *user);
/* Tell the supervisor we are ready (once, asynchronously, retried every
 * heartbeat interval until it succeeds); then heartbeats start. A heartbeat
 * reply with stop_requested acts like SIGTERM. */
int gk_svc_ready(gk_svc *svc);
void gk_svc_fini(gk_svc *svc);

/* From now on the process has 3 s ($GPUKMM_STOP_BOUND_MS) to exit: past that a
 * watchdog thread logs "NAME: WHAT did not finish within N ms (teardown hung,
 * nng#1543?): exiting CODE now" and _exits CODE. For a teardown that can hang
 * in nng 1.5.2's nng_close / nng_fini (nng#1543): a service's stop (armed by
 * gk_svc_init's stop request, CODE 0), a command line tool's close once its
 * answer is printed (CODE its exit status). exit() disarms it first (an atexit
 * handler registered after the sanitizers' own), so LeakSanitizer's exit check
 * runs in full. Once per process: a second call changes nothing. */
void gk_exit_bound(const char *name, const char *what, int code);

#endif
