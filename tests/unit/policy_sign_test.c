/* lib/policy for issue #20: kernelModule.parameters and sign — every refused
 * form with its message (validate_kmm.c), the render at both levels (checked
 * against the real KMM CRD and KMM's admission), filesToSign's default, and
 * KMM's template variables (kmmvars.c) as KMM substitutes them. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/kobj.h"
#include "gpukmm/policy.h"
#include "schema_check.h"

/* the joined violations and warnings of {"resourceRegistration":"dp","kernelModule":<km>} */
static char *validate_km(const char *km, char **warnings)
{
	char *src = NULL;
	cr_assert(asprintf(&src, "{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":"
				 "\"gpu\"},\"spec\":{\"resourceRegistration\":\"dp\",\"kernelModule\":%s}}", km) > 0);
	cJSON *j = cJSON_Parse(src);
	cr_assert_not_null(j, "bad test JSON: %s", src);
	gk_policy_report r;
	gk_policy_report_init(&r);
	gk_policy_validate_json(j, true, NULL, &r, NULL);
	cr_assert(!r.oom);
	char *out = gk_policy_report_join(&r);
	if (warnings) {
		size_t len = 1;
		for (size_t i = 0; i < r.n_warnings; i++)
			len += strlen(r.warnings[i]) + 1;
		*warnings = calloc(1, len);
		for (size_t i = 0; i < r.n_warnings; i++) {
			if (i)
				strcat(*warnings, "\n");
			strcat(*warnings, r.warnings[i]);
		}
	}
	gk_policy_report_free(&r);
	cJSON_Delete(j);
	free(src);
	return out;
}

#define MAP "{\"regexp\":\"^6\",\"containerImage\":\"r.io/xe:${KERNEL_FULL_VERSION}\"}"
#define MAPS "\"kernelMappings\":[" MAP "]"
#define SECRETS "\"keySecret\":{\"name\":\"mok-key\"},\"certSecret\":{\"name\":\"mok-cert\"}"
#define UNSIGNED "\"unsignedImage\":\"r.io/xe-unsigned:${KERNEL_FULL_VERSION}\""
#define SIGN "\"sign\":{" SECRETS "," UNSIGNED "}"

static void ok_km(const char *km)
{
	char *w = NULL, *m = validate_km(km, &w);
	cr_expect_str_empty(m, "expected valid: %s\ngot: %s", km, m);
	cr_expect_str_empty(w, "expected no warning: %s\ngot: %s", km, w);
	free(m);
	free(w);
}

/* exactly one violation, this one */
static void refused(const char *km, const char *msg)
{
	char *m = validate_km(km, NULL);
	cr_expect_str_eq(m, msg, "for %s", km);
	free(m);
}

/* ---- parameters -------------------------------------------------------------------- */

Test(parameters, accepted)
{
	ok_km("{\"parameters\":[\"force_probe=e20b\",\"max_vfs=7\",\"enable_guc=-1\",\"_x=a,b:c/d@e%f+g=h\",\"a-b=1\"]," MAPS "}");
}

