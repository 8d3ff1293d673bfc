/* kubesim API semantics through the request handler (no sockets): metadata, 409 on
 * stale updates, status subresource separation, generation, finalizers, garbage
 * collection (background, foreground, orphan, cluster-scoped owners), server-side
 * apply ownership and conflicts, watch history and 410, stats and faults. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../tools/kubesim/kubesim.h"
#include "../../tools/kubesim/selector.h"
#include "kubesim_call.h"


static void setup(void)
{
	S = calloc(1, sizeof(*S));
	cr_assert(S);
	cr_assert_eq(ks_server_init(S, 50), 0);
	cr_assert_eq(ks_server_seed(S), 0);
	S->bookmark_ms = 50;
}

static void teardown(void)
{
	ks_server_free(S);
	free(S);
}

TestSuite(api, .init = setup, .fini = teardown);


#define CM "/api/v1/namespaces/default/configmaps"
#define MSG(o) (cJSON_IsString(cJSON_GetObjectItem(o, "message")) ? cJSON_GetObjectItem(o, "message")->valuestring : "")
#define MERGE "application/merge-patch+json"

Test(api, create_get_metadata)
{
	int code;
	cJSON *o = call("POST", CM, "{\"metadata\":{\"name\":\"a\"},\"data\":{\"k\":\"v\"}}", "application/json", &code);
	cr_assert_eq(code, 201);
	cr_assert_str_eq(str(o, "kind"), "ConfigMap");
	cr_assert_str_eq(str(o, "apiVersion"), "v1");
	cr_assert_str_eq(str(o, "metadata.namespace"), "default");
	cr_assert_eq(strlen(str(o, "metadata.uid")), 36);
	cr_assert(str(o, "metadata.creationTimestamp")[0]);
	cr_assert(atoi(str(o, "metadata.resourceVersion")) > 0);
	cJSON_Delete(o);
	cr_assert_eq(do_("POST", CM, "{\"metadata\":{\"name\":\"a\"}}", "application/json"), 409);
	o = call("POST", CM, "{\"metadata\":{\"generateName\":\"gen-\"}}", "application/json", &code);
	cr_assert_eq(code, 201);
	cr_assert(strncmp(str(o, "metadata.name"), "gen-", 4) == 0 && strlen(str(o, "metadata.name")) == 9);
	cJSON_Delete(o);
	cr_assert_eq(do_("POST", CM, "{\"metadata\":{\"name\":\"Bad_Name\"}}", "application/json"), 422);
	cr_assert_eq(do_("POST", CM, "{\"metadata\":{}}", "application/json"), 422);
	cr_assert_eq(do_("POST", CM, "not json", "application/json"), 400);
	cr_assert_eq(do_("POST", CM, "[1]", "application/json"), 400);
	cr_assert_eq(do_("POST", "/api/v1/namespaces/nope/configmaps", "{\"metadata\":{\"name\":\"a\"}}", "application/json"), 404);
	cr_assert_eq(do_("POST", CM, "{\"apiVersion\":\"v2\",\"metadata\":{\"name\":\"b\"}}", "application/json"), 400);
	cr_assert_eq(do_("POST", CM, "{\"metadata\":{\"name\":\"c\",\"labels\":{\"a\":1}}}", "application/json"), 400);
	cr_assert_eq(do_("GET", CM "/zz", NULL, NULL), 404);
	cr_assert_eq(do_("GET", "/api/v1/namespaces/default/bogus", NULL, NULL), 404);
	cr_assert_eq(do_("PUT", CM, "{}", "application/json"), 405);
	cr_assert_eq(do_("PATCH", CM "/a", "{}", "text/plain"), 415);
}

Test(api, stale_update_conflicts)
{
	int code;
	cJSON *o = call("POST", CM, "{\"metadata\":{\"name\":\"a\"},\"data\":{\"k\":\"1\"}}", "application/json", &code);
	char old[64];
	snprintf(old, sizeof(old), "%s", str(o, "metadata.resourceVersion"));
	cJSON_Delete(o);
	char body[256];
	snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"%s\"},\"data\":{\"k\":\"2\"}}", old);
	cr_assert_eq(do_("PUT", CM "/a", body, "application/json"), 200);
	o = call("PUT", CM "/a", body, "application/json", &code); /* same, now stale RV */
	cr_assert_eq(code, 409);
	cr_assert_str_eq(str(o, "reason"), "Conflict");
	cr_assert(strstr(MSG(o), "the object has been modified"));
	cJSON_Delete(o);
	snprintf(body, sizeof(body), "{\"metadata\":{\"resourceVersion\":\"%s\"},\"data\":{\"k\":\"3\"}}", old);
	cr_assert_eq(do_("PATCH", CM "/a", body, MERGE), 409);
	/* unconditional update works */
	cr_assert_eq(do_("PUT", CM "/a", "{\"metadata\":{\"name\":\"a\"},\"data\":{\"k\":\"4\"}}", "application/json"), 200);
	cr_assert_eq(do_("PUT", CM "/b", "{\"metadata\":{\"name\":\"b\"}}", "application/json"), 404);
	cr_assert_eq(do_("PUT", CM "/a", "{\"metadata\":{\"name\":\"other\"}}", "application/json"), 400);
}

