/* kubesim — a Kubernetes API server simulator for tests and demos.
 *
 * kubesim --listen 127.0.0.1:PORT (0 = ephemeral) [--tls-cert F --tls-key F]
 *         [--token T | --token-file F] [--token-auth-file F] [--rbac]
 *         [--state-dir DIR] [--history N]
 *         [--faults JSON|@FILE] [--service-url NS/NAME=URL]... [--bookmark-ms N]
 *         [--log-level L] [--kube-version 1.MINOR] [--runtime-config G/V=BOOL,...]
 * Prints exactly one line on stdout when ready: "kubesim: listening on http://HOST:PORT". */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "gpukmm/log.h"
#include "gpukmm/version.h"
#include "http.h"
#include "kubesim.h"
#include "versions.h"
#include "ctrl.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: kubesim --listen HOST:PORT [--tls-cert FILE --tls-key FILE] [--token T | --token-file F]\n"
		   "               [--token-auth-file F] [--rbac]\n"
		   "               [--state-dir DIR] [--history N] [--faults JSON|@FILE]\n"
		   "               [--service-url NAMESPACE/NAME=URL]... [--service-addr NAMESPACE/NAME=HOST:PORT]...\n"
		   "               [--bookmark-ms N] [--log-level LEVEL]\n"
		   "               [--kube-version MAJOR.MINOR] [--runtime-config GROUP/VERSION=BOOL,...]\n"
		   "               [--controllers LIST] [--pod-ready-ms N] [--pod-stop-ms N] [--openshift]\n"
		   "               [--no-apf]\n"
		   "\n"
		   "  --kube-version 1.31|1.32|1.33|1.34\n"
		   "      act as that Kubernetes release: /version answers it (the kubectl dispatcher\n"
		   "      picks its client by the minor) and the built-in API versions are the\n"
		   "      release's, resource.k8s.io (DeviceClass, ResourceClaim,\n"
		   "      ResourceClaimTemplate, ResourceSlice) above all, as a cluster with DRA on\n"
		   "      serves it:\n"
		   "        1.31  v1alpha3\n"
		   "        1.32  v1beta1            (v1alpha3 off by default)\n"
		   "        1.33  v1beta2, v1beta1\n"
		   "        1.34  v1                 (v1beta2, v1beta1 off by default)\n"
		   "      v1alpha3/v1beta1 objects carry a request's deviceClassName, selectors,\n"
		   "      count... inline and a slice device's attributes under `basic`; v1beta2/v1\n"
		   "      nest the request under `exactly` and keep devices flat. Objects are stored\n"
		   "      in the newest served version and converted on every read or write at\n"
		   "      another; the other versions' fields are unknown fields. Without the flag:\n"
		   "      /version 1.32 and resource.k8s.io/v1 (kubesim's historic answer).\n"
		   "  --runtime-config resource.k8s.io/VERSION=true|false,...\n"
		   "      turn API versions of the release on or off like kube-apiserver's flag\n"
		   "      (all of resource.k8s.io off: DRA not enabled)\n"
		   "  --controllers LIST (default *)\n"
		   "      the controllers a cluster runs, kube-controller-manager's syntax (\"*\",\n"
		   "      \"*,-daemonset\", \"daemonset,kubelet\"):\n"
		   "        daemonset   creates a DaemonSet's pods on the nodes that should run them\n"
		   "                    (nodeSelector, required node affinity, taints vs the\n"
		   "                    template's tolerations and the DaemonSet ones), rolls them on\n"
		   "                    template changes (RollingUpdate maxUnavailable, OnDelete),\n"
		   "                    fills status (desired/current/ready/updated/available/\n"
		   "                    misscheduled/unavailable, observedGeneration)\n"
		   "        kubelet     a pod bound to an existing node is Running and Ready\n"
		   "                    --pod-ready-ms later (annotation kubesim.gpukmm.io/ready:\n"
		   "                    \"false\": Running, not Ready); a pod deleted gracefully is\n"
		   "                    gone --pod-stop-ms later (at most its grace period)\n"
		   "        disruption  PodDisruptionBudget status: expectedPods, desiredHealthy,\n"
		   "                    currentHealthy, disruptionsAllowed, condition DisruptionAllowed\n"
		   "                    (pods/eviction then honours the budget)\n"
		   "  --pod-ready-ms N (default 300), --pod-stop-ms N (default 200)\n"
		   "  --faults JSON|@FILE (or PUT /kubesim/faults at run time; counted in /kubesim/stats)\n"
		   "      {\"seed\": N, \"latencyMs\": N, \"refuseConnectionsSeconds\": S,\n"
		   "       \"watch\": {\"closeAfterEvents\": N, \"closeAfterSeconds\": S, \"force410\": N},\n"
		   "       \"rules\": [{\"verb\": \"list\", \"resource\": \"modules\", \"path\": \"/apis/G/V\",\n"
		   "                  \"rate\": 0.5, \"code\": 503, \"body\": \"{}\", \"times\": N,\n"
		   "                  \"retryAfter\": S, \"latencyMs\": N}]}\n"
		   "      verb: get, list, watch, create, update, patch, delete, deletecollection,\n"
		   "      discovery (/api, /apis, group and group-version documents) or *; path: a\n"
		   "      request path prefix; code 4xx/5xx answers a Status, or `body` verbatim,\n"
		   "      which a 2xx needs (a lying 200: {}, null, a Status, truncated JSON);\n"
		   "      times: the rule is spent after that many faults\n"
		   "  --service-url NAMESPACE/NAME=URL\n"
		   "      a webhook configuration's clientConfig.service NAME in NAMESPACE is called at\n"
		   "      URL + its path (http allowed: tests)\n"
		   "  --service-addr NAMESPACE/NAME=HOST:PORT\n"
		   "      as the API server calls it: https://NAME.NAMESPACE.svc:PORT/path (the\n"
		   "      service's port, default 443), the certificate verified for\n"
		   "      NAME.NAMESPACE.svc against caBundle, the connection made to HOST:PORT\n"
		   "  --openshift\n"
		   "      act as OpenShift: security.openshift.io/v1 SecurityContextConstraints\n"
		   "      (the default restricted-v2 and privileged ones exist; stored, not enforced)\n"
		   "      and route.openshift.io/v1 Routes are served\n"
		   "  --no-apf\n"
		   "      act as an API server without API Priority and Fairness: responses carry\n"
		   "      no X-Kubernetes-PF-FlowSchema-UID / PriorityLevel-UID headers\n"
		   "  --token T | --token-file F\n"
		   "      the admin's bearer token (user kubesim-admin, group system:masters); without\n"
		   "      --rbac and without it, any request is the admin\n"
		   "  --token-auth-file F\n"
		   "      more users, kube-apiserver's format: token,user,uid[,\"group1,group2\"]\n"
		   "  --rbac\n"
		   "      authorize every request as the API server's RBAC authorizer does, by the\n"
		   "      stored Roles, ClusterRoles and bindings (the bootstrap roles are created);\n"
		   "      ServiceAccount tokens come from TokenRequest (kubectl create token); a\n"
		   "      request without a token is system:anonymous. GET /kubesim/rbac: decisions\n"
		   "  (TokenReview answers for these tokens: the admin's, --token-auth-file's and\n"
		   "  ServiceAccount tokens; SubjectAccessReview is the RBAC authorizer's)\n");
}

