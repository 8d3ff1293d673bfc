/* gk_strpool: shared reference-counted strings (include/gpukmm/strpool.h). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "gpukmm/strpool.h"

Test(strpool, equal_strings_are_one_pointer_until_the_last_put)
{
	gk_strpool p = { 0 };
	char a[] = "kubernetes.io/arch", b[] = "kubernetes.io/arch";
	const char *x = gk_strpool_get(&p, a, SIZE_MAX), *y = gk_strpool_get(&p, b, SIZE_MAX);
	cr_assert_not_null(x);
	cr_assert_eq(x, y, "the same string is the same pointer");
	cr_assert_neq(x, a, "a copy, not the caller's");
	cr_assert_eq(gk_strpool_size(&p), 1);
	const char *z = gk_strpool_get(&p, "amd64", SIZE_MAX);
	cr_assert_neq(z, x);
	cr_assert_eq(gk_strpool_size(&p), 2);
	gk_strpool_put(&p, x);
	cr_assert_eq(gk_strpool_size(&p), 2, "one reference is left");
	cr_assert_str_eq(y, "kubernetes.io/arch");
	gk_strpool_put(&p, y);
	cr_assert_eq(gk_strpool_size(&p), 1, "the last reference frees it");
	gk_strpool_put(&p, z);
	cr_assert_eq(gk_strpool_size(&p), 0);
}

Test(strpool, empty_is_static_and_max_cuts)
{
	gk_strpool p = { 0 };
	const char *e1 = gk_strpool_get(&p, NULL, SIZE_MAX), *e2 = gk_strpool_get(&p, "", SIZE_MAX);
	cr_assert_str_eq(e1, "");
	cr_assert_eq(e1, e2);
	cr_assert_eq(gk_strpool_size(&p), 0, "\"\" is not held");
	gk_strpool_put(&p, e1);
	const char *c = gk_strpool_get(&p, "6.8.0-45-generic", 5);
	cr_assert_str_eq(c, "6.8.0");
	cr_assert_eq(gk_strpool_get(&p, "6.8.0", SIZE_MAX), c, "the cut copy is the string it cut to");
	gk_strpool_put(&p, c);
	gk_strpool_put(&p, c);
	cr_assert_eq(gk_strpool_size(&p), 0);
}