Test(api, noop_update_is_not_a_write)
{
	int code;
	cJSON *o = call("POST", CM, "{\"metadata\":{\"name\":\"a\"},\"data\":{\"k\":\"1\"}}", "application/json", &code);
	char rv[64];
	snprintf(rv, sizeof(rv), "%s", str(o, "metadata.resourceVersion"));
	cJSON_Delete(o);
	o = call("PATCH", CM "/a", "{\"data\":{\"k\":\"1\"}}", MERGE, &code);
	cr_assert_eq(code, 200);
	cr_assert_str_eq(str(o, "metadata.resourceVersion"), rv);
	cJSON_Delete(o);
}

#define NODES "/api/v1/nodes"

Test(api, status_subresource_and_generation)
{
	int code;
	cJSON *o = call("POST", NODES, "{\"metadata\":{\"name\":\"n\"},\"spec\":{},\"status\":{\"nodeInfo\":{\"kernelVersion\":\"6.1\"}}}",
			"application/json", &code);
	cr_assert_eq(code, 201);
	cr_assert_str_eq(str(o, "status.nodeInfo.kernelVersion"), "6.1");
	cr_assert_str_eq(str(o, "metadata.generation"), "1");
	cJSON_Delete(o);
	/* a main-resource write cannot change status */
	o = call("PATCH", NODES "/n", "{\"spec\":{\"unschedulable\":true},\"status\":{\"nodeInfo\":{\"kernelVersion\":\"x\"}}}",
		 MERGE, &code);
	cr_assert_eq(code, 200);
	cr_assert_str_eq(str(o, "status.nodeInfo.kernelVersion"), "6.1");
	cr_assert_str_eq(str(o, "metadata.generation"), "2");
	cJSON_Delete(o);
	/* a status write cannot change spec or labels, and does not bump generation */
	o = call("PATCH", NODES "/n/status", "{\"spec\":{\"unschedulable\":false},\"metadata\":{\"labels\":{\"a\":\"b\"}},"
					     "\"status\":{\"nodeInfo\":{\"kernelVersion\":\"6.2\"}}}",
		 MERGE, &code);
	cr_assert_eq(code, 200);
	cr_assert_str_eq(str(o, "status.nodeInfo.kernelVersion"), "6.2");
	cr_assert_str_eq(str(o, "spec.unschedulable"), "true");
	cr_assert_str_eq(str(o, "metadata.labels.a"), "");
	cr_assert_str_eq(str(o, "metadata.generation"), "2");
	cJSON_Delete(o);
	/* metadata-only change: no generation bump */
	o = call("PATCH", NODES "/n", "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}", MERGE, &code);
	cr_assert_str_eq(str(o, "metadata.generation"), "2");
	cJSON_Delete(o);
	cr_assert_eq(do_("PATCH", CM "/x/status", "{}", MERGE), 404); /* configmaps have no status */
}

Test(api, finalizers_hold_deletion)
{
	int code;
	cr_assert_eq(do_("POST", CM, "{\"metadata\":{\"name\":\"f\",\"finalizers\":[\"x.io/hold\"]}}", "application/json"), 201);
	cJSON *o = call("DELETE", CM "/f", NULL, NULL, &code);
	cr_assert_eq(code, 202);
	cr_assert(str(o, "metadata.deletionTimestamp")[0]);
	cJSON_Delete(o);
	cr_assert_eq(do_("GET", CM "/f", NULL, NULL), 200);
	/* no new finalizers while deleting */
	cr_assert_eq(do_("PATCH", CM "/f", "{\"metadata\":{\"finalizers\":[\"x.io/hold\",\"y\"]}}", MERGE), 422);
	cr_assert_eq(do_("PATCH", CM "/f", "{\"metadata\":{\"finalizers\":null}}", MERGE), 200);
	cr_assert_eq(do_("GET", CM "/f", NULL, NULL), 404);
}

