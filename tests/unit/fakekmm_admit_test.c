/* fake-kmm admission rules: every rule and message of KMM's Module webhook,
 * table-driven after KMM's own internal/webhook/module_test.go cases. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/fake-kmm/fakekmm.h"

#define META "\"metadata\":{\"name\":\"name\",\"namespace\":\"ns\"}"
#define MOD(spec) "{" META ",\"spec\":" spec "}"
#define ML(container) "{\"selector\":{},\"moduleLoader\":{\"container\":" container "}}"
#define KM "\"kernelMappings\":[{\"regexp\":\"^.+$\",\"containerImage\":\"img:tag\"}]"
#define MP "\"modprobe\":{\"moduleName\":\"xe\"}"
#define VALID MOD(ML("{" MP "," KM "}"))
#define TOL(t) MOD("{\"selector\":{},\"tolerations\":[" t "]}")
#define MPROBE(mp) MOD(ML("{\"modprobe\":" mp "," KM "}"))
#define CONT(c) MOD(ML("{" MP "," c "}"))

typedef struct tcase {
	const char *name;
	const char *obj;
	int want;           /* GK_POLICY_KMM_* */
	const char *msg;    /* exact message, or NULL */
	const char *substr; /* message substring, or NULL */
} tcase;

static const fk_kube_version k132 = { 1, 32 }, k133 = { 1, 33 }, k134 = { 1, 34 }, k135 = { 1, 35 },
			     k20 = { 2, 0 }, k099 = { 0, 99 };

static void run(const tcase *t, size_t n, const fk_kube_version *kv)
{
	for (size_t i = 0; i < n; i++) {
		cJSON *o = cJSON_Parse(t[i].obj);
		cr_assert_not_null(o, "case %s: bad test JSON", t[i].name);
		char msg[4096];
		int r = gk_policy_kmm_admit_json(o, NULL, kv, msg, sizeof msg);
		cr_expect_eq(r, t[i].want, "case %s: got %d (%s), want %d", t[i].name, r, msg, t[i].want);
		if (t[i].msg)
			cr_expect_str_eq(msg, t[i].msg, "case %s", t[i].name);
		if (t[i].substr)
			cr_expect(strstr(msg, t[i].substr) != NULL, "case %s: '%s' lacks '%s'", t[i].name, msg, t[i].substr);
		cJSON_Delete(o);
	}
}
#define RUN(cases, kv) run(cases, sizeof cases / sizeof cases[0], kv)

Test(admit, valid_module_and_no_loader)
{
	static const tcase c[] = {
		{ "valid", VALID, GK_POLICY_KMM_ALLOW, "", NULL },
		{ "no moduleLoader", MOD("{\"selector\":{}}"), GK_POLICY_KMM_ALLOW, "", NULL },
		{ "moduleLoader null", MOD("{\"selector\":{},\"moduleLoader\":null}"), GK_POLICY_KMM_ALLOW, "", NULL },
		{ "no kernel mappings (the CRD rejects it, not the webhook)", MOD(ML("{" MP "}")), GK_POLICY_KMM_ALLOW, "", NULL },
		{ "literal", CONT("\"kernelMappings\":[{\"literal\":\"6.1.0\",\"containerImage\":\"img@sha256:abc\"}]"),
		  GK_POLICY_KMM_ALLOW, "", NULL },
		{ "top-level image, mapping image empty",
		  CONT("\"containerImage\":\"host:5000/img\",\"kernelMappings\":[{\"literal\":\"6.1.0\",\"containerImage\":\"\"}]"),
		  GK_POLICY_KMM_ALLOW, "", NULL },
	};
	RUN(c, &k132);
}

