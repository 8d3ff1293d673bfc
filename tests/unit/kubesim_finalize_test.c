/* kubesim: deletions that wait for their content, as a real server makes them wait —
 * a CRD through its cleanup finalizer (its custom resources deleted first, the ones
 * holding finalizers keep it Terminating, new ones refused), a namespace with the
 * namespace controller's conditions naming what remains. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubesim_call.h"

static void setup(void)
{
	S = calloc(1, sizeof(*S));
	cr_assert(S);
	cr_assert_eq(ks_server_init(S, 1000), 0);
	cr_assert_eq(ks_server_seed(S), 0);
}

static void teardown(void)
{
	ks_server_free(S);
	free(S);
}

TestSuite(finalize, .init = setup, .fini = teardown);

#define JSON "application/json"
#define MERGE "application/merge-patch+json"
#define CRDS "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
#define CRD CRDS "/widgets.test.io"
#define W(ns) "/apis/test.io/v1/namespaces/" ns "/widgets"

static void install_crd(void)
{
	cr_assert_eq(do_("POST", CRDS,
			 "{\"metadata\":{\"name\":\"widgets.test.io\"},\"spec\":{\"group\":\"test.io\",\"scope\":"
			 "\"Namespaced\",\"names\":{\"plural\":\"widgets\",\"singular\":\"widget\",\"kind\":\"Widget\"},"
			 "\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true,\"schema\":{\"openAPIV3Schema\":{"
			 "\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":true}}}]}}",
			 JSON),
		     201);
}

static void widget(const char *ns, const char *name, int hold)
{
	char url[128], b[256];
	snprintf(url, sizeof(url), "/apis/test.io/v1/namespaces/%s/widgets", ns);
	snprintf(b, sizeof(b), "{\"metadata\":{\"name\":\"%s\"%s}}", name,
		 hold ? ",\"finalizers\":[\"example.com/hold\"]" : "");
	cr_assert_eq(do_("POST", url, b, JSON), 201);
}

/* the Terminating condition: "status reason" */
static const char *terminating(void)
{
	static char buf[128];
	int code;
	cJSON *o = call("GET", CRD, NULL, NULL, &code);
	buf[0] = 0;
	const cJSON *c;
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(cJSON_GetObjectItem(o, "status"), "conditions")) {
		char t[64];
		snprintf(t, sizeof(t), "%s", str(c, "type"));
		if (strcmp(t, "Terminating") == 0) {
			snprintf(buf, sizeof(buf), "%s ", str(c, "status"));
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s", str(c, "reason"));
		}
	}
	cJSON_Delete(o);
	return buf;
}

Test(finalize, crd_deletion_waits_for_custom_resources_with_finalizers)
{
	install_crd();
	cr_assert_eq(do_("POST", "/api/v1/namespaces", "{\"metadata\":{\"name\":\"team\"}}", JSON), 201);
	widget("default", "held", 1);
	widget("team", "held2", 1);
	widget("default", "free", 0);
	cr_assert_eq(do_("DELETE", CRD, NULL, NULL), 202, "deletion deferred");
	int code;
	cJSON *o = call("GET", CRD, NULL, NULL, &code);
	cr_assert_eq(code, 200, "the CRD stays while its resources do");
	cr_assert(str(o, "metadata.deletionTimestamp")[0]);
	cr_assert_str_eq(str(o, "metadata.finalizers.0"), "customresourcecleanup.apiextensions.k8s.io");
	cJSON_Delete(o);
	cr_assert_str_eq(terminating(), "True InstanceDeletionInProgress");
	cr_assert_eq(do_("GET", W("default") "/free", NULL, NULL), 404, "a resource without finalizers goes at once");
	o = call("GET", W("default") "/held", NULL, NULL, &code);
	cr_assert_eq(code, 200);
	cr_assert(str(o, "metadata.deletionTimestamp")[0], "the held one is Terminating");
	cJSON_Delete(o);
	/* no new ones meanwhile; the kind is still served for everything else */
	o = call("POST", W("default"), "{\"metadata\":{\"name\":\"late\"}}", JSON, &code);
	cr_assert_eq(code, 405);
	cr_assert_str_eq(str(o, "reason"), "MethodNotAllowed");
	cr_assert_str_eq(str(o, "message"), "create not allowed while custom resource definition is terminating");
	cJSON_Delete(o);
	cr_assert_eq(do_("GET", "/apis/test.io/v1/widgets", NULL, NULL), 200);
	cr_assert_eq(do_("DELETE", CRD, NULL, NULL), 202, "a second DELETE changes nothing");
	/* the finalizers go one by one; the CRD with the last */
	cr_assert_eq(do_("PATCH", W("default") "/held", "{\"metadata\":{\"finalizers\":null}}", MERGE), 200);
	cr_assert_eq(do_("GET", W("default") "/held", NULL, NULL), 404);
	cr_assert_str_eq(terminating(), "True InstanceDeletionInProgress");
	cr_assert_eq(do_("PATCH", W("team") "/held2", "{\"metadata\":{\"finalizers\":null}}", MERGE), 200);
	cr_assert_eq(do_("GET", CRD, NULL, NULL), 404, "no resource left: the CRD is gone");
	cr_assert_eq(do_("GET", "/apis/test.io/v1/widgets", NULL, NULL), 404, "and its kind with it");
}