Test(parameters, each_refused_form_names_the_entry)
{
	refused("{\"parameters\":[\"force_probe\"]," MAPS "}",
		"kernelModule.parameters[0] \"force_probe\" must be key=value (a parameter of the module and its value)");
	refused("{\"parameters\":[\"=1\"]," MAPS "}",
		"kernelModule.parameters[0] \"=1\": \"\" is not a module parameter name (a letter or '_', then letters, "
		"digits, '_' or '-')");
	refused("{\"parameters\":[\"9x=1\"]," MAPS "}",
		"kernelModule.parameters[0] \"9x=1\": \"9x\" is not a module parameter name (a letter or '_', then letters, "
		"digits, '_' or '-')");
	refused("{\"parameters\":[\"xe.force_probe=1\"]," MAPS "}",
		"kernelModule.parameters[0] \"xe.force_probe=1\": \"xe.force_probe\" is not a module parameter name (a letter "
		"or '_', then letters, digits, '_' or '-')");
	refused("{\"parameters\":[\"a b=1\"]," MAPS "}",
		"kernelModule.parameters[0] \"a b=1\": \"a b\" is not a module parameter name (a letter or '_', then "
		"letters, digits, '_' or '-')");
	refused("{\"parameters\":[\"ok=1\",\"a=\"]," MAPS "}", "kernelModule.parameters[1] \"a=\": the value is empty");
	const char *tail = "; a value is letters, digits and . _ , : + / @ % = - only (no whitespace, quotes or shell "
			   "metacharacters)";
	struct { const char *entry, *quoted, *what; } bad[] = {
		{ "a=x y", "\"a=x y\"", "whitespace" },
		{ "a=x\\ty", "\"a=x\\ty\"", "whitespace" },
		{ "a=$(reboot)", "\"a=$(reboot)\"", "the character '$'" },
		{ "a=`id`", "\"a=`id`\"", "the character '`'" },
		{ "a=1;reboot", "\"a=1;reboot\"", "the character ';'" },
		{ "a=1|x", "\"a=1|x\"", "the character '|'" },
		{ "a=1&", "\"a=1&\"", "the character '&'" },
		{ "a=<x", "\"a=<x\"", "the character '<'" },
		{ "a=\\\"q\\\"", "\"a=\\\"q\\\"\"", "the character '\"'" },
		{ "a='q'", "\"a='q'\"", "the character '''" },
		{ "a=*", "\"a=*\"", "the character '*'" },
		{ "a=~", "\"a=~\"", "the character '~'" },
		{ "a=#", "\"a=#\"", "the character '#'" },
		{ "a=\\\\", "\"a=\\\\\"", "the character '\\'" },
		{ "a=\\u0001", "\"a=\\x01\"", "a control character" },
		{ "a=\\u00e9", "\"a=\xc3\xa9\"", "a non-ASCII byte" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char km[256], msg[512];
		snprintf(km, sizeof(km), "{\"parameters\":[\"%s\"]," MAPS "}", bad[i].entry);
		snprintf(msg, sizeof(msg), "kernelModule.parameters[0] %s: the value contains %s%s", bad[i].quoted,
			 bad[i].what, tail);
		refused(km, msg);
	}
	/* the kernel treats '-' and '_' alike: one parameter given twice */
	refused("{\"parameters\":[\"max_vfs=1\",\"x=2\",\"max-vfs=3\"]," MAPS "}",
		"kernelModule.parameters[2] \"max-vfs=3\": parameter max-vfs is already set by parameters[0]");
}

Test(parameters, rendered_into_modprobe)
{
	cJSON *j = cJSON_Parse("{\"metadata\":{\"name\":\"gpu\"},\"spec\":{\"resourceRegistration\":\"dp\",\"kernelModule\":"
			       "{\"parameters\":[\"force_probe=e20b\",\"max_vfs=7\"]," MAPS "}}}");
	Gpukmm__ClusterPolicy *cp = NULL;
	gk_err e = { 0 };
	cr_assert_eq(gk_kobj_cluster_policy_from_json(j, &cp, &e), 0, "%s", e.msg);
	cr_assert(gk_policy_default(cp) >= 0);
	Gpukmm__Module *m = NULL;
	cr_assert_eq(gk_policy_render_module(cp, NULL, &m, &e), 0, "%s", e.msg);
	Gpukmm__ModprobeSpec *mp = m->spec->module_loader->container->modprobe;
	cr_assert_eq(mp->n_parameters, 2);
	cr_expect_str_eq(mp->parameters[0], "force_probe=e20b");
	cr_expect_str_eq(mp->parameters[1], "max_vfs=7");
	gk_kobj_free(m);
	gk_kobj_free(cp);
	cJSON_Delete(j);
}

/* ---- sign: the refused forms --------------------------------------------------------- */

Test(sign, accepted_forms)
{
	/* container level with the default filesToSign */
	ok_km("{" SIGN "," MAPS "}");
	/* mapping level only, defaulted too */
	ok_km("{\"kernelMappings\":[{\"regexp\":\"^6\",\"containerImage\":\"r.io/xe:${KERNEL_FULL_VERSION}\",\"sign\":{" SECRETS
	      "," UNSIGNED "}}]}");
	/* both levels: the mapping lists what it signs in addition; globs and KERNEL_* variables */
	ok_km("{\"sign\":{" SECRETS "," UNSIGNED ",\"filesToSign\":[\"/opt/lib/modules/${KERNEL_FULL_VERSION}/xe.ko\"]},"
	      "\"kernelMappings\":[{\"regexp\":\"^6\",\"containerImage\":\"r.io/xe:$KERNEL_FULL_VERSION\",\"sign\":{"
	      "\"keySecret\":{\"name\":\"k2\"},\"certSecret\":{\"name\":\"c2\"},\"unsignedImage\":\"r.io/u:${KERNEL_XYZ}-$KERNEL_X\","
	      "\"unsignedImageRegistryTLS\":{\"insecure\":true},\"filesToSign\":[\"/opt/lib/modules/${KERNEL_VERSION}/updates/*.ko\","
	      "\"/opt/lib/modules/${KERNEL_FULL_VERSION}/extra/drm_[a-z]?.ko\"]}}]}");
	/* a mapping that builds signs what it built: no unsignedImage needed */
	ok_km("{\"sign\":{" SECRETS "},\"kernelMappings\":[{\"regexp\":\"^6\",\"containerImage\":\"r.io/xe:${KERNEL_FULL_VERSION}\","
	      "\"build\":{\"dockerfileConfigMap\":{\"name\":\"df\"}}}]}");
}

Test(sign, secrets)
{
	refused("{\"sign\":{\"certSecret\":{\"name\":\"c\"}," UNSIGNED "}," MAPS "}",
		"kernelModule.sign.keySecret.name is required: the Secret (in the operator namespace) whose key \"key\" holds "
		"the private signing key");
	refused("{\"sign\":{\"keySecret\":{\"name\":\"k\"},\"certSecret\":{}," UNSIGNED "}," MAPS "}",
		"kernelModule.sign.certSecret.name is required: the Secret (in the operator namespace) whose key \"cert\" "
		"holds the signing certificate");
	char *m = validate_km("{\"sign\":{\"keySecret\":{\"name\":\"Key_1\"},\"certSecret\":{\"name\":\"c\"}," UNSIGNED "}," MAPS "}",
			      NULL);
	cr_expect(strncmp(m, "kernelModule.sign.keySecret.name \"Key_1\" is not a valid Kubernetes object name: a lowercase "
			     "RFC 1123 subdomain", 100) == 0, "%s", m);
	free(m);
	refused("{\"kernelMappings\":[{\"regexp\":\"^6\",\"containerImage\":\"r.io/xe:1\",\"sign\":{\"keySecret\":{\"name\":"
		"\"k\"},\"unsignedImage\":\"r.io/u:1\"}}]}",
		"kernelModule.kernelMappings[0].sign.certSecret.name is required: the Secret (in the operator namespace) "
		"whose key \"cert\" holds the signing certificate");
}

static void refused_file(const char *file_json, const char *msg)
{
	char km[1024];
	snprintf(km, sizeof(km), "{\"sign\":{" SECRETS "," UNSIGNED ",\"filesToSign\":[%s]}," MAPS "}", file_json);
	refused(km, msg);
}

Test(sign, files_to_sign)
{
	refused_file("\"/lib/modules/x/xe.ko\"",
		     "kernelModule.sign.filesToSign[0] \"/lib/modules/x/xe.ko\" must be under KMM's dirName \"/opt/\" (the "
		     "module image's tree KMM signs and loads from), e.g. \"/opt/lib/modules/${KERNEL_FULL_VERSION}/xe.ko\"");
	refused_file("\"/optional/xe.ko\"",
		     "kernelModule.sign.filesToSign[0] \"/optional/xe.ko\" must be under KMM's dirName \"/opt/\" (the module "
		     "image's tree KMM signs and loads from), e.g. \"/opt/lib/modules/${KERNEL_FULL_VERSION}/xe.ko\"");
	refused_file("\"opt/xe.ko\"",
		     "kernelModule.sign.filesToSign[0] \"opt/xe.ko\" must be under KMM's dirName \"/opt/\" (the module "
		     "image's tree KMM signs and loads from), e.g. \"/opt/lib/modules/${KERNEL_FULL_VERSION}/xe.ko\"");
	refused_file("\"\"", "kernelModule.sign.filesToSign[0] is empty");
	refused_file("\"/opt/../etc/shadow\"", "kernelModule.sign.filesToSign[0] \"/opt/../etc/shadow\": \"..\" would leave dirName");
	const char *tail = " is not allowed: KMM's sign job pastes each entry into a shell command; use letters, digits, "
			   ". _ - + / , : @, the globs * ? [ ] and ${KERNEL_...} variables";
	struct { const char *json, *quoted, *what; } bad[] = {
		{ "/opt/a b.ko", "\"/opt/a b.ko\"", "whitespace" },
		{ "/opt/a;reboot", "\"/opt/a;reboot\"", "the character ';'" },
		{ "/opt/`id`", "\"/opt/`id`\"", "the character '`'" },
		{ "/opt/a|b", "\"/opt/a|b\"", "the character '|'" },
		{ "/opt/a&", "\"/opt/a&\"", "the character '&'" },
		{ "/opt/a>b", "\"/opt/a>b\"", "the character '>'" },
		{ "/opt/(a)", "\"/opt/(a)\"", "the character '('" },
		{ "/opt/\\\"a\\\"", "\"/opt/\\\"a\\\"\"", "the character '\"'" },
		{ "/opt/'a'", "\"/opt/'a'\"", "the character '''" },
		{ "/opt/a\\\\b", "\"/opt/a\\\\b\"", "the character '\\'" },
		{ "/opt/{a,b}.ko", "\"/opt/{a,b}.ko\"", "the character '{'" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char f[128], msg[512];
		snprintf(f, sizeof(f), "\"%s\"", bad[i].json);
		snprintf(msg, sizeof(msg), "kernelModule.sign.filesToSign[0] %s: %s%s", bad[i].quoted, bad[i].what, tail);
		refused_file(f, msg);
	}
	refused_file("\"/opt/$$(reboot)\"", "kernelModule.sign.filesToSign[0] \"/opt/$$(reboot)\": '$' only as ${KERNEL_...} "
					    "(KERNEL_FULL_VERSION, KERNEL_VERSION, KERNEL_XYZ, KERNEL_X, KERNEL_Y, KERNEL_Z)");
	refused_file("\"/opt/${KERNEL_FULL_VERSION:-x}/a.ko\"",
		     "kernelModule.sign.filesToSign[0] \"/opt/${KERNEL_FULL_VERSION:-x}/a.ko\": '$' only as ${KERNEL_...} "
		     "(KERNEL_FULL_VERSION, KERNEL_VERSION, KERNEL_XYZ, KERNEL_X, KERNEL_Y, KERNEL_Z)");
	refused_file("\"/opt/${MOD_NAME}/a.ko\"",
		     "kernelModule.sign.filesToSign[0] \"/opt/${MOD_NAME}/a.ko\": $MOD_NAME is not a variable KMM substitutes "
		     "here (KERNEL_FULL_VERSION, KERNEL_VERSION, KERNEL_XYZ, KERNEL_X, KERNEL_Y, KERNEL_Z; not MOD_NAME or "
		     "MOD_NAMESPACE): KMM would make it \"\"");
	refused_file("\"/opt/$KERNEL_XY/a.ko\"",
		     "kernelModule.sign.filesToSign[0] \"/opt/$KERNEL_XY/a.ko\": $KERNEL_XY is not a variable KMM substitutes "
		     "here (KERNEL_FULL_VERSION, KERNEL_VERSION, KERNEL_XYZ, KERNEL_X, KERNEL_Y, KERNEL_Z; not MOD_NAME or "
		     "MOD_NAMESPACE): KMM would make it \"\"");
	refused_file("\"/opt/${KERNEL_X/a.ko\"",
		     "kernelModule.sign.filesToSign[0] \"/opt/${KERNEL_X/a.ko\": \"${\" without a closing \"}\": KMM fails to "
		     "substitute it");
	/* KMM appends a mapping's list to the container's and refuses an empty one */
	refused("{" SIGN ",\"kernelMappings\":[{\"regexp\":\"^6\",\"containerImage\":\"r.io/xe:1\",\"sign\":{" SECRETS "}}]}",
		"kernelModule.kernelMappings[0].sign.filesToSign is required when kernelModule.sign is set too: KMM appends a "
		"mapping's filesToSign to kernelModule.sign.filesToSign and refuses an empty list; list the files this mapping "
		"signs in addition, or set sign on each mapping instead of kernelModule.sign");
	/* the same file at both levels: signed twice (a warning) */
	char *w = NULL;
	char *m = validate_km("{\"sign\":{" SECRETS "," UNSIGNED ",\"filesToSign\":[\"/opt/a.ko\"]},\"kernelMappings\":[{"
			      "\"regexp\":\"^6\",\"containerImage\":\"r.io/xe:1\",\"sign\":{" SECRETS ",\"filesToSign\":[\"/opt/b.ko\","
			      "\"/opt/a.ko\"]}}]}", &w);
	cr_expect_str_empty(m);
	cr_expect_str_eq(w, "kernelModule.kernelMappings[0].sign.filesToSign[1] \"/opt/a.ko\" is also in "
			    "kernelModule.sign.filesToSign: KMM appends the two lists and signs it twice");
	free(m);
	free(w);
}

Test(sign, unsigned_image)
{
	refused("{\"sign\":{" SECRETS "}," MAPS "}",
		"kernelModule.kernelMappings[0]: signing needs an unsignedImage (kernelMappings[0].sign.unsignedImage or "
		"kernelModule.sign.unsignedImage): the image KMM pulls, signs and pushes as containerImage; only a mapping "
		"with build signs the image it built");
	refused("{\"kernelMappings\":[{\"regexp\":\"^6\",\"containerImage\":\"r.io/xe:1\",\"sign\":{" SECRETS "}}]}",
		"kernelModule.kernelMappings[0]: signing needs an unsignedImage (kernelMappings[0].sign.unsignedImage or "
		"kernelModule.sign.unsignedImage): the image KMM pulls, signs and pushes as containerImage; only a mapping "
		"with build signs the image it built");
	/* the mapping's own unsignedImage is enough, the container's serves mappings without one */
	ok_km("{\"sign\":{" SECRETS "},\"kernelMappings\":[{\"regexp\":\"^6\",\"containerImage\":\"r.io/xe:1\",\"sign\":{" SECRETS
	      ",\"unsignedImage\":\"r.io/u:1\",\"filesToSign\":[\"/opt/x.ko\"]}}]}");
	refused("{\"sign\":{" SECRETS ",\"unsignedImage\":\"r.io/xe:${KERNEL_VERSION}\"},\"kernelMappings\":[{\"regexp\":\"^6\","
		"\"containerImage\":\"r.io/xe:$KERNEL_FULL_VERSION\"}]}",
		"kernelModule.kernelMappings[0]: sign.unsignedImage \"r.io/xe:${KERNEL_VERSION}\" is the containerImage: KMM "
		"pushes the signed image to containerImage (and skips signing when it exists), so the unsigned image must be "
		"another tag or repository");
	refused("{\"sign\":{" SECRETS ",\"unsignedImage\":\"r.io/Xe:1\"}," MAPS "}",
		"invalid image reference in kernelModule.sign.unsignedImage: \"r.io/Xe:1\": invalid reference format: "
		"repository name (Xe) must be lowercase");
	refused("{\"sign\":{" SECRETS ",\"unsignedImage\":\"r.io/xe-unsigned\"}," MAPS "}",
		"kernelModule.sign.unsignedImage: image \"r.io/xe-unsigned\" must include an explicit tag or digest");
	refused("{\"sign\":{" SECRETS ",\"unsignedImage\":\"r.io/u:${MOD_NAME}\"}," MAPS "}",
		"kernelModule.sign.unsignedImage \"r.io/u:${MOD_NAME}\": $MOD_NAME is not a variable KMM substitutes here "
		"(KERNEL_FULL_VERSION, KERNEL_VERSION, KERNEL_XYZ, KERNEL_X, KERNEL_Y, KERNEL_Z; not MOD_NAME or "
		"MOD_NAMESPACE): KMM would make it \"\"");
	/* an unsignedImage on a mapping that builds is ignored by KMM: a warning */
	char *w = NULL;
	char *m = validate_km("{\"kernelMappings\":[{\"regexp\":\"^6\",\"containerImage\":\"r.io/xe:1\",\"build\":{"
			      "\"dockerfileConfigMap\":{\"name\":\"df\"}},\"sign\":{" SECRETS ",\"unsignedImage\":\"r.io/u:1\"}}]}", &w);
	cr_expect_str_empty(m);
	cr_expect_str_eq(w, "kernelModule.kernelMappings[0].sign.unsignedImage is ignored: kernelMappings[0] builds its "
			    "image in-cluster and KMM signs what it built");
	free(m);
	free(w);
}

Test(templates, container_image_variables)
{
	ok_km("{\"kernelMappings\":[{\"regexp\":\"^6\",\"containerImage\":\"r.io/${MOD_NAMESPACE}/$MOD_NAME:${KERNEL_XYZ}-"
	      "$KERNEL_X.$KERNEL_Y.${KERNEL_Z}\"}]}");
	refused("{\"kernelMappings\":[{\"regexp\":\"^6\",\"containerImage\":\"r.io/xe:${KERNEL_XY}\"}]}",
		"kernelModule.kernelMappings[0].containerImage \"r.io/xe:${KERNEL_XY}\": $KERNEL_XY is not a variable KMM "
		"substitutes (KERNEL_FULL_VERSION, KERNEL_VERSION, KERNEL_XYZ, KERNEL_X, KERNEL_Y, KERNEL_Z, MOD_NAME, "
		"MOD_NAMESPACE): KMM would make it \"\"");
	/* (the image reference check refuses it too) */
	char *m = validate_km("{\"kernelMappings\":[{\"regexp\":\"^6\",\"containerImage\":\"r.io/xe:v1-${KERNEL_FULL_VERSION\"}]}",
			      NULL);
	cr_expect(strstr(m, "kernelModule.kernelMappings[0].containerImage \"r.io/xe:v1-${KERNEL_FULL_VERSION\": \"${\" "
			    "without a closing \"}\": KMM fails to substitute it"), "%s", m);
	free(m);
}

/* ---- KMM's variables ------------------------------------------------------------------ */

static char *expand(const char *tmpl, const char *kernel, bool mod)
{
	gk_policy_kmm_vars v;
	char msg[256];
	cr_assert_eq(gk_policy_kmm_vars_for_kernel(kernel, &v, msg, sizeof(msg)), 0, "%s", msg);
	if (mod) {
		v.mod_name = "gpu-gpu";
		v.mod_namespace = "ns";
	}
	char *s = gk_policy_kmm_expand(tmpl, &v, msg, sizeof(msg));
	cr_assert_not_null(s, "%s", msg);
	return s;
}

static void expands(const char *tmpl, const char *kernel, bool mod, const char *want)
{
	char *s = expand(tmpl, kernel, mod);
	cr_expect_str_eq(s, want, "%s with %s", tmpl, kernel);
	free(s);
}

Test(kmm_vars, as_kmm_substitutes)
{
	const char *k = "5.14.0-427.13.1.el9_4.x86_64";
	expands("${KERNEL_FULL_VERSION}|$KERNEL_VERSION|${KERNEL_XYZ}|$KERNEL_X|$KERNEL_Y|${KERNEL_Z}", k, false,
		"5.14.0-427.13.1.el9_4.x86_64|5.14.0-427.13.1.el9_4.x86_64|5.14.0|5|14|0");
	expands("r.io/${MOD_NAMESPACE}/$MOD_NAME:${KERNEL_FULL_VERSION}", "6.8.0-45-generic", true, "r.io/ns/gpu-gpu:6.8.0-45-generic");
	/* MOD_* are not substituted in sign fields, unknown names are unset: "" */
	expands("a${MOD_NAME}b$KERNEL_XYc${NOPE}d", "6.8.0-45-generic", false, "abd");
	/* a trailing '+' is trimmed, other bytes outside [A-Za-z0-9._-] become '_' */
	expands("$KERNEL_FULL_VERSION", "6.8.0-rc1+", false, "6.8.0-rc1");
	expands("$KERNEL_FULL_VERSION/$KERNEL_XYZ", "6.8.0~1+dirty", false, "6.8.0_1_dirty/6.8.0_1_dirty");
	/* envsubst syntax: $$, defaults, alternatives, a lone $ */
	expands("$$KERNEL_X $ ${KERNEL_X:-d} ${NOPE:-d$KERNEL_Y} ${NOPE-x} ${KERNEL_X:+alt} ${NOPE+alt} $_", "6.8.0", false,
		"$KERNEL_X $ 6 d8 x alt  $_");
	gk_policy_kmm_vars v;
	char msg[256];
	cr_expect_eq(gk_policy_kmm_vars_for_kernel("6.8", &v, msg, sizeof(msg)), -1);
	cr_expect_str_eq(msg, "invalid kernel version 6.8: expected at least three components (major.minor.patch)");
	/* normalised before the [.,-] split: a ',' is already '_' */
	cr_expect_eq(gk_policy_kmm_vars_for_kernel("6.8,1", &v, msg, sizeof(msg)), -1);
	cr_expect_str_eq(msg, "invalid kernel version 6.8_1: expected at least three components (major.minor.patch)");
	cr_expect_eq(gk_policy_kmm_vars_for_kernel("", &v, msg, sizeof(msg)), -1);
	cr_assert_eq(gk_policy_kmm_vars_for_kernel("6.8.0", &v, msg, sizeof(msg)), 0);
	cr_expect_null(gk_policy_kmm_expand("r.io/x:${KERNEL_X", &v, msg, sizeof(msg)));
	cr_expect_str_eq(msg, "failed to substitute \"r.io/x:${KERNEL_X\": closing brace expected");
	char name[64];
	cr_expect_eq(gk_policy_kmm_unknown_var("${KERNEL_FULL_VERSION}$MOD_NAME", true, name, sizeof(name)), 0);
	cr_expect_eq(gk_policy_kmm_unknown_var("${KERNEL_FULL_VERSION}$MOD_NAME", false, name, sizeof(name)), 1);
	cr_expect_str_eq(name, "MOD_NAME");
	cr_expect(gk_policy_kmm_has_vars("r.io/x:$KERNEL_X"));
	cr_expect(!gk_policy_kmm_has_vars("r.io/x:1$"));
}

/* ---- render at both levels, against the real KMM CRD and KMM's admission ------------------ */

static Gpukmm__Module *render_km(const char *km, cJSON **json)
{
	char *src = NULL;
	cr_assert(asprintf(&src, "{\"metadata\":{\"name\":\"gpu\",\"uid\":\"u\"},\"spec\":{\"resourceRegistration\":\"dp\","
				 "\"kernelModule\":%s}}", km) > 0);
	cJSON *j = cJSON_Parse(src);
	cr_assert_not_null(j, "%s", src);
	Gpukmm__ClusterPolicy *cp = NULL;
	gk_err e = { 0 };
	cr_assert_eq(gk_kobj_cluster_policy_from_json(j, &cp, &e), 0, "%s", e.msg);
	cr_assert(gk_policy_default(cp) >= 0);
	gk_policy_report r;
	gk_policy_report_init(&r);
	gk_policy_validate(cp, NULL, &r);
	cr_assert_eq(r.n, 0, "%s: %s", km, r.n ? r.v[0].msg : "");
	gk_policy_report_free(&r);
	Gpukmm__Module *m = NULL;
	cr_assert_eq(gk_policy_render_module(cp, NULL, &m, &e), 0, "%s", e.msg);
	*json = gk_policy_module_to_json(m);
	gk_kobj_free(cp);
	cJSON_Delete(j);
	free(src);
	return m;
}

static char *sign_of(const cJSON *container_or_mapping)
{
	return cJSON_PrintUnformatted(cJSON_GetObjectItem(container_or_mapping, "sign"));
}

Test(sign_render, both_levels_pass_kmm_crd_and_admission)
{
	cJSON *crd;
	cJSON *schema = crd_schema("tests/fixtures/kmm-crd/modules.kmm.sigs.x-k8s.io.crd.yaml", &crd);
	cr_assert_not_null(schema);
	const char *kms[] = {
		/* container level, default file; parameters */
		"{\"parameters\":[\"force_probe=e20b\"]," SIGN "," MAPS "}",
		/* mapping level only, default file, the unsigned image's registry TLS */
		"{\"kernelMappings\":[{\"regexp\":\"^6\",\"containerImage\":\"r.io/xe:${KERNEL_FULL_VERSION}\",\"sign\":{" SECRETS
		"," UNSIGNED ",\"unsignedImageRegistryTLS\":{\"insecureSkipTLSVerify\":true}}},{\"regexp\":\"^5\","
		"\"containerImage\":\"r.io/xe:5\"}]}",
		/* both levels, a building mapping signed by the container level */
		"{\"moduleName\":\"i915\",\"sign\":{" SECRETS "," UNSIGNED ",\"filesToSign\":[\"/opt/lib/modules/${KERNEL_FULL_VERSION}/"
		"updates/*.ko\"]},\"kernelMappings\":[{\"regexp\":\"^6\",\"containerImage\":\"r.io/xe:${KERNEL_FULL_VERSION}\",\"sign\":"
		"{\"keySecret\":{\"name\":\"k2\"},\"certSecret\":{\"name\":\"c2\"},\"filesToSign\":[\"/opt/lib/modules/"
		"${KERNEL_FULL_VERSION}/extra/dep.ko\"]}},{\"regexp\":\"^7\",\"containerImage\":\"r.io/xe:7-${KERNEL_XYZ}\","
		"\"build\":{\"dockerfileConfigMap\":{\"name\":\"df\"}}}]}",
	};
	const char *want_container[] = {
		"{\"keySecret\":{\"name\":\"mok-key\"},\"certSecret\":{\"name\":\"mok-cert\"},\"unsignedImage\":"
		"\"r.io/xe-unsigned:${KERNEL_FULL_VERSION}\",\"filesToSign\":[\"/opt/lib/modules/${KERNEL_FULL_VERSION}/xe.ko\"]}",
		NULL,
		"{\"keySecret\":{\"name\":\"mok-key\"},\"certSecret\":{\"name\":\"mok-cert\"},\"unsignedImage\":"
		"\"r.io/xe-unsigned:${KERNEL_FULL_VERSION}\",\"filesToSign\":[\"/opt/lib/modules/${KERNEL_FULL_VERSION}/updates/*.ko\"]}",
	};
	const char *want_map0[] = {
		NULL,
		"{\"keySecret\":{\"name\":\"mok-key\"},\"certSecret\":{\"name\":\"mok-cert\"},\"unsignedImage\":"
		"\"r.io/xe-unsigned:${KERNEL_FULL_VERSION}\",\"unsignedImageRegistryTLS\":{\"insecureSkipTLSVerify\":true},"
		"\"filesToSign\":[\"/opt/lib/modules/${KERNEL_FULL_VERSION}/xe.ko\"]}",
		"{\"keySecret\":{\"name\":\"k2\"},\"certSecret\":{\"name\":\"c2\"},\"filesToSign\":[\"/opt/lib/modules/"
		"${KERNEL_FULL_VERSION}/extra/dep.ko\"]}",
	};
	for (size_t i = 0; i < sizeof(kms) / sizeof(kms[0]); i++) {
		cJSON *j = NULL;
		Gpukmm__Module *m = render_km(kms[i], &j);
		const cJSON *ct = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "spec"), "moduleLoader"), "container");
		const cJSON *m0 = cJSON_GetArrayItem(cJSON_GetObjectItem(ct, "kernelMappings"), 0);
		char *cs = sign_of(ct), *ms = sign_of(m0);
		if (want_container[i])
			cr_expect_str_eq(cs, want_container[i], "policy %zu container sign", i);
		else
			cr_expect_null(cs, "policy %zu: no container sign, got %s", i, cs);
		if (want_map0[i])
			cr_expect_str_eq(ms, want_map0[i], "policy %zu mapping sign", i);
		else
			cr_expect_null(ms, "policy %zu: no mapping sign, got %s", i, ms);
		cJSON_free(cs);
		cJSON_free(ms);
		char errs[4096] = "";
		schema_check(j, schema, "", errs, sizeof(errs));
		cr_expect_str_empty(errs, "policy %zu:\n%s", i, errs);
		char msg[512];
		cr_expect_eq(gk_policy_kmm_admit(m, msg, sizeof(msg)), GK_POLICY_KMM_ALLOW, "policy %zu: %s", i, msg);
		/* the Module reads back to the same JSON, and it is not a difference to itself */
		Gpukmm__Module *back = NULL;
		gk_err e = { 0 };
		cr_assert_eq(gk_kobj_module_from_json(j, &back, &e), 0, "%s", e.msg);
		cJSON *patch = NULL;
		cr_expect_eq(gk_policy_module_diff(back, m, &patch, NULL), 0);
		cr_expect_null(patch, "policy %zu: %s", i, patch ? cJSON_PrintUnformatted(patch) : "");
		cJSON_Delete(patch);
		gk_kobj_free(back);
		cJSON_Delete(j);
		gk_kobj_free(m);
	}
	cJSON_Delete(crd);
}

