/* gpukmm supervisor — internal interfaces (DESIGN.md §6).
 *
 * Files of supervisor/, one job each:
 *   conf.c     the service table: profile defaults, JSON config file, validation
 *   pflags.c   profile options (webhook TLS/listen, leader election) -> service args
 *   fsm.c      the state × event table of one service (s6-supervise style)
 *   policy.c   pure restart policy: backoff, healthy reset, intensity window, exit decision
 *   spawn.c    fork + immediate exec of one child with its fds, env and privileges
 *   logfwd.c   children's output pipes -> prefixed lines -> bounded non-blocking sink
 *   notify.c   sd_notify by hand (READY=1, STOPPING=1, STATUS=, WATCHDOG=1)
 *   metrics.c  Prometheus text of the service table (pure rendering)
 *   http.c     /healthz /readyz (libmicrohttpd thread, state handed over under a mutex)
 *   metricsd.c /metrics: HTTPS + TokenReview/SubjectAccessReview through a credentialed
 *              service (AccessReview RPC), or plain HTTP with --metrics-insecure
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
	char note[320];               /* said once at start and in /readyz (e.g. the webhook is off) */
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
/* Drop the service of that name from the table: 0, or -1 when there is none. */
int gk_sup_conf_remove(gk_sup_conf *c, const char *name);

/* Profile options (pflags.c): flags/env of the supervisor appended to the args of
 * the service of that name ("webhook": --tls-cert, --tls-key, --listen; "watcher":
 * --leader-elect, --lease-name; "certd" and "webhook": the certificate directory). NULL/"" = not given. --without removes services
 * from the table first. A flag whose service is not in the table, a cert without a
 * key (or the reverse), or --lease-name without --leader-elect is
 * GK_INVALID_ARGUMENT. */
typedef struct gk_sup_pflags {
	const char *webhook_tls_cert, *webhook_tls_key, *webhook_listen;
	bool leader_elect;
	const char *lease_name;
	const char *without; /* "webhook" or "a,b": services left out (before the others apply) */
	const char *metrics_tls_cert, *metrics_tls_key; /* only checked (gk_sup_check_files) */
	/* the webhook's certificate kept by certd in this directory: certd gets --dir,
	 * the webhook --tls-cert/--tls-key there and --tls-wait; without it the
	 * profile's certd (one without --dir of its own) is left out */
	const char *webhook_cert_dir;
} gk_sup_pflags;
int gk_sup_conf_apply_pflags(gk_sup_conf *c, const gk_sup_pflags *f, gk_err *err);
/* Every file the options name, checked before anything starts (files.c): the
 * webhook's and /metrics' certificate and key (readable PEM, the key matches), the
 * webhook's certificate directory (a directory: certd fills it later), the token
 * file (readable), the kubeconfig or $KUBECONFIG list (parses, merged like
 * kubectl; the files it names are readable; an exec plugin's command is
 * there). The error names the option and the file. NULL = not given. */
int gk_sup_check_files(const gk_sup_pflags *f, const char *token_file, const char *kubeconfig,
		       const char *path_env, gk_err *err);
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

/* The signals that ask a service to stop, in the order they are sent: SIGCONT
 * first (a stopped service must run to handle the stop signal), then the stop
 * signal, and nothing after it. A SIGCONT sent after the stop signal, however
 * soon, can reach a service already exiting and discard a stop it depends on:
 * LeakSanitizer's exit-time check stops every thread with PTRACE_ATTACH (a
 * SIGSTOP), and a SIGCONT that lands in between throws that SIGSTOP away; its
 * tracer then waits forever and the supervisor SIGKILLs the service after its
 * stop timeout (an "unclean" stop, exit 143). Returns how many (2). */
int gk_sup_stop_signals(int stop_signal, int out[2]);

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

/* ---- spawning (spawn.c) --------------------------------------------------------- */

typedef struct gk_sup_spawn {
	const char *path;
	char *const *argv;
	char *const *envp;
	int null_fd;             /* /dev/null, becomes stdin */
	int out_fd;              /* write end of the service's log pipe, becomes stdout and stderr */
	long uid, gid;           /* -1 = keep */
	int pdeath_signal;       /* sent to the child when the supervisor dies */
} gk_sup_spawn;

