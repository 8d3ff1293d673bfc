/* lib/policy validation: every upstream webhook scenario (gpu-base-operator §8.2),
 * the pre-existing rules, schema/type errors by field, and gpukmm's own rules. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"
#include "gpukmm/yamljson.h"

/* Validates j (deleted); returns the joined violations ("" when valid),
 * malloc'd, and the report in *keep when asked. */
static char *validate_obj(cJSON *j, gk_policy_report *keep)
{
	gk_policy_report r;
	gk_policy_report_init(&r);
	gk_policy_validate_json(j, true, NULL, &r, NULL);
	cr_assert(!r.oom);
	char *out = gk_policy_report_join(&r);
	if (keep)
		*keep = r;
	else
		gk_policy_report_free(&r);
	cJSON_Delete(j);
	return out;
}

/* Validates {"resourceRegistration":"dp", <spec_extra>} for ClusterPolicy `name`. */
static char *validate_named(const char *name, const char *spec_extra, gk_policy_report *keep)
{
	char *src = NULL;
	cr_assert(asprintf(&src,
			   "{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"%s\"},"
			   "\"spec\":{\"resourceRegistration\":\"dp\"%s%s}}",
			   name, *spec_extra ? "," : "", spec_extra) > 0);
	cJSON *j = cJSON_Parse(src);
	cr_assert_not_null(j, "bad test JSON: %s", src);
	free(src);
	return validate_obj(j, keep);
}

static char *validate(const char *spec_extra)
{
	return validate_named("gpu", spec_extra, NULL);
}

static void accept(const char *spec_extra)
{
	char *m = validate(spec_extra);
	cr_expect_str_empty(m, "expected valid: %s\ngot: %s", spec_extra, m);
	free(m);
}

static void reject(const char *spec_extra, const char *substring)
{
	char *m = validate(spec_extra);
	cr_expect(strstr(m, substring) != NULL, "expected '%s' for %s\ngot: %s", substring, spec_extra, m);
	free(m);
}

static void reject_exact(const char *spec_extra, const char *exact)
{
	char *m = validate(spec_extra);
	cr_expect_str_eq(m, exact, "for %s", spec_extra);
	free(m);
}

#define KM(maps) "\"kernelModule\":{\"kernelMappings\":[" maps "]}"
#define MAP(re, img) "{\"regexp\":\"" re "\",\"containerImage\":\"" img "\"}"
#define GOOD MAP("^.+$", "registry.example.com/xe-driver:1.0")

/* ---- upstream §8.2, in order ---- */
Test(webhook_upstream, accept_nil_kernel_module) { accept(""); }
Test(webhook_upstream, accept_single_wildcard_mapping) { accept(KM(GOOD)); }
Test(webhook_upstream, accept_without_module_name) { accept(KM(GOOD)); }
Test(webhook_upstream, accept_two_mappings)
{
	accept(KM(MAP("^5\\\\.14\\\\.0-.*\\\\.el9", "registry.example.com/xe-rhel9:1.0") ","
		  MAP("^6\\\\.12\\\\..*", "registry.example.com/xe-rhel10:1.0")));
}
Test(webhook_upstream, reject_no_image_no_build)
{
	reject_exact(KM("{\"regexp\":\"^.+$\"}"), "kernelModule.kernelMappings[0]: one of containerImage or build must be set");
}
Test(webhook_upstream, reject_no_regexp)
{
	reject_exact(KM("{\"containerImage\":\"registry.example.com/xe-driver:1.0\"}"),
		     "kernelModule.kernelMappings[0]: regexp is required");
}
Test(webhook_upstream, reject_invalid_regexp)
{
	reject_exact(KM(MAP("[invalid", "registry.example.com/xe-driver:1.0")),
		     "kernelModule.kernelMappings[0].regexp: invalid regular expression: error parsing regexp: "
		     "missing closing ]: `[invalid`");
}
Test(webhook_upstream, reject_no_tag)
{
	reject_exact(KM(MAP("^.+$", "registry.example.com/xe-driver")),
		     "kernelModule.kernelMappings[0].containerImage: image \"registry.example.com/xe-driver\" must "
		     "include an explicit tag or digest");
}
Test(webhook_upstream, accept_template_braced) { accept(KM(MAP("^.+$", "registry.example.com/xe-oot-kmd:v1.0-${KERNEL_FULL_VERSION}"))); }
Test(webhook_upstream, accept_template_bare) { accept(KM(MAP("^.+$", "registry.example.com/xe-oot-kmd:v1.0-$KERNEL_FULL_VERSION"))); }
Test(webhook_upstream, accept_template_in_path) { accept(KM(MAP("^.+$", "registry.example.com/${MOD_NAMESPACE}/$MOD_NAME:v1.0"))); }
Test(webhook_upstream, reject_template_without_tag)
{
	reject(KM(MAP("^.+$", "registry.example.com/xe-oot-kmd-${KERNEL_FULL_VERSION}")),
	       "must include an explicit tag or digest");
}
Test(webhook_upstream, build_without_image_is_upstream_ok_but_ours_requires_image)
{
	/* upstream accepts; gpukmm (DESIGN §5.1) requires the image the build pushes to */
	char *m = validate(KM("{\"regexp\":\"^.+$\",\"build\":{\"dockerfileConfigMap\":{\"name\":\"xe-dockerfile\"},"
			      "\"buildArgs\":[{\"name\":\"XE_TAG\",\"value\":\"v1.0\"}]}}"));
	cr_expect_str_eq(m, "kernelModule.kernelMappings[0].containerImage is required when build is set: KMM pushes "
			    "the built module image there and rejects a mapping without one");
	free(m);
	accept(KM("{\"regexp\":\"^.+$\",\"containerImage\":\"registry.example.com/xe:v1-${KERNEL_FULL_VERSION}\","
		  "\"build\":{\"dockerfileConfigMap\":{\"name\":\"xe-dockerfile\"},"
		  "\"buildArgs\":[{\"name\":\"XE_TAG\",\"value\":\"v1.0\"}]}}"));
}
Test(webhook_upstream, reject_empty_dockerfile_config_map)
{
	reject(KM("{\"regexp\":\"^.+$\",\"containerImage\":\"r.io/x:1\",\"build\":{\"dockerfileConfigMap\":{\"name\":\"\"}}}"),
	       "kernelModule.kernelMappings[0].build.dockerfileConfigMap.name is required");
	reject(KM("{\"regexp\":\"^.+$\",\"containerImage\":\"r.io/x:1\",\"build\":{}}"),
	       "kernelModule.kernelMappings[0].build.dockerfileConfigMap.name is required");
}
Test(webhook_upstream, accept_registry_tls)
{
	accept("\"kernelModule\":{\"registryTLS\":{\"insecureSkipTLSVerify\":true},\"kernelMappings\":[" GOOD "]}");
	accept(KM("{\"regexp\":\"^.+$\",\"containerImage\":\"r.io/x:1\",\"registryTLS\":{\"insecure\":true}}"));
}
Test(webhook_upstream, loading_order)
{
	accept("\"kernelModule\":{\"modulesLoadingOrder\":[\"xe\",\"drm_buddy\"],\"kernelMappings\":[" GOOD "]}");
	reject_exact("\"kernelModule\":{\"modulesLoadingOrder\":[\"xe\"],\"kernelMappings\":[" GOOD "]}",
		     "kernelModule.modulesLoadingOrder must have at least 2 entries");
	reject_exact("\"kernelModule\":{\"modulesLoadingOrder\":[\"drm_buddy\",\"xe\"],\"kernelMappings\":[" GOOD "]}",
		     "kernelModule.modulesLoadingOrder[0] must be moduleName \"xe\"");
	reject_exact("\"kernelModule\":{\"modulesLoadingOrder\":[\"xe\",\"drm_buddy\",\"drm_buddy\"],\"kernelMappings\":["
		     GOOD "]}", "kernelModule.modulesLoadingOrder[2]: duplicate entry \"drm_buddy\"");
	/* only the first duplicate; all rules together */
	reject_exact("\"kernelModule\":{\"moduleName\":\"i915x\",\"modulesLoadingOrder\":[\"a\",\"a\",\"b\",\"b\"],"
		     "\"kernelMappings\":[" GOOD "]}",
		     "kernelModule.modulesLoadingOrder[0] must be moduleName \"i915x\"\n"
		     "kernelModule.modulesLoadingOrder[1]: duplicate entry \"a\"");
}

