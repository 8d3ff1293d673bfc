/* reconcile_lat — helper of tests/bench/reconcile.sh: ClusterPolicy spec change written to the API → Module patched,
 * latency over N changes, measured by watching the Module.
 *
 *   reconcile_lat --kubeconfig F --namespace NS --policy P --n N --mode e2e|baseline [--gap-ms G]
 *
 * e2e:      gpukmm-watcher + gpukmm-modmgr (started by the driver script) do the
 *           work; this program only writes the change and watches the Module.
 * baseline: this process does the work itself, without IPC: a ClusterPolicy
 *           watch, and on each change the same lib/policy rendering + diff
 *           against the Module from its own Module watch, then one merge patch
 *           through lib/kube — what modmgr does, minus the processes.
 * --gap-ms G: write each change G ms after the previous one was seen (events
 *           are still processed meanwhile): the latency of one change on its own,
 *           not overlapped with the previous change's tail (status report,
 *           Event bookkeeping, the watch echo). 0 (default) = back to back.
 * --events URL (e2e): also subscribe to the watcher's bus and time each
 *           change's arrival there, splitting the latency into API → watcher →
 *           bus ("bus_p50_ms"/"bus_p99_ms") and the rest (modmgr's pass, its
 *           Module patch, the Module watch back to us); and watch the policies
 *           too, to time the same change's arrival on a watch of our own
 *           ("api_p50_ms"/"api_p99_ms": the API's share of the bus figure, what
 *           the watcher cannot be faster than).
 * Prints one JSON object: {"mode","n","p50_ms","p99_ms","max_ms","mean_ms",
 * "requests","writes","writes_per_change"[,"bus_p50_ms","bus_p99_ms","api_p50_ms","api_p99_ms"]} (API
 * counts from /kubesim/stats, the driver's own ClusterPolicy patches
 * subtracted). */
#include <cJSON.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "events.pb-c.h"
#include "gpukmm/ipc.h"
#include "gpukmm/kobj.h"
#include "gpukmm/kube.h"
#include "gpukmm/policy.h"

typedef struct bench {
	const char *ns, *policy;
	char module[300];
	bool baseline;
	gk_kube_client *kc;       /* watches */
	gk_kube_client *wc;       /* writes */
	gk_kube_mux *mux;
	long want;                /* selector value awaited */
	bool seen;
	Gpukmm__Module *cached;   /* baseline: latest Module */
	uint64_t baseline_patches, baseline_errors;
	gk_policy_opts popts;
	gk_ipc_sub *sub;          /* --events: the watcher's bus */
	double bus_at;            /* when the awaited change came by on the bus (0 = not yet) */
	double api_at;            /* --events: when it came by on our own policy watch */
} bench;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void on_module(void *user, enum gk_kube_event type, const char *key, const cJSON *obj)
{
	bench *b = user;
	if (!obj || type == GK_KUBE_DELETED)
		return;
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(md, "name");
	if (!cJSON_IsString(name) || strcmp(name->valuestring, b->module) != 0)
		return;
	if (b->baseline) {
		Gpukmm__Module *m = NULL;
		gk_err e;
		if (gk_kobj_module_from_json(obj, &m, &e) == 0) {
			gk_kobj_free(b->cached);
			b->cached = m;
		}
	}
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	const cJSON *sel = cJSON_GetObjectItemCaseSensitive(spec, "selector");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(sel, "bench");
	if (cJSON_IsString(v) && atol(v->valuestring) == b->want)
		b->seen = true;
}

/* baseline controller: the same work as a modmgr pass, in process */
static void on_policy(void *user, enum gk_kube_event type, const char *key, const cJSON *obj)
{
	bench *b = user;
	if (!b->baseline) { /* e2e with --events: only the arrival is timed */
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "spec"), "nodeSelector"),
			"bench");
		if (!b->api_at && cJSON_IsString(v) && atol(v->valuestring) == b->want)
			b->api_at = now_ms();
		return;
	}
	if (!obj || type == GK_KUBE_DELETED || !b->cached)
		return;
	Gpukmm__ClusterPolicy *cp = NULL;
	Gpukmm__Module *want = NULL;
	cJSON *patch = NULL;
	gk_err e;
	if (gk_kobj_cluster_policy_from_json(obj, &cp, &e) || gk_policy_default(cp) < 0 ||
	    gk_policy_render_module(cp, &b->popts, &want, &e) ||
	    gk_policy_module_diff(b->cached, want, &patch, &e)) {
		b->baseline_errors++;
		goto out;
	}
	if (patch) {
		char *body = cJSON_PrintUnformatted(patch);
		gk_kube_ref r = { .group = "kmm.sigs.x-k8s.io", .version = "v1beta1", .resource = "modules",
				  .ns = b->ns, .name = b->module };
		gk_kube_status st;
		if (!body || gk_kube_patch(b->wc, &r, GK_PATCH_MERGE, body, NULL, false, NULL, &st, &e))
			b->baseline_errors++;
		else
			b->baseline_patches++;
		free(body);
	}