/* fork + immediate exec (nng is not fork-safe: the child runs only system calls):
 * new session and process group, default signal mask and dispositions,
 * PR_SET_PDEATHSIG (and exits if the supervisor is already gone), stdin
 * /dev/null, stdout+stderr to out_fd, every other fd closed on exec, optional
 * gid/uid drop, PR_SET_NO_NEW_PRIVS. A failure in the child before exec is
 * reported here with the step and errno; the child is then reaped. */
int gk_sup_spawn_child(const gk_sup_spawn *sp, pid_t *pid, gk_err *err);

/* argv for a service: path, then its args with "{runtime_dir}" and "{name}"
 * expanded. NULL-terminated, free with gk_sup_strv_free. NULL on OOM. */
char **gk_sup_build_argv(const gk_sup_svc_conf *s, const char *runtime_dir);

typedef struct gk_sup_env_in {
	char *const *base;       /* the supervisor's environment */
	const char *runtime_dir;
	const char *control_url;
	const char *token_file;  /* NULL = none */
	const char *kubeconfig;  /* NULL = none */
} gk_sup_env_in;
/* The child's environment: the supervisor's minus systemd's notify/watchdog/
 * socket-activation variables; plus GPUKMM_RUNTIME_DIR, GPUKMM_CONTROL,
 * GPUKMM_HEARTBEAT_MS and the service's own env (which wins). A service with
 * "credentials" gets GPUKMM_TOKEN_FILE and KUBECONFIG (the file or the
 * ':'-separated list, merged by lib/kube) and keeps HOME (exec plugins read
 * their own credentials there). A service without gets no path to any: no
 * KUBECONFIG, no GPUKMM_TOKEN_FILE, no cloud credential variables (AWS_*,
 * AZURE_*, GOOGLE_*, CLOUDSDK_*, XDG_CONFIG_HOME) and HOME=/nonexistent, so
 * no ~/.kube/config or plugin credentials can be found through it. */
char **gk_sup_build_env(const gk_sup_svc_conf *s, const gk_sup_env_in *in);
void gk_sup_strv_free(char **v);

/* ---- log forwarding (logfwd.c) ---------------------------------------------- */

#define GK_SUP_LINE_MAX 4096

/* Splits a byte stream into lines (a longer line is cut into pieces). */
typedef struct gk_sup_linebuf {
	char buf[GK_SUP_LINE_MAX];
	size_t len;
} gk_sup_linebuf;
typedef void (*gk_sup_line_fn)(void *user, const char *line, size_t len);
void gk_sup_lines_feed(gk_sup_linebuf *lb, const char *data, size_t n, gk_sup_line_fn fn, void *user);
void gk_sup_lines_flush(gk_sup_linebuf *lb, gk_sup_line_fn fn, void *user); /* emit a partial tail */

/* The bounded, never-blocking sink all output goes through (fd is non-blocking). */
typedef struct gk_sup_out {
	int fd;
	int json;                /* 1: one JSON object per line */
	char *buf;
	size_t cap, start, len;  /* pending bytes are buf[start .. start+len) */
	uint64_t lines, dropped, dropped_unreported;
	uint64_t write_errors;
} gk_sup_out;
int gk_sup_out_init(gk_sup_out *o, int fd, size_t cap, int json, gk_err *err);
void gk_sup_out_fini(gk_sup_out *o);
/* One line of a service (no trailing newline), prefixed "name | " or wrapped in JSON. */
void gk_sup_out_line(gk_sup_out *o, const char *service, pid_t pid, const char *line, size_t len);
/* Bytes that already form whole lines (the supervisor's own log records). */
void gk_sup_out_raw(gk_sup_out *o, const char *data, size_t len);
/* Write what the fd takes now; returns true while bytes are still pending. */
bool gk_sup_out_flush(gk_sup_out *o);

/* ---- sd_notify (notify.c) ---------------------------------------------------- */

/* Opens a datagram socket to $NOTIFY_SOCKET ("/path" or "@abstract"); -1 when
 * unset or invalid (then every send is a no-op). */