Test(webhook_upstream, typed_validator_skips_order_check_without_module_name)
{
	cJSON *j = cJSON_Parse("{\"metadata\":{\"name\":\"gpu\"},\"spec\":{\"resourceRegistration\":\"dp\",\"kernelModule\":"
			       "{\"modulesLoadingOrder\":[\"drm_buddy\",\"xe\"],\"kernelMappings\":[" GOOD "]}}}");
	Gpukmm__ClusterPolicy *cp;
	cr_assert_eq(gk_kobj_cluster_policy_from_json(j, &cp, NULL), 0);
	gk_policy_report r;
	gk_policy_report_init(&r);
	gk_policy_validate(cp, NULL, &r);
	cr_expect_eq(r.n, 0, "%s", r.n ? r.v[0].msg : "");
	gk_policy_report_free(&r);
	cr_assert_eq(gk_policy_default(cp), 1);
	cr_assert_eq(gk_policy_default(cp), 0, "idempotent");
	gk_policy_validate(cp, NULL, &r);
	cr_expect_eq(r.n, 1);
	gk_policy_report_free(&r);
	gk_kobj_free(cp);
	cJSON_Delete(j);
}

Test(webhook_upstream, all_violations_together_in_upstream_order)
{
	char *m = validate("\"dp\":{\"allowIDs\":[\"0x56a0\",\"bad\"],\"denyIDs\":[\"0x56A1\"],\"plugin\":\"r.io/UPPER:1\"},"
			   "\"pullSecret\":{\"name\":\"Bad_Name\"},"
			   KM("{\"regexp\":\"(\",\"containerImage\":\"r.io/x\"},{\"regexp\":\"^a$\"}"));
	cr_expect_str_eq(m,
		"dp.allowIDs and dp.denyIDs cannot both be set\n"
		"invalid PCI device ID in dp.allowIDs: \"bad\" (must match 0x[0-9a-f]{4})\n"
		"invalid PCI device ID in dp.denyIDs: \"0x56A1\" (must match 0x[0-9a-f]{4})\n"
		"invalid image reference in dp.plugin: \"r.io/UPPER:1\": invalid reference format: repository name "
		"(UPPER) must be lowercase\n"
		"pullSecret.name \"Bad_Name\" is not a valid Kubernetes object name: a lowercase RFC 1123 subdomain must "
		"consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
		"character (e.g. 'example.com', regex used for validation is "
		"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')\n"
		"kernelModule.kernelMappings[0].regexp: invalid regular expression: error parsing regexp: missing "
		"closing ): `(`\n"
		"kernelModule.kernelMappings[0].containerImage: image \"r.io/x\" must include an explicit tag or digest\n"
		"kernelModule.kernelMappings[1]: one of containerImage or build must be set");
	free(m);
}

Test(webhook_upstream, levelzero_warning_only_in_dp_mode)
{
	gk_policy_report r;
	char *m = validate_named("gpu", "\"dp\":{\"levelzero\":\"intel/levelzero:1.0\"}", &r);
	cr_expect_str_empty(m);
	cr_assert_eq(r.n_warnings, 1);
	cr_expect_str_eq(r.warnings[0], "dp.levelzero is no longer used and will be ignored.");
	gk_policy_report_free(&r);
	free(m);
}