Test(admit, name_length)
{
	static const tcase c[] = {
		{ "name/ns", VALID, GK_POLICY_KMM_ALLOW, "", NULL },
		{ "21+21", "{\"metadata\":{\"name\":\"aaaaaaaaaaaaaaaaaaaaa\",\"namespace\":\"bbbbbbbbbbbbbbbbbbbbb\"},\"spec\":{\"selector\":{}}}",
		  GK_POLICY_KMM_DENY,
		  "module name and namespace have a combined length of 42 characters, which exceeds the maximum of 41 when version is set",
		  NULL },
		{ "20+21 fits", "{\"metadata\":{\"name\":\"aaaaaaaaaaaaaaaaaaaa\",\"namespace\":\"bbbbbbbbbbbbbbbbbbbbb\"},\"spec\":{\"selector\":{}}}",
		  GK_POLICY_KMM_ALLOW, "", NULL },
	};
	RUN(c, &k132);
}

Test(admit, tolerations)
{
	static const tcase c[] = {
		{ "empty list", TOL(""), GK_POLICY_KMM_ALLOW, "", NULL },
		{ "invalid effect", TOL("{\"key\":\"k\",\"operator\":\"Equal\",\"value\":\"v\",\"effect\":\"Bogus\"}"), GK_POLICY_KMM_DENY,
		  "failed to validate Module's tolerations: Toleration[0] invalid effect 'Bogus', allowed values are ['NoSchedule', 'PreferNoSchedule', 'NoExecute']",
		  NULL },
		{ "invalid operator", TOL("{\"key\":\"k\",\"operator\":\"Lt\",\"value\":\"1\"}"), GK_POLICY_KMM_DENY,
		  "failed to validate Module's tolerations: Toleration[0] invalid operator 'Lt', allowed values are ['Equal', 'Exists']",
		  NULL },
		{ "Exists with value", TOL("{\"key\":\"k\",\"operator\":\"Exists\",\"value\":\"v\"}"), GK_POLICY_KMM_DENY,
		  "failed to validate Module's tolerations: Toleration[0] value must be empty when operator is 'Exists'", NULL },
		{ "all valid effects",
		  TOL("{\"key\":\"a\",\"effect\":\"NoSchedule\"},{\"key\":\"b\",\"operator\":\"Exists\",\"effect\":\"PreferNoSchedule\"},"
		      "{\"key\":\"c\",\"operator\":\"Equal\",\"value\":\"x\",\"effect\":\"NoExecute\"},{\"operator\":\"Exists\"}"),
		  GK_POLICY_KMM_ALLOW, "", NULL },
		{ "invalid key", TOL("{\"key\":\"-bad\",\"operator\":\"Exists\"}"), GK_POLICY_KMM_DENY,
		  "failed to validate Module's tolerations: Toleration[0] invalid key '-bad': name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
		  NULL },
		{ "invalid key prefix", TOL("{\"key\":\"Bad_Prefix/x\",\"operator\":\"Exists\"}"), GK_POLICY_KMM_DENY, NULL,
		  "Toleration[0] invalid key 'Bad_Prefix/x': prefix part a lowercase RFC 1123 subdomain" },
		{ "empty key, invalid operator", TOL("{\"operator\":\"Equal\"}"), GK_POLICY_KMM_DENY,
		  "failed to validate Module's tolerations: Toleration[0] operator must be 'Exists' when key is empty", NULL },
		{ "tolerationSeconds without NoExecute", TOL("{\"key\":\"k\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\",\"tolerationSeconds\":5}"),
		  GK_POLICY_KMM_DENY,
		  "failed to validate Module's tolerations: Toleration[0] effect must be 'NoExecute' when tolerationSeconds is set", NULL },
		{ "tolerationSeconds with NoExecute", TOL("{\"key\":\"k\",\"operator\":\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":5}"),
		  GK_POLICY_KMM_ALLOW, "", NULL },
		{ "Equal with invalid value", TOL("{\"key\":\"k\",\"operator\":\"Equal\",\"value\":\"a b\"}"), GK_POLICY_KMM_DENY,
		  "failed to validate Module's tolerations: Toleration[0] invalid value 'a b' for Equal operator a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
		  NULL },
		{ "second toleration index", TOL("{\"operator\":\"Exists\"},{\"key\":\"k\",\"operator\":\"Gt\"}"), GK_POLICY_KMM_DENY, NULL,
		  "Toleration[1] invalid operator 'Gt'" },
		{ "tolerations before moduleLoader", MOD("{\"selector\":{},\"tolerations\":[{\"operator\":\"Equal\"}],\"moduleLoader\":{\"container\":{\"modprobe\":{}}}}"),
		  GK_POLICY_KMM_DENY, NULL, "failed to validate Module's tolerations" },
	};
	RUN(c, &k132);
}