Test(api, delete_preconditions)
{
	int code;
	cJSON *o = call("POST", CM, "{\"metadata\":{\"name\":\"p\"}}", "application/json", &code);
	char body[256];
	snprintf(body, sizeof(body), "{\"preconditions\":{\"uid\":\"nope\"}}");
	ks_req r = { .method = "DELETE", .path = CM "/p", .body = body, .body_len = strlen(body) };
	ks_resp out;
	ks_handle(S, &r, &out);
	cr_assert_eq(out.code, 409);
	ks_resp_free(&out);
	snprintf(body, sizeof(body), "{\"preconditions\":{\"uid\":\"%s\"}}", str(o, "metadata.uid"));
	r.body_len = strlen(body);
	ks_handle(S, &r, &out);
	cr_assert_eq(out.code, 200);
	ks_resp_free(&out);
	cJSON_Delete(o);
	cr_assert_eq(do_("DELETE", CM "/p", NULL, NULL), 404);
}

/* an owner (cluster-scoped node) with a namespaced dependent */
static char owner_uid[64];

static void make_owner_and_dependents(void)
{
	int code;
	cJSON *o = call("POST", NODES, "{\"metadata\":{\"name\":\"owner\"}}", "application/json", &code);
	cr_assert_eq(code, 201);
	snprintf(owner_uid, sizeof(owner_uid), "%s", str(o, "metadata.uid"));
	cJSON_Delete(o);
	for (int i = 0; i < 2; i++) {
		char body[512];
		snprintf(body, sizeof(body),
			 "{\"metadata\":{\"name\":\"dep%d\",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\","
			 "\"name\":\"owner\",\"uid\":\"%s\",\"blockOwnerDeletion\":true}]}}",
			 i, owner_uid);
		cr_assert_eq(do_("POST", CM, body, "application/json"), 201);
	}
}

Test(api, gc_background)
{
	make_owner_and_dependents();
	cr_assert_eq(do_("DELETE", NODES "/owner", NULL, NULL), 200);
	cr_assert_eq(do_("GET", CM "/dep0", NULL, NULL), 404);
	cr_assert_eq(do_("GET", CM "/dep1", NULL, NULL), 404);
}

Test(api, gc_orphan)
{
	make_owner_and_dependents();
	cr_assert_eq(do_("DELETE", NODES "/owner?propagationPolicy=Orphan", NULL, NULL), 202);
	cr_assert_eq(do_("GET", NODES "/owner", NULL, NULL), 404);
	int code;
	cJSON *o = call("GET", CM "/dep0", NULL, NULL, &code);
	cr_assert_eq(code, 200);
	cr_assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "ownerReferences"));
	cJSON_Delete(o);
}

Test(api, gc_foreground_waits_for_dependents)
{
	make_owner_and_dependents();
	/* dep1 holds a finalizer, so the owner must wait */
	cr_assert_eq(do_("PATCH", CM "/dep1", "{\"metadata\":{\"finalizers\":[\"hold\"]}}", MERGE), 200);
	cr_assert_eq(do_("DELETE", NODES "/owner?propagationPolicy=Foreground", NULL, NULL), 202);
	cr_assert_eq(do_("GET", CM "/dep0", NULL, NULL), 404);
	int code;
	cJSON *o = call("GET", NODES "/owner", NULL, NULL, &code);
	cr_assert_eq(code, 200, "owner must wait for its dependents");
	char *fins = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "finalizers"));
	cr_assert(fins && strstr(fins, "foregroundDeletion"), "%s", fins ? fins : "");
	free(fins);
	cJSON_Delete(o);
	cr_assert_eq(do_("PATCH", CM "/dep1", "{\"metadata\":{\"finalizers\":null}}", MERGE), 200);
	cr_assert_eq(do_("GET", CM "/dep1", NULL, NULL), 404);
	cr_assert_eq(do_("GET", NODES "/owner", NULL, NULL), 404);
}

Test(api, gc_dangling_owner_on_create)
{
	cr_assert_eq(do_("POST", CM, "{\"metadata\":{\"name\":\"orphan\",\"ownerReferences\":[{\"apiVersion\":\"v1\","
				     "\"kind\":\"Node\",\"name\":\"gone\",\"uid\":\"no-such-uid\"}]}}",
			 "application/json"),
		     201);
	cr_assert_eq(do_("GET", CM "/orphan", NULL, NULL), 404);
}