Test(webhook_upstream, preexisting_rules)
{
	reject_exact("\"xpu\":{\"configMapOverride\":\"x_y\"}",
		     "xpu.configMapOverride \"x_y\" is not a valid Kubernetes object name: a lowercase RFC 1123 subdomain "
		     "must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
		     "alphanumeric character (e.g. 'example.com', regex used for validation is "
		     "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
	reject("\"kueue\":{\"equalResources\":[{\"name\":\"q\",\"localQueues\":[{\"name\":\"l\",\"namespace\":\"a.b\"},"
	       "{\"name\":\"l\",\"namespace\":\"a.b\"}]},{\"name\":\"q\",\"localQueues\":[]}]}",
	       "kueue.equalResources[0].localQueues[0].namespace \"a.b\" is not a valid namespace name: a lowercase "
	       "RFC 1123 label must consist of");
	reject("\"kueue\":{\"equalResources\":[{\"name\":\"q\",\"localQueues\":[{\"name\":\"l\",\"namespace\":\"ab\"},"
	       "{\"name\":\"l\",\"namespace\":\"ab\"}]},{\"name\":\"q\",\"localQueues\":[]}]}",
	       "kueue.equalResources[0]: duplicate localQueue \"ab/l\"\nkueue.equalResources: duplicate clusterQueue name \"q\"");
	/* across ClusterQueues too (upstream checks within one; two queues would fight over it) */
	reject_exact("\"kueue\":{\"equalResources\":[{\"name\":\"q1\",\"localQueues\":[{\"name\":\"l\",\"namespace\":\"ab\"}]},"
		     "{\"name\":\"q2\",\"localQueues\":[{\"name\":\"m\",\"namespace\":\"ab\"},{\"name\":\"l\",\"namespace\":\"ab\"}]}]}",
		     "kueue.equalResources[1]: duplicate localQueue \"ab/l\"");
	accept("\"kueue\":{\"equalResources\":[{\"name\":\"q1\",\"localQueues\":[{\"name\":\"l\",\"namespace\":\"ab\"}]},"
	       "{\"name\":\"q2\",\"localQueues\":[{\"name\":\"l\",\"namespace\":\"cd\"}]}]}");
	reject("\"dra\":{\"image\":\"x:y:z\"}", "invalid image reference in dra.image: \"x:y:z\": invalid reference format");
	reject("\"xpu\":{\"image\":\"r.io/x@sha256:abc\"}", "invalid image reference in xpu.image: \"r.io/x@sha256:abc\": invalid reference format");
	reject("\"xpu\":{\"image\":\"r.io/x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeX\"}",
	       "invalid reference format");
	accept("\"xpu\":{\"image\":\"r.io/x:1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}");
	reject("\"xpu\":{\"image\":\"r.io/x@md5:0123456789abcdef0123456789abcdef\"}", "unsupported digest algorithm");
	reject("\"xpu\":{\"image\":\"r.io/x@sha256:0123456789abcdef0123456789abcdef\"}", "invalid checksum digest length");
	accept("\"dp\":{\"plugin\":\"intel/intel-gpu-plugin:0.36.0\"},\"pullSecret\":{\"name\":\"regcred\"}");
	reject("\"pullSecret\":{}", "pullSecret.name \"\" is not a valid Kubernetes object name");
}

/* ---- schema / types, each by field ---- */
Test(schema, type_errors_name_each_field)
{
	char *m = validate("\"useNFDLabeling\":\"yes\",\"nodeSelector\":{\"a\":1},\"tolerations\":{},"
			   "\"kernelModule\":{\"moduleName\":7,\"kernelMappings\":[{\"regexp\":[],\"containerImage\":\"r.io/x:1\"},5]}");
	cr_expect(strstr(m, "spec.useNFDLabeling: expected boolean, got string"), "%s", m);
	cr_expect(strstr(m, "spec.nodeSelector.a: expected string, got number"), "%s", m);
	cr_expect(strstr(m, "spec.tolerations: expected array, got object"), "%s", m);
	cr_expect(strstr(m, "spec.kernelModule.moduleName: expected string, got number"), "%s", m);
	cr_expect(strstr(m, "spec.kernelModule.kernelMappings[0].regexp: expected string, got array"), "%s", m);
	cr_expect(strstr(m, "spec.kernelModule.kernelMappings[1]: expected object, got number"), "%s", m);
	free(m);
}

Test(schema, required_enum_range_unknown)
{
	cJSON *j = cJSON_Parse("{\"apiVersion\":\"v1\",\"kind\":\"Module\",\"metadata\":{\"name\":\"gpu\"},"
			       "\"spec\":{\"resourceRegistration\":\"gpu\",\"dp\":{\"byPathMode\":\"some\"},"
			       "\"health\":{\"checkIntervalSeconds\":0,\"coreTemperatureThreshold\":131},"
			       "\"kernelmodule\":{},\"kernelModule\":{\"kernelMappings\":[]}},\"extra\":1}");
	gk_policy_report r;
	gk_policy_report_init(&r);
	gk_policy_validate_json(j, true, NULL, &r, NULL);
	char *m = gk_policy_report_join(&r);
	cr_expect(strstr(m, "apiVersion: Invalid value: \"v1\": must be \"intel.com/v1alpha1\""), "%s", m);
	cr_expect(strstr(m, "kind: Invalid value: \"Module\": must be \"ClusterPolicy\""), "%s", m);
	cr_expect(strstr(m, "spec.resourceRegistration: Unsupported value: \"gpu\": supported values: \"dp\", \"dra\""), "%s", m);
	cr_expect(strstr(m, "spec.dp.byPathMode: Unsupported value: \"some\""), "%s", m);
	cr_expect(strstr(m, "spec.health.checkIntervalSeconds: Invalid value: 0: spec.health.checkIntervalSeconds in body "
			    "should be greater than or equal to 1"), "%s", m);
	cr_expect(strstr(m, "spec.health.coreTemperatureThreshold: Invalid value: 131"), "%s", m);
	cr_expect(strstr(m, "spec.kernelmodule: unknown field"), "%s", m);
	cr_expect(strstr(m, "extra: unknown field"), "%s", m);
	cr_expect(strstr(m, "spec.kernelModule.kernelMappings: Invalid value: 0"), "%s", m);
	/* every violation carries its field path */
	for (size_t i = 0; i < r.n; i++)
		cr_expect(r.v[i].field[0] || strstr(r.v[i].msg, "object"), "no field for %s", r.v[i].msg);
	free(m);
	gk_policy_report_free(&r);
	cJSON_Delete(j);
}

Test(schema, missing_spec_and_resource_registration)
{
	cJSON *j = cJSON_Parse("{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"a\"}}");
	gk_policy_report r;
	gk_policy_report_init(&r);
	gk_policy_validate_json(j, true, NULL, &r, NULL);
	char *m = gk_policy_report_join(&r);
	cr_expect_str_eq(m, "spec: Required value");
	free(m);
	gk_policy_report_free(&r);
	cJSON_Delete(j);
	j = cJSON_Parse("[1,2]");
	gk_policy_report_init(&r);
	gk_policy_validate_json(j, true, NULL, &r, NULL);
	cr_expect_eq(r.n, 1);
	gk_policy_report_free(&r);
	cJSON_Delete(j);
}

/* ---- gpukmm's own rules (DESIGN §5) ---- */
Test(ours, module_name_plus_namespace_limit)
{
	/* default namespace intel-gpu-base-operator (23): cp name <= 14 */
	char *m = validate_named("abcdefghijklmn", KM(GOOD), NULL);
	cr_expect_str_empty(m);
	free(m);
	m = validate_named("abcdefghijklmno", KM(GOOD), NULL);
	cr_expect_str_eq(m, "metadata.name: the KMM Module \"abcdefghijklmno-gpu\" in namespace \"intel-gpu-base-operator\" "
			    "would have a combined name and namespace length of 42 characters, which exceeds KMM's maximum "
			    "of 41; use a ClusterPolicy name of at most 14 characters");
	free(m);
	/* without kernelModule there is no Module: no limit */
	m = validate_named("abcdefghijklmnopqrstuvwxyz", "", NULL);
	cr_expect_str_empty(m);
	free(m);
}

Test(ours, ready_label_name_part_limit_with_custom_namespace)
{
	cJSON *j = cJSON_Parse("{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"g\"},"
			       "\"spec\":{\"resourceRegistration\":\"dra\"," KM(GOOD) "}}");
	gk_policy_opts o = { .namespace_ = "a-namespace-name-that-is-really-quite-long-indeed-yes-1234" };
	gk_policy_report r;
	gk_policy_report_init(&r);
	gk_policy_validate_json(j, true, &o, &r, NULL);
	char *m = gk_policy_report_join(&r);
	cr_expect(strstr(m, "exceeds KMM's maximum of 41"), "%s", m);
	cr_expect(strstr(m, "the KMM ready label \"kmm.node.kubernetes.io/a-namespace-name-that-is-really-quite-long-indeed-"
			    "yes-1234.g-gpu.ready\" would have a name part of 70 characters, which exceeds the label limit of 63"),
		  "%s", m);
	free(m);
	gk_policy_report_free(&r);
	cJSON_Delete(j);
}

Test(ours, version_must_be_label_value)
{
	accept("\"kernelModule\":{\"version\":\"1.0\",\"kernelMappings\":[" GOOD "]}");
	reject("\"kernelModule\":{\"version\":\"v 1/0\",\"kernelMappings\":[" GOOD "]}",
	       "kernelModule.version \"v 1/0\" must be a valid label value");
}

Test(ours, tolerations_follow_kmm_rules)
{
	accept("\"tolerations\":[{\"key\":\"gpu-dedicated\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"},"
	       "{\"operator\":\"Exists\"},{\"key\":\"a\",\"value\":\"b\",\"effect\":\"NoExecute\",\"tolerationSeconds\":30}]");
	char *m = validate("\"tolerations\":[{\"key\":\"a b\"},{\"value\":\"x\"},{\"key\":\"k\",\"operator\":\"Lt\",\"effect\":\"Sometimes\"},"
			   "{\"key\":\"k\",\"operator\":\"Exists\",\"value\":\"v\",\"tolerationSeconds\":5}]");
	cr_expect(strstr(m, "spec.tolerations[0].key: Invalid value: \"a b\""), "%s", m);
	cr_expect(strstr(m, "spec.tolerations[1].operator: Invalid value: \"\": operator must be Exists when `key` is empty"), "%s", m);
	cr_expect(strstr(m, "spec.tolerations[2].operator: Unsupported value: \"Lt\""), "%s", m);
	cr_expect(strstr(m, "spec.tolerations[2].effect: Unsupported value: \"Sometimes\""), "%s", m);
	cr_expect(strstr(m, "spec.tolerations[3].effect: Invalid value: \"\": effect must be 'NoExecute'"), "%s", m);
	cr_expect(strstr(m, "spec.tolerations[3].operator: Invalid value: \"v\": value must be empty"), "%s", m);
	free(m);
}