#define DRA(d) MOD("{\"selector\":{},\"dra\":" d "}")
Test(admit, dra)
{
	static const tcase ok[] = {
		{ "valid", DRA("{\"driverName\":\"gpu.intel.com\",\"deviceClasses\":[{\"name\":\"a\"},{\"name\":\"b.c\"}]}"),
		  GK_POLICY_KMM_ALLOW, "", NULL },
		{ "empty driverName", DRA("{\"driverName\":\"\"}"), GK_POLICY_KMM_DENY, "failed to validate DRA: spec.dra.driverName is required", NULL },
		{ "invalid driverName", DRA("{\"driverName\":\"Bad_Name\"}"), GK_POLICY_KMM_DENY,
		  "failed to validate DRA: spec.dra.driverName \"Bad_Name\" is not a valid DNS subdomain: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
		  NULL },
		{ "duplicate class", DRA("{\"driverName\":\"d\",\"deviceClasses\":[{\"name\":\"a\"},{\"name\":\"a\"}]}"), GK_POLICY_KMM_DENY,
		  "failed to validate DRA: spec.dra.deviceClasses[1].name \"a\" is a duplicate", NULL },
		{ "invalid class", DRA("{\"driverName\":\"d\",\"deviceClasses\":[{\"name\":\"A\"}]}"), GK_POLICY_KMM_DENY, NULL,
		  "failed to validate DRA: spec.dra.deviceClasses[0].name \"A\" is not a valid DNS subdomain" },
		{ "empty class name", DRA("{\"driverName\":\"d\",\"deviceClasses\":[{}]}"), GK_POLICY_KMM_DENY,
		  "failed to validate DRA: spec.dra.deviceClasses[0].name is required", NULL },
	};
	RUN(ok, &k134);
	const char *v = DRA("{\"driverName\":\"gpu.intel.com\"}");
	const fk_kube_version *yes[] = { &k134, &k135, &k20, NULL };
	const fk_kube_version *no[] = { &k133, &k099, &k132 };
	cJSON *o = cJSON_Parse(v);
	char msg[2048];
	for (size_t i = 0; i < 4; i++)
		cr_expect_eq(gk_policy_kmm_admit_json(o, NULL, yes[i], msg, sizeof msg), GK_POLICY_KMM_ALLOW, "%s", msg);
	for (size_t i = 0; i < 3; i++)
		cr_expect_eq(gk_policy_kmm_admit_json(o, NULL, no[i], msg, sizeof msg), GK_POLICY_KMM_DENY);
	gk_policy_kmm_admit_json(o, NULL, &k133, msg, sizeof msg);
	cr_expect_str_eq(msg, "failed to validate DRA: spec.dra requires Kubernetes 1.34 or later; current cluster version is 1.33");
	cJSON_Delete(o);
}

