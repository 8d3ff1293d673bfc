/* gpukmm — the supervisor: command line and wiring (see sup.h for the parts). */
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpukmm/ipc.h"
#include "gpukmm/log.h"
#include "gpukmm/version.h"
#include "sup.h"

extern char **environ;

static const char usage_text[] =
"usage: gpukmm --profile controller|node|all|webhook [--config FILE] [options]\n"
"       gpukmm --config FILE [options]\n"
"\n"
"Starts the gpukmm services of a profile, restarts each on failure, and stops\n"
"them in reverse order on SIGTERM/SIGINT.\n"
"\n"
"Profiles (service binaries are looked up next to gpukmm, then in $PATH):\n"
"  controller  watcher, modmgr, gater, opmgr, statusd, certd (with --webhook-cert-dir),\n"
"              webhook\n"
"  node        prober, statusd --mode node\n"
"  all         both (the node statusd runs as 'node-statusd' on its own socket)\n"
"  webhook     the webhook alone (a container of its own, without API credentials,\n"
"              next to one running --profile controller --without webhook)\n"
"\n"
"Options:\n"
"  --profile P          controller, node, all or webhook\n"
"  --config FILE        JSON config (below); its services replace the profile's\n"
"  --runtime-dir DIR    sockets live here (created 0700, locked, stale sockets removed);\n"
"                       default $RUNTIME_DIRECTORY, /run/gpukmm as root, else\n"
"                       $XDG_RUNTIME_DIR/gpukmm\n"
"  --http-listen A:P    serve /healthz, /livez, /readyz: the kubelet's probes, no\n"
"                       authentication (e.g. 0.0.0.0:8081, [::]:8081; IPv6 in brackets;\n"
"                       port 0 = any)\n"
"  --metrics-listen A:P serve /metrics (Prometheus text) here: HTTPS, and the client's\n"
"                       bearer token must be allowed `get` on the non-resource URL\n"
"                       /metrics (TokenReview + SubjectAccessReview, asked through the\n"
"                       --metrics-reviewer service; the supervisor holds no credentials).\n"
"                       $GPUKMM_METRICS_LISTEN; none = no /metrics\n"
"  --metrics-insecure   plain HTTP and no authentication, for local use; the address\n"
"                       then defaults to 127.0.0.1:8080   $GPUKMM_METRICS_INSECURE=1\n"
"  --metrics-tls-cert F serving certificate (PEM, re-read when it changes) and its key;\n"
"  --metrics-tls-key F  without them a self-signed one is made at start\n"
"                       $GPUKMM_METRICS_TLS_CERT / $GPUKMM_METRICS_TLS_KEY\n"
"  --metrics-reviewer N the credentialed service that reviews tokens (default statusd;\n"
"                       its socket ipc://DIR/N.sock serves gpukmm.AccessReview), or\n"
"                       the ipc:// URL of one that another supervisor runs (the node\n"
"                       pod's prober container: its statusd's socket)\n"
"  --token-file FILE    API token path, handed (as GPUKMM_TOKEN_FILE) only to services\n"
"                       with \"credentials\": true ($GPUKMM_TOKEN_FILE)\n"
"  --kubeconfig FILE    likewise, as KUBECONFIG; default $KUBECONFIG (a ':'-separated\n"
"                       list, merged like kubectl). Services without credentials get\n"
"                       neither, and HOME=/nonexistent\n"
"  --log-format F       text (each service line prefixed 'name | ') or json\n"
"  --log-level L        debug, info, warn, error\n"
"  --check              validate the configuration and every file it names (the\n"
"                       kubeconfig, token file, webhook certificate and key), print\n"
"                       the service table, exit (2 naming what is wrong)\n"
"  --version            print the version and exit\n"
"  -h, --help           this text\n"
"\n"
"Profile options (appended to the args of the service of that name; an option whose\n"
"service is not configured is an error). Each has an environment equivalent, used\n"
"when the option is not given:\n"
"  --webhook-tls-cert F  webhook serving certificate (PEM)      $GPUKMM_WEBHOOK_TLS_CERT\n"
"  --webhook-tls-key F   its private key (PEM); both or neither $GPUKMM_WEBHOOK_TLS_KEY\n"
"                        (neither: the webhook is not started; said once and in /readyz)\n"
"  --webhook-listen A:P  webhook HTTPS address (default :9443)  $GPUKMM_WEBHOOK_LISTEN\n"
"  --webhook-cert-dir D  the webhook's certificate is kept by gpukmm-certd in D:\n"
"                        certd (only started with it) makes and rotates it in the\n"
"                        Secret gpukmm-webhook-cert, keeps the webhook configurations'\n"
"                        caBundle current and writes D/tls.crt, D/tls.key; the webhook\n"
"                        serves them, waiting until they exist (not ready until then).\n"
"                        Not with --webhook-tls-cert      $GPUKMM_WEBHOOK_CERT_DIR\n"
"  --leader-elect        watcher elects a leader through a Lease $GPUKMM_LEADER_ELECT=1\n"
"                        in the operator namespace ($OPERATOR_NAMESPACE)\n"
"  --lease-name N        that Lease (default gpukmm-controller) $GPUKMM_LEASE_NAME\n"
"  --without S[,S...]    leave these services out (applied first) $GPUKMM_WITHOUT\n"
"\n"
"Config file (every field optional except services[].name; unknown fields are errors):\n"
"  {\n"
"    \"intensity\": {\"max_restarts\": 5, \"window_ms\": 60000},\n"
"    \"services\": [{\n"
"      \"name\": \"watcher\",                 a-z 0-9 '-', unique\n"
"      \"binary\": \"gpukmm-watcher\",        default gpukmm-<name>; with '/' a path\n"
"      \"args\": [\"--listen\", \"ipc://{runtime_dir}/{name}.sock\"],\n"
"      \"env\": {\"KEY\": \"value\"},\n"
"      \"restart\": \"permanent\",            permanent | transient (only after a failure)\n"
"                                       | temporary (never)\n"
"      \"backoff\": {\"initial_ms\": 500, \"max_ms\": 300000, \"jitter\": 0.2,\n"
"                  \"reset_after_ms\": 600000},  doubling, capped, reset once ready that long\n"
"      \"stop\": {\"signal\": \"SIGTERM\", \"timeout_ms\": 5000},  then SIGKILL to its group\n"
"      \"ready\": {\"required\": true, \"timeout_ms\": 300000},   not ready in time: restarted\n"
"      \"heartbeat\": {\"interval_ms\": 1000, \"timeout_ms\": 10000}, silent that long: restarted\n"
"      \"credentials\": false,              gets the token file / kubeconfig\n"
"      \"user\": 65534, \"group\": 65534       drop to this uid/gid (default: keep; group\n"
"                                       defaults to user; supplementary groups dropped)\n"
"    }]\n"
"  }\n"
"\n"
"More than intensity.max_restarts restarts within window_ms stops everything and\n"
"exits 1, so systemd or the kubelet takes over. A service that exits 2 (a usage\n"
"error) is not restarted: it is 'failed' in the service table, the others go on.\n"
"\n"
"Services get GPUKMM_RUNTIME_DIR, GPUKMM_CONTROL (ipc://DIR/control.sock) and\n"
"GPUKMM_HEARTBEAT_MS; they report Control.Ready and heartbeats there.\n"
"`gpukmmctl status` shows the service table.\n"
"\n"
"systemd: Type=notify (READY=1 once every required service is ready, STOPPING=1,\n"
"STATUS=, WATCHDOG=1 every WATCHDOG_USEC/2). PID 1: reaps every child.\n"
"\n"
"Exit status: 0 stopped cleanly; 1 restart intensity exceeded or a runtime error;\n"
"2 usage or configuration error (nothing started); 128+N stopped by signal N but\n"
"some service had to be killed or did not exit cleanly.\n";

