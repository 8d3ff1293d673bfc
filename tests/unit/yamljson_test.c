/* lib/yamljson: YAML → cJSON, the duplicate-key check (a hash set per
 * mapping: same errors as the list walk it replaced, in document order). The
 * cost on 40,000 keys is measured by `make bench B=yamlkeys`, not here. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/yamljson.h"

static int parse(const char *s, gk_yamljson_docs *d, gk_err *e)
{
	memset(e, 0, sizeof(*e));
	return gk_yamljson_parse(s, strlen(s), d, e);
}

/* a mapping of n keys "k0".."k<n-1>" under metadata.labels, then `tail` */
static char *many_keys(size_t n, const char *tail)
{
	size_t cap = 64 + n * 24 + strlen(tail);
	char *b = malloc(cap);
	cr_assert(b);
	size_t l = (size_t)snprintf(b, cap, "metadata:\n  labels:\n");
	for (size_t i = 0; i < n; i++)
		l += (size_t)snprintf(b + l, cap - l, "    k%zu: v\n", i);
	snprintf(b + l, cap - l, "%s", tail);
	return b;
}

Test(yamljson, duplicate_key_message_names_the_key)
{
	gk_yamljson_docs d;
	gk_err e;
	cr_assert_eq(parse("a: 1\nb: 2\na: 3\n", &d, &e), GK_INVALID_ARGUMENT);
	cr_assert_str_eq(e.msg, "duplicate key \"a\"");
	cr_assert_eq(d.n, 0);
	cr_assert_eq(parse("{a: 1, a: 2}", &d, &e), GK_INVALID_ARGUMENT);
	cr_assert_str_eq(e.msg, "duplicate key \"a\"");
}

Test(yamljson, first_duplicate_in_document_order_is_reported)
{
	gk_yamljson_docs d;
	gk_err e;
	cr_assert_eq(parse("x: 1\ny: 2\nz: 3\ny: 4\nx: 5\n", &d, &e), GK_INVALID_ARGUMENT);
	cr_assert_str_eq(e.msg, "duplicate key \"y\"");
	/* inside a nested mapping: found before the outer one goes on */
	cr_assert_eq(parse("a:\n  p: 1\n  q: 2\n  p: 3\na: 4\n", &d, &e), GK_INVALID_ARGUMENT);
	cr_assert_str_eq(e.msg, "duplicate key \"p\"");
	/* the value of the duplicate is parsed first: its own error comes first */
	cr_assert_eq(parse("a: 1\na: {b: 1, b: 2}\n", &d, &e), GK_INVALID_ARGUMENT);
	cr_assert_str_eq(e.msg, "duplicate key \"b\"");
}

Test(yamljson, same_key_in_different_mappings_is_fine)
{
	gk_yamljson_docs d;
	gk_err e;
	cr_assert_eq(parse("a: {k: 1}\nb: {k: 2}\nc: [{k: 1}, {k: 2}]\n---\na: 1\n", &d, &e), 0, "%s", e.msg);
	cr_assert_eq(d.n, 2);
	char *s = cJSON_PrintUnformatted(d.doc[0]);
	cr_assert_str_eq(s, "{\"a\":{\"k\":1},\"b\":{\"k\":2},\"c\":[{\"k\":1},{\"k\":2}]}");
	cJSON_free(s);
	gk_yamljson_free(&d);
	/* keys that differ only in case are different keys */
	cr_assert_eq(parse("A: 1\na: 2\n", &d, &e), 0, "%s", e.msg);
	gk_yamljson_free(&d);
}

Test(yamljson, many_keys_in_order_and_a_late_duplicate_found)
{
	gk_yamljson_docs d;
	gk_err e;
	char *ok = many_keys(40000, "spec: {}\n");
	cr_assert_eq(parse(ok, &d, &e), 0, "%s", e.msg);
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(d.doc[0], "metadata"), "labels");
	cr_assert_eq(cJSON_GetArraySize(labels), 40000);
	cr_assert_str_eq(cJSON_GetArrayItem(labels, 0)->string, "k0");
	cr_assert_str_eq(cJSON_GetArrayItem(labels, 39999)->string, "k39999");
	gk_yamljson_free(&d);
	free(ok);
	char *dup = many_keys(40000, "    k39998: again\n    k5: again\n");
	cr_assert_eq(parse(dup, &d, &e), GK_INVALID_ARGUMENT);
	cr_assert_str_eq(e.msg, "duplicate key \"k39998\"");
	free(dup);
}