Test(ours, metadata_name_required_for_a_module)
{
	char *m = validate_named("", KM(GOOD), NULL);
	cr_expect_str_eq(m, "metadata.name: Required value");
	free(m);
}

/* ---- pieces ---- */
Test(pieces, image_refs)
{
	char msg[512];
	const char *good[] = { "busybox", "busybox:1", "library/busybox", "localhost/x", "localhost:5000/x:1",
			       "registry.example.com/a/b/c:v1.0-0", "[::1]:5000/x:1", "a__b/c--d/e.f:1", NULL };
	for (const char **g = good; *g; g++)
		cr_expect_eq(gk_policy_check_image_ref(*g, msg, sizeof(msg)), 0, "%s: %s", *g, msg);
	struct { const char *ref, *msg; } bad[] = {
		{ "", "invalid reference format" },
		{ "UPPER/x:1", NULL },
		{ "Busybox", "invalid reference format: repository name (library/Busybox) must be lowercase" },
		{ "a/b:", "invalid reference format" },
		{ "r.io/-x:1", "invalid reference format" },
		{ "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		  "invalid repository name (0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef), cannot "
		  "specify 64-byte hexadecimal strings" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (!bad[i].msg) { /* an upper-case registry host is fine */
			cr_expect_eq(gk_policy_check_image_ref(bad[i].ref, msg, sizeof(msg)), 0, "%s", bad[i].ref);
			continue;
		}
		cr_expect_neq(gk_policy_check_image_ref(bad[i].ref, msg, sizeof(msg)), 0, "%s", bad[i].ref);
		cr_expect_str_eq(msg, bad[i].msg, "%s", bad[i].ref);
	}
}

Test(pieces, regexps_are_go_re2)
{
	char msg[256];
	cr_expect_eq(gk_policy_check_regexp("^5\\.14\\.0-.*\\.el9.*\\.x86_64$", msg, sizeof(msg)), 0);
	cr_expect_eq(gk_policy_check_regexp("(?i)^6\\.\\d+", msg, sizeof(msg)), 0);
	/* look-around and backreferences are not RE2 */
	cr_expect_neq(gk_policy_check_regexp("^(?=6)", msg, sizeof(msg)), 0);
	cr_expect_str_eq(msg, "error parsing regexp: invalid or unsupported Perl syntax: `(?=`");
	cr_expect_neq(gk_policy_check_regexp("(a)\\1", msg, sizeof(msg)), 0);
	cr_expect_str_eq(msg, "error parsing regexp: invalid escape sequence: `\\1`");
	cr_expect_neq(gk_policy_check_regexp("a**", msg, sizeof(msg)), 0);
	cr_expect_str_eq(msg, "error parsing regexp: invalid nested repetition operator: `**`");
	cr_expect_neq(gk_policy_check_regexp("a)", msg, sizeof(msg)), 0);
	cr_expect_str_eq(msg, "error parsing regexp: unexpected ): `a)`");
}

Test(pieces, kmm_template_substitution)
{
	char *s = gk_policy_substitute_kmm_vars("r.io/${MOD_NAMESPACE}/$MOD_NAME:v1-${KERNEL_FULL_VERSION}$ ${x");
	cr_expect_str_eq(s, "r.io/0/0:v1-0$ ${x");
	free(s);
}

/* every op of a default patch whose path starts with prefix, as one string */
static char *ops_under(const cJSON *ops, const char *prefix)
{
	cJSON *sel = cJSON_CreateArray();
	const cJSON *o;
	cJSON_ArrayForEach(o, ops) {
		const cJSON *path = cJSON_GetObjectItem(o, "path");
		if (strncmp(path->valuestring, prefix, strlen(prefix)) == 0)
			cJSON_AddItemToArray(sel, cJSON_Duplicate(o, 1));
	}
	char *s = cJSON_PrintUnformatted(sel);
	cJSON_Delete(sel);
	return s;
}

Test(pieces, default_patch)
{
	cJSON *j = cJSON_Parse("{\"spec\":{\"kernelModule\":{\"kernelMappings\":[]}}}");
	cJSON *p = gk_policy_default_patch(j);
	char *s = ops_under(p, "/spec/kernelModule");
	cr_expect_str_eq(s, "[{\"op\":\"add\",\"path\":\"/spec/kernelModule/moduleName\",\"value\":\"xe\"}]");
	cJSON_free(s);
	cJSON_Delete(p);
	cJSON_Delete(j);
	j = cJSON_Parse("{\"spec\":{\"kernelModule\":{\"moduleName\":\"\"}}}");
	p = gk_policy_default_patch(j);
	s = ops_under(p, "/spec/kernelModule");
	cr_expect_str_eq(s, "[{\"op\":\"replace\",\"path\":\"/spec/kernelModule/moduleName\",\"value\":\"xe\"}]");
	cJSON_free(s);
	cJSON_Delete(p);
	cJSON_Delete(j);
	const char *none[] = { "{\"spec\":{\"kernelModule\":{\"moduleName\":\"i915\"}}}", "{\"spec\":{}}", "{}", "[]",
			       "{\"spec\":{\"kernelModule\":{\"moduleName\":5}}}" };
	for (size_t i = 0; i < 5; i++) {
		j = cJSON_Parse(none[i]);
		p = gk_policy_default_patch(j);
		s = ops_under(p, "/spec/kernelModule");
		cr_expect_str_eq(s, "[]", "%s", none[i]);
		cJSON_free(s);
		cJSON_Delete(p);
		cJSON_Delete(j);
	}
}

/* ---- kernelModule.upgradePolicy ------------------------------------------------------ */
#define KM_UP(v, up) "\"kernelModule\":{\"version\":" v ",\"kernelMappings\":[{\"regexp\":\"^.*$\",\"containerImage\":\"r/x:1\"}],\"upgradePolicy\":" up "}"

Test(upgrade, accepted)
{
	accept(KM_UP("\"1.4\"", "{}"));
	accept(KM_UP("\"1.4\"", "{\"autoUpgrade\":true,\"maxParallel\":2,\"maxUnavailable\":3}"));
	accept(KM_UP("\"1.4\"", "{\"maxUnavailable\":\"100%\"}"));
	accept(KM_UP("\"1.4\"", "{\"maxUnavailable\":\"1%\",\"drain\":{\"enable\":false,\"timeoutSeconds\":1,"
			       "\"gracePeriodSeconds\":0,\"deleteEmptyDirData\":true,\"force\":true}}"));
	accept(KM_UP("\"1.4\"", "{\"drain\":{\"podSelector\":\"app=train,tier in (gpu, batch),!canary\"}}"));
	accept(KM_UP("\"\"", "{\"autoUpgrade\":false}"));
}

Test(upgrade, rejected_with_the_field_and_why)
{
	reject(KM_UP("\"\"", "{\"autoUpgrade\":true}"),
	       "kernelModule.upgradePolicy.autoUpgrade needs kernelModule.version");
	reject(KM_UP("\"1.4\"", "{\"maxParallel\":0}"),
	       "kernelModule.upgradePolicy.maxParallel must be at least 1 (nodes upgraded at the same time), got 0");
	reject(KM_UP("\"1.4\"", "{\"maxUnavailable\":0}"),
	       "kernelModule.upgradePolicy.maxUnavailable must be a number of nodes of at least 1 or a percentage of the "
	       "nodes from \"1%\" to \"100%\" (e.g. \"25%\"), got 0");
	reject(KM_UP("\"1.4\"", "{\"maxUnavailable\":\"2\"}"), "got \"2\"");
	reject(KM_UP("\"1.4\"", "{\"maxUnavailable\":\"101%\"}"), "got \"101%\"");
	reject(KM_UP("\"1.4\"", "{\"maxUnavailable\":\"0%\"}"), "got \"0%\"");
	reject(KM_UP("\"1.4\"", "{\"maxUnavailable\":\"25 %\"}"), "got \"25 %\"");
	reject(KM_UP("\"1.4\"", "{\"maxUnavailable\":1.5}"),
	       "spec.kernelModule.upgradePolicy.maxUnavailable: expected an integer or a string, got 1.5");
	reject(KM_UP("\"1.4\"", "{\"maxUnavailable\":true}"), "expected an integer or a string, got bool");
	reject(KM_UP("\"1.4\"", "{\"drain\":{\"timeoutSeconds\":0}}"),
	       "kernelModule.upgradePolicy.drain.timeoutSeconds must be at least 1");
	reject(KM_UP("\"1.4\"", "{\"drain\":{\"gracePeriodSeconds\":-1}}"),
	       "kernelModule.upgradePolicy.drain.gracePeriodSeconds must be 0 or more");
	reject(KM_UP("\"1.4\"", "{\"drain\":{\"podSelector\":\"app in (a\"}}"),
	       "kernelModule.upgradePolicy.drain.podSelector \"app in (a\" is not a label selector: unable to parse");
	reject(KM_UP("\"1.4\"", "{\"drain\":{\"podSelector\":\"-app=x\"}}"), "is not a label selector: key \"-app\"");
	reject(KM_UP("\"1.4\"", "{\"drain\":{\"podSelector\":\"app=x-\"}}"), "value \"x-\" of key \"app\"");
	reject(KM_UP("\"1.4\"", "{\"surge\":1}"), "spec.kernelModule.upgradePolicy.surge: unknown field");
	reject(KM_UP("\"1.4\"", "{\"drain\":{\"ignoreDaemonSets\":true}}"),
	       "spec.kernelModule.upgradePolicy.drain.ignoreDaemonSets: unknown field");
	reject(KM_UP("\"1.4\"", "{\"autoUpgrade\":\"yes\"}"), "spec.kernelModule.upgradePolicy.autoUpgrade: expected bool");
}

Test(upgrade, resolved_with_defaults)
{
	gk_policy_upgrade u;
	gk_policy_upgrade_resolve(NULL, &u);
	cr_assert_not(u.auto_upgrade);
	cr_assert_eq(u.max_parallel, 1);
	cr_assert(u.max_unavailable_percent);
	cr_assert_eq(u.max_unavailable, 25);
	cr_assert(u.drain_enable);
	cr_assert_eq(u.drain_timeout_s, 300);
	cr_assert_not(u.has_grace_period);
	cr_assert_null(u.pod_selector);
	cJSON *j = cJSON_Parse("{\"metadata\":{\"name\":\"gpu\"},\"spec\":{\"resourceRegistration\":\"dp\","
			       KM_UP("\"1.4\"", "{\"autoUpgrade\":true,\"maxParallel\":2,\"maxUnavailable\":\"50%\","
					       "\"drain\":{\"enable\":false,\"timeoutSeconds\":60,\"gracePeriodSeconds\":5,"
					       "\"podSelector\":\"a=b\",\"force\":true}}") "}}");
	cr_assert_not_null(j);
	Gpukmm__ClusterPolicy *cp = NULL;
	gk_err e;
	cr_assert_eq(gk_kobj_cluster_policy_from_json(j, &cp, &e), 0, "%s", e.msg);
	gk_policy_upgrade_resolve(cp->spec->kernel_module, &u);
	cr_assert(u.auto_upgrade);
	cr_assert_eq(u.max_parallel, 2);
	cr_assert_eq(u.max_unavailable, 50);
	cr_assert(u.max_unavailable_percent);
	cr_assert_eq(gk_policy_upgrade_max_unavailable(&u, 5), 3);
	cr_assert_not(u.drain_enable);
	cr_assert_eq(u.drain_timeout_s, 60);
	cr_assert(u.has_grace_period);
	cr_assert_eq(u.grace_period_s, 5);
	cr_assert_str_eq(u.pod_selector, "a=b");
	cr_assert(u.force);
	cr_assert_not(u.delete_empty_dir_data);
	gk_kobj_free(cp);
	cJSON_Delete(j);
}

/* ---- size limits: the CRD's maxItems / maxLength, said the same way ---- */

/* a policy with `maps` kernelMappings (regexp `rx` each), validated; joined report */
static char *with_mappings(size_t maps, const char *rx, gk_policy_report *keep)
{
	cJSON *j = cJSON_Parse("{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"gpu\"},"
			       "\"spec\":{\"resourceRegistration\":\"dp\",\"kernelModule\":{\"kernelMappings\":[]}}}");
	cJSON *arr = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "spec"), "kernelModule"), "kernelMappings");
	for (size_t i = 0; i < maps; i++) {
		cJSON *m = cJSON_CreateObject();
		cJSON_AddStringToObject(m, "regexp", rx);
		cJSON_AddStringToObject(m, "containerImage", "registry.example.com/xe-driver:1.0");
		cJSON_AddItemToArray(arr, m);
	}
	return validate_obj(j, keep);
}

