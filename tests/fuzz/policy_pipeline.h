/* The policy pipeline both policy fuzzers drive (tests/fuzz/fuzz_policy.c with
 * libFuzzer, tests/unit/policy_fuzz_test.c with a deterministic corpus):
 * bytes -> YAML/JSON documents -> validate -> default patch -> status JSON ->
 * for a valid policy with kernelModule: render -> JSON -> typed Module -> diff
 * (a rendered Module read back needs no write) -> KMM's admission (a valid
 * policy renders what KMM accepts). Returns NULL, or which invariant broke
 * (detail in why[]). Crashes and leaks are the sanitizers' to find. */
#ifndef GPUKMM_TESTS_POLICY_PIPELINE_H
#define GPUKMM_TESTS_POLICY_PIPELINE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"
#include "gpukmm/yamljson.h"

static const char *policy_pipeline_module(const Gpukmm__Module *m, char *why, size_t cap)
{
	const char *bad = NULL;
	gk_err e = { 0 };
	cJSON *mj = gk_policy_module_to_json(m);
	Gpukmm__Module *back = NULL;
	cJSON *p = NULL;
	if (!mj)
		bad = "rendered Module to JSON failed";
	else if (gk_kobj_module_from_json(mj, &back, &e) != 0)
		bad = "rendered Module JSON does not read back";
	else if (gk_policy_module_diff(back, m, &p, &e) != 0 || p)
		bad = "a rendered Module read back must need no write";
	else if (gk_policy_kmm_admit(m, why, cap) != 0)
		bad = "valid policy, KMM rejects its Module";
	if (bad && e.msg[0])
		snprintf(why, cap, "%s", e.msg);
	cJSON_Delete(p);
	gk_kobj_free(back);
	cJSON_Delete(mj);
	return bad;
}

static const char *policy_pipeline(const char *text, size_t len, bool report_unknown, char *why, size_t cap)
{
	gk_yamljson_docs docs;
	const char *bad = NULL;
	if (gk_yamljson_parse(text, len, &docs, NULL) != 0)
		return NULL;
	for (size_t d = 0; d < docs.n && !bad; d++) {
		gk_policy_report r;
		Gpukmm__ClusterPolicy *cp = NULL;
		gk_policy_report_init(&r);
		gk_policy_validate_json(docs.doc[d], report_unknown, NULL, &r, &cp);
		free(gk_policy_report_join(&r));
		cJSON_Delete(gk_policy_default_patch(docs.doc[d]));
		if (cp && cp->status)
			cJSON_Delete(gk_kobj_cluster_policy_status_to_json(cp->status));
		if (cp && gk_policy_report_ok(&r) && cp->spec && cp->spec->kernel_module) {
			Gpukmm__Module *m = NULL;
			if (gk_policy_render_module(cp, NULL, &m, NULL) == 0)
				bad = policy_pipeline_module(m, why, cap);
			gk_kobj_free(m);
		}
		gk_policy_report_free(&r);
		gk_kobj_free(cp);
	}
	gk_yamljson_free(&docs);
	return bad;
}

#endif