#define VOL(p) MOD("{\"selector\":{},\"devicePlugin\":{\"container\":{\"image\":\"dp:1\"},\"volumes\":[{\"name\":\"v\",\"hostPath\":{\"path\":\"" p "\"}}]}}")
Test(admit, host_path_volumes)
{
	static const tcase c[] = {
		{ "empty", MOD("{\"selector\":{},\"devicePlugin\":{\"container\":{\"image\":\"dp:1\"},\"volumes\":[]}}"), GK_POLICY_KMM_ALLOW, "", NULL },
		{ "not hostPath", MOD("{\"selector\":{},\"devicePlugin\":{\"container\":{\"image\":\"dp:1\"},\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}}]}}"),
		  GK_POLICY_KMM_ALLOW, "", NULL },
		{ "/dev", VOL("/dev"), GK_POLICY_KMM_ALLOW, "", NULL },
		{ "/sys/class", VOL("/sys/class"), GK_POLICY_KMM_ALLOW, "", NULL },
		{ "/var/lib/x", VOL("/var/lib/x"), GK_POLICY_KMM_ALLOW, "", NULL },
		{ "/opt/x", VOL("/opt/x"), GK_POLICY_KMM_ALLOW, "", NULL },
		{ "/run/x", VOL("/run/x"), GK_POLICY_KMM_ALLOW, "", NULL },
		{ "redundant slashes", VOL("//sys///class/"), GK_POLICY_KMM_ALLOW, "", NULL },
		{ "/etc", VOL("/etc"), GK_POLICY_KMM_DENY,
		  "failed to validate device plugin volumes: spec.devicePlugin.volumes[0]: hostPath \"/etc\" is not allowed; only /dev, /sys, /var, /opt and /run paths are permitted",
		  NULL },
		{ "/devious", VOL("/devious"), GK_POLICY_KMM_DENY, NULL, "hostPath \"/devious\" is not allowed" },
		{ "traversal", VOL("/dev/../etc"), GK_POLICY_KMM_DENY, NULL, "hostPath \"/dev/../etc\" is not allowed" },
		{ "relative", VOL("dev"), GK_POLICY_KMM_DENY, NULL, "is not allowed" },
		{ "root", VOL("/"), GK_POLICY_KMM_DENY, NULL, "is not allowed" },
		{ "dra volumes", MOD("{\"selector\":{},\"dra\":{\"driverName\":\"d\",\"volumes\":[{\"name\":\"v\",\"hostPath\":{\"path\":\"/etc\"}}]}}"),
		  GK_POLICY_KMM_DENY, NULL, "spec.dra.volumes[0]: hostPath \"/etc\" is not allowed" },
	};
	RUN(c, &k134);
}