Test(api, gc_runs_only_when_owners_or_deletions_change)
{
	make_owner_and_dependents();
	uint64_t runs = S->stats.gc_runs;
	/* a write that leaves the owner references alone cannot change what the collector decides */
	cr_assert_eq(do_("PATCH", CM "/dep0", "{\"data\":{\"k\":\"v\"}}", MERGE), 200);
	cr_assert_eq(do_("POST", CM, "{\"metadata\":{\"name\":\"plain\"}}", "application/json"), 201);
	cr_assert_eq(S->stats.gc_runs, runs);
	/* one that points them at a missing owner can: the dependent is collected */
	cr_assert_eq(do_("PATCH", CM "/dep0",
			 "{\"metadata\":{\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\","
			 "\"name\":\"gone\",\"uid\":\"no-such-uid\"}]}}",
			 MERGE),
		     200);
	cr_assert_eq(S->stats.gc_runs, runs + 1);
	cr_assert_eq(do_("GET", CM "/dep0", NULL, NULL), 404);
	cr_assert_eq(do_("GET", CM "/dep1", NULL, NULL), 200);
}

Test(api, namespace_deletion_removes_content)
{
	cr_assert_eq(do_("POST", "/api/v1/namespaces", "{\"metadata\":{\"name\":\"tmp\"}}", "application/json"), 201);
	cr_assert_eq(do_("POST", "/api/v1/namespaces/tmp/configmaps", "{\"metadata\":{\"name\":\"c\"}}", "application/json"), 201);
	do_("DELETE", "/api/v1/namespaces/tmp", NULL, NULL);
	cr_assert_eq(do_("GET", "/api/v1/namespaces/tmp/configmaps/c", NULL, NULL), 404);
	cr_assert_eq(do_("GET", "/api/v1/namespaces/tmp", NULL, NULL), 404);
}

#define APPLY "application/apply-patch+yaml"

Test(api, server_side_apply_ownership)
{
	int code;
	const char *cfg = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"s\"},\"data\":{\"a\":\"1\",\"b\":\"1\"}}";
	cr_assert_eq(do_("PATCH", CM "/s?fieldManager=alice", cfg, APPLY), 201);
	cr_assert_eq(do_("PATCH", CM "/s", cfg, APPLY), 400); /* fieldManager required */
	/* bob changes a field alice owns: conflict */
	const char *bob = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"s\"},\"data\":{\"a\":\"2\"}}";
	cJSON *o = call("PATCH", CM "/s?fieldManager=bob", bob, APPLY, &code);
	cr_assert_eq(code, 409);
	cr_assert(strstr(MSG(o), "conflict with \"alice\""), "%s", MSG(o));
	cr_assert(strstr(MSG(o), ".data.a"), "%s", MSG(o));
	cJSON_Delete(o);
	/* same value: shared ownership, no conflict */
	const char *bob_same = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"s\"},\"data\":{\"b\":\"1\"}}";
	cr_assert_eq(do_("PATCH", CM "/s?fieldManager=bob", bob_same, APPLY), 200);
	/* force takes it (bob keeps applying b too) */
	const char *bob_both = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"s\"},\"data\":{\"a\":\"2\",\"b\":\"1\"}}";
	o = call("PATCH", CM "/s?fieldManager=bob&force=true", bob_both, APPLY, &code);
	cr_assert_eq(code, 200);
	cr_assert_str_eq(str(o, "data.a"), "2");
	cJSON_Delete(o);
	/* alice stops applying b: b stays (bob co-owns); alice applies a again -> conflict with bob */
	const char *alice2 = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"s\"},\"data\":{\"c\":\"1\"}}";
	o = call("PATCH", CM "/s?fieldManager=alice", alice2, APPLY, &code);
	cr_assert_eq(code, 200);
	cr_assert_str_eq(str(o, "data.b"), "1");
	cr_assert_str_eq(str(o, "data.c"), "1");
	cJSON_Delete(o);
	/* bob drops b: now nobody owns it -> removed */
	o = call("PATCH", CM "/s?fieldManager=bob", bob, APPLY, &code);
	cr_assert_eq(code, 200);
	cr_assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "data"), "b"), "b should be gone");
	cJSON_Delete(o);
	/* an Update manager takes ownership from the applier */
	cr_assert_eq(do_("PATCH", CM "/s?fieldManager=editor", "{\"data\":{\"c\":\"9\"}}", MERGE), 200);
	o = call("PATCH", CM "/s?fieldManager=alice", alice2, APPLY, &code);
	cr_assert_eq(code, 409, "editor owns data.c now");
	cr_assert(strstr(MSG(o), "conflict with \"editor\""), "%s", MSG(o));
	cJSON_Delete(o);
	o = call("GET", CM "/s", NULL, NULL, &code);
	cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "managedFields")), 2, "alice lost data.c to the editor and has no fields left");
	cJSON_Delete(o);
}

