/* Test helper (header-only, included by Criterion tests): a YAML document as
 * cJSON, an expectation that a JSON value equals one written in YAML (the
 * operand tests pin whole objects that way), and a ClusterPolicy from its spec
 * in YAML. */
#ifndef GPUKMM_TESTS_YAML_EXPECT_H
#define GPUKMM_TESTS_YAML_EXPECT_H

#include <cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/operands.h"
#include "gpukmm/policy.h"
#include "gpukmm/yamljson.h"

static inline cJSON *yaml(const char *text)
{
	gk_yamljson_docs d = { 0 };
	gk_err e = { 0 };
	cr_assert_eq(gk_yamljson_parse(text, strlen(text), &d, &e), 0, "%s", e.msg);
	cJSON *j = d.doc[0];
	d.doc[0] = NULL;
	gk_yamljson_free(&d);
	return j;
}

static inline void expect_json(const cJSON *got, const char *want_yaml, const char *what)
{
	cJSON *want = yaml(want_yaml);
	char *g = got ? cJSON_PrintUnformatted(got) : strdup("(absent)");
	char *w = cJSON_PrintUnformatted(want);
	cr_expect(got && cJSON_Compare(got, want, 1), "%s:\n got  %s\n want %s", what, g, w);
	free(g);
	free(w);
	cJSON_Delete(want);
}

/* The ClusterPolicy "gpu" (uid u-1) with this spec (indented YAML), with the webhook's defaults */
static inline Gpukmm__ClusterPolicy *policy_of_yaml(const char *spec_yaml)
{
	char *src = NULL;
	cr_assert(asprintf(&src, "apiVersion: intel.com/v1alpha1\nkind: ClusterPolicy\nmetadata: {name: gpu, uid: u-1}\n"
				 "spec:\n%s", spec_yaml) > 0);
	cJSON *j = yaml(src);
	free(src);
	Gpukmm__ClusterPolicy *cp = NULL;
	gk_err e = { 0 };
	cr_assert_eq(gk_kobj_cluster_policy_from_json(j, &cp, &e), 0, "%s", e.msg);
	cJSON_Delete(j);
	cr_assert(gk_policy_default(cp) >= 0);
	return cp;
}

/* *set := what that policy renders with o */
static inline void render_yaml(gk_op_set *set, const gk_op_opts *o, const char *spec_yaml)
{
	Gpukmm__ClusterPolicy *cp = policy_of_yaml(spec_yaml);
	gk_err e = { 0 };
	gk_op_set_free(set);
	cr_assert_eq(gk_op_render(cp, o, set, &e), 0, "%s", e.msg);
	gk_kobj_free(cp);
}

#endif
