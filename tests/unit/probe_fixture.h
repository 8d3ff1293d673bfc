/* Test helper: the root of a probe fixture scenario (tests/fixtures/mk-probe-fixture.sh),
 * built once per build dir through tests/fixtures/probe-fixture.sh. Header-only so each
 * test binary stays one .c file. */
#ifndef GK_TEST_PROBE_FIXTURE_H
#define GK_TEST_PROBE_FIXTURE_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

/* Fills out (PATH_MAX) with the absolute fixture directory; aborts the test on failure. */
static inline void probe_fixture(const char *scen, char *out)
{
	const char *src = getenv("GPUKMM_SRC"), *build = getenv("BUILD");
	if (!src)
		src = ".";
	if (!build)
		build = "build";
	char base[PATH_MAX], cmd[3 * PATH_MAX];
	if (build[0] == '/')
		snprintf(base, sizeof base, "%s/fixtures/probe", build);
	else
		snprintf(base, sizeof base, "%s/%s/fixtures/probe", src, build);
	snprintf(cmd, sizeof cmd, "'%s/tests/fixtures/probe-fixture.sh' '%s' '%s'", src, scen, base);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p, "popen %s", cmd);
	char line[PATH_MAX] = "";
	char *got = fgets(line, sizeof line, p);
	int rc = pclose(p);
	cr_assert(got && rc == 0, "fixture %s could not be built (rc %d)", scen, rc);
	line[strcspn(line, "\n")] = 0;
	cr_assert(realpath(line, out), "fixture dir %s", line);
}

#endif