Test(sign_render, kmm_refuses_what_validation_refuses)
{
	/* the mapping-level list KMM needs when both levels sign: without our rule, KMM refuses the Module */
	cJSON *j = cJSON_Parse("{\"metadata\":{\"name\":\"gpu-gpu\",\"namespace\":\"ns\"},\"spec\":{\"selector\":{},\"moduleLoader\":"
			       "{\"container\":{\"modprobe\":{\"moduleName\":\"xe\"},\"sign\":{" SECRETS ",\"filesToSign\":[\"/opt/a.ko\"]},"
			       "\"kernelMappings\":[{\"regexp\":\"^6\",\"containerImage\":\"r.io/x:1\",\"sign\":{" SECRETS "}}]}}}}");
	char msg[512];
	cr_expect_eq(gk_policy_kmm_admit_json(j, NULL, NULL, msg, sizeof(msg)), GK_POLICY_KMM_DENY);
	cr_expect_str_eq(msg, "kernelMappings[0].Sign: filesToSign is required when Sign is set");
	cJSON_Delete(j);
	j = cJSON_Parse("{\"metadata\":{\"name\":\"gpu-gpu\",\"namespace\":\"ns\"},\"spec\":{\"selector\":{},\"moduleLoader\":"
			"{\"container\":{\"modprobe\":{\"moduleName\":\"xe\"},\"sign\":{" SECRETS ",\"filesToSign\":[\"/lib/a.ko\"]},"
			"\"kernelMappings\":[{\"regexp\":\"^6\",\"containerImage\":\"r.io/x:1\"}]}}}}");
	cr_expect_eq(gk_policy_kmm_admit_json(j, NULL, NULL, msg, sizeof(msg)), GK_POLICY_KMM_DENY);
	cr_expect_str_eq(msg, "global Sign: filesToSign[\"/lib/a.ko\"] must be under dirName \"/opt\"");
	cJSON_Delete(j);
}

