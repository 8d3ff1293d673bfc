/* lib/base (errors) and lib/log. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/err.h"
#include "gpukmm/log.h"

Test(err, set_and_wrap)
{
	gk_err e;
	cr_assert_eq(gk_err_set(&e, GK_NOT_FOUND, "module %s", "xe"), GK_NOT_FOUND);
	cr_assert_str_eq(e.msg, "module xe");
	gk_err_wrap(&e, "probe %d", 2);
	cr_assert_str_eq(e.msg, "probe 2: module xe");
	cr_assert_eq(e.code, GK_NOT_FOUND);
	cr_assert_eq(gk_err_set(NULL, GK_INTERNAL, "x"), GK_INTERNAL);
}

Test(err, code_names_round_trip)
{
	for (int c = 0; c <= GK_UNAUTHENTICATED; c++)
		cr_assert_eq(gk_code_from_name(gk_code_name(c)), c);
	cr_assert_eq(gk_code_from_name("NOPE"), -1);
	cr_assert_str_eq(gk_code_name(99), "CODE_UNKNOWN");
}

Test(log, json_line_escapes_and_names_service)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	gk_log_set_stream(f);
	gk_log_init("watcher", GK_LOG_JSON, GK_LOG_INFO);
	GK_DEBUG("hidden");
	GK_WARN("quote \" and\nnewline");
	fclose(f);
	cr_assert(strstr(buf, "hidden") == NULL);
	cr_assert(strstr(buf, "\"level\":\"warn\"") != NULL, "%s", buf);
	cr_assert(strstr(buf, "\"service\":\"watcher\"") != NULL);
	cr_assert(strstr(buf, "quote \\\" and\\nnewline") != NULL, "%s", buf);
	free(buf);
}

Test(log, text_line_is_one_line)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	gk_log_set_stream(f);
	gk_log_init("modmgr", GK_LOG_TEXT, GK_LOG_DEBUG);
	GK_INFO("a\nb");
	fclose(f);
	cr_assert(strstr(buf, "INFO  modmgr: a b\n") != NULL, "%s", buf);
	cr_assert_eq(strchr(buf, '\n'), buf + len - 1);
	free(buf);
}

Test(log, parse)
{
	cr_assert_eq(gk_log_parse_format("JSON"), GK_LOG_JSON);
	cr_assert_eq(gk_log_parse_format("yaml"), -1);
	cr_assert_eq(gk_log_parse_level("warning"), GK_LOG_WARN);
	cr_assert_eq(gk_log_parse_level("loud"), -1);
}