out:
	cJSON_Delete(patch);
	gk_kobj_free(want);
	gk_kobj_free(cp);
}

static void on_bus(void *user, const char *topic, uint64_t seq, ProtobufCMessage *msg)
{
	bench *b = user;
	const Gpukmm__Event *ev = (const Gpukmm__Event *)msg;
	if (!b->bus_at && ev->object_case == GPUKMM__EVENT__OBJECT_CLUSTER_POLICY && ev->cluster_policy->spec) {
		const Gpukmm__ClusterPolicySpec *sp = ev->cluster_policy->spec;
		for (size_t i = 0; i < sp->n_node_selector; i++)
			if (sp->node_selector[i]->key && strcmp(sp->node_selector[i]->key, "bench") == 0 &&
			    sp->node_selector[i]->value && atol(sp->node_selector[i]->value) == b->want)
				b->bus_at = now_ms();
	}
	gk_ipc_free(msg);
}

static int run_until(bench *b, bool *flag, double timeout_ms)
{
	double deadline = now_ms() + timeout_ms;
	while (!*flag) {
		double left = deadline - now_ms();
		if (left <= 0)
			return -1;
		int64_t t = gk_kube_mux_timeout_ms(b->mux);
		int wait = (t < 0 || t > left) ? (int)left + 1 : (int)t;
		struct pollfd p[2] = { { .fd = gk_kube_mux_fd(b->mux), .events = POLLIN },
				       { .fd = b->sub ? gk_ipc_sub_fd(b->sub) : -1, .events = POLLIN } };
		poll(p, b->sub ? 2 : 1, wait);
		if (b->sub && p[1].revents)
			gk_ipc_sub_dispatch(b->sub);
		gk_kube_mux_run(b->mux);
	}
	return 0;
}

static int stats(bench *b, double *req, double *wr)
{
	cJSON *j = NULL;
	gk_err e;
	if (gk_kube_request(b->wc, "GET", "/kubesim/stats", NULL, NULL, 0, &j, NULL, &e))
		return -1;
	*req = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "requests"));
	*wr = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "writes"));
	cJSON_Delete(j);
	return 0;
}

/* The teardown can hang in nng_close (nng#1543, no fix in nng 1.5.2); the
 * result is printed by then, so a stuck teardown ends the process with the
 * run's own exit code instead of stalling the benchmark. */