int gk_sup_notify_open(const char *notify_socket, gk_err *err);
int gk_sup_notify_send(int fd, const char *msg);
/* Half of $WATCHDOG_USEC in ms when the watchdog is meant for this pid, else 0. */
int64_t gk_sup_watchdog_ms(const char *usec, const char *wpid, pid_t self);

/* ---- runtime directory (rundir.c) ------------------------------------------ */

/* Who owns the runtime dir. Services only reach the supervisor and each other
 * through sockets in it, so a service dropped to another uid must be able to
 * create its socket there and connect to the others. The rule: every service
 * that drops privileges ("user") drops to the same uid:gid, and the dir (0700)
 * is handed to that uid:gid; root (the supervisor, services that keep its uid)
 * still reaches everything. The dir is then the only access boundary, so the
 * supervisor's control.sock is made 0666 inside it (services' own sockets keep
 * 0600: root and the owner). A group-shared 0750/0660 layout would work for
 * several uids too, but needs a umask/mode in every service and a socket mode
 * per listener; one service user is what the Deployments use. Sets *uid and *gid to
 * -1 when no service drops privileges; two different uid:gid pairs are an
 * INVALID_ARGUMENT naming the service. */
int gk_sup_rundir_owner(const gk_sup_conf *c, long *uid, long *gid, gk_err *err);
/* Create dir 0700 (or check an existing one: a directory, not a symlink, ours
 * or owner_uid's, then chmod 0700), hand it to owner_uid:owner_gid when >= 0
 * (gk_sup_rundir_owner), take its lock (a second supervisor on it fails with
 * ALREADY_EXISTS) and remove stale *.sock files. Returns the lock fd in *lock_fd. */
int gk_sup_rundir_prepare(const char *dir, long owner_uid, long owner_gid, int *lock_fd, gk_err *err);
/* Remove our socket files (at exit). */
void gk_sup_rundir_clean(const char *dir);
/* Default: $RUNTIME_DIRECTORY, else /run/gpukmm as root, else $XDG_RUNTIME_DIR/gpukmm,
 * else <tmp>/gpukmm-<uid>. Malloc'd. */
char *gk_sup_rundir_default(void);

/* ---- the running supervisor (sup.c, control.c, metrics.c, http.c) ------------- */

#include "gpukmm/loop.h"

struct gk_sup;
struct Gpukmm__MetricSet;
struct gk_metrics;
struct gk_metric;

typedef struct gk_sup_svc {
	const gk_sup_svc_conf *conf;
	struct gk_sup *sup;
	enum gk_sup_state state;
	pid_t pid;                /* main process, 0 when none */
	pid_t pgid;               /* its process group (kept after it died, for leftovers) */
	int64_t spawned_ms, ready_ms, last_hb_ms;
	uint32_t restarts;        /* restarts scheduled so far */
	unsigned failures;        /* consecutive, for the backoff */
	int last_exit_code;       /* -1: none yet / killed by a signal */
	int last_signal;          /* 0: none */
	int wstatus;              /* of the exit being handled */
	int64_t backoff_ms;       /* delay of the pending restart */
	gk_timer_id timer;        /* the one timer of this service */
	bool hung;                /* killed for lost liveness */
	int log_rd, log_wr;       /* output pipe, kept across restarts */
	gk_sup_linebuf lines;
	struct Gpukmm__MetricSet *metrics; /* of the latest heartbeat of this process, NULL = none */
	char last_error[200];
} gk_sup_svc;

typedef struct gk_sup_http gk_sup_http;
typedef struct gk_sup_msrv gk_sup_msrv;

typedef struct gk_sup_opts {
	const char *runtime_dir;
	const char *token_file;
	const char *kubeconfig;
	int log_json;
	const char *http_listen;      /* "ADDR:PORT", NULL = no HTTP */
	const char *metrics_listen;   /* "ADDR:PORT", NULL = no /metrics */
	bool metrics_insecure;        /* plain HTTP, no authentication (local use) */
	const char *metrics_cert, *metrics_key;  /* serving pair; NULL = self-signed at start */
	const char *metrics_reviewer; /* the service that reviews tokens (AccessReview) */
	char *const *environ_base;
	int out_fd;                   /* where forwarded lines go (1) */
	int control_socket_mode;      /* control.sock mode; 0 = 0600 (0666 when the
				       * runtime dir is handed to a service user) */
	const char *note;             /* a line for /readyz (conf.note), NULL = none */
} gk_sup_opts;