Test(api, list_selectors_and_pagination)
{
	for (int i = 0; i < 5; i++) {
		char b[256];
		snprintf(b, sizeof(b), "{\"metadata\":{\"name\":\"c%d\",\"labels\":{\"i\":\"%d\",\"even\":\"%s\"}}}", i, i,
			 i % 2 ? "no" : "yes");
		cr_assert_eq(do_("POST", CM, b, "application/json"), 201);
	}
	int code;
	cJSON *l = call("GET", CM "?labelSelector=even=yes", NULL, NULL, &code);
	cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(l, "items")), 3);
	cJSON_Delete(l);
	l = call("GET", CM "?fieldSelector=metadata.name=c3", NULL, NULL, &code);
	cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(l, "items")), 1);
	cJSON_Delete(l);
	int seen = 0;
	char cont[512] = "";
	for (int page = 0; page < 10; page++) {
		char url[1024];
		snprintf(url, sizeof(url), CM "?limit=2%s%s", cont[0] ? "&continue=" : "", cont);
		l = call("GET", url, NULL, NULL, &code);
		cr_assert_eq(code, 200);
		seen += cJSON_GetArraySize(cJSON_GetObjectItem(l, "items"));
		snprintf(cont, sizeof(cont), "%s", str(l, "metadata.continue"));
		cJSON_Delete(l);
		if (!cont[0])
			break;
	}
	cr_assert_eq(seen, 5);
	cr_assert_eq(do_("GET", CM "?continue=%%%", NULL, NULL), 400);
	cr_assert_eq(do_("GET", CM "?labelSelector=a%20in", NULL, NULL), 400);
	cr_assert_eq(do_("DELETE", CM "?labelSelector=even=no", NULL, NULL), 200);
	l = call("GET", CM, NULL, NULL, &code);
	cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(l, "items")), 3);
	cJSON_Delete(l);
}

/* ---- watch through the handler ---- */


Test(api, watch_resume_bookmarks_and_410)
{
	int code;
	cJSON *o = call("POST", CM, "{\"metadata\":{\"name\":\"w\"}}", "application/json", &code);
	int rv0 = atoi(str(o, "metadata.resourceVersion"));
	cJSON_Delete(o);
	cr_assert_eq(do_("PATCH", CM "/w", "{\"data\":{\"a\":\"1\"}}", MERGE), 200);
	cr_assert_eq(do_("DELETE", CM "/w", NULL, NULL), 200);
	char url[256];
	snprintf(url, sizeof(url), CM "?watch=1&resourceVersion=%d&timeoutSeconds=1&allowWatchBookmarks=true", rv0);
	char *s = watch_all(url);
	cr_assert_eq(count(s, "\"type\":\"ADDED\""), 0, "%s", s);
	cr_assert_eq(count(s, "\"type\":\"MODIFIED\""), 1, "%s", s);
	cr_assert_eq(count(s, "\"type\":\"DELETED\""), 1, "%s", s);
	cr_assert(count(s, "\"type\":\"BOOKMARK\"") >= 1, "%s", s);
	free(s);
	snprintf(url, sizeof(url), CM "?watch=1&resourceVersion=%d&timeoutSeconds=1", rv0 - 1);
	s = watch_all(url);
	cr_assert_eq(count(s, "\"type\":\"ADDED\""), 1, "%s", s);
	cr_assert_eq(count(s, "BOOKMARK"), 0, "no bookmarks unless asked: %s", s);
	free(s);
	/* history window of 50 events: push the old RV out */
	for (int i = 0; i < 60; i++) {
		char b[128];
		snprintf(b, sizeof(b), "{\"metadata\":{\"name\":\"x%d\"}}", i);
		cr_assert_eq(do_("POST", CM, b, "application/json"), 201);
	}
	s = watch_all(url);
	cr_assert(strstr(s, "\"type\":\"ERROR\""), "%s", s);
	cr_assert(strstr(s, "\"code\":410") && strstr(s, "\"reason\":\"Expired\""), "%s", s);
	free(s);
	/* RV unset: current state as ADDED */
	s = watch_all(CM "?watch=true&timeoutSeconds=1");
	cr_assert_eq(count(s, "\"type\":\"ADDED\""), 60, "%d", count(s, "\"type\":\"ADDED\""));
	free(s);
	/* compaction expires even recent RVs */
	o = call("GET", CM, NULL, NULL, &code);
	snprintf(url, sizeof(url), CM "?watch=1&resourceVersion=%s&timeoutSeconds=1", str(o, "metadata.resourceVersion"));
	cJSON_Delete(o);
	cr_assert_eq(do_("POST", CM, "{\"metadata\":{\"name\":\"late\"}}", "application/json"), 201);
	cr_assert_eq(do_("POST", "/kubesim/compact", "", NULL), 200);
	s = watch_all(url);
	cr_assert(strstr(s, "\"code\":410"), "%s", s);
	free(s);
}

