/* Helper of tests/bench/watch_*.sh (not a test by itself).
 *
 *   watch_bench gen URL NODES MODS [FIRST] create NODES realistic Nodes (node-FIRST on,
 *                                         default 0), print "rv0 RV", then MODS
 *                                         merge-patches round-robin, print "rv1 RV"
 *   watch_bench patch URL NODES MODS G    writer G: MODS merge-patches over the NODES nodes
 *   watch_bench claims URL NS N [FIRST]   create N ResourceClaims in namespace NS
 *                                         (claim-FIRST on, default 0)
 *   watch_bench consume URL RV N          replay the Node watch from RV through lib/kube
 *                                         (framing, cJSON) → lib/kobj (typed Node) → typed
 *                                         cache → lib/ipc bus publish; stop after N events;
 *                                         print {"events":..,"seconds":..,"cpu_seconds":..,
 *                                         "rss_kb":..} (CPU: user + system of the whole run)
 *   watch_bench lines SKIP N              read stdin lines; print the seconds from line
 *                                         SKIP+1 to line SKIP+N (kubectl -w output) */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "events.pb-c.h"
#include "gpukmm/ipc.h"
#include "gpukmm/kobj.h"
#include "gpukmm/kube.h"
#include "gpukmm/log.h"
#include "../../services/watcher/store.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "VmRSS:", 6))
			kb = strtol(line + 6, NULL, 10);
	if (f)
		fclose(f);
	return kb;
}

static gk_kube_client *client(const char *url)
{
	gk_kube_config cfg = {.server = (char *)url};
	gk_kube_opts o = {.qps = -1, .timeout_ms = 60000};
	gk_kube_client *c;
	gk_err e = {0};
	if (gk_kube_client_new(&c, &cfg, &o, &e)) {
		fprintf(stderr, "watch_bench: %s\n", e.msg);
		exit(1);
	}
	return c;
}

static const char *rv_of(const cJSON *o)
{
	const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "resourceVersion");
	return cJSON_IsString(v) ? v->valuestring : "";
}

/* A Node as a kubelet writes it (labels, capacity, conditions, nodeInfo): ~2 KB. */
static char *node_json(int i)
{
	char *s;
	if (asprintf(&s,
		     "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"node-%05d\",\"labels\":{"
		     "\"beta.kubernetes.io/arch\":\"amd64\",\"beta.kubernetes.io/os\":\"linux\",\"kubernetes.io/arch\":\"amd64\","
		     "\"kubernetes.io/hostname\":\"node-%05d\",\"kubernetes.io/os\":\"linux\",\"node.kubernetes.io/instance-type\":\"gpu-large\","
		     "\"topology.kubernetes.io/region\":\"eu-west\",\"topology.kubernetes.io/zone\":\"eu-west-%d\","
		     "\"intel.feature.node.kubernetes.io/gpu\":\"true\",\"feature.node.kubernetes.io/pci-0300_8086.present\":\"true\"},"
		     "\"annotations\":{\"node.alpha.kubernetes.io/ttl\":\"0\",\"volumes.kubernetes.io/controller-managed-attach-detach\":\"true\","
		     "\"gpukmm.io/report\":\"{\\\"oot\\\":true}\"}},"
		     "\"spec\":{\"podCIDR\":\"10.%d.%d.0/24\",\"providerID\":\"bench://node-%05d\"},"
		     "\"status\":{\"capacity\":{\"cpu\":\"64\",\"memory\":\"527938764Ki\",\"pods\":\"110\",\"gpu.intel.com/xe\":\"8\"},"
		     "\"allocatable\":{\"cpu\":\"63500m\",\"memory\":\"517938764Ki\",\"pods\":\"110\",\"gpu.intel.com/xe\":\"8\"},"
		     "\"conditions\":[{\"type\":\"MemoryPressure\",\"status\":\"False\",\"reason\":\"KubeletHasSufficientMemory\",\"message\":\"kubelet has sufficient memory available\"},"
		     "{\"type\":\"DiskPressure\",\"status\":\"False\",\"reason\":\"KubeletHasNoDiskPressure\",\"message\":\"kubelet has no disk pressure\"},"
		     "{\"type\":\"PIDPressure\",\"status\":\"False\",\"reason\":\"KubeletHasSufficientPID\",\"message\":\"kubelet has sufficient PID available\"},"
		     "{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",\"message\":\"kubelet is posting ready status\"}],"
		     "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.%d.%d\"},{\"type\":\"Hostname\",\"address\":\"node-%05d\"}],"
		     "\"nodeInfo\":{\"machineID\":\"4f1c2d9e8b7a6c5d4e3f2a1b0c9d8e7f\",\"systemUUID\":\"4f1c2d9e-8b7a-6c5d-4e3f-2a1b0c9d8e7f\","
		     "\"bootID\":\"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\",\"kernelVersion\":\"6.8.0-45-generic\",\"osImage\":\"Ubuntu 24.04.1 LTS\","
		     "\"containerRuntimeVersion\":\"containerd://1.7.12\",\"kubeletVersion\":\"v1.32.1\",\"kubeProxyVersion\":\"v1.32.1\","
		     "\"operatingSystem\":\"linux\",\"architecture\":\"amd64\"}}}",
		     i, i, i % 3, i / 256, i % 256, i, i / 256, i % 256, i) < 0)
		exit(1);
	return s;
}