Test(sign_render, default_file)
{
	char buf[128];
	cr_assert_eq(gk_policy_sign_default_file(buf, sizeof(buf), "xe"), 0);
	cr_expect_str_eq(buf, "/opt/lib/modules/${KERNEL_FULL_VERSION}/xe.ko");
	cr_expect_eq(gk_policy_sign_default_file(buf, 10, "xe"), GK_OUT_OF_RANGE);
}

Test(sign_render, kms_false_tls_flags_are_not_a_difference)
{
	cJSON *j = NULL;
	Gpukmm__Module *m = render_km("{\"sign\":{" SECRETS "," UNSIGNED ",\"unsignedImageRegistryTLS\":{\"insecure\":true}}," MAPS "}", &j);
	/* what another writer (or an API round trip with Go's zero values) could leave */
	cJSON *ct = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "spec"), "moduleLoader"), "container");
	cJSON_AddFalseToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(ct, "sign"), "unsignedImageRegistryTLS"),
			       "insecureSkipTLSVerify");
	Gpukmm__Module *back = NULL;
	gk_err e = { 0 };
	cr_assert_eq(gk_kobj_module_from_json(j, &back, &e), 0, "%s", e.msg);
	cJSON *patch = NULL;
	cr_expect_eq(gk_policy_module_diff(back, m, &patch, NULL), 0);
	cr_expect_null(patch, "%s", patch ? cJSON_PrintUnformatted(patch) : "");
	cJSON_Delete(patch);
	gk_kobj_free(back);
	cJSON_Delete(j);
	gk_kobj_free(m);
}