Test(admit, container_and_kernel_mappings)
{
	static const tcase c[] = {
		{ "top image without tag", CONT("\"containerImage\":\"img\"," KM), GK_POLICY_KMM_DENY,
		  "failed to validate kernel mappings: failed to validate image format: container image must explicitely set a tag or digest; got: img",
		  NULL },
		{ "regexp and literal", CONT("\"kernelMappings\":[{\"regexp\":\"a\",\"literal\":\"b\",\"containerImage\":\"i:t\"}]"),
		  GK_POLICY_KMM_DENY, "failed to validate kernel mappings: regexp and literal are mutually exclusive properties at kernelMappings[0]", NULL },
		{ "neither", CONT("\"kernelMappings\":[{\"literal\":\"6\",\"containerImage\":\"i:t\"},{\"containerImage\":\"i:t\"}]"),
		  GK_POLICY_KMM_DENY, "failed to validate kernel mappings: regexp or literal must be set at kernelMappings[1]", NULL },
		{ "invalid regexp", CONT("\"kernelMappings\":[{\"regexp\":\"(abc\",\"containerImage\":\"i:t\"}]"), GK_POLICY_KMM_DENY,
		  "failed to validate kernel mappings: invalid regexp at index 0: error parsing regexp: missing closing ): `(abc`", NULL },
		{ "look-around is not RE2", CONT("\"kernelMappings\":[{\"regexp\":\"^6(?=\\\\.1)\",\"containerImage\":\"i:t\"}]"),
		  GK_POLICY_KMM_DENY, "failed to validate kernel mappings: invalid regexp at index 0: error parsing regexp: invalid or unsupported Perl syntax: `(?=`", NULL },
		{ "backreference", CONT("\"kernelMappings\":[{\"regexp\":\"(a)\\\\1\",\"containerImage\":\"i:t\"}]"),
		  GK_POLICY_KMM_DENY, "failed to validate kernel mappings: invalid regexp at index 0: error parsing regexp: invalid escape sequence: `\\1`", NULL },
		{ "missing image", CONT("\"kernelMappings\":[{\"literal\":\"6\"}]"), GK_POLICY_KMM_DENY,
		  "failed to validate kernel mappings: missing spec.moduleLoader.container.kernelMappings[0].containerImage", NULL },
		{ "mapping image without tag", CONT("\"kernelMappings\":[{\"literal\":\"6\",\"containerImage\":\"quay.io/img\"}]"),
		  GK_POLICY_KMM_DENY,
		  "failed to validate kernel mappings: failed to validate image format: container image must explicitely set a tag or digest; got: quay.io/img",
		  NULL },
		{ "in-tree both in container", CONT("\"inTreeModulesToRemove\":[\"a\"],\"inTreeModuleToRemove\":\"b\"," KM), GK_POLICY_KMM_DENY,
		  "failed to validate kernel mappings: only one of the Container's fields: InTreeModulesToRemove or InTreeModuleToRemove can be defined",
		  NULL },
		{ "in-tree empty list counts as set", CONT("\"inTreeModulesToRemove\":[],\"inTreeModuleToRemove\":\"b\"," KM), GK_POLICY_KMM_DENY,
		  NULL, "only one of the Container's fields" },
		{ "in-tree both in mapping",
		  CONT("\"kernelMappings\":[{\"literal\":\"6\",\"containerImage\":\"i:t\",\"inTreeModulesToRemove\":[\"a\"],\"inTreeModuleToRemove\":\"b\"}]"),
		  GK_POLICY_KMM_DENY,
		  "failed to validate kernel mappings: only one of the KernelMapping fields: InTreeModulesToRemove or InTreeModuleToRemove can be defined",
		  NULL },
		{ "in-tree list in container, single in mapping",
		  CONT("\"inTreeModulesToRemove\":[\"a\"],\"kernelMappings\":[{\"literal\":\"6\",\"containerImage\":\"i:t\",\"inTreeModuleToRemove\":\"b\"}]"),
		  GK_POLICY_KMM_DENY,
		  "failed to validate kernel mappings: only one type if field (InTreeModuleToRemove or InTreeModulesToRemove) can be defined in KenrelMapping or Container",
		  NULL },
		{ "in-tree single in container, list in mapping",
		  CONT("\"inTreeModuleToRemove\":\"a\",\"kernelMappings\":[{\"literal\":\"6\",\"containerImage\":\"i:t\",\"inTreeModulesToRemove\":[\"b\"]}]"),
		  GK_POLICY_KMM_DENY, NULL, "only one type if field" },
		{ "in-tree list in both is fine",
		  CONT("\"inTreeModulesToRemove\":[\"a\"],\"kernelMappings\":[{\"literal\":\"6\",\"containerImage\":\"i:t\",\"inTreeModulesToRemove\":[\"b\"]}]"),
		  GK_POLICY_KMM_ALLOW, "", NULL },
	};
	RUN(c, &k132);
}

