/* kubesim strategic merge patch, table-tested against what the API server's
 * strategicpatch produces for the same (kind, live object, patch): per-kind list
 * strategies (Node taints are atomic, containers merge by name, ...), directives
 * and the order of merged lists. The patches are the ones kubectl sends for
 * taint / label / apply / edit. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/kubesim/jsonutil.h"
#include "../../tools/kubesim/patch.h"

static cJSON *J(const char *s)
{
	cJSON *j = cJSON_Parse(s);
	cr_assert(j, "bad JSON in test: %s", s);
	return j;
}

struct smp_row {
	const char *name, *kind, *live, *patch, *want; /* want NULL: an error containing err */
	const char *err;
};

/* JSON with ' for " to keep the table readable. */
static char *q(const char *s)
{
	char *d = strdup(s);
	cr_assert(d);
	for (char *p = d; *p; p++)
		if (*p == '\'')
			*p = '"';
	return d;
}

static const struct smp_row rows[] = {
	/* kubectl taint node n a- (taints have no patchStrategy: the whole list is sent) */
	{ "taint removed", "Node",
	  "{'spec':{'taints':[{'key':'a','effect':'NoSchedule'},{'key':'b','value':'1','effect':'NoExecute'}]}}",
	  "{'spec':{'taints':[{'key':'b','value':'1','effect':'NoExecute'}]}}",
	  "{'spec':{'taints':[{'key':'b','value':'1','effect':'NoExecute'}]}}", NULL },
	{ "last taint removed", "Node", "{'spec':{'taints':[{'key':'a','effect':'NoSchedule'}]}}",
	  "{'spec':{'taints':null}}", "{'spec':{}}", NULL },
	/* kubectl taint node n a=v2:NoSchedule --overwrite */
	{ "taint overwritten", "Node",
	  "{'spec':{'taints':[{'key':'a','value':'v','effect':'NoSchedule'},{'key':'b','effect':'NoSchedule'}]}}",
	  "{'spec':{'taints':[{'key':'a','value':'v2','effect':'NoSchedule'},{'key':'b','effect':'NoSchedule'}]}}",
	  "{'spec':{'taints':[{'key':'a','value':'v2','effect':'NoSchedule'},{'key':'b','effect':'NoSchedule'}]}}",
	  NULL },
	/* the same key with two effects is two taints: atomic replace keeps both */
	{ "taint same key two effects", "Node", "{'spec':{'taints':[{'key':'a','effect':'NoSchedule'}]}}",
	  "{'spec':{'taints':[{'key':'a','effect':'NoSchedule'},{'key':'a','effect':'NoExecute'}]}}",
	  "{'spec':{'taints':[{'key':'a','effect':'NoSchedule'},{'key':'a','effect':'NoExecute'}]}}", NULL },
	/* kubectl cordon / uncordon */
	{ "uncordon", "Node", "{'spec':{'unschedulable':true,'podCIDRs':['10.0.0.0/24']}}",
	  "{'spec':{'unschedulable':null}}", "{'spec':{'podCIDRs':['10.0.0.0/24']}}", NULL },
	/* kubectl label node n a=b c- */
	{ "labels", "Node", "{'metadata':{'labels':{'c':'d','x':'y'}}}",
	  "{'metadata':{'labels':{'a':'b','c':null}}}", "{'metadata':{'labels':{'x':'y','a':'b'}}}", NULL },
	{ "node conditions merge by type", "Node",
	  "{'status':{'conditions':[{'type':'Ready','status':'True'},{'type':'DiskPressure','status':'False'}]}}",
	  "{'status':{'conditions':[{'type':'Ready','status':'False','reason':'KubeletDown'}]}}",
	  "{'status':{'conditions':[{'type':'Ready','status':'False','reason':'KubeletDown'},"
	  "{'type':'DiskPressure','status':'False'}]}}",
	  NULL },
	/* an item the live list lacks goes first (mergeSortedSlice takes the patch item
	 * when either position is unknown); kubectl sends $setElementOrder to avoid that */
	{ "node addresses merge by type", "Node", "{'status':{'addresses':[{'type':'InternalIP','address':'1'}]}}",
	  "{'status':{'addresses':[{'type':'Hostname','address':'h'}]}}",
	  "{'status':{'addresses':[{'type':'Hostname','address':'h'},{'type':'InternalIP','address':'1'}]}}", NULL },
	{ "podCIDRs set of scalars", "Node", "{'spec':{'podCIDRs':['a']}}", "{'spec':{'podCIDRs':['b']}}",
	  "{'spec':{'podCIDRs':['b','a']}}", NULL },
	/* finalizers: a set of scalars, patch order first, then interleaved with the live order */
	{ "finalizers add", "ConfigMap", "{'metadata':{'finalizers':['a','b','c']}}",
	  "{'metadata':{'finalizers':['c','d']}}", "{'metadata':{'finalizers':['a','b','c','d']}}", NULL },
	{ "finalizers order", "ConfigMap", "{'metadata':{'finalizers':['a','b','c']}}",
	  "{'metadata':{'finalizers':['d','a']}}", "{'metadata':{'finalizers':['d','a','b','c']}}", NULL },
	{ "finalizers delete", "ConfigMap", "{'metadata':{'finalizers':['a','b','c']}}",
	  "{'metadata':{'$deleteFromPrimitiveList/finalizers':['b','z']}}", "{'metadata':{'finalizers':['a','c']}}",
	  NULL },
	{ "finalizers set order", "ConfigMap", "{'metadata':{'finalizers':['a','b']}}",
	  "{'metadata':{'$setElementOrder/finalizers':['b','a']}}", "{'metadata':{'finalizers':['b','a']}}", NULL },
	{ "delete from absent list", "ConfigMap", "{'metadata':{}}",
	  "{'metadata':{'$deleteFromPrimitiveList/finalizers':['b']}}", "{'metadata':{}}", NULL },
	{ "ownerReferences by uid", "Pod", "{'metadata':{'ownerReferences':[{'uid':'1','name':'a'}]}}",
	  "{'metadata':{'ownerReferences':[{'uid':'2','name':'b'},{'uid':'1','$patch':'delete'}]}}",
	  "{'metadata':{'ownerReferences':[{'uid':'2','name':'b'}]}}", NULL },
	/* containers by name, nested env by name, ports by containerPort */
	{ "container merged in place", "Pod",
	  "{'spec':{'containers':[{'name':'a','image':'1'},{'name':'b','image':'1'}]}}",
	  "{'spec':{'containers':[{'name':'b','image':'2'}]}}",
	  "{'spec':{'containers':[{'name':'a','image':'1'},{'name':'b','image':'2'}]}}", NULL },
	{ "container deleted", "Pod", "{'spec':{'containers':[{'name':'a'},{'name':'b'}]}}",
	  "{'spec':{'containers':[{'name':'a','$patch':'delete'}]}}", "{'spec':{'containers':[{'name':'b'}]}}", NULL },
	{ "containers replaced", "Pod", "{'spec':{'containers':[{'name':'a'},{'name':'b'}]}}",
	  "{'spec':{'containers':[{'$patch':'replace'},{'name':'c','$retainKeys':['name']}]}}",
	  "{'spec':{'containers':[{'name':'c'}]}}", NULL },
	{ "env and ports", "Pod",
	  "{'spec':{'containers':[{'name':'a','env':[{'name':'A','value':'1'},{'name':'B','value':'2'}],"
	  "'ports':[{'containerPort':80,'name':'http'}]}]}}",
	  "{'spec':{'containers':[{'name':'a','env':[{'name':'B','value':'3'}],'ports':[{'containerPort':443}]}]}}",
	  "{'spec':{'containers':[{'name':'a','env':[{'name':'A','value':'1'},{'name':'B','value':'3'}],"
	  "'ports':[{'containerPort':443},{'containerPort':80,'name':'http'}]}]}}",
	  NULL },
	{ "tolerations atomic", "Pod", "{'spec':{'tolerations':[{'key':'a','operator':'Exists'}]}}",
	  "{'spec':{'tolerations':[{'key':'b','operator':'Exists'}]}}",
	  "{'spec':{'tolerations':[{'key':'b','operator':'Exists'}]}}", NULL },
	{ "pod conditions and podIPs", "Pod", "{'status':{'conditions':[{'type':'Ready','status':'False'}],'podIPs':[{'ip':'1'}]}}",
	  "{'status':{'conditions':[{'type':'Ready','status':'True'}],'podIPs':[{'ip':'2'}]}}",
	  "{'status':{'conditions':[{'type':'Ready','status':'True'}],'podIPs':[{'ip':'2'},{'ip':'1'}]}}", NULL },
	/* volumes: retainKeys switches the volume source */
	{ "volume source switched", "Pod", "{'spec':{'volumes':[{'name':'v','hostPath':{'path':'/x'}}]}}",
	  "{'spec':{'volumes':[{'name':'v','emptyDir':{},'$retainKeys':['emptyDir','name']}]}}",
	  "{'spec':{'volumes':[{'name':'v','emptyDir':{}}]}}", NULL },
	/* DaemonSet: the pod template's lists, as kubectl apply sends them (3-way) */
	{ "apply removes an env var", "DaemonSet",
	  "{'spec':{'template':{'spec':{'containers':[{'name':'c','image':'i','env':[{'name':'A','value':'1'},"
	  "{'name':'B','value':'2'}]}]}}}}",
	  "{'spec':{'template':{'spec':{'$setElementOrder/containers':[{'name':'c'}],'containers':[{"
	  "'$setElementOrder/env':[{'name':'A'}],'env':[{'$patch':'delete','name':'B'}],'name':'c'}]}}}}",
	  "{'spec':{'template':{'spec':{'containers':[{'name':'c','image':'i','env':[{'name':'A','value':'1'}]}]}}}}",
	  NULL },
	{ "apply reorders containers", "DaemonSet",
	  "{'spec':{'template':{'spec':{'containers':[{'name':'a','image':'1'},{'name':'b','image':'1'}]}}}}",
	  "{'spec':{'template':{'spec':{'$setElementOrder/containers':[{'name':'b'},{'name':'a'}],"
	  "'containers':[{'name':'a','image':'2'}]}}}}",
	  "{'spec':{'template':{'spec':{'containers':[{'name':'b','image':'1'},{'name':'a','image':'2'}]}}}}", NULL },
	{ "template labels and nodeSelector maps", "DaemonSet",
	  "{'spec':{'template':{'metadata':{'labels':{'a':'1'}},'spec':{'nodeSelector':{'x':'1'}}}}}",
	  "{'spec':{'template':{'metadata':{'labels':{'b':'2'}},'spec':{'nodeSelector':{'x':null,'y':'2'}}}}}",
	  "{'spec':{'template':{'metadata':{'labels':{'a':'1','b':'2'}},'spec':{'nodeSelector':{'y':'2'}}}}}", NULL },
	{ "daemonset tolerations atomic", "DaemonSet",
	  "{'spec':{'template':{'spec':{'tolerations':[{'key':'a'},{'key':'b'}]}}}}",
	  "{'spec':{'template':{'spec':{'tolerations':[{'key':'b'}]}}}}",
	  "{'spec':{'template':{'spec':{'tolerations':[{'key':'b'}]}}}}", NULL },
	/* maps: $patch replace / delete */
	{ "map replaced", "ConfigMap", "{'data':{'a':'1','b':'2'}}", "{'data':{'$patch':'replace','c':'3'}}",
	  "{'data':{'c':'3'}}", NULL },
	{ "map deleted", "ConfigMap", "{'data':{'a':'1'},'metadata':{'name':'x'}}", "{'data':{'$patch':'delete'}}",
	  "{'metadata':{'name':'x'}}", NULL },
	{ "retainKeys clears the rest", "ConfigMap", "{'data':{'a':'1','b':'2'}}",
	  "{'data':{'$retainKeys':['a','c'],'c':'3'}}", "{'data':{'a':'1','c':'3'}}", NULL },
	/* directives never end up in the stored object */
	{ "directives in added values dropped", "Pod", "{}",
	  "{'spec':{'containers':[{'name':'a','$retainKeys':['name'],'env':null}]}}",
	  "{'spec':{'containers':[{'name':'a'}]}}", NULL },
	{ "unknown kind: lists atomic", "Whatever", "{'spec':{'items':[{'name':'a'}]}}",
	  "{'spec':{'items':[{'name':'b'}]}}", "{'spec':{'items':[{'name':'b'}]}}", NULL },
	{ "type change replaces", "ConfigMap", "{'data':{'a':'1'}}", "{'data':['x']}", "{'data':['x']}", NULL },
	/* errors */
	{ "missing merge key", "Pod", "{'spec':{'containers':[{'name':'a'}]}}",
	  "{'spec':{'containers':[{'image':'x'}]}}", NULL, "does not contain declared merge key: name" },
	{ "delete without merge key", "Pod", "{'spec':{'containers':[{'name':'a'}]}}",
	  "{'spec':{'containers':[{'$patch':'delete'}]}}", NULL, "merge key" },
	{ "list $patch merge", "Pod", "{'spec':{'containers':[{'name':'a'}]}}",
	  "{'spec':{'containers':[{'$patch':'merge'}]}}", NULL, "cannot yet be specified" },
	{ "unknown map directive", "ConfigMap", "{'data':{}}", "{'data':{'$patch':'frobnicate'}}", NULL,
	  "unknown patch type" },
	{ "retainKeys not covering the patch", "ConfigMap", "{'data':{'a':'1'}}",
	  "{'data':{'$retainKeys':['a'],'b':'2'}}", NULL, "retainKeys" },
	{ "retainKeys not a list", "ConfigMap", "{'data':{}}", "{'data':{'$retainKeys':'a'}}", NULL, "retainKeys" },
	{ "bad setElementOrder", "ConfigMap", "{'metadata':{}}", "{'metadata':{'$setElementOrder/finalizers':'a'}}",
	  NULL, "setElementOrder" },
	{ "bad deleteFromPrimitiveList", "ConfigMap", "{'metadata':{'finalizers':['a']}}",
	  "{'metadata':{'$deleteFromPrimitiveList/finalizers':'a'}}", NULL, "primitive list" },
};

