/* gpukmmctl uninstall — remove gpukmm from a cluster without anything left
 * Terminating (README "Uninstall"; the decisions: uninstall.c).
 *
 * 1. The controller must run: only it releases a ClusterPolicy's finalizer, after
 *    deleting the policy's KMM Module under the claim guard (ARCHITECTURE.md §4:
 *    never while a GPU is allocated). Its leader Lease must be renewed while we
 *    watch; a stopped controller is said, and nothing is deleted.
 * 2. Every ClusterPolicy is deleted; we wait until none is left, saying what holds
 *    each one (from its status). Past --timeout: exit 1, nothing else deleted.
 * 3. The rest, by the label app.kubernetes.io/part-of=gpukmm (and the instance),
 *    in an order that cannot hang (uninstall.c); the namespace last, waited for. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "gpukmm/ipc.h"
#include "gpukmm/kube.h"
#include "uninstall.h"

#define POLL_MS 1000

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpukmmctl uninstall [--kubeconfig FILE] [--namespace NS] [--instance NAME]\n"
		"                           [--timeout DURATION] [--policies-only]\n"
		"\n"
		"Removes gpukmm from the cluster so that nothing hangs in Terminating:\n"
		"  1. checks that the controller runs (its leader Lease is renewed): only the\n"
		"     controller releases a ClusterPolicy's finalizer, after deleting the\n"
		"     policy's KMM Module under its guard (never while a GPU is allocated);\n"
		"  2. deletes every ClusterPolicy and waits until the controller has released\n"
		"     them, saying what holds each one (e.g. the ResourceClaims or pods using\n"
		"     GPUs); after --timeout it stops there (exit 1) and deletes nothing else;\n"
		"  3. deletes everything labelled app.kubernetes.io/part-of=gpukmm and\n"
		"     app.kubernetes.io/instance=NAME: the webhook configurations, the CRD, the\n"
		"     workloads, Services, Secrets, RBAC, and last the namespace (waited for).\n"
		"\n"
		"  --kubeconfig FILE  default: $KUBECONFIG, in-cluster, ~/.kube/config\n"
		"  --namespace NS     the operator namespace (default intel-gpu-base-operator)\n"
		"  --instance NAME    app.kubernetes.io/instance of the installation (default gpukmm)\n"
		"  --timeout D        how long to wait for the policies, then for the namespace\n"
		"                     (default 10m; 90s, 5m, 1h)\n"
		"  --policies-only    stop after step 2 (then: kubectl delete -k deploy/<variant>)\n"
		"\n"
		"Exit status: 0 uninstalled, 1 something holds (said) or an API error, 2 usage.\n");
}

static int64_t mono_ms(void)
{
	return gk_mono_ms();
}

static void nap(void)
{
	struct timespec ts = { POLL_MS / 1000, (POLL_MS % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static int parse_timeout(const char *s, int64_t *ms)
{
	char *end;
	long v = strtol(s, &end, 10);
	int64_t mul = !*end || strcmp(end, "s") == 0 ? 1000 : strcmp(end, "m") == 0 ? 60000 : strcmp(end, "h") == 0 ? 3600000 : 0;
	if (end == s || v <= 0 || !mul)
		return -1;
	*ms = (int64_t)v * mul;
	return 0;
}

static const gk_kube_ref CP = { .group = "intel.com", .version = "v1alpha1", .resource = "clusterpolicies" };

typedef struct names {
	char **v;
	size_t n;
	cJSON *items;            /* the objects (for their status) */
} names;

static void on_item(void *user, const cJSON *item)
{
	names *nm = user;
	cJSON *c = cJSON_Duplicate(item, 1);
	if (c)
		cJSON_AddItemToArray(nm->items, c);
}

/* Every ClusterPolicy (a missing CRD: none). 0, or the error code. */
static int list_policies(gk_kube_client *c, cJSON **items, gk_err *err)
{
	names nm = { .items = cJSON_CreateArray() };
	gk_kube_status st;
	if (!nm.items)
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	int rc = gk_kube_list(c, &CP, NULL, on_item, &nm, NULL, 0, &st, err);
	if (rc == GK_NOT_FOUND)
		rc = 0, cJSON_Delete(nm.items), nm.items = cJSON_CreateArray();
	if (rc)
		cJSON_Delete(nm.items);
	else
		*items = nm.items;
	return rc;
}

static const char *name_of(const cJSON *o)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "name");
	return cJSON_IsString(n) ? n->valuestring : "";
}