Test(admit, modprobe)
{
	static const tcase c[] = {
		{ "neither moduleName nor rawArgs", MPROBE("{}"), GK_POLICY_KMM_DENY,
		  "failed to validate modprobe: load and unload rawArgs must be set when moduleName is unset", NULL },
		{ "rawArgs.load empty", MPROBE("{\"rawArgs\":{\"load\":[],\"unload\":[\"-r\",\"xe\"]}}"), GK_POLICY_KMM_DENY,
		  "failed to validate modprobe: load and unload rawArgs must be set when moduleName is unset", NULL },
		{ "rawArgs.unload empty", MPROBE("{\"rawArgs\":{\"load\":[\"xe\"]}}"), GK_POLICY_KMM_DENY,
		  "failed to validate modprobe: load and unload rawArgs must be set when moduleName is unset", NULL },
		{ "rawArgs with moduleName", MPROBE("{\"moduleName\":\"xe\",\"rawArgs\":{\"load\":[\"xe\"],\"unload\":[\"-r\",\"xe\"]}}"),
		  GK_POLICY_KMM_DENY, "failed to validate modprobe: rawArgs cannot be set when moduleName is set", NULL },
		{ "rawArgs only", MPROBE("{\"rawArgs\":{\"load\":[\"xe\"],\"unload\":[\"-r\",\"xe\"]}}"), GK_POLICY_KMM_ALLOW, "", NULL },
		{ "moduleName only", MPROBE("{\"moduleName\":\"xe\"}"), GK_POLICY_KMM_ALLOW, "", NULL },
		{ "loading order of one", MPROBE("{\"moduleName\":\"xe\",\"modulesLoadingOrder\":[\"xe\"]}"), GK_POLICY_KMM_DENY,
		  "failed to validate modprobe: if a loading order is defined, at least two values must be defined", NULL },
		{ "loading order empty", MPROBE("{\"moduleName\":\"xe\",\"modulesLoadingOrder\":[]}"), GK_POLICY_KMM_DENY,
		  "failed to validate modprobe: if a loading order is defined, at least two values must be defined", NULL },
		{ "loading order without moduleName",
		  MPROBE("{\"rawArgs\":{\"load\":[\"a\"],\"unload\":[\"a\"]},\"modulesLoadingOrder\":[\"a\",\"b\"]}"), GK_POLICY_KMM_DENY,
		  "failed to validate modprobe: if a loading order is defined, moduleName must be set", NULL },
		{ "first is not moduleName", MPROBE("{\"moduleName\":\"xe\",\"modulesLoadingOrder\":[\"a\",\"xe\"]}"), GK_POLICY_KMM_DENY,
		  "failed to validate modprobe: if a loading order is defined, the first element must be moduleName", NULL },
		{ "duplicates", MPROBE("{\"moduleName\":\"xe\",\"modulesLoadingOrder\":[\"xe\",\"a\",\"a\"]}"), GK_POLICY_KMM_DENY,
		  "failed to validate modprobe: \"a\": duplicate value in the loading order list", NULL },
		{ "valid order", MPROBE("{\"moduleName\":\"xe\",\"modulesLoadingOrder\":[\"xe\",\"a\",\"b\"]}"), GK_POLICY_KMM_ALLOW, "", NULL },
	};
	RUN(c, &k132);
}

Test(admit, files_to_sign)
{
	static const tcase c[] = {
		{ "global sign empty", CONT(KM ",\"sign\":{\"keySecret\":{\"name\":\"k\"},\"certSecret\":{\"name\":\"c\"}}"), GK_POLICY_KMM_DENY,
		  "global Sign: filesToSign is required when Sign is set", NULL },
		{ "outside default /opt", CONT(KM ",\"sign\":{\"filesToSign\":[\"/lib/modules/x.ko\"]}"), GK_POLICY_KMM_DENY,
		  "global Sign: filesToSign[\"/lib/modules/x.ko\"] must be under dirName \"/opt\"", NULL },
		{ "under /opt", CONT(KM ",\"sign\":{\"filesToSign\":[\"/opt/lib/modules/${KERNEL_FULL_VERSION}/x.ko\"]}"), GK_POLICY_KMM_ALLOW, "", NULL },
		{ "mapping sign outside dirName",
		  MOD(ML("{\"modprobe\":{\"moduleName\":\"xe\",\"dirName\":\"/d\"},\"kernelMappings\":[{\"literal\":\"6\",\"containerImage\":\"i:t\"},"
			 "{\"literal\":\"7\",\"containerImage\":\"i:t\",\"sign\":{\"filesToSign\":[\"/dx/a.ko\"]}}]}")),
		  GK_POLICY_KMM_DENY, "kernelMappings[1].Sign: filesToSign[\"/dx/a.ko\"] must be under dirName \"/d\"", NULL },
	};
	RUN(c, &k132);
}