Test(limits, at_each_limit_is_valid)
{
	char *m = with_mappings(GK_POLICY_MAX_KERNEL_MAPPINGS, "^6\\.8\\..*$", NULL);
	cr_expect_str_empty(m);
	free(m);
	char rx[GK_POLICY_MAX_REGEXP_LEN + 1];
	memset(rx, 'a', GK_POLICY_MAX_REGEXP_LEN);
	rx[GK_POLICY_MAX_REGEXP_LEN] = 0;
	m = with_mappings(1, rx, NULL);
	cr_expect_str_empty(m);
	free(m);
	/* 16 modules in the loading order, 64 tolerations */
	char order[512] = "\"xe\"";
	for (int i = 1; i < GK_POLICY_MAX_LOADING_ORDER; i++)
		snprintf(order + strlen(order), sizeof(order) - strlen(order), ",\"m%d\"", i);
	char *spec = NULL;
	cr_assert(asprintf(&spec, "\"kernelModule\":{\"modulesLoadingOrder\":[%s],\"kernelMappings\":[" GOOD "]}", order) > 0);
	accept(spec);
	free(spec);
}

Test(limits, one_past_each_limit_is_reported_like_the_api_server)
{
	char *m = with_mappings(GK_POLICY_MAX_KERNEL_MAPPINGS + 1, "^.+$", NULL);
	cr_expect_str_eq(m, "spec.kernelModule.kernelMappings: Too many: 129: must have at most 128 items");
	free(m);
	char rx[GK_POLICY_MAX_REGEXP_LEN + 2];
	memset(rx, '(', GK_POLICY_MAX_REGEXP_LEN + 1); /* not compiled: no "missing closing )" */
	rx[GK_POLICY_MAX_REGEXP_LEN + 1] = 0;
	m = with_mappings(1, rx, NULL);
	cr_expect_str_eq(m, "spec.kernelModule.kernelMappings[0].regexp: Too long: may not be more than 1024 bytes");
	free(m);
	char img[GK_POLICY_MAX_IMAGE_LEN + 40];
	snprintf(img, sizeof(img), "registry.example.com/%0*d:1", GK_POLICY_MAX_IMAGE_LEN, 0);
	char *spec = NULL;
	cr_assert(asprintf(&spec, "\"dra\":{\"image\":\"%s\"}", img) > 0);
	reject_exact(spec, "spec.dra.image: Too long: may not be more than 1024 bytes");
	free(spec);
	char ids[4096] = "";
	for (int i = 0; i <= GK_POLICY_MAX_PCI_IDS; i++)
		snprintf(ids + strlen(ids), sizeof(ids) - strlen(ids), "%s\"0x%04x\"", i ? "," : "", i);
	cr_assert(asprintf(&spec, "\"dp\":{\"allowIDs\":[%s]}", ids) > 0);
	reject_exact(spec, "spec.dp.allowIDs: Too many: 257: must have at most 256 items");
	free(spec);
	char tol[8192] = "";
	for (int i = 0; i <= GK_POLICY_MAX_TOLERATIONS; i++)
		snprintf(tol + strlen(tol), sizeof(tol) - strlen(tol), "%s{\"operator\":\"Exists\"}", i ? "," : "");
	cr_assert(asprintf(&spec, "\"tolerations\":[%s]", tol) > 0);
	reject_exact(spec, "spec.tolerations: Too many: 65: must have at most 64 items");
	free(spec);
	char sel[4096] = "";
	for (int i = 0; i <= GK_POLICY_MAX_NODE_SELECTOR; i++)
		snprintf(sel + strlen(sel), sizeof(sel) - strlen(sel), "%s\"k%d\":\"v\"", i ? "," : "", i);
	cr_assert(asprintf(&spec, "\"nodeSelector\":{%s}", sel) > 0);
	reject_exact(spec, "spec.nodeSelector: Too many: 65: must have at most 64 items");
	free(spec);
}