/* Step 1: is the controller there? 0 yes (or cannot tell: no Lease), 1 stopped. */
static int controller_runs(gk_kube_client *c, const char *ns, int64_t deadline_ms)
{
	const gk_kube_ref lr = { .group = "coordination.k8s.io", .version = "v1", .resource = "leases", .ns = ns,
				 .name = "gpukmm-controller" };
	gkctl_lease_watch w = { 0 };
	for (;;) {
		cJSON *l = NULL;
		gk_kube_status st;
		gk_err err;
		int rc = gk_kube_get(c, &lr, &l, &st, &err);
		if (rc == GK_NOT_FOUND) {
			printf("controller: no Lease %s/gpukmm-controller (no leader election?): cannot tell whether it runs; "
			       "going on\n", ns);
			return 0;
		}
		if (rc) {
			printf("controller: cannot read its Lease %s/gpukmm-controller: %s\n", ns, err.msg);
			return 1;
		}
		enum gkctl_liveness v = gkctl_lease_observe(&w, l, mono_ms(), 5000);
		cJSON_Delete(l);
		if (v == GKCTL_RUNNING) {
			printf("controller: running (Lease %s/gpukmm-controller held by %s and renewed)\n", ns, w.holder);
			return 0;
		}
		if (v == GKCTL_STOPPED || mono_ms() > deadline_ms) {
			printf("controller: NOT running: its Lease %s/gpukmm-controller (holder \"%s\") was not renewed in "
			       "%lld s.\n"
			       "  Only the controller releases a ClusterPolicy's finalizer, once the policy's KMM Module is "
			       "deleted\n"
			       "  under its guard. Start it again (kubectl apply -k deploy/default) and run this again; nothing "
			       "was deleted.\n",
			       ns, w.holder, (long long)((mono_ms() - w.changed_ms) / 1000));
			return 1;
		}
		nap();
	}
}

/* Step 2. 0 every policy gone; 1 timed out or failed. */
static int drain(gk_kube_client *c, int64_t deadline_ms)
{
	cJSON *items = NULL;
	gk_err err;
	gk_kube_status st;
	if (list_policies(c, &items, &err)) {
		printf("cannot list ClusterPolicies: %s\n", err.msg);
		return 1;
	}
	int n = cJSON_GetArraySize(items);
	printf("deleting %d ClusterPolic%s\n", n, n == 1 ? "y" : "ies");
	const cJSON *it;
	cJSON_ArrayForEach(it, items) {
		gk_kube_ref r = CP;
		r.name = name_of(it);
		int rc = gk_kube_delete(c, &r, NULL, NULL, &st, &err);
		if (rc && rc != GK_NOT_FOUND) {
			printf("  %s: cannot delete it: %s\n", r.name, err.msg);
			cJSON_Delete(items);
			return 1;
		}
	}
	/* what each one said last: printed when it changes */
	cJSON *said = cJSON_CreateObject();
	int rc = 1;
	for (;;) {
		cJSON_Delete(items);
		items = NULL;
		if (list_policies(c, &items, &err)) {
			printf("cannot list ClusterPolicies: %s (retrying)\n", err.msg);
		} else {
			/* the policies gone since the last round */
			for (cJSON *s = said->child, *next; s; s = next) {
				next = s->next;
				bool there = false;
				cJSON_ArrayForEach(it, items) there = there || strcmp(name_of(it), s->string) == 0;
				if (!there) {
					printf("  %s: released and gone\n", s->string);
					cJSON_Delete(cJSON_DetachItemViaPointer(said, s));
				}
			}
			if (cJSON_GetArraySize(items) == 0) {
				printf("every ClusterPolicy is gone\n");
				rc = 0;
				break;
			}
			cJSON_ArrayForEach(it, items) {
				char why[1024];
				gkctl_policy_holds(it, why, sizeof(why));
				const cJSON *was = cJSON_GetObjectItemCaseSensitive(said, name_of(it));
				if (!cJSON_IsString(was) || strcmp(was->valuestring, why) != 0) {
					printf("  %s: held: %s\n", name_of(it), why);
					cJSON_DeleteItemFromObjectCaseSensitive(said, name_of(it));
					cJSON_AddStringToObject(said, name_of(it), why);
				}
			}
		}
		fflush(stdout);
		if (mono_ms() > deadline_ms) {
			printf("timed out: %d ClusterPolic%s still held (above: why). They keep gpukmm's finalizer until "
			       "the controller\n  could delete their KMM Module safely; nothing else was deleted. Run this "
			       "again once that is resolved.\n",
			       items ? cJSON_GetArraySize(items) : -1, items && cJSON_GetArraySize(items) == 1 ? "y" : "ies");
			break;
		}
		nap();
	}
	cJSON_Delete(said);
	cJSON_Delete(items);
	return rc;
}