Test(admit, garbage_is_bad_not_crash)
{
	static const tcase c[] = {
		{ "spec string", "{" META ",\"spec\":\"x\"}", GK_POLICY_KMM_BAD, "cannot decode Module: spec must be an object", NULL },
		{ "name number", "{\"metadata\":{\"name\":5},\"spec\":{}}", GK_POLICY_KMM_BAD, NULL, "metadata.name must be a string" },
		{ "tolerations object", MOD("{\"tolerations\":{}}"), GK_POLICY_KMM_BAD, NULL, "spec.tolerations must be an array" },
		{ "toleration not object", MOD("{\"tolerations\":[1]}"), GK_POLICY_KMM_BAD, NULL, "spec.tolerations[0] must be an object" },
		{ "mappings string", CONT("\"kernelMappings\":\"x\""), GK_POLICY_KMM_BAD, NULL, "kernelMappings must be an array" },
		{ "regexp number", CONT("\"kernelMappings\":[{\"regexp\":1}]"), GK_POLICY_KMM_BAD, NULL, "regexp must be a string" },
		{ "loading order ints", MPROBE("{\"moduleName\":\"xe\",\"modulesLoadingOrder\":[1,2]}"), GK_POLICY_KMM_BAD, NULL, "must be a string" },
		{ "array", "[]", GK_POLICY_KMM_BAD, NULL, "JSON object" },
	};
	RUN(c, &k132);
	char msg[64];
	cr_expect_eq(gk_policy_kmm_admit_json(NULL, NULL, NULL, msg, sizeof msg), GK_POLICY_KMM_BAD);
	/* tiny buffers truncate, never overflow */
	cJSON *o = cJSON_Parse(TOL("{\"key\":\"-bad\",\"operator\":\"Exists\"}"));
	cr_expect_eq(gk_policy_kmm_admit_json(o, NULL, NULL, msg, sizeof msg), GK_POLICY_KMM_DENY);
	cr_expect_eq(strlen(msg), sizeof msg - 1);
	cJSON_Delete(o);
}

#define VER(v) MOD(ML("{" MP "," KM ",\"version\":\"" v "\"}"))
Test(admit, update_version_toggle)
{
	static const struct {
		const char *old, *new_;
		int want;
	} c[] = {
		{ VER("v1"), VER(""), GK_POLICY_KMM_DENY },
		{ VER(""), VER("v2"), GK_POLICY_KMM_DENY },
		{ VER(""), VER(""), GK_POLICY_KMM_ALLOW },
		{ VER("v1"), VER("v2"), GK_POLICY_KMM_ALLOW },
		{ MOD("{\"selector\":{}}"), VER("v2"), GK_POLICY_KMM_ALLOW }, /* old without moduleLoader: no check */
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		cJSON *o = cJSON_Parse(c[i].old), *n = cJSON_Parse(c[i].new_);
		char msg[1024];
		cr_expect_eq(gk_policy_kmm_admit_json(n, o, NULL, msg, sizeof msg), c[i].want, "case %zu: %s", i, msg);
		if (c[i].want == GK_POLICY_KMM_DENY)
			cr_expect_str_eq(msg, "cannot update to or from an empty version; please delete the Module and create it again");
		cJSON_Delete(o);
		cJSON_Delete(n);
	}
	/* update also runs every create rule */
	cJSON *o = cJSON_Parse(VALID), *n = cJSON_Parse(CONT("\"kernelMappings\":[{\"regexp\":\"(\",\"containerImage\":\"i:t\"}]"));
	char msg[1024];
	cr_expect_eq(gk_policy_kmm_admit_json(n, o, NULL, msg, sizeof msg), GK_POLICY_KMM_DENY);
	cr_expect(strstr(msg, "failed to validate kernel mappings") != NULL);
	cJSON_Delete(o);
	cJSON_Delete(n);
}