Test(api, watch_label_transitions)
{
	int code;
	cJSON *o = call("POST", CM, "{\"metadata\":{\"name\":\"t\",\"labels\":{\"sel\":\"yes\"}}}", "application/json", &code);
	int rv0 = atoi(str(o, "metadata.resourceVersion"));
	cJSON_Delete(o);
	do_("PATCH", CM "/t", "{\"metadata\":{\"labels\":{\"sel\":\"no\"}}}", MERGE);
	do_("PATCH", CM "/t", "{\"metadata\":{\"labels\":{\"sel\":\"yes\"}}}", MERGE);
	char url[256];
	snprintf(url, sizeof(url), CM "?watch=1&resourceVersion=%d&timeoutSeconds=1&labelSelector=sel=yes", rv0);
	char *s = watch_all(url);
	/* leaving the selection is DELETED, entering again is ADDED */
	char *d = strstr(s, "\"type\":\"DELETED\""), *a = strstr(s, "\"type\":\"ADDED\"");
	cr_assert(d && a && d < a, "%s", s);
	free(s);
}

Test(api, faults_and_stats)
{
	cr_assert_eq(do_("PUT", "/kubesim/faults", "{\"seed\":1,\"rules\":[{\"verb\":\"get\",\"resource\":\"configmaps\",\"rate\":1,\"code\":429,\"retryAfter\":3}]}",
			 "application/json"),
		     200);
	ks_req r = { .method = "GET", .path = CM "/x" };
	ks_resp out;
	ks_handle(S, &r, &out);
	cr_assert_eq(out.code, 429);
	cr_assert_eq(out.retry_after, 3);
	ks_resp_free(&out);
	cr_assert_eq(do_("PUT", "/kubesim/faults", "{\"bogus\":1}", "application/json"), 400);
	cr_assert_eq(do_("PUT", "/kubesim/faults", "{}", "application/json"), 200);
	cr_assert_eq(do_("GET", CM "/x", NULL, NULL), 404);
	int code;
	cJSON *st = call("GET", "/kubesim/stats", NULL, NULL, &code);
	cr_assert_eq(code, 200);
	cr_assert_eq(cJSON_GetObjectItem(st, "faultsInjected")->valueint, 1);
	cr_assert_eq(cJSON_GetObjectItem(st, "writes")->valueint, 0);
	cr_assert_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(st, "byVerb"), "get"), "configmaps")->valueint, 2);
	cJSON_Delete(st);
	do_("POST", CM, "{\"metadata\":{\"name\":\"w\"}}", "application/json");
	st = call("GET", "/kubesim/stats", NULL, NULL, &code);
	cr_assert_eq(cJSON_GetObjectItem(st, "writes")->valueint, 1);
	cr_assert_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(st, "writesByResource"), "configmaps")->valueint, 1);
	cJSON_Delete(st);
}

Test(api, token_auth)
{
	S->token = "s3cret";
	ks_req r = { .method = "GET", .path = "/api/v1/nodes" };
	ks_resp out;
	ks_handle(S, &r, &out);
	cr_assert_eq(out.code, 401);
	cr_assert(strstr(out.body, "Unauthorized"));
	ks_resp_free(&out);
	r.auth = "Bearer wrong";
	ks_handle(S, &r, &out);
	cr_assert_eq(out.code, 401);
	ks_resp_free(&out);
	r.auth = "Bearer s3cret";
	ks_handle(S, &r, &out);
	cr_assert_eq(out.code, 200);
	ks_resp_free(&out);
	S->token = NULL;
}

static int auth_code(const char *authz)
{
	ks_req r = { .method = "GET", .path = "/api/v1/nodes", .auth = authz };
	ks_resp out;
	ks_handle(S, &r, &out);
	int c = out.code;
	ks_resp_free(&out);
	return c;
}

