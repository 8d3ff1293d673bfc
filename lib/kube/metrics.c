/* lib/kube: every API request counted and timed, in one place (the blocking
 * client's perform and the mux's completion both call gk_kube__observe), which
 * is also where a response's API Priority and Fairness headers are noticed;
 * and the time requests waited in the client-side limiter. */
#include <stdio.h>
#include <string.h>

#include "gpukmm/log.h"
#include "gpukmm/metrics.h"
#include "internal.h"

/* Path segments after the group-version prefix ("/api/v1", "/apis/g/v"). */
static int rest_segments(const char *path, const char **rest)
{
	const char *p = path;
	int skip;
	if (strncmp(p, "/api/", 5) == 0)
		skip = 2;
	else if (strncmp(p, "/apis/", 6) == 0)
		skip = 3;
	else
		return -1;
	for (int i = 0; i < skip; i++) {
		p = strchr(p + 1, '/');
		if (!p)
			return -1; /* discovery of a group or version */
	}
	*rest = p;
	int n = 0;
	for (const char *q = p; *q && *q != '?'; q++)
		if (*q == '/' && q[1] && q[1] != '?' && q[1] != '/')
			n++;
	return n;
}

const char *gk_kube_verb(const char *method, const char *path)
{
	if (!method || !path)
		return "OTHER";
	const char *q = strchr(path, '?');
	if (strcmp(method, "GET") == 0) {
		if (q && (strstr(q, "watch=true") || strstr(q, "watch=1")))
			return "WATCH";
		const char *rest = NULL;
		int n = rest_segments(path, &rest);
		if (n > 0 && strncmp(rest, "/watch/", 7) == 0)
			return "WATCH";
		/* namespaces/<ns>/<resource>...: the resource is 2 segments later */
		if (n >= 3 && strncmp(rest, "/namespaces/", 12) == 0)
			n -= 2;
		return n == 1 ? "LIST" : "GET";
	}
	static const char *const verbs[] = { "POST", "PUT", "PATCH", "DELETE", "HEAD" };
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (strcmp(method, verbs[i]) == 0)
			return verbs[i];
	return "OTHER";
}

static gk_metric *throttled_metric(void)
{
	static gk_metric *m;
	if (!m)
		m = gk_metric_counter("gpukmm_api_client_throttled_seconds_total",
				      "Time API requests waited in the client-side rate limiter (0 once the "
				      "server shows API Priority and Fairness, where the limit stands down).",
				      NULL);
	return m;
}

void gk_kube__throttled(gk_kube_client *c, int64_t wait_ms)
{
	c->stats.throttled_ms += (uint64_t)wait_ms;
	gk_metric_add(throttled_metric(), (double)wait_ms / 1000.0, NULL);
}

/* A response classified by API Priority and Fairness carries the flow schema
 * and priority level that took it: with qps_until_apf the client's own limit
 * stands down for good (the server queues and sheds by priority itself). */
static void apf_seen(gk_kube_client *c, CURL *e)
{
	struct curl_header *h;
	if (!c->opts.qps_until_apf || c->stats.apf ||
	    (curl_easy_header(e, "X-Kubernetes-PF-PriorityLevel-UID", 0, CURLH_HEADER, -1, &h) != CURLHE_OK &&
	     curl_easy_header(e, "X-Kubernetes-PF-FlowSchema-UID", 0, CURLH_HEADER, -1, &h) != CURLHE_OK))
		return;
	c->stats.apf = true;
	if (c->bucket.qps > 0)
		GK_INFO("kube: the API server applies priority and fairness: the client-side limit "
			"(%.0f/s, burst %.0f) is off", c->bucket.qps, c->bucket.burst);
	c->bucket.qps = -1;
}

void gk_kube__observe(gk_kube_client *c, CURL *e)
{
	apf_seen(c, e);
	static gk_metric *requests, *latency;
	if (!requests) {
		requests = gk_metric_counter("gpukmm_api_requests_total",
					     "Kubernetes API requests, by verb (GET, LIST, WATCH, POST, PUT, PATCH, "
					     "DELETE) and HTTP status code (<error>: no answer).",
					     "verb,code");
		latency = gk_metric_histogram("gpukmm_api_request_duration_seconds",
					      "Kubernetes API request latency (watches excluded: they last minutes "
					      "by design), by verb and HTTP status code.",
					      "verb,code", GK_METRIC_LATENCY_BUCKETS, GK_METRIC_N_LATENCY_BUCKETS);
	}
	char *url = NULL, *method = NULL;
	curl_easy_getinfo(e, CURLINFO_EFFECTIVE_METHOD, &method);
	long http = 0;
	curl_off_t us = 0;
	curl_easy_getinfo(e, CURLINFO_EFFECTIVE_URL, &url);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &http);
	curl_easy_getinfo(e, CURLINFO_TOTAL_TIME_T, &us);
	const char *path = url ? strstr(url, "://") : NULL;
	path = path ? strchr(path + 3, '/') : NULL;
	const char *verb = gk_kube_verb(method, path ? path : "/");
	char code[24];
	if (http > 0)
		snprintf(code, sizeof(code), "%ld", http);
	else
		snprintf(code, sizeof(code), "<error>");
	gk_metric_add(requests, 1, GK_LV(verb, code));
	if (strcmp(verb, "WATCH") != 0)
		gk_metric_observe(latency, (double)us / 1e6, GK_LV(verb, code));
}