enum { OPT_PROFILE = 1, OPT_CONFIG, OPT_RUNDIR, OPT_HTTP, OPT_TOKEN, OPT_KUBECONFIG, OPT_LOGFMT,
       OPT_LOGLVL, OPT_CHECK, OPT_WH_CERT, OPT_WH_KEY, OPT_WH_LISTEN, OPT_LEADER, OPT_LEASE, OPT_WITHOUT, OPT_M_LISTEN,
       OPT_M_INSECURE, OPT_M_CERT, OPT_M_KEY, OPT_M_REVIEWER,
       OPT_VERSION, OPT_WH_DIR };

#define METRICS_INSECURE_DEFAULT "127.0.0.1:8080"

static const char *env_or(const char *v, const char *env)
{
	const char *e = getenv(env);
	return v ? v : e && *e ? e : NULL;
}

/* The /metrics options, checked against the service table: 0, or a message. */
static const char *metrics_opts(gk_sup_opts *o, int insecure, const gk_sup_conf *c)
{
	if (insecure < 0) {
		const char *e = getenv("GPUKMM_METRICS_INSECURE");
		if (e && *e && strcmp(e, "0") && strcmp(e, "1") && strcmp(e, "true") && strcmp(e, "false"))
			return "GPUKMM_METRICS_INSECURE: 1, true, 0 or false";
		insecure = e && (!strcmp(e, "1") || !strcmp(e, "true"));
	}
	o->metrics_insecure = insecure;
	o->metrics_listen = env_or(o->metrics_listen, "GPUKMM_METRICS_LISTEN");
	o->metrics_cert = env_or(o->metrics_cert, "GPUKMM_METRICS_TLS_CERT");
	o->metrics_key = env_or(o->metrics_key, "GPUKMM_METRICS_TLS_KEY");
	if (!o->metrics_reviewer)
		o->metrics_reviewer = "statusd";
	if (insecure && !o->metrics_listen)
		o->metrics_listen = METRICS_INSECURE_DEFAULT;
	if (!o->metrics_cert != !o->metrics_key)
		return "--metrics-tls-cert and --metrics-tls-key go together";
	if (insecure && o->metrics_cert)
		return "--metrics-insecure serves plain HTTP: no --metrics-tls-cert";
	if (!o->metrics_listen || insecure)
		return NULL;
	if (strncmp(o->metrics_reviewer, "ipc://", 6) == 0)
		return o->metrics_reviewer[6] ? NULL : "--metrics-reviewer: an empty ipc:// URL";
	if (strstr(o->metrics_reviewer, "://"))
		return "--metrics-reviewer: a service name, or an ipc:// URL";
	for (size_t i = 0; i < c->n_svcs; i++)
		if (strcmp(c->svcs[i].name, o->metrics_reviewer) == 0)
			return c->svcs[i].credentials ? NULL
						       : "--metrics-reviewer: that service has no credentials "
							 "(\"credentials\": true) to review tokens with";
	return "--metrics-listen: the token reviewer (--metrics-reviewer, default statusd) is not a configured "
	       "service; name one with credentials, or use --metrics-insecure for local use";
}