static int gen(const char *url, int nodes, int mods, int first)
{
	gk_kube_client *c = client(url);
	gk_err e = {0};
	gk_kube_ref r = {"", "v1", "nodes", NULL, NULL, NULL};
	cJSON *out = NULL;
	for (int i = first; i < first + nodes; i++) {
		char *s = node_json(i);
		cJSON *o = cJSON_Parse(s);
		free(s);
		cJSON_Delete(out);
		out = NULL;
		if (gk_kube_create(c, &r, o, &out, NULL, &e) && e.code != GK_ALREADY_EXISTS) {
			fprintf(stderr, "create: %s\n", e.msg);
			return 1;
		}
		cJSON_Delete(o);
	}
	/* the RV before the modifications: a list's */
	char rv[64] = "";
	gk_kube_list_opts lo = {.limit = 1};
	if (gk_kube_list(c, &r, &lo, NULL, NULL, rv, sizeof rv, NULL, &e)) {
		fprintf(stderr, "list: %s\n", e.msg);
		return 1;
	}
	printf("rv0 %s\n", rv);
	fflush(stdout);
	double t0 = now_s();
	char name[32], body[128];
	for (int i = 0; i < mods; i++) {
		snprintf(name, sizeof name, "node-%05d", nodes ? i % nodes : 0);
		snprintf(body, sizeof body, "{\"metadata\":{\"labels\":{\"bench-seq\":\"%d\"}}}", i);
		gk_kube_ref n = {"", "v1", "nodes", NULL, name, NULL};
		cJSON_Delete(out);
		out = NULL;
		if (gk_kube_patch(c, &n, GK_PATCH_MERGE, body, NULL, false, &out, NULL, &e)) {
			fprintf(stderr, "patch: %s\n", e.msg);
			return 1;
		}
	}
	double dt = now_s() - t0;
	printf("rv1 %s\n", out ? rv_of(out) : "");
	printf("gen_rate %.0f\n", mods / (dt > 0 ? dt : 1));
	cJSON_Delete(out);
	gk_kube_client_free(c);
	return 0;
}

static int patch(const char *url, int nodes, int mods, int g)
{
	gk_kube_client *c = client(url);
	gk_err e = {0};
	char name[32], body[128];
	for (int i = 0; i < mods; i++) {
		snprintf(name, sizeof name, "node-%05d", nodes ? (i * 7 + g) % nodes : 0);
		snprintf(body, sizeof body, "{\"metadata\":{\"labels\":{\"bench-seq\":\"%d-%d\"}}}", g, i);
		gk_kube_ref n = {"", "v1", "nodes", NULL, name, NULL};
		if (gk_kube_patch(c, &n, GK_PATCH_MERGE, body, NULL, false, NULL, NULL, &e)) {
			fprintf(stderr, "patch: %s\n", e.msg);
			return 1;
		}
	}
	gk_kube_client_free(c);
	return 0;
}

static int claims(const char *url, const char *ns, int n, int first)
{
	gk_kube_client *c = client(url);
	gk_err e = {0};
	gk_kube_ref r = {"resource.k8s.io", "v1", "resourceclaims", ns, NULL, NULL};
	for (int i = first; i < first + n; i++) {
		char s[512];
		snprintf(s, sizeof s,
			 "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":\"claim-%05d\","
			 "\"labels\":{\"app\":\"trainer\"}},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"exactly\":"
			 "{\"deviceClassName\":\"gpu.intel.com\"}}]}},\"status\":{\"allocation\":{\"devices\":{\"results\":"
			 "[{\"request\":\"gpu\",\"driver\":\"gpu.intel.com\",\"pool\":\"node-%05d\",\"device\":\"card%d\"}]}}}}",
			 i, i, i % 8);
		cJSON *o = cJSON_Parse(s);
		if (gk_kube_create(c, &r, o, NULL, NULL, &e) && e.code != GK_ALREADY_EXISTS) {
			fprintf(stderr, "create claim: %s\n", e.msg);
			return 1;
		}
		cJSON_Delete(o);
	}
	gk_kube_client_free(c);
	return 0;
}

typedef struct consumer {
	long want, got;
	double first, last;
	ws_store cache;
	gk_ipc_pub *pub;
	uint64_t published;
	bool noop;
} consumer;