Test(admit, apimachinery_validation)
{
	char m[2048];
	cr_expect_eq(gk_policy_check_qualified_name("example.com/My_Name-1", m, sizeof m), 0);
	cr_expect_eq(gk_policy_check_qualified_name("a/b/c", m, sizeof m), -1);
	cr_expect(strstr(m, "a qualified name must consist of") == m);
	cr_expect(strstr(m, "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')") != NULL);
	cr_expect_eq(gk_policy_check_qualified_name("/x", m, sizeof m), -1);
	cr_expect_str_eq(m, "prefix part must be non-empty");
	cr_expect_eq(gk_policy_check_qualified_name("p/", m, sizeof m), -1);
	cr_expect_str_eq(m, "name part must be non-empty");
	char long_[80];
	memset(long_, 'a', 64);
	long_[64] = 0;
	cr_expect_eq(gk_policy_check_qualified_name(long_, m, sizeof m), -1);
	cr_expect_str_eq(m, "name part must be no more than 63 characters");
	cr_expect_eq(gk_policy_check_label_value("", m, sizeof m), 0);
	cr_expect_eq(gk_policy_check_label_value(long_, m, sizeof m), -1);
	cr_expect_str_eq(m, "must be no more than 63 characters");
	cr_expect_eq(gk_policy_check_dns1123_subdomain("a.b-c.d", m, sizeof m), 0);
	cr_expect_eq(gk_policy_check_dns1123_subdomain("a..b", m, sizeof m), -1);
	cr_expect_eq(gk_policy_check_dns1123_subdomain("-a", m, sizeof m), -1);
	cr_expect_eq(gk_policy_check_dns1123_subdomain("a-", m, sizeof m), -1);
}

Test(admit, re2_go_semantics)
{
	char m[256];
	cr_expect_eq(gk_policy_re2go_match("^6\\.1\\.", "6.1.0-18-amd64"), 1);
	cr_expect_eq(gk_policy_re2go_match("amd64", "6.1.0-18-amd64"), 1); /* unanchored */
	cr_expect_eq(gk_policy_re2go_match("^amd64", "6.1.0-18-amd64"), 0);
	cr_expect_eq(gk_policy_re2go_match("(", "x"), -1);
	cr_expect_eq(gk_policy_re2go_check("abc)", m, sizeof m), 1);
	cr_expect_str_eq(m, "error parsing regexp: unexpected ): `abc)`");
	cr_expect_eq(gk_policy_re2go_check("[a", m, sizeof m), 1);
	cr_expect_str_eq(m, "error parsing regexp: missing closing ]: `[a`");
	cr_expect_eq(gk_policy_re2go_check("(?P<n>a)", m, sizeof m), 0);
	cr_expect_eq(gk_policy_re2go_check("", m, sizeof m), 0);
}

Test(admit, re2_match_keeps_answers_through_its_cache)
{
	/* the compiled patterns are kept in a small ring: more patterns than
	 * slots, each asked again after the others pushed it out, an invalid one
	 * among them, a pattern that differs from a kept one in its last byte */
	char pat[40][32], text[32];
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 40; i++) {
			snprintf(pat[i], sizeof pat[i], "^6\\.%d\\.", i);
			snprintf(text, sizeof text, "6.%d.0-18-amd64", i);
			cr_assert_eq(gk_policy_re2go_match(pat[i], text), 1, "%s on %s", pat[i], text);
			snprintf(text, sizeof text, "6.%d.0-18-amd64", i + 100);
			cr_assert_eq(gk_policy_re2go_match(pat[i], text), 0, "%s on %s", pat[i], text);
			cr_assert_eq(gk_policy_re2go_match("(", "x"), -1);
		}
		cr_assert_eq(gk_policy_re2go_match("^6\\.1\\.", "6.1.0"), 1);
		cr_assert_eq(gk_policy_re2go_match("^6\\.1\\.$", "6.1.0"), 0);
		cr_assert_eq(gk_policy_re2go_match("^6\\.1\\.", "6.10.0"), 0);
	}
}