static volatile sig_atomic_t exit_code;
static void on_alarm(int sig)
{
	_exit(exit_code);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static bench B;
	bench *b = &B;
	const char *kubeconfig = NULL, *events = NULL;
	long n = 1000;
	double gap_ms = 0;
	b->ns = "intel-gpu-base-operator";
	b->policy = "bench";
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--kubeconfig")) kubeconfig = argv[i + 1];
		else if (!strcmp(argv[i], "--namespace")) b->ns = argv[i + 1];
		else if (!strcmp(argv[i], "--policy")) b->policy = argv[i + 1];
		else if (!strcmp(argv[i], "--n")) n = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--mode")) b->baseline = !strcmp(argv[i + 1], "baseline");
		else if (!strcmp(argv[i], "--events")) events = argv[i + 1];
		else if (!strcmp(argv[i], "--gap-ms")) gap_ms = atof(argv[i + 1]);
		else { fprintf(stderr, "reconcile_lat: unknown option %s\n", argv[i]); return 2; }
	}
	if (n < 1 || n > 1000000 || gap_ms < 0 || gap_ms > 10000)
		return 2;
	snprintf(b->module, sizeof(b->module), "%s-gpu", b->policy);
	b->popts.namespace_ = b->ns;
	gk_kube_config cfg = { 0 };
	gk_err e;
	gk_kube_opts ko = { .qps = -1 };
	if (gk_kube_config_load(&cfg, kubeconfig, &e) || gk_kube_client_new(&b->kc, &cfg, &ko, &e) ||
	    gk_kube_client_new(&b->wc, &cfg, &ko, &e) || gk_kube_mux_new(&b->mux, b->kc, &e)) {
		fprintf(stderr, "reconcile_lat: %s\n", e.msg);
		return 1;
	}
	if (events && (gk_ipc_sub_open(&b->sub, events, NULL, on_bus, NULL, b, &e) ||
		       gk_ipc_sub_topic(b->sub, "clusterpolicy", &gpukmm__event__descriptor, &e))) {
		fprintf(stderr, "reconcile_lat: %s\n", e.msg);
		return 1;
	}
	gk_kube_ref mr = { .group = "kmm.sigs.x-k8s.io", .version = "v1beta1", .resource = "modules", .ns = b->ns };
	gk_kube_ref pr = { .group = "intel.com", .version = "v1alpha1", .resource = "clusterpolicies" };
	bool msynced = false, psynced = true;
	gk_kube_watch *mw = NULL, *pw = NULL;
	gk_kube_watch_cbs mcbs = { .on_event = on_module };
	if (gk_kube_watch_start(&mw, b->mux, &mr, NULL, &mcbs, b, &e)) {
		fprintf(stderr, "reconcile_lat: %s\n", e.msg);
		return 1;
	}
	if (b->baseline || events) {
		gk_kube_watch_cbs pcbs = { .on_event = on_policy };
		if (gk_kube_watch_start(&pw, b->mux, &pr, NULL, &pcbs, b, &e)) {
			fprintf(stderr, "reconcile_lat: %s\n", e.msg);
			return 1;
		}
	}
	/* wait for the initial lists: the Module must be known */
	b->want = -1;
	gk_kube_watch_stats ws;
	double deadline = now_ms() + 20000;
	while (now_ms() < deadline) {
		gk_kube_watch_stats_get(mw, &ws);
		msynced = ws.synced;
		if (pw) {
			gk_kube_watch_stats ps;
			gk_kube_watch_stats_get(pw, &ps);
			psynced = ps.synced;
		}
		if (msynced && psynced && (!b->baseline || b->cached))
			break;
		bool never = false;
		b->seen = false;
		run_until(b, &never, 20);
	}
	if (!msynced || !psynced) {
		fprintf(stderr, "reconcile_lat: watches did not sync\n");
		return 1;
	}
	double *lat = calloc((size_t)n, sizeof(double));
	double *bus = calloc((size_t)n, sizeof(double)), *api = calloc((size_t)n, sizeof(double));
	long nbus = 0, napi = 0;
	double r0, w0, r1, w1;
	if (!lat || !bus || !api || stats(b, &r0, &w0))
		return 1;
	gk_kube_ref cpr = pr;
	cpr.name = b->policy;
	long done = 0;
	for (long i = 1; i <= n; i++) {
		char body[128];
		snprintf(body, sizeof(body), "{\"spec\":{\"nodeSelector\":{\"bench\":\"%ld\"}}}", i);
		if (gap_ms > 0 && i > 1) {
			bool never = false;
			run_until(b, &never, gap_ms);
		}
		b->want = i;
		b->seen = false;
		b->bus_at = 0;
		b->api_at = 0;
		double t0 = now_ms();
		gk_kube_status st;
		if (gk_kube_patch(b->wc, &cpr, GK_PATCH_MERGE, body, NULL, false, NULL, &st, &e)) {
			fprintf(stderr, "reconcile_lat: patch: %s\n", e.msg);
			break;
		}
		if (run_until(b, &b->seen, 10000)) {
			fprintf(stderr, "reconcile_lat: change %ld not applied within 10 s\n", i);
			break;
		}
		lat[done++] = now_ms() - t0;
		if (b->bus_at)
			bus[nbus++] = b->bus_at - t0;
		if (b->api_at)
			api[napi++] = b->api_at - t0;
	}
	if (stats(b, &r1, &w1))
		return 1;
	qsort(lat, (size_t)done, sizeof(double), cmp_d);
	qsort(bus, (size_t)nbus, sizeof(double), cmp_d);
	qsort(api, (size_t)napi, sizeof(double), cmp_d);
	double sum = 0;
	for (long i = 0; i < done; i++)
		sum += lat[i];
	double p50 = done ? lat[(done - 1) / 2] : 0, p99 = done ? lat[(long)((done - 1) * 0.99)] : 0;
	double writes = w1 - w0 - (double)done; /* minus the driver's policy patches */
	printf("{\"mode\":\"%s\",\"gap_ms\":%g,\"n\":%ld,\"done\":%ld,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,"
	       "\"mean_ms\":%.3f,\"requests\":%.0f,\"writes\":%.0f,\"writes_per_change\":%.3f",
	       b->baseline ? "baseline" : "e2e", gap_ms, n, done, p50, p99, done ? lat[done - 1] : 0,
	       done ? sum / (double)done : 0, r1 - r0 - (double)done - 2, writes,
	       done ? writes / (double)done : 0);
	if (nbus)
		printf(",\"bus_n\":%ld,\"bus_p50_ms\":%.3f,\"bus_p99_ms\":%.3f", nbus, bus[(nbus - 1) / 2],
		       bus[(long)((nbus - 1) * 0.99)]);
	if (napi)
		printf(",\"api_n\":%ld,\"api_p50_ms\":%.3f,\"api_p99_ms\":%.3f", napi, api[(napi - 1) / 2],
		       api[(long)((napi - 1) * 0.99)]);
	printf("}\n");
	fflush(stdout);
	exit_code = done == n ? 0 : 1;
	signal(SIGALRM, on_alarm);
	alarm(3);
	free(lat);
	free(bus);
	free(api);
	if (b->sub)
		gk_ipc_sub_close(b->sub);
	gk_kube_watch_stop(mw);
	if (pw)
		gk_kube_watch_stop(pw);
	gk_kube_mux_free(b->mux);
	gk_kube_client_free(b->kc);
	gk_kube_client_free(b->wc);
	gk_kube_config_free(&cfg);
	gk_kobj_free(b->cached);
	return done == n ? 0 : 1;
}