typedef struct gk_sup {
	gk_sup_conf *conf;
	gk_sup_svc *svcs;
	size_t n;
	gk_loop *loop;
	gk_sup_opts opts;
	char control_url[4200];
	gk_sup_out out;
	gk_sup_intensity intensity;
	uint64_t rng;
	int null_fd;
	int notify_fd;
	int64_t watchdog_ms;
	int64_t start_ms;
	bool ready;               /* every required service is ready */
	bool ready_notified;
	bool stopping;
	bool in_stop;
	bool escalated;
	bool unclean;             /* a service needed SIGKILL or died badly during stop */
	int stop_signo;           /* signal that started the stop, 0 = none */
	size_t stop_cursor;
	int exit_code;
	uint64_t unknown_reaped;  /* children reaped that were no service's main process */
	uint64_t spawn_errors;
	bool out_watched;         /* the sink's fd is in the loop for EPOLLOUT */
	void *log_stream;         /* FILE * of our own log records into out */
	void *control;            /* gk_ipc_server * */
	void *control_impl;
	gk_sup_http *http;
	gk_sup_msrv *msrv;
	struct gk_metrics *reg;   /* the supervisor's own families (metrics.c) */
	struct gk_metric *fam[24];
	size_t metrics_skipped;   /* service families left out of the last render */
} gk_sup;

/* Set up (nothing started yet): loop, signals, output, pipes, Control server, HTTP. */
int gk_sup_init(gk_sup *s, gk_sup_conf *conf, const gk_sup_opts *opts, gk_err *err);
/* Start every service in order and run until stopped; returns the exit code:
 * 0 clean stop, 1 intensity exceeded (escalation), 128+sig when a stop by
 * signal could not stop everything cleanly. */
int gk_sup_run(gk_sup *s);
void gk_sup_fini(gk_sup *s);
/* Feed one event to one service (the table decides). */
void gk_sup_event(gk_sup *s, gk_sup_svc *v, enum gk_sup_event ev);
/* Begin the ordered stop (reverse start order). signo 0 = escalation. */
void gk_sup_stop_all(gk_sup *s, int signo);
gk_sup_svc *gk_sup_find(gk_sup *s, pid_t pid, const char *name);
int64_t gk_sup_now_ms(void);   /* CLOCK_MONOTONIC */

/* control.c: register the Control service on s->control. */
int gk_sup_control_open(gk_sup *s, gk_err *err);
void gk_sup_control_close(gk_sup *s);

/* metrics.c: the supervisor's registry (init: 0, -1 on OOM); the Prometheus
 * text of the supervisor and its services (malloc'd, NULL on OOM). */
int gk_sup_metrics_init(gk_sup *s);
void gk_sup_metrics_fini(gk_sup *s);
char *gk_sup_metrics_render(gk_sup *s, int64_t now_ms, size_t *len);
/* Keep a heartbeat's metrics as the service's latest (NULL/0: none). */
void gk_sup_svc_set_metrics(gk_sup_svc *v, struct Gpukmm__MetricSet *m);
/* Current RSS of this process in bytes (0 if unknown). */
uint64_t gk_sup_rss_bytes(void);

/* http.c: the loop-answers machinery (init), the probe server (start), and
 * a freshly rendered /metrics page for another thread (malloc'd; NULL when
 * the loop does not answer in time). */
int gk_sup_http_init(gk_sup *s, gk_err *err);
int gk_sup_http_start(gk_sup *s, const char *listen, gk_err *err);
char *gk_sup_http_metrics(gk_sup_http *h, size_t *len);
void gk_sup_http_stop(gk_sup *s);

/* metricsd.c: the /metrics server of opts.metrics_listen. */
int gk_sup_msrv_start(gk_sup *s, gk_err *err);
void gk_sup_msrv_stop(gk_sup *s);
/* The supervisor's families for its counters (metrics.c owns the registry). */
struct gk_metric *gk_sup_metric(gk_sup *s, int which);
enum { GK_SUP_M_REQUESTS = 0, GK_SUP_M_REVIEWS };

#endif