static void write_file(const char *dir, const char *name, const char *content)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	cr_assert(f);
	fputs(content, f);
	fclose(f);
}

/* --token-file: a rotated file (rename over it, or rewritten in place) is picked
 * up on the next request; an empty or missing file keeps the last good token. */
Test(api, token_file_rotation)
{
	char dir[400], path[600], tmp[600];
	const char *t = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/ks-tokenXXXXXX", t && *t ? t : P_tmpdir);
	cr_assert(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/token", dir);
	snprintf(tmp, sizeof(tmp), "%s/token.new", dir);
	write_file(dir, "token", "first\n");
	gk_err e = { 0 };
	cr_assert_eq(ks_token_file_load(S, path, &e), 0, "%s", e.msg);
	cr_assert_eq(auth_code("Bearer first"), 200);
	cr_assert_eq(auth_code("Bearer second"), 401);
	cr_assert_eq(auth_code(NULL), 401);

	write_file(dir, "token.new", "second\n"); /* atomic rotation */
	cr_assert_eq(rename(tmp, path), 0);
	cr_assert_eq(auth_code("Bearer first"), 401);
	cr_assert_eq(auth_code("Bearer second"), 200);

	write_file(dir, "token", "third-and-longer"); /* rewritten in place */
	cr_assert_eq(auth_code("Bearer second"), 401);
	cr_assert_eq(auth_code("Bearer third-and-longer"), 200);

	write_file(dir, "token", ""); /* truncated mid-rewrite: keep the last token */
	cr_assert_eq(auth_code("Bearer third-and-longer"), 200);
	cr_assert_eq(auth_code("Bearer "), 401);
	cr_assert_eq(unlink(path), 0); /* gone: keep it too */
	cr_assert_eq(auth_code("Bearer third-and-longer"), 200);

	write_file(dir, "token", "fourth\n");
	cr_assert_eq(auth_code("Bearer fourth"), 200);
	cr_assert_eq(auth_code("Bearer third-and-longer"), 401);
	unlink(path);
	rmdir(dir);

	cr_assert_neq(ks_token_file_load(S, "/nonexistent/token", &e), 0);
	cr_assert(strstr(e.msg, "/nonexistent/token"), "%s", e.msg);
}

/* The claim "CRD defaults/required/enum are not applied", checked through the
 * handler: required and enum refused with the API server's messages, defaults
 * applied on create and again after a patch removes the field. */
Test(api, crd_required_enum_defaults)
{
	const char *crd =
		"{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
		"\"metadata\":{\"name\":\"gadgets.t.io\"},\"spec\":{\"group\":\"t.io\",\"scope\":\"Cluster\","
		"\"names\":{\"plural\":\"gadgets\",\"singular\":\"gadget\",\"kind\":\"Gadget\",\"listKind\":\"GadgetList\"},"
		"\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true,\"schema\":{\"openAPIV3Schema\":{"
		"\"type\":\"object\",\"properties\":{\"spec\":{\"type\":\"object\",\"required\":[\"size\"],\"properties\":{"
		"\"size\":{\"type\":\"integer\"},\"color\":{\"type\":\"string\",\"enum\":[\"red\",\"green\"],\"default\":\"green\"},"
		"\"nested\":{\"type\":\"object\",\"default\":{},\"properties\":{\"level\":{\"type\":\"string\",\"default\":\"low\"}}}"
		"}}}}}}]}}";
	cr_assert_eq(do_("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd, NULL), 201);
	int code;
	cJSON *o = call("POST", "/apis/t.io/v1/gadgets", "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"color\":\"red\"}}", NULL,
			&code);
	cr_assert_eq(code, 422);
	cr_assert(strstr(MSG(o), "Gadget.t.io \"a\" is invalid: spec.size: Required value"), "%s", MSG(o));
	cJSON_Delete(o);
	o = call("POST", "/apis/t.io/v1/gadgets", "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"size\":1,\"color\":\"pink\"}}",
		 NULL, &code);
	cr_assert_eq(code, 422);
	cr_assert(strstr(MSG(o), "spec.color: Unsupported value: \"pink\": supported values: \"red\", \"green\""), "%s",
		  MSG(o));
	cJSON_Delete(o);
	o = call("POST", "/apis/t.io/v1/gadgets", "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"size\":1}}", NULL, &code);
	cr_assert_eq(code, 201);
	cr_assert_str_eq(str(o, "spec.color"), "green");
	cr_assert_str_eq(str(o, "spec.nested.level"), "low");
	cJSON_Delete(o);
	o = call("PATCH", "/apis/t.io/v1/gadgets/a", "{\"spec\":{\"color\":\"red\",\"nested\":{\"level\":\"high\"}}}", MERGE,
		 &code);
	cr_assert_eq(code, 200);
	cr_assert_str_eq(str(o, "spec.color"), "red");
	cJSON_Delete(o);
	o = call("PATCH", "/apis/t.io/v1/gadgets/a", "{\"spec\":{\"color\":null,\"nested\":null}}", MERGE, &code);
	cr_assert_eq(code, 200);
	cr_assert_str_eq(str(o, "spec.color"), "green", "default re-applied after removal");
	cr_assert_str_eq(str(o, "spec.nested.level"), "low");
	cJSON_Delete(o);
	o = call("PUT", "/apis/t.io/v1/gadgets/a", "{\"apiVersion\":\"t.io/v1\",\"kind\":\"Gadget\",\"metadata\":{\"name\":\"a\"},\"spec\":{}}",
		 NULL, &code);
	cr_assert_eq(code, 422, "update without the required field");
	cJSON_Delete(o);
}

/* Built-in kinds: what kubectl users get wrong by hand is refused like the API
 * server does (422 Invalid, field causes). */
Test(api, builtin_validation)
{
	int code;
	cJSON *o = call("POST", "/api/v1/nodes",
			"{\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"Bogus\"},{\"effect\":\"NoSchedule\"}]}}",
			NULL, &code);
	cr_assert_eq(code, 422);
	cr_assert(strstr(MSG(o), "Node \"n\" is invalid: [spec.taints[0].effect: Unsupported value: \"Bogus\": supported "
				 "values: \"NoExecute\", \"NoSchedule\", \"PreferNoSchedule\", spec.taints[1].key: Required value]"),
		  "%s", MSG(o));
	const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "details"), "causes"), 0);
	cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(c0, "field")), "spec.taints[0].effect");
	cJSON_Delete(o);
	cr_assert_eq(do_("POST", "/api/v1/nodes",
			 "{\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"NoSchedule\"},"
			 "{\"key\":\"a\",\"effect\":\"NoSchedule\"}]}}",
			 NULL),
		     422);
	cr_assert_eq(do_("POST", "/api/v1/nodes",
			 "{\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"NoSchedule\"},"
			 "{\"key\":\"a\",\"effect\":\"NoExecute\"}]}}",
			 NULL),
		     201);
	/* a patch that breaks a stored Node is refused too */
	cr_assert_eq(do_("PATCH", "/api/v1/nodes/n", "{\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"Never\"}]}}", MERGE), 422);

	o = call("POST", "/apis/apps/v1/namespaces/default/daemonsets",
		 "{\"metadata\":{\"name\":\"d\"},\"spec\":{\"template\":{\"metadata\":{\"labels\":{\"a\":\"b\"}},"
		 "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}}}",
		 NULL, &code);
	cr_assert_eq(code, 422);
	cr_assert(strstr(MSG(o), "DaemonSet.apps \"d\" is invalid: spec.selector: Required value"), "%s", MSG(o));
	cJSON_Delete(o);
	o = call("POST", "/apis/apps/v1/namespaces/default/daemonsets",
		 "{\"metadata\":{\"name\":\"d\"},\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"x\"}},\"template\":{\"metadata\":"
		 "{\"labels\":{\"a\":\"b\"}},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}}",
		 NULL, &code);
	cr_assert_eq(code, 422);
	cr_assert(strstr(MSG(o), "`selector` does not match template `labels`"), "%s", MSG(o));
	cr_assert(strstr(MSG(o), "spec.template.spec.containers[0].image: Required value"), "%s", MSG(o));
	cJSON_Delete(o);
	cr_assert_eq(do_("POST", "/apis/apps/v1/namespaces/default/daemonsets",
			 "{\"metadata\":{\"name\":\"d\"},\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"b\"}},\"template\":"
			 "{\"metadata\":{\"labels\":{\"a\":\"b\",\"c\":\"d\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}}}",
			 NULL),
		     201);
	cr_assert_eq(do_("POST", "/api/v1/namespaces/default/pods", "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[]}}",
			 NULL),
		     422);
	cr_assert_eq(do_("POST", "/api/v1/namespaces/default/pods",
			 "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"},{\"name\":\"c\",\"image\":\"j\"}]}}",
			 NULL),
		     422);
}