Test(finalize, crd_without_resources_goes_at_once)
{
	install_crd();
	cr_assert_eq(do_("DELETE", CRD, NULL, NULL), 202);
	cr_assert_eq(do_("GET", CRD, NULL, NULL), 404);
	install_crd(); /* the name is free again */
}

Test(finalize, namespace_termination_names_what_remains)
{
	install_crd();
	cr_assert_eq(do_("POST", "/api/v1/namespaces", "{\"metadata\":{\"name\":\"team\"}}", JSON), 201);
	widget("team", "a", 1);
	widget("team", "b", 1);
	cr_assert_eq(do_("POST", "/api/v1/namespaces/team/configmaps",
			 "{\"metadata\":{\"name\":\"c\",\"finalizers\":[\"other.io/keep\"]}}", JSON),
		     201);
	cr_assert_eq(do_("POST", "/api/v1/namespaces/team/configmaps", "{\"metadata\":{\"name\":\"d\"}}", JSON), 201);
	cr_assert_eq(do_("DELETE", "/api/v1/namespaces/team", NULL, NULL), 202);
	int code;
	cJSON *o = call("GET", "/api/v1/namespaces/team", NULL, NULL, &code);
	cr_assert_eq(code, 200);
	cr_assert_str_eq(str(o, "status.phase"), "Terminating");
	static const char *want[][4] = {
		{ "NamespaceDeletionDiscoveryFailure", "False", "ResourcesDiscovered", "All resources successfully discovered" },
		{ "NamespaceDeletionGroupVersionParsingFailure", "False", "ParsedGroupVersions",
		  "All legacy kube types successfully parsed" },
		{ "NamespaceDeletionContentFailure", "False", "ContentDeleted",
		  "All content successfully deleted, may be waiting on finalization" },
		{ "NamespaceContentRemaining", "True", "SomeResourcesRemain",
		  "Some resources are remaining: configmaps has 1 resource instances, widgets.test.io has 2 resource "
		  "instances" },
		{ "NamespaceFinalizersRemaining", "True", "SomeFinalizersRemain",
		  "Some content in the namespace has finalizers remaining: example.com/hold in 2 resource instances, "
		  "other.io/keep in 1 resource instances" },
	};
	for (int i = 0; i < 5; i++) {
		char p[64];
		snprintf(p, sizeof(p), "status.conditions.%d.type", i);
		cr_assert_str_eq(str(o, p), want[i][0]);
		snprintf(p, sizeof(p), "status.conditions.%d.status", i);
		cr_assert_str_eq(str(o, p), want[i][1]);
		snprintf(p, sizeof(p), "status.conditions.%d.reason", i);
		cr_assert_str_eq(str(o, p), want[i][2]);
		snprintf(p, sizeof(p), "status.conditions.%d.message", i);
		cr_assert_str_eq(str(o, p), want[i][3]);
	}
	cJSON_Delete(o);
	cr_assert_eq(do_("GET", "/api/v1/namespaces/team/configmaps/d", NULL, NULL), 404, "content without finalizers gone");
	cr_assert_eq(do_("PATCH", "/api/v1/namespaces/team/configmaps/c", "{\"metadata\":{\"finalizers\":null}}", MERGE),
		     200);
	cr_assert_eq(do_("PATCH", W("team") "/a", "{\"metadata\":{\"finalizers\":null}}", MERGE), 200);
	o = call("GET", "/api/v1/namespaces/team", NULL, NULL, &code);
	cr_assert_str_eq(str(o, "status.conditions.3.message"),
			 "Some resources are remaining: widgets.test.io has 1 resource instances");
	cJSON_Delete(o);
	cr_assert_eq(do_("PATCH", W("team") "/b", "{\"metadata\":{\"finalizers\":null}}", MERGE), 200);
	cr_assert_eq(do_("GET", "/api/v1/namespaces/team", NULL, NULL), 404, "empty: the namespace is gone");
}