static char *read_file(const char *path, size_t max, gk_err *err)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		gk_err_set(err, GK_NOT_FOUND, "%s: %s", path, strerror(errno));
		return NULL;
	}
	char *buf = malloc(max + 1);
	if (!buf) {
		fclose(f);
		gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		return NULL;
	}
	size_t n = fread(buf, 1, max, f);
	int big = n == max && fgetc(f) != EOF;
	fclose(f);
	if (big) {
		free(buf);
		gk_err_set(err, GK_OUT_OF_RANGE, "%s: larger than %zu bytes", path, max);
		return NULL;
	}
	buf[n] = 0;
	return buf;
}

int main(int argc, char **argv)
{
	const char *listen = NULL, *cert_f = NULL, *key_f = NULL, *token = NULL, *token_f = NULL, *state = NULL;
	const char *faults = NULL, *level = NULL, *kube_version = NULL, *runtime_config = NULL, *controllers = NULL;
	const char *users = NULL;
	int rbac = 0;
	ks_ctrl_opts copts = { KS_CTRL_ALL, 300, 200 };
	int openshift = 0, no_apf = 0;
	int history = 10000, bookmark_ms = 1000;
	const char *svc[64];
	int svc_addr[64] = { 0 };
	int nsvc = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		char flag[64];
		int inl = 0; /* --flag=value */
		const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
		if (eq && (size_t)(eq - a) < sizeof(flag)) {
			snprintf(flag, sizeof(flag), "%.*s", (int)(eq - a), a);
			a = flag;
			v = eq + 1;
			inl = 1;
		}
#define OPT(name, dst)                                                                      \
	if (strcmp(a, name) == 0) {                                                         \
		if (!v) {                                                                   \
			fprintf(stderr, "kubesim: %s needs a value\n", name);              \
			return 2;                                                           \
		}                                                                           \
		dst = v;                                                                    \
		i += !inl;                                                                        \
		continue;                                                                   \
	}
		OPT("--listen", listen)
		OPT("--tls-cert", cert_f)
		OPT("--tls-key", key_f)
		OPT("--token", token)
		OPT("--token-file", token_f)
		OPT("--state-dir", state)
		OPT("--faults", faults)
		OPT("--log-level", level)
		OPT("--token-auth-file", users)
		OPT("--kube-version", kube_version)
		OPT("--runtime-config", runtime_config)
		OPT("--controllers", controllers)
#undef OPT
		if (strcmp(a, "--rbac") == 0) {
			rbac = 1;
			continue;
		}
		if (strcmp(a, "--history") == 0 && v) {
			history = atoi(v);
			if (history < 1 || history > 10000000) {
				fprintf(stderr, "kubesim: --history must be in [1, 10000000]\n");
				return 2;
			}
			i += !inl;
			continue;
		}
		if ((strcmp(a, "--pod-ready-ms") == 0 || strcmp(a, "--pod-stop-ms") == 0) && v) {
			char *end;
			long ms = strtol(v, &end, 10);
			if (*end || ms < 0 || ms > 3600000) {
				fprintf(stderr, "kubesim: %s must be in [0, 3600000]\n", a);
				return 2;
			}
			*(a[6] == 'r' ? &copts.pod_ready_ms : &copts.pod_stop_ms) = (int)ms;
			i += !inl;
			continue;
		}
		if (strcmp(a, "--bookmark-ms") == 0 && v) {
			bookmark_ms = atoi(v);
			if (bookmark_ms < 10) {
				fprintf(stderr, "kubesim: --bookmark-ms must be >= 10\n");
				return 2;
			}
			i += !inl;
			continue;
		}
		if ((strcmp(a, "--service-url") == 0 || strcmp(a, "--service-addr") == 0) && v) {
			int addr = strcmp(a, "--service-addr") == 0;
			if (nsvc >= 64 || !strchr(v, '=') || !strchr(v, '/') || (addr && !strchr(strchr(v, '='), ':'))) {
				fprintf(stderr, "kubesim: %s wants NAMESPACE/NAME=%s\n", a, addr ? "HOST:PORT" : "URL");
				return 2;
			}
			svc_addr[nsvc] = addr;
			svc[nsvc++] = v;
			i += !inl;
			continue;
		}
		if (strcmp(a, "--openshift") == 0) {
			openshift = 1;
			continue;
		}
		if (strcmp(a, "--no-apf") == 0) {
			no_apf = 1;
			continue;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(a, "--version") == 0) {
			printf("kubesim %s\n", gk_version);
			return 0;
		}
		fprintf(stderr, "kubesim: unknown or incomplete argument '%s'\n", a);
		usage(stderr);
		return 2;
	}
	gk_log_init_env("kubesim");
	if (level) {
		int l = gk_log_parse_level(level);
		if (l < 0) {
			fprintf(stderr, "kubesim: bad --log-level '%s'\n", level);
			return 2;
		}
		gk_log_init("kubesim", GK_LOG_TEXT, (enum gk_log_level)l);
	}
	if (!listen) {
		usage(stderr);
		return 2;
	}
	char host[64];
	const char *colon = strrchr(listen, ':');
	if (!colon || (size_t)(colon - listen) >= sizeof(host)) {
		fprintf(stderr, "kubesim: --listen wants HOST:PORT\n");
		return 2;
	}
	snprintf(host, sizeof(host), "%.*s", (int)(colon - listen), listen);
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (*end || port < 0 || port > 65535) {
		fprintf(stderr, "kubesim: bad port in --listen\n");
		return 2;
	}
	if ((cert_f == NULL) != (key_f == NULL)) {
		fprintf(stderr, "kubesim: --tls-cert and --tls-key go together\n");
		return 2;
	}
	if (token && token_f) {
		fprintf(stderr, "kubesim: --token and --token-file are exclusive\n");
		return 2;
	}

	/* signals are handled by sigwait in this thread only */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	gk_err err = { 0 };
	int rc = 1;
	char *cert = NULL, *key = NULL;
	struct ks_http *h = NULL;
	ks_server *s = calloc(1, sizeof(*s));
	if (!s || ks_server_init(s, history)) {
		fprintf(stderr, "kubesim: out of memory\n");
		free(s);
		return 1;
	}
	s->bookmark_ms = bookmark_ms;
	s->no_apf = no_apf;
	if (ks_versions_set(s, kube_version, runtime_config, &err) ||
	    ks_ctrl_parse(controllers, &copts.enabled, &err)) {
		fprintf(stderr, "kubesim: %s\n", err.msg);
		ks_server_free(s);
		free(s);
		return 2;
	}
	if ((openshift && ks_openshift_setup(s)) || ks_ctrl_init(s, &copts)) {
		fprintf(stderr, "kubesim: out of memory\n");
		ks_server_free(s);
		free(s);
		return 1;
	}
	if (cert_f && (!(cert = read_file(cert_f, 1 << 20, &err)) || !(key = read_file(key_f, 1 << 20, &err)))) {
		GK_ERROR("TLS: %s", err.msg);
		goto out;
	}
	if (token_f) {
		if (ks_token_file_load(s, token_f, &err)) {
			GK_ERROR("%s", err.msg);
			goto out;
		}
	} else if (token) {
		s->token = (char *)token;
	}
	if (faults) {
		char *txt = faults[0] == '@' ? read_file(faults + 1, 1 << 20, &err) : strdup(faults);
		cJSON *j = txt ? cJSON_Parse(txt) : NULL;
		free(txt);
		if (!j || ks_faults_parse(&s->faults, j, &err)) {
			GK_ERROR("--faults: %s", j ? err.msg : (err.code ? err.msg : "not valid JSON"));
			cJSON_Delete(j);
			goto out;
		}
		cJSON_Delete(j);
	}
	if (nsvc) {
		s->svc_urls = calloc((size_t)nsvc, sizeof(*s->svc_urls));
		if (!s->svc_urls)
			goto out;
		for (int i = 0; i < nsvc; i++) {
			const char *eq = strchr(svc[i], '=');
			s->svc_urls[i].ns_name = strndup(svc[i], (size_t)(eq - svc[i]));
			s->svc_urls[i].url = strdup(eq + 1);
			s->svc_urls[i].addr = svc_addr[i];
			s->nsvc_urls++;
			if (!s->svc_urls[i].ns_name || !s->svc_urls[i].url)
				goto out;
		}
	}
	if (state) {
		if (mkdir(state, 0700) && errno != EEXIST) {
			GK_ERROR("state dir %s: %s", state, strerror(errno));
			goto out;
		}
		s->state_dir = (char *)state;
		if (ks_state_load(s, state, &err)) {
			GK_ERROR("state: %s", err.msg);
			goto out;
		}
	}
	if (ks_server_seed(s) || ks_openshift_seed(s)) {
		GK_ERROR("out of memory");
		goto out;
	}
	s->rbac = rbac;
	if (ks_auth_init(s, users, state, &err)) {
		GK_ERROR("%s", err.msg);
		goto out;
	}
	if (ks_ctrl_start(s)) {
		GK_ERROR("cannot start the controllers' thread");
		goto out;
	}
	h = ks_http_start(s, host, (int)port, cert, key, &err);
	if (!h) {
		GK_ERROR("%s", err.msg);
		goto out;
	}
	snprintf(s->server_addr, sizeof(s->server_addr), "%s:%d", host, ks_http_port(h));
	printf("kubesim: listening on %s://%s:%d\n", cert ? "https" : "http", host, ks_http_port(h));
	fflush(stdout);
	GK_INFO("ready on %s:%d (history %d events%s%s%s)", host, ks_http_port(h), history,
		s->token ? ", token auth" : "", rbac ? ", RBAC" : "", state ? ", state dir" : "");
	for (;;) {
		struct timespec ts = { 1, 0 };
		int sig = sigtimedwait(&set, NULL, &ts);
		if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP)
			break;
		if (state) {
			pthread_mutex_lock(&s->mu);
			if (s->dirty && ks_state_save(s, state, &err))
				GK_WARN("state: %s", err.msg);
			pthread_mutex_unlock(&s->mu);
		}
	}
	GK_INFO("terminating");
	pthread_mutex_lock(&s->mu);
	s->shutting_down = 1;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->mu);
	ks_ctrl_stop(s);
	ks_http_stop(h);
	h = NULL;
	rc = 0;
	if (state) {
		pthread_mutex_lock(&s->mu);
		if (ks_state_save(s, state, &err)) {
			GK_ERROR("state: %s", err.msg);
			rc = 1;
		}
		pthread_mutex_unlock(&s->mu);
	}
out:
	ks_http_stop(h);
	free(cert);
	free(key);
	ks_server_free(s);
	free(s);
	return rc;
}