Test(smp, table)
{
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct smp_row *r = &rows[i];
		char *live = q(r->live), *patch = q(r->patch);
		cJSON *p = J(patch);
		gk_err e = { 0 };
		cJSON *got = ks_strategic_merge_patch(r->kind, J(live), p, &e);
		if (r->want) {
			char *want = q(r->want);
			cJSON *w = J(want);
			char *gs = got ? cJSON_PrintUnformatted(got) : NULL;
			/* lists compare in order, object keys in any order */
			cr_expect(got && ks_json_equal(got, w), "%s: got %s (%s), want %s", r->name, gs ? gs : "NULL",
				  e.msg, want);
			free(gs);
			cJSON_Delete(w);
			free(want);
		} else {
			cr_expect_null(got, "%s: accepted", r->name);
			cr_expect(strstr(e.msg, r->err), "%s: error \"%s\" lacks \"%s\"", r->name, e.msg, r->err);
		}
		cJSON_Delete(got);
		cJSON_Delete(p);
		free(live);
		free(patch);
	}
}

Test(smp, list_strategy_lookup)
{
	const char *k = "x";
	cr_assert_eq(ks_smp_list_strategy("Node", "spec.taints", &k), 0);
	cr_assert_null(k);
	cr_assert_eq(ks_smp_list_strategy("DaemonSet", "spec.template.spec.containers", &k), 1);
	cr_assert_str_eq(k, "name");
	cr_assert_eq(ks_smp_list_strategy("DaemonSet", "spec.template.spec.containers.env", &k), 1);
	cr_assert_str_eq(k, "name");
	cr_assert_eq(ks_smp_list_strategy("Pod", "spec.containers.ports", &k), 1);
	cr_assert_str_eq(k, "containerPort");
	cr_assert_eq(ks_smp_list_strategy("Secret", "metadata.finalizers", &k), 1);
	cr_assert_null(k);
	cr_assert_eq(ks_smp_list_strategy("Pod", "spec.tolerations", &k), 0);
	cr_assert_eq(ks_smp_list_strategy("Pod", "spec.template.spec.containers", &k), 0);
}