/* 40,000 mappings, each with a bad regexp: the limit is reported and only
 * the first 128 are checked (the work of one review is bounded) */
Test(limits, items_past_the_limit_are_not_checked)
{
	gk_policy_report r;
	char *m = with_mappings(40000, "[bad", &r);
	cr_expect_eq(r.n, 1 + GK_POLICY_MAX_KERNEL_MAPPINGS, "%zu violations", r.n);
	cr_expect(strstr(m, "spec.kernelModule.kernelMappings: Too many: 40000: must have at most 128 items"));
	cr_expect(strstr(m, "kernelModule.kernelMappings[127].regexp: invalid regular expression"));
	cr_expect(!strstr(m, "kernelModule.kernelMappings[128].regexp"));
	free(m);
	gk_policy_report_free(&r);
}

/* the CRD carries the same limits (one source of truth each side, checked here) */
static const cJSON *at(const cJSON *o, const char *path)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
		o = cJSON_IsArray(o) ? cJSON_GetArrayItem(o, atoi(k)) : cJSON_GetObjectItemCaseSensitive(o, k);
	cr_assert(o, "CRD has no %s", path);
	return o;
}

Test(limits, the_crd_says_the_same)
{
	FILE *f = fopen("deploy/crd/intel.com_clusterpolicies.yaml", "rb");
	cr_assert(f, "run from the source tree");
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	gk_yamljson_docs d;
	gk_err e;
	cr_assert_eq(gk_yamljson_parse(buf, n, &d, &e), 0, "%s", e.msg);
	const cJSON *sp = at(d.doc[0], "spec.versions.0.schema.openAPIV3Schema.properties.spec.properties");
	const cJSON *km = at(sp, "kernelModule.properties"), *mp = at(km, "kernelMappings.items.properties");
	struct { const cJSON *o; const char *key; int want; } lim[] = {
		{ at(km, "kernelMappings"), "maxItems", GK_POLICY_MAX_KERNEL_MAPPINGS },
		{ at(km, "modulesLoadingOrder"), "maxItems", GK_POLICY_MAX_LOADING_ORDER },
		{ at(mp, "build.properties.buildArgs"), "maxItems", GK_POLICY_MAX_BUILD_ARGS },
		{ at(mp, "build.properties.secrets"), "maxItems", GK_POLICY_MAX_BUILD_SECRETS },
		{ at(mp, "inTreeModulesToRemove"), "maxItems", GK_POLICY_MAX_IN_TREE_REMOVE },
		{ at(mp, "regexp"), "maxLength", GK_POLICY_MAX_REGEXP_LEN },
		{ at(mp, "containerImage"), "maxLength", GK_POLICY_MAX_IMAGE_LEN },
		{ at(sp, "dp.properties.allowIDs"), "maxItems", GK_POLICY_MAX_PCI_IDS },
		{ at(sp, "dp.properties.denyIDs"), "maxItems", GK_POLICY_MAX_PCI_IDS },
		{ at(sp, "dp.properties.plugin"), "maxLength", GK_POLICY_MAX_IMAGE_LEN },
		{ at(sp, "dp.properties.levelzero"), "maxLength", GK_POLICY_MAX_IMAGE_LEN },
		{ at(sp, "dra.properties.image"), "maxLength", GK_POLICY_MAX_IMAGE_LEN },
		{ at(sp, "xpu.properties.image"), "maxLength", GK_POLICY_MAX_IMAGE_LEN },
		{ at(sp, "tolerations"), "maxItems", GK_POLICY_MAX_TOLERATIONS },
		{ at(sp, "nodeSelector"), "maxProperties", GK_POLICY_MAX_NODE_SELECTOR },
		{ at(sp, "kueue.properties.equalResources"), "maxItems", GK_POLICY_MAX_CLUSTER_QUEUES },
		{ at(sp, "kueue.properties.equalResources.items.properties.localQueues"), "maxItems", GK_POLICY_MAX_LOCAL_QUEUES },
	};
	for (size_t i = 0; i < sizeof(lim) / sizeof(lim[0]); i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(lim[i].o, lim[i].key);
		cr_expect(cJSON_IsNumber(v) && v->valueint == lim[i].want, "limit %zu (%s): CRD %d, lib/policy %d", i,
			  lim[i].key, cJSON_IsNumber(v) ? v->valueint : -1, lim[i].want);
	}
	gk_yamljson_free(&d);
}