static void on_event(void *user, enum gk_kube_event t, const char *key, const cJSON *obj)
{
	consumer *c = user;
	double now = now_s();
	if (!c->got)
		c->first = now;
	c->got++;
	c->last = now;
	if (!obj || c->noop)
		return;
	Gpukmm__Node *n;
	gk_err e;
	if (gk_kobj_node_from_json(obj, &n, &e))
		return;
	int r = ws_put(&c->cache, key, &n->base, 1);
	Gpukmm__Event ev = GPUKMM__EVENT__INIT;
	ev.has_type = 1;
	ev.type = r == 1 ? GPUKMM__EVENT_TYPE__ADDED : GPUKMM__EVENT_TYPE__MODIFIED;
	ev.object_case = GPUKMM__EVENT__OBJECT_NODE;
	ev.node = n;
	if (gk_ipc_pub_send(c->pub, "node", &ev.base))
		c->published++;
	gk_kobj_free(n);
}

static int consume(const char *url, const char *rv, long n)
{
	gk_kube_client *kc = client(url);
	gk_kube_mux *m;
	gk_err e = {0};
	static consumer c;
	c.want = n;
	c.noop = getenv("WATCH_BENCH_NOOP") != NULL;
	ws_init(&c.cache);
	char dir[256], addr[300];
	const char *t = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/gk-wbench.XXXXXX", t && *t ? t : P_tmpdir);
	if (!mkdtemp(dir))
		return 1;
	snprintf(addr, sizeof addr, "ipc://%s/events.sock", dir);
	if (gk_kube_mux_new(&m, kc, &e) || gk_ipc_pub_open(&c.pub, addr, NULL, &e)) {
		fprintf(stderr, "watch_bench: %s\n", e.msg);
		return 1;
	}
	gk_kube_ref r = {"", "v1", "nodes", NULL, NULL, NULL};
	gk_kube_watch_opts o = {.start_resource_version = rv};
	gk_kube_watch_cbs cbs = {.on_event = on_event};
	gk_kube_watch *w;
	double t0 = now_s();
	if (gk_kube_watch_start(&w, m, &r, &o, &cbs, &c, &e)) {
		fprintf(stderr, "watch_bench: %s\n", e.msg);
		return 1;
	}
	while (c.got < c.want && now_s() - t0 < 600) {
		struct pollfd p = {gk_kube_mux_fd(m), POLLIN, 0};
		int64_t to = gk_kube_mux_timeout_ms(m);
		poll(&p, 1, to < 0 || to > 100 ? 100 : (int)to);
		gk_kube_mux_run(m);
	}
	double total = now_s() - t0;
	gk_kube_watch_stats st;
	gk_kube_watch_stats_get(w, &st);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		     (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	printf("{\"events\":%ld,\"seconds\":%.4f,\"first_to_last\":%.4f,\"cpu_seconds\":%.3f,"
	       "\"published\":%llu,\"cached\":%zu,\"bad_docs\":%llu,\"rss_kb\":%ld}\n",
	       c.got, total, c.last - c.first, cpu, (unsigned long long)c.published, c.cache.n,
	       (unsigned long long)st.bad_docs, rss_kb());
	gk_kube_watch_stop(w);
	gk_kube_mux_free(m);
	gk_ipc_pub_close(c.pub);
	ws_clear(&c.cache);
	gk_kube_client_free(kc);
	char sock[320];
	snprintf(sock, sizeof sock, "%s/events.sock", dir);
	unlink(sock);
	rmdir(dir);
	gk_ipc_fini();
	return c.got >= c.want ? 0 : 1;
}

static int lines(long skip, long n)
{
	char *line = NULL;
	size_t cap = 0;
	long i = 0;
	double t0 = 0, t1 = 0;
	while (getline(&line, &cap, stdin) > 0) {
		i++;
		if (i == skip + 1)
			t0 = now_s();
		if (i == skip + n) {
			t1 = now_s();
			break;
		}
	}
	free(line);
	printf("{\"lines\":%ld,\"seconds\":%.4f}\n", i - skip, t1 > 0 ? t1 - t0 : -1.0);
	return t1 > 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	gk_log_init("watch_bench", GK_LOG_TEXT, GK_LOG_WARN);
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "gen"))
		return gen(argv[2], atoi(argv[3]), atoi(argv[4]), argc == 6 ? atoi(argv[5]) : 0);
	if (argc == 6 && !strcmp(argv[1], "patch"))
		return patch(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "claims"))
		return claims(argv[2], argv[3], atoi(argv[4]), argc == 6 ? atoi(argv[5]) : 0);
	if (argc == 5 && !strcmp(argv[1], "consume"))
		return consume(argv[2], argv[3], atol(argv[4]));
	if (argc == 4 && !strcmp(argv[1], "lines"))
		return lines(atol(argv[2]), atol(argv[3]));
	fprintf(stderr, "usage: watch_bench gen URL NODES MODS [FIRST] | claims URL NS N [FIRST] | consume URL RV N | lines SKIP N\n");
	return 2;
}