/* Step 3: one kind, every object with the labels. 0, or 1 on an API error. */
static int remove_kind(gk_kube_client *c, const gkctl_kind *k, const char *selector)
{
	gk_kube_ref r = { .group = k->group, .version = k->version, .resource = k->resource };
	gk_kube_list_opts lo = { .label_selector = selector };
	names nm = { .items = cJSON_CreateArray() };
	gk_kube_status st;
	gk_err err;
	if (!nm.items)
		return 1;
	int rc = gk_kube_list(c, &r, &lo, on_item, &nm, NULL, 0, &st, &err);
	if (rc == GK_NOT_FOUND) { /* a kind this cluster does not serve */
		cJSON_Delete(nm.items);
		return 0;
	}
	if (rc) {
		printf("  %s: cannot list: %s\n", k->resource, err.msg);
		cJSON_Delete(nm.items);
		return 1;
	}
	int bad = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, nm.items) {
		const cJSON *ns = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(it, "metadata"),
								   "namespace");
		r.ns = k->namespaced && cJSON_IsString(ns) ? ns->valuestring : NULL;
		r.name = name_of(it);
		gk_kube_delete_opts d = { .propagation = "Background" };
		rc = gk_kube_delete(c, &r, &d, NULL, &st, &err);
		if (rc && rc != GK_NOT_FOUND) {
			printf("  %s %s%s%s: cannot delete: %s\n", k->resource, r.ns ? r.ns : "", r.ns ? "/" : "", r.name,
			       err.msg);
			bad = 1;
		} else {
			printf("  deleted %s %s%s%s\n", k->resource, r.ns ? r.ns : "", r.ns ? "/" : "", r.name);
		}
	}
	cJSON_Delete(nm.items);
	return bad;
}

static int remove_rest(gk_kube_client *c, const char *ns, const char *instance, int64_t deadline_ms)
{
	char sel[300];
	snprintf(sel, sizeof(sel), "app.kubernetes.io/part-of=gpukmm,app.kubernetes.io/instance=%s", instance);
	printf("deleting what is labelled %s\n", sel);
	int bad = 0;
	for (size_t i = 0; i < gkctl_n_uninstall_kinds; i++)
		bad |= remove_kind(c, &gkctl_uninstall_kinds[i], sel);
	const gk_kube_ref nr = { .version = "v1", .resource = "namespaces", .name = ns };
	for (;;) {
		cJSON *o = NULL;
		gk_kube_status st;
		gk_err err;
		int rc = gk_kube_get(c, &nr, &o, &st, &err);
		if (rc == GK_NOT_FOUND) {
			printf("namespace %s is gone\n", ns);
			break;
		}
		if (mono_ms() > deadline_ms) {
			char *s = o ? cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(o, "status")) : NULL;
			printf("timed out: namespace %s is still there: %s\n", ns, s ? s : err.msg);
			free(s);
			cJSON_Delete(o);
			return 1;
		}
		cJSON_Delete(o);
		nap();
	}
	return bad;
}

int gkctl_uninstall(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "kubeconfig", required_argument, NULL, 'k' },
		{ "namespace", required_argument, NULL, 'n' },
		{ "instance", required_argument, NULL, 'i' },
		{ "timeout", required_argument, NULL, 't' },
		{ "policies-only", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *kubeconfig = NULL, *ns = "intel-gpu-base-operator", *instance = "gpukmm";
	int64_t timeout_ms = 600000;
	int only = 0, o;
	optind = 1;
	opterr = 0;
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 'k': kubeconfig = optarg; break;
		case 'n': ns = optarg; break;
		case 'i': instance = optarg; break;
		case 't':
			if (parse_timeout(optarg, &timeout_ms)) {
				fprintf(stderr, "gpukmmctl uninstall: --timeout: a duration (90s, 5m, 1h)\n");
				return 2;
			}
			break;
		case 'p': only = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	gk_kube_config cfg;
	gk_kube_client *c = NULL;
	gk_err err;
	gk_kube_opts ko = { .qps = 20, .burst = 40, .user_agent = "gpukmmctl" };
	if (gk_kube_config_load(&cfg, kubeconfig, &err) || gk_kube_client_new(&c, &cfg, &ko, &err)) {
		fprintf(stderr, "gpukmmctl uninstall: %s\n", err.msg);
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	int rc = 1;
	cJSON *items = NULL;
	int64_t deadline = mono_ms() + timeout_ms;
	if (list_policies(c, &items, &err)) {
		printf("cannot list ClusterPolicies: %s\n", err.msg);
		goto out;
	}
	int n = cJSON_GetArraySize(items);
	cJSON_Delete(items);
	/* the controller is needed only to release policies */
	if (n > 0 && controller_runs(c, ns, mono_ms() + 30000))
		goto out;
	if (drain(c, deadline))
		goto out;
	if (only) {
		printf("done (--policies-only): now kubectl delete -k deploy/<variant>\n");
		rc = 0;
		goto out;
	}
	rc = remove_rest(c, ns, instance, mono_ms() + timeout_ms);
	printf(rc ? "uninstall incomplete (above: what failed)\n" : "uninstalled\n");
out:
	gk_kube_client_free(c);
	gk_kube_config_free(&cfg);
	return rc;
}