/* upstream §2.2: images and monitoringResource when empty, whatever the mode */
Test(pieces, default_patch_images_and_monitoring_resource)
{
	cJSON *j = cJSON_Parse("{\"spec\":{\"resourceRegistration\":\"dra\"}}");
	cJSON *p = gk_policy_default_patch(j);
	char *s = cJSON_PrintUnformatted(p);
	cr_expect_str_eq(s, "[{\"op\":\"add\",\"path\":\"/spec/dp\",\"value\":{\"plugin\":\"" GK_POLICY_DEFAULT_DP_IMAGE "\"}},"
			    "{\"op\":\"add\",\"path\":\"/spec/dra\",\"value\":{\"image\":\"" GK_POLICY_DEFAULT_DRA_IMAGE "\"}},"
			    "{\"op\":\"add\",\"path\":\"/spec/xpu\",\"value\":{\"image\":\"" GK_POLICY_DEFAULT_XPU_IMAGE "\"}},"
			    "{\"op\":\"add\",\"path\":\"/spec/xpu/monitoringResource\",\"value\":\"monitoring\"}]");
	cJSON_free(s);
	cJSON_Delete(p);
	cJSON_Delete(j);
	/* set values stay; empty ones are replaced; present sub-objects get fields */
	j = cJSON_Parse("{\"spec\":{\"dp\":{\"plugin\":\"my/dp:1\"},\"dra\":{\"image\":\"\"},"
			"\"xpu\":{\"monitoringResource\":\"xe_monitoring\"}}}");
	p = gk_policy_default_patch(j);
	s = cJSON_PrintUnformatted(p);
	cr_expect_str_eq(s, "[{\"op\":\"replace\",\"path\":\"/spec/dra/image\",\"value\":\"" GK_POLICY_DEFAULT_DRA_IMAGE "\"},"
			    "{\"op\":\"add\",\"path\":\"/spec/xpu/image\",\"value\":\"" GK_POLICY_DEFAULT_XPU_IMAGE "\"}]");
	cJSON_free(s);
	cJSON_Delete(p);
	cJSON_Delete(j);
	/* the typed defaulting agrees, and is idempotent */
	j = cJSON_Parse("{\"metadata\":{\"name\":\"gpu\"},\"spec\":{\"resourceRegistration\":\"dp\"}}");
	Gpukmm__ClusterPolicy *cp;
	cr_assert_eq(gk_kobj_cluster_policy_from_json(j, &cp, NULL), 0);
	cr_assert_eq(gk_policy_default(cp), 1);
	cr_assert_eq(gk_policy_default(cp), 0);
	cr_expect_str_eq(cp->spec->dp->plugin, GK_POLICY_DEFAULT_DP_IMAGE);
	cr_expect_str_eq(cp->spec->dra->image, GK_POLICY_DEFAULT_DRA_IMAGE);
	cr_expect_str_eq(cp->spec->xpu->image, GK_POLICY_DEFAULT_XPU_IMAGE);
	cr_expect_str_eq(cp->spec->xpu->monitoring_resource, "monitoring");
	gk_kobj_free(cp);
	cJSON_Delete(j);
}