static int fail_usage(const char *msg)
{
	fprintf(stderr, "gpukmm: %s\n(see gpukmm --help)\n", msg);
	return 2;
}

static void print_table(const gk_sup_conf *c)
{
	printf("%-14s %-10s %-9s %-5s %s\n", "SERVICE", "RESTART", "REQUIRED", "CRED", "COMMAND");
	for (size_t i = 0; i < c->n_svcs; i++) {
		const gk_sup_svc_conf *s = &c->svcs[i];
		printf("%-14s %-10s %-9s %-5s %s", s->name, gk_sup_restart_name(s->restart),
		       s->required ? "yes" : "no", s->credentials ? "yes" : "no", s->path ? s->path : s->binary);
		for (size_t k = 0; k < s->n_args; k++)
			printf(" %s", s->args[k]);
		printf("\n");
	}
	printf("intensity: more than %d restarts within %lld ms stops everything\n", c->intensity_max,
	       (long long)c->intensity_window_ms);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "profile", required_argument, NULL, OPT_PROFILE },
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "runtime-dir", required_argument, NULL, OPT_RUNDIR },
		{ "http-listen", required_argument, NULL, OPT_HTTP },
		{ "token-file", required_argument, NULL, OPT_TOKEN },
		{ "kubeconfig", required_argument, NULL, OPT_KUBECONFIG },
		{ "log-format", required_argument, NULL, OPT_LOGFMT },
		{ "log-level", required_argument, NULL, OPT_LOGLVL },
		{ "check", no_argument, NULL, OPT_CHECK },
		{ "webhook-tls-cert", required_argument, NULL, OPT_WH_CERT },
		{ "webhook-tls-key", required_argument, NULL, OPT_WH_KEY },
		{ "webhook-listen", required_argument, NULL, OPT_WH_LISTEN },
		{ "leader-elect", no_argument, NULL, OPT_LEADER },
		{ "lease-name", required_argument, NULL, OPT_LEASE },
		{ "metrics-listen", required_argument, NULL, OPT_M_LISTEN },
		{ "metrics-insecure", no_argument, NULL, OPT_M_INSECURE },
		{ "metrics-tls-cert", required_argument, NULL, OPT_M_CERT },
		{ "metrics-tls-key", required_argument, NULL, OPT_M_KEY },
		{ "metrics-reviewer", required_argument, NULL, OPT_M_REVIEWER },
		{ "without", required_argument, NULL, OPT_WITHOUT },
		{ "webhook-cert-dir", required_argument, NULL, OPT_WH_DIR },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	const char *profile = NULL, *config = NULL, *rundir = NULL, *http = NULL, *token = NULL, *kubeconfig = NULL;
	gk_sup_pflags pf = { 0 };
	gk_sup_opts mo = { 0 };
	int fmt = -1, lvl = -1, check = 0, leader = -1, minsecure = -1, o;
	gk_log_init_env("gpukmm");
	opterr = 0;
	while ((o = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (o) {
		case OPT_PROFILE: profile = optarg; break;
		case OPT_CONFIG: config = optarg; break;
		case OPT_RUNDIR: rundir = optarg; break;
		case OPT_HTTP: http = optarg; break;
		case OPT_TOKEN: token = optarg; break;
		case OPT_KUBECONFIG: kubeconfig = optarg; break;
		case OPT_LOGFMT:
			if ((fmt = gk_log_parse_format(optarg)) < 0)
				return fail_usage("--log-format: text or json");
			break;
		case OPT_LOGLVL:
			if ((lvl = gk_log_parse_level(optarg)) < 0)
				return fail_usage("--log-level: debug, info, warn or error");
			break;
		case OPT_CHECK: check = 1; break;
		case OPT_WH_CERT: pf.webhook_tls_cert = optarg; break;
		case OPT_WH_KEY: pf.webhook_tls_key = optarg; break;
		case OPT_WH_LISTEN: pf.webhook_listen = optarg; break;
		case OPT_LEADER: leader = 1; break;
		case OPT_LEASE: pf.lease_name = optarg; break;
		case OPT_M_LISTEN: mo.metrics_listen = optarg; break;
		case OPT_M_INSECURE: minsecure = 1; break;
		case OPT_M_CERT: mo.metrics_cert = optarg; break;
		case OPT_M_KEY: mo.metrics_key = optarg; break;
		case OPT_M_REVIEWER: mo.metrics_reviewer = optarg; break;
		case OPT_WITHOUT: pf.without = optarg; break;
		case OPT_WH_DIR: pf.webhook_cert_dir = optarg; break;
		case 'h': fputs(usage_text, stdout); return 0;
		case OPT_VERSION: printf("gpukmm %s\n", gk_version); return 0;
		default: {
			char m[128];
			snprintf(m, sizeof(m), "unknown or incomplete option '%s'", argv[optind - 1]);
			return fail_usage(m);
		}
		}
	}
	if (optind < argc)
		return fail_usage("unexpected argument");
	if (!profile && !config)
		return fail_usage("--profile or --config is required");
	if (fmt < 0)
		fmt = gk_log_parse_format(getenv("GPUKMM_LOG_FORMAT"));
	if (lvl < 0)
		lvl = gk_log_parse_level(getenv("GPUKMM_LOG_LEVEL"));
	gk_log_init("gpukmm", fmt < 0 ? GK_LOG_TEXT : (enum gk_log_format)fmt,
		    lvl < 0 ? GK_LOG_INFO : (enum gk_log_level)lvl);

	/* configuration: all of it checked before anything starts */
	gk_sup_conf conf;
	gk_err err = { 0 };
	int rc = config ? gk_sup_conf_load(&conf, profile, config, &err) : gk_sup_conf_profile(&conf, profile, &err);
	if (rc) {
		fprintf(stderr, "gpukmm: %s\n", err.msg);
		return 2;
	}
	/* profile options: the flag wins, else its environment variable */
	if (!pf.webhook_tls_cert)
		pf.webhook_tls_cert = getenv("GPUKMM_WEBHOOK_TLS_CERT");
	if (!pf.webhook_tls_key)
		pf.webhook_tls_key = getenv("GPUKMM_WEBHOOK_TLS_KEY");
	if (!pf.webhook_listen)
		pf.webhook_listen = getenv("GPUKMM_WEBHOOK_LISTEN");
	if (!pf.lease_name)
		pf.lease_name = getenv("GPUKMM_LEASE_NAME");
	if (!pf.without)
		pf.without = getenv("GPUKMM_WITHOUT");
	if (!pf.webhook_cert_dir)
		pf.webhook_cert_dir = getenv("GPUKMM_WEBHOOK_CERT_DIR");
	if (leader < 0) {
		const char *e = getenv("GPUKMM_LEADER_ELECT");
		if (e && *e && strcmp(e, "0") && strcmp(e, "1") && strcmp(e, "true") && strcmp(e, "false")) {
			gk_sup_conf_free(&conf);
			return fail_usage("GPUKMM_LEADER_ELECT: 1, true, 0 or false");
		}
		leader = e && (!strcmp(e, "1") || !strcmp(e, "true"));
	}
	pf.leader_elect = leader;
	if ((rc = gk_sup_conf_apply_pflags(&conf, &pf, &err))) {
		fprintf(stderr, "gpukmm: %s\n", err.msg);
		gk_sup_conf_free(&conf);
		return 2;
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = '\0';
	if ((rc = gk_sup_conf_resolve(&conf, n > 0 ? dirname(self) : NULL, getenv("PATH"), &err))) {
		fprintf(stderr, "gpukmm: %s%s%s\n", config ? "config " : "", config ? config : "",
			config ? ": " : "");
		fprintf(stderr, "gpukmm: %s\n", err.msg);
		gk_sup_conf_free(&conf);
		return 2;
	}
	const char *mbad = metrics_opts(&mo, minsecure, &conf);
	if (mbad) {
		gk_sup_conf_free(&conf);
		return fail_usage(mbad);
	}
	long ouid, ogid;
	if (gk_sup_rundir_owner(&conf, &ouid, &ogid, &err)) {
		fprintf(stderr, "gpukmm: %s\n", err.msg);
		gk_sup_conf_free(&conf);
		return 2;
	}
	/* credentials: the flag, else the environment ($KUBECONFIG may be a list) */
	if (!token)
		token = getenv("GPUKMM_TOKEN_FILE");
	if (!kubeconfig)
		kubeconfig = getenv("KUBECONFIG");
	if (token && !*token)
		token = NULL;
	if (kubeconfig && !*kubeconfig)
		kubeconfig = NULL;
	pf.metrics_tls_cert = mo.metrics_cert;
	pf.metrics_tls_key = mo.metrics_key;
	if ((rc = gk_sup_check_files(&pf, token, kubeconfig, getenv("PATH"), &err))) {
		fprintf(stderr, "gpukmm: %s\n", err.msg);
		gk_sup_conf_free(&conf);
		return 2;
	}
	if (check) {
		print_table(&conf);
		if (conf.note[0])
			printf("note: %s\n", conf.note);
		gk_sup_conf_free(&conf);
		return 0;
	}
	if (conf.note[0])
		GK_WARN("%s", conf.note);
	char *rd = rundir ? strdup(rundir) : gk_sup_rundir_default();
	int lock_fd = -1;
	if (!rd || gk_sup_rundir_prepare(rd, ouid, ogid, &lock_fd, &err)) {
		fprintf(stderr, "gpukmm: %s\n", rd ? err.msg : "out of memory");
		free(rd);
		gk_sup_conf_free(&conf);
		return 2;
	}

	gk_sup sup;
	gk_sup_opts opts = { .runtime_dir = rd, .token_file = token, .kubeconfig = kubeconfig,
			     .log_json = fmt == GK_LOG_JSON, .http_listen = http, .environ_base = environ,
			     .out_fd = STDOUT_FILENO, .control_socket_mode = ouid >= 0 ? 0666 : 0,
			     .metrics_listen = mo.metrics_listen, .metrics_insecure = mo.metrics_insecure,
			     .metrics_cert = mo.metrics_cert, .metrics_key = mo.metrics_key,
			     .metrics_reviewer = mo.metrics_reviewer, .note = conf.note[0] ? conf.note : NULL };
	if ((rc = gk_sup_init(&sup, &conf, &opts, &err))) {
		GK_ERROR("%s", err.msg);
		rc = err.code == GK_INVALID_ARGUMENT ? 2 : 1;
	} else {
		rc = gk_sup_run(&sup);
	}
	gk_sup_fini(&sup);
	gk_ipc_fini();
	gk_sup_rundir_clean(rd);
	if (lock_fd >= 0)
		close(lock_fd);
	free(rd);
	gk_sup_conf_free(&conf);
	return rc;
}
