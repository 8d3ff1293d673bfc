/* Test helper (header-only, included by Criterion tests): a YAML document as
 * cJSON, and an expectation that a JSON value equals one written in YAML (the
 * operand tests pin whole objects that way). */
#ifndef GPUKMM_TESTS_YAML_EXPECT_H
#define GPUKMM_TESTS_YAML_EXPECT_H

#include <cJSON.h>
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

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

#endif