/* ---- the images a policy makes a cluster pull ------------------------------------------ */

static Gpukmm__Node *mknode(const char *name, const char *kernel, const char *labels)
{
	char *src = NULL;
	cr_assert(asprintf(&src, "{\"metadata\":{\"name\":\"%s\",\"labels\":{%s}},\"status\":{\"nodeInfo\":{\"kernelVersion\":\"%s\"}}}",
			   name, labels, kernel) > 0);
	cJSON *j = cJSON_Parse(src);
	Gpukmm__Node *n = NULL;
	gk_err e = { 0 };
	cr_assert_eq(gk_kobj_node_from_json(j, &n, &e), 0, "%s", e.msg);
	cJSON_Delete(j);
	free(src);
	return n;
}

Test(images, per_node_kernel_deduplicated)
{
	cJSON *j = cJSON_Parse("{\"metadata\":{\"name\":\"gpu\"},\"spec\":{\"resourceRegistration\":\"dra\",\"resourceMonitoring\":true,"
			       "\"xpu\":{\"image\":\"r.io/xpu:2\"},\"kernelModule\":{\"sign\":{" SECRETS ",\"unsignedImage\":"
			       "\"r.io/u:${KERNEL_XYZ}\"},\"kernelMappings\":[{\"regexp\":\"^6\",\"containerImage\":"
			       "\"r.io/${MOD_NAMESPACE}/${MOD_NAME}:${KERNEL_FULL_VERSION}\"}]}}}");
	Gpukmm__ClusterPolicy *cp = NULL;
	gk_err e = { 0 };
	cr_assert_eq(gk_kobj_cluster_policy_from_json(j, &cp, &e), 0, "%s", e.msg);
	cr_assert(gk_policy_default(cp) >= 0);
	const char *amd = "\"kubernetes.io/arch\":\"amd64\"";
	Gpukmm__Node *nodes[] = { mknode("a", "6.8.0-45-generic", amd), mknode("b", "6.8.0-45-generic+", amd),
				  mknode("c", "5.15.0-1", amd), mknode("d", "6.8.1-1", "\"kubernetes.io/arch\":\"arm64\""),
				  mknode("e", "6.9", amd) };
	gk_policy_opts o = { .namespace_ = "ns" };
	gk_policy_images l = { 0 };
	cr_assert_eq(gk_policy_images_add(&l, cp, &o, nodes, 5, true), 0);
	const char *want[] = {
		"ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.11.0@sha256:"
		"49f38fcbee4f98d748b537b1a728a12f39e56fd208c86dc3fa32ab2162c21197",
		"r.io/ns/gpu-gpu:6.8.0-45-generic",
		"r.io/u:6.8.0",
		"r.io/xpu:2",
	};
	cr_assert_eq(l.n, 4);
	for (size_t i = 0; i < 4; i++)
		cr_expect_str_eq(l.v[i].image, want[i]);
	cr_expect_eq(l.v[1].roles, GK_POLICY_IMAGE_MODULE | GK_POLICY_IMAGE_SIGNED);
	cr_expect_eq(l.v[1].n_kernels, 1, "a and b ('+' trimmed) share one kernel");
	cr_expect_eq(l.v[2].roles, GK_POLICY_IMAGE_UNSIGNED);
	cr_expect_str_eq(l.v[2].sources[0], "spec.kernelModule.sign.unsignedImage");
	cr_expect_eq(l.v[0].roles, GK_POLICY_IMAGE_OPERAND);
	/* c: no mapping; d: not selected (arm64); e: a kernel KMM cannot template */
	cr_assert_eq(l.n_unmapped, 2);
	cr_expect_str_eq(l.unmapped[0].node, "c");
	cr_expect_str_eq(l.unmapped[0].reason, "no kernelMapping matches its kernel");
	cr_expect_str_eq(l.unmapped[1].node, "e");
	cr_expect_str_eq(l.unmapped[1].reason, "invalid kernel version 6.9: expected at least three components (major.minor.patch)");
	gk_policy_images_free(&l);
	for (size_t i = 0; i < 5; i++)
		gk_kobj_free(nodes[i]);
	gk_kobj_free(cp);
	cJSON_Delete(j);
}
