/* lib/policy: KMM's Module admission rules (internal/webhook/module.go at the
 * HEAD described in the KMM notes, §1.3): same order, first error only, same
 * messages. Pure: JSON in, verdict and message out. The one implementation:
 * fake-kmm's webhook serves it, tests and the fuzzer check that every Module
 * gpukmm renders passes it. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gpukmm/policy.h"

#define DRA_MIN_MAJOR 1
#define DRA_MIN_MINOR 34

/* snprintf that truncates silently: messages are bounded on purpose. */
static void emsg(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void emsg(char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out, cap, fmt, ap);
	va_end(ap);
}

typedef struct actx {
	int bad;           /* a field has the wrong JSON type */
	char *msg;
	size_t cap;
} actx;

static void set_bad(actx *c, const char *path, const char *want)
{
	if (!c->bad)
		emsg(c->msg, c->cap, "cannot decode Module: %s must be %s", path, want);
	c->bad = 1;
}

/* Child of obj (NULL when absent or JSON null). obj may be NULL. */
static const cJSON *child(const cJSON *obj, const char *key)
{
	if (!obj || !cJSON_IsObject(obj))
		return NULL;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	return (v && !cJSON_IsNull(v)) ? v : NULL;
}

static const char *str(actx *c, const cJSON *obj, const char *key, const char *path)
{
	const cJSON *v = child(obj, key);
	if (!v)
		return "";
	if (!cJSON_IsString(v)) {
		set_bad(c, path, "a string");
		return "";
	}
	return v->valuestring;
}

/* Child of a given JSON type (NULL when absent or null); another type marks c bad. */
static const cJSON *typed(actx *c, const cJSON *obj, const char *key, const char *path,
			  cJSON_bool (*is)(const cJSON *const), const char *want)
{
	const cJSON *v = child(obj, key);
	if (v && !is(v)) {
		set_bad(c, path, want);
		return NULL;
	}
	return v;
}

static const cJSON *obj_of(actx *c, const cJSON *obj, const char *key, const char *path)
{
	return typed(c, obj, key, path, cJSON_IsObject, "an object");
}

static const cJSON *arr_of(actx *c, const cJSON *obj, const char *key, const char *path)
{
	return typed(c, obj, key, path, cJSON_IsArray, "an array");
}

static int has_char(const char *s, char a, char b)
{
	return strchr(s, a) || strchr(s, b);
}

/* Go's %q for the plain strings we quote. */
static void quote(char *out, size_t cap, const char *s)
{
	size_t o = 0;
	if (cap < 3) {
		if (cap)
			out[0] = 0;
		return;
	}
	out[o++] = '"';
	for (; *s && o + 3 < cap; s++) {
		if (*s == '"' || *s == '\\')
			out[o++] = '\\';
		out[o++] = *s;
	}
	out[o++] = '"';
	out[o] = 0;
}

/* ---- tolerations --------------------------------------------------------- */
static int check_tolerations(actx *c, const cJSON *tols, char *e, size_t ecap)
{
	char vm[1024];
	int i = 0;
	const cJSON *t;
	cJSON_ArrayForEach(t, tols) {
		char p[64];
		emsg(p, sizeof p, "spec.tolerations[%d]", i);
		if (!cJSON_IsObject(t)) {
			set_bad(c, p, "an object");
			return 1;
		}
		const char *key = str(c, t, "key", "spec.tolerations[].key");
		const char *op = str(c, t, "operator", "spec.tolerations[].operator");
		const char *value = str(c, t, "value", "spec.tolerations[].value");
		const char *effect = str(c, t, "effect", "spec.tolerations[].effect");
		const cJSON *secs = child(t, "tolerationSeconds");
		if (secs && !cJSON_IsNumber(secs))
			set_bad(c, "spec.tolerations[].tolerationSeconds", "an integer");
		if (c->bad)
			return 1;
		if (*key && gk_policy_check_qualified_name(key, vm, sizeof vm)) {
			emsg(e, ecap, "Toleration[%d] invalid key '%s': %s", i, key, vm);
			return 1;
		}
		if (!*key && strcmp(op, "Exists") != 0) {
			emsg(e, ecap, "Toleration[%d] operator must be 'Exists' when key is empty", i);
			return 1;
		}
		if (secs && strcmp(effect, "NoExecute") != 0) {
			emsg(e, ecap, "Toleration[%d] effect must be 'NoExecute' when tolerationSeconds is set", i);
			return 1;
		}
		if (!*op || !strcmp(op, "Equal")) {
			if (gk_policy_check_label_value(value, vm, sizeof vm)) {
				emsg(e, ecap, "Toleration[%d] invalid value '%s' for Equal operator %s", i, value, vm);
				return 1;
			}
		} else if (!strcmp(op, "Exists")) {
			if (*value) {
				emsg(e, ecap, "Toleration[%d] value must be empty when operator is 'Exists'", i);
				return 1;
			}
		} else {
			emsg(e, ecap, "Toleration[%d] invalid operator '%s', allowed values are ['Equal', 'Exists']", i, op);
			return 1;
		}
		if (*effect && strcmp(effect, "NoSchedule") && strcmp(effect, "PreferNoSchedule") &&
		    strcmp(effect, "NoExecute")) {
			emsg(e, ecap,
				 "Toleration[%d] invalid effect '%s', allowed values are ['NoSchedule', 'PreferNoSchedule', 'NoExecute']",
				 i, effect);
			return 1;
		}
		i++;
	}
	return 0;
}

/* ---- DRA ----------------------------------------------------------------- */
static int check_dra(actx *c, const cJSON *dra, const gk_policy_kube_version *kv, char *e, size_t ecap)
{
	char vm[1024], q[600];
	if (kv && (kv->major < DRA_MIN_MAJOR || (kv->major == DRA_MIN_MAJOR && kv->minor < DRA_MIN_MINOR))) {
		emsg(e, ecap, "spec.dra requires Kubernetes %d.%d or later; current cluster version is %d.%d",
			 DRA_MIN_MAJOR, DRA_MIN_MINOR, kv->major, kv->minor);
		return 1;
	}
	const char *driver = str(c, dra, "driverName", "spec.dra.driverName");
	if (c->bad)
		return 1;
	if (!*driver) {
		emsg(e, ecap, "spec.dra.driverName is required");
		return 1;
	}
	if (gk_policy_check_dns1123_subdomain(driver, vm, sizeof vm)) {
		quote(q, sizeof q, driver);
		emsg(e, ecap, "spec.dra.driverName %s is not a valid DNS subdomain: %s", q, vm);
		return 1;
	}
	const cJSON *dcs = arr_of(c, dra, "deviceClasses", "spec.dra.deviceClasses");
	const cJSON *dc;
	int i = 0;
	cJSON_ArrayForEach(dc, dcs) {
		const char *name = str(c, dc, "name", "spec.dra.deviceClasses[].name");
		if (c->bad)
			return 1;
		if (!*name) {
			emsg(e, ecap, "spec.dra.deviceClasses[%d].name is required", i);
			return 1;
		}
		quote(q, sizeof q, name);
		if (gk_policy_check_dns1123_subdomain(name, vm, sizeof vm)) {
			emsg(e, ecap, "spec.dra.deviceClasses[%d].name %s is not a valid DNS subdomain: %s", i, q, vm);
			return 1;
		}
		int j = 0;
		const cJSON *prev;
		cJSON_ArrayForEach(prev, dcs) {
			if (j++ >= i)
				break;
			const cJSON *pn = child(prev, "name");
			if (pn && cJSON_IsString(pn) && !strcmp(pn->valuestring, name)) {
				emsg(e, ecap, "spec.dra.deviceClasses[%d].name %s is a duplicate", i, q);
				return 1;
			}
		}
		i++;
	}
	return 0;
}

/* ---- hostPath volumes ------------------------------------------------------ */
/* Go's filepath.Clean into out (cap >= strlen(p) + 2). */
static void path_clean(const char *p, char *out, size_t cap)
{
	size_t o = 0, n = strlen(p);
	int rooted = p[0] == '/';
	size_t dotdot = 0; /* index in out where .. backtracking must stop */
	size_t i = 0;
	if (cap < n + 2) {
		emsg(out, cap, "%s", "");
		return;
	}
	if (rooted) {
		out[o++] = '/';
		i = 1;
		dotdot = 1;
	}
	while (i < n) {
		if (p[i] == '/') {
			i++;
		} else if (p[i] == '.' && (i + 1 == n || p[i + 1] == '/')) {
			i++;
		} else if (p[i] == '.' && p[i + 1] == '.' && (i + 2 == n || p[i + 2] == '/')) {
			i += 2;
			if (o > dotdot) {
				o--;
				while (o > dotdot && out[o] != '/')
					o--;
			} else if (!rooted) {
				if (o > 0)
					out[o++] = '/';
				out[o++] = '.';
				out[o++] = '.';
				dotdot = o;
			}
		} else {
			if ((rooted && o != 1) || (!rooted && o != 0))
				out[o++] = '/';
			for (; i < n && p[i] != '/'; i++)
				out[o++] = p[i];
		}
	}
	if (o == 0)
		out[o++] = '.';
	out[o] = 0;
}

static int host_path_allowed(const char *p)
{
	static const char *const allowed[] = { "/dev", "/sys", "/var", "/opt", "/run" };
	char clean[4096];
	if (strlen(p) + 2 > sizeof clean)
		return 0;
	path_clean(p, clean, sizeof clean);
	for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++) {
		size_t l = strlen(allowed[i]);
		if (!strncmp(clean, allowed[i], l) && (clean[l] == 0 || clean[l] == '/'))
			return 1;
	}
	return 0;
}

static int check_volumes(actx *c, const cJSON *owner, const char *field, char *e, size_t ecap)
{
	char path[64], q[4200];
	emsg(path, sizeof path, "spec.%s.volumes", field);
	const cJSON *vols = arr_of(c, owner, "volumes", path);
	const cJSON *v;
	int i = 0;
	cJSON_ArrayForEach(v, vols) {
		const cJSON *hp = obj_of(c, v, "hostPath", "spec.*.volumes[].hostPath");
		if (c->bad)
			return 1;
		if (hp) {
			const char *p = str(c, hp, "path", "spec.*.volumes[].hostPath.path");
			if (c->bad)
				return 1;
			if (!host_path_allowed(p)) {
				quote(q, sizeof q, p);
				emsg(e, ecap,
					 "%s[%d]: hostPath %s is not allowed; only /dev, /sys, /var, /opt and /run paths are permitted",
					 path, i, q);
				return 1;
			}
		}
		i++;
	}
	return 0;
}

/* ---- container / kernel mappings -------------------------------------------- */
static int check_image(const char *img, char *e, size_t ecap)
{
	if (!has_char(img, ':', '@')) {
		emsg(e, ecap, "failed to validate image format: container image must explicitely set a tag or digest; got: %s",
			 img);
		return 1;
	}
	return 0;
}

static int check_container(actx *c, const cJSON *cont, char *e, size_t ecap)
{
	char rm[512];
	const cJSON *c_list = arr_of(c, cont, "inTreeModulesToRemove", "spec.moduleLoader.container.inTreeModulesToRemove");
	const char *c_one = str(c, cont, "inTreeModuleToRemove", "spec.moduleLoader.container.inTreeModuleToRemove");
	const char *c_img = str(c, cont, "containerImage", "spec.moduleLoader.container.containerImage");
	const cJSON *maps = arr_of(c, cont, "kernelMappings", "spec.moduleLoader.container.kernelMappings");
	if (c->bad)
		return 1;
	if (c_list && *c_one) {
		emsg(e, ecap, "only one of the Container's fields: InTreeModulesToRemove or InTreeModuleToRemove can be defined");
		return 1;
	}
	if (*c_img && check_image(c_img, e, ecap))
		return 1;
	const cJSON *km;
	int idx = 0;
	cJSON_ArrayForEach(km, maps) {
		if (!cJSON_IsObject(km)) {
			set_bad(c, "spec.moduleLoader.container.kernelMappings[]", "an object");
			return 1;
		}
		const char *re = str(c, km, "regexp", "spec.moduleLoader.container.kernelMappings[].regexp");
		const char *lit = str(c, km, "literal", "spec.moduleLoader.container.kernelMappings[].literal");
		const char *img = str(c, km, "containerImage", "spec.moduleLoader.container.kernelMappings[].containerImage");
		const cJSON *k_list = arr_of(c, km, "inTreeModulesToRemove", "spec.moduleLoader.container.kernelMappings[].inTreeModulesToRemove");
		const char *k_one = str(c, km, "inTreeModuleToRemove", "spec.moduleLoader.container.kernelMappings[].inTreeModuleToRemove");
		if (c->bad)
			return 1;
		if (*re && *lit) {
			emsg(e, ecap, "regexp and literal are mutually exclusive properties at kernelMappings[%d]", idx);
			return 1;
		}
		if (!*re && !*lit) {
			emsg(e, ecap, "regexp or literal must be set at kernelMappings[%d]", idx);
			return 1;
		}
		if (gk_policy_re2go_check(re, rm, sizeof rm) != 0) {
			emsg(e, ecap, "invalid regexp at index %d: %s", idx, rm);
			return 1;
		}
		if (!*img) {
			if (!*c_img) {
				emsg(e, ecap, "missing spec.moduleLoader.container.kernelMappings[%d].containerImage", idx);
				return 1;
			}
		} else if (check_image(img, e, ecap)) {
			return 1;
		}
		if (k_list && *k_one) {
			emsg(e, ecap, "only one of the KernelMapping fields: InTreeModulesToRemove or InTreeModuleToRemove can be defined");
			return 1;
		}
		if ((k_list && *c_one) || (*k_one && c_list)) {
			/* sic: KMM's message has these typos */
			emsg(e, ecap, "only one type if field (InTreeModuleToRemove or InTreeModulesToRemove) can be defined in KenrelMapping or Container");
			return 1;
		}
		idx++;
	}
	return 0;
}

/* ---- modprobe --------------------------------------------------------------- */
static int check_modprobe(actx *c, const cJSON *mp, char *e, size_t ecap)
{
	const char *name = str(c, mp, "moduleName", "spec.moduleLoader.container.modprobe.moduleName");
	const cJSON *raw = obj_of(c, mp, "rawArgs", "spec.moduleLoader.container.modprobe.rawArgs");
	const cJSON *load = arr_of(c, raw, "load", "spec.moduleLoader.container.modprobe.rawArgs.load");
	const cJSON *unload = arr_of(c, raw, "unload", "spec.moduleLoader.container.modprobe.rawArgs.unload");
	const cJSON *order = arr_of(c, mp, "modulesLoadingOrder", "spec.moduleLoader.container.modprobe.modulesLoadingOrder");
	if (c->bad)
		return 1;
	int has_name = *name != 0;
	int has_load = load && cJSON_GetArraySize(load) > 0;
	int has_unload = unload && cJSON_GetArraySize(unload) > 0;
	if (has_name) {
		if (has_load || has_unload) {
			emsg(e, ecap, "rawArgs cannot be set when moduleName is set");
			return 1;
		}
	} else if (!has_load || !has_unload) {
		emsg(e, ecap, "load and unload rawArgs must be set when moduleName is unset");
		return 1;
	}
	if (!order)
		return 0;
	int n = cJSON_GetArraySize(order);
	const cJSON *it;
	cJSON_ArrayForEach(it, order) {
		if (!cJSON_IsString(it)) {
			set_bad(c, "spec.moduleLoader.container.modprobe.modulesLoadingOrder[]", "a string");
			return 1;
		}
	}
	if (n < 2) {
		emsg(e, ecap, "if a loading order is defined, at least two values must be defined");
		return 1;
	}
	if (!has_name) {
		emsg(e, ecap, "if a loading order is defined, moduleName must be set");
		return 1;
	}
	if (strcmp(cJSON_GetArrayItem(order, 0)->valuestring, name) != 0) {
		emsg(e, ecap, "if a loading order is defined, the first element must be moduleName");
		return 1;
	}
	int i = 0;
	cJSON_ArrayForEach(it, order) {
		int j = 0;
		const cJSON *prev;
		cJSON_ArrayForEach(prev, order) {
			if (j++ >= i)
				break;
			if (!strcmp(prev->valuestring, it->valuestring)) {
				char q[600];
				quote(q, sizeof q, it->valuestring);
				emsg(e, ecap, "%s: duplicate value in the loading order list", q);
				return 1;
			}
		}
		i++;
	}
	return 0;
}

/* ---- signing ------------------------------------------------------------------ */
static int check_sign(actx *c, const cJSON *sign, const char *dir, char *e, size_t ecap)
{
	char q1[600], q2[600];
	if (!sign)
		return 0;
	if (!cJSON_IsObject(sign)) {
		set_bad(c, "spec.moduleLoader.container.sign", "an object");
		return 1;
	}
	const cJSON *files = arr_of(c, sign, "filesToSign", "spec.moduleLoader.container.sign.filesToSign");
	if (c->bad)
		return 1;
	if (!files || cJSON_GetArraySize(files) == 0) {
		emsg(e, ecap, "filesToSign is required when Sign is set");
		return 1;
	}
	size_t dl = strlen(dir);
	const cJSON *f;
	cJSON_ArrayForEach(f, files) {
		if (!cJSON_IsString(f)) {
			set_bad(c, "spec.moduleLoader.container.sign.filesToSign[]", "a string");
			return 1;
		}
		if (strncmp(f->valuestring, dir, dl) != 0 || f->valuestring[dl] != '/') {
			quote(q1, sizeof q1, f->valuestring);
			quote(q2, sizeof q2, dir);
			emsg(e, ecap, "filesToSign[%s] must be under dirName %s", q1, q2);
			return 1;
		}
	}
	return 0;
}

static int check_files_to_sign(actx *c, const cJSON *cont, const cJSON *mp, char *e, size_t ecap)
{
	char inner[2048];
	const cJSON *dirv = child(mp, "dirName");
	/* The CRD defaults dirName to /opt; an API server that did not apply the
	 * default gives us none, so apply it here. */
	const char *dir = dirv ? str(c, mp, "dirName", "spec.moduleLoader.container.modprobe.dirName") : "/opt";
	if (c->bad)
		return 1;
	if (check_sign(c, child(cont, "sign"), dir, inner, sizeof inner)) {
		if (!c->bad)
			emsg(e, ecap, "global Sign: %s", inner);
		return 1;
	}
	const cJSON *km;
	int idx = 0;
	cJSON_ArrayForEach(km, child(cont, "kernelMappings")) {
		if (check_sign(c, child(km, "sign"), dir, inner, sizeof inner)) {
			if (!c->bad)
				emsg(e, ecap, "kernelMappings[%d].Sign: %s", idx, inner);
			return 1;
		}
		idx++;
	}
	return 0;
}

static const char *version_of(actx *c, const cJSON *spec, int *has_loader)
{
	const cJSON *ml = obj_of(c, spec, "moduleLoader", "spec.moduleLoader");
	*has_loader = ml != NULL;
	const cJSON *cont = obj_of(c, ml, "container", "spec.moduleLoader.container");
	return str(c, cont, "version", "spec.moduleLoader.container.version");
}

int gk_policy_kmm_admit_json(const cJSON *obj, const cJSON *old, const gk_policy_kube_version *kv, char *msg, size_t cap)
{
	actx c = { 0, msg, cap };
	char inner[2048];
	if (cap)
		msg[0] = 0;
	if (!obj || !cJSON_IsObject(obj)) {
		emsg(msg, cap, "cannot decode Module: the object must be a JSON object");
		return GK_POLICY_KMM_BAD;
	}
	const cJSON *meta = obj_of(&c, obj, "metadata", "metadata");
	const char *name = str(&c, meta, "name", "metadata.name");
	const char *ns = str(&c, meta, "namespace", "metadata.namespace");
	const cJSON *spec = obj_of(&c, obj, "spec", "spec");
	if (c.bad)
		return GK_POLICY_KMM_BAD;

	if (old) {
		int old_loader = 0, new_loader = 0;
		actx oc = { 0, inner, sizeof inner };
		const char *ov = version_of(&oc, child(old, "spec"), &old_loader);
		const char *nv = version_of(&c, spec, &new_loader);
		if (c.bad)
			return GK_POLICY_KMM_BAD;
		if (!oc.bad && old_loader && new_loader && ((!*ov) != (!*nv))) {
			emsg(msg, cap, "cannot update to or from an empty version; please delete the Module and create it again");
			return GK_POLICY_KMM_DENY;
		}
	}

	size_t len = strlen(name) + strlen(ns);
	if (len > GK_POLICY_KMM_MAX_NAME_NS) {
		emsg(msg, cap,
			 "module name and namespace have a combined length of %zu characters, which exceeds the maximum of %d when version is set",
			 len, GK_POLICY_KMM_MAX_NAME_NS);
		return GK_POLICY_KMM_DENY;
	}

	const cJSON *tols = arr_of(&c, spec, "tolerations", "spec.tolerations");
	if (c.bad)
		return GK_POLICY_KMM_BAD;
	if (check_tolerations(&c, tols, inner, sizeof inner)) {
		if (c.bad)
			return GK_POLICY_KMM_BAD;
		emsg(msg, cap, "failed to validate Module's tolerations: %s", inner);
		return GK_POLICY_KMM_DENY;
	}

	const cJSON *dra = obj_of(&c, spec, "dra", "spec.dra");
	const cJSON *dp = obj_of(&c, spec, "devicePlugin", "spec.devicePlugin");
	if (c.bad)
		return GK_POLICY_KMM_BAD;
	if (dra && check_dra(&c, dra, kv, inner, sizeof inner)) {
		if (c.bad)
			return GK_POLICY_KMM_BAD;
		emsg(msg, cap, "failed to validate DRA: %s", inner);
		return GK_POLICY_KMM_DENY;
	}
	if (dp && check_volumes(&c, dp, "devicePlugin", inner, sizeof inner)) {
		if (c.bad)
			return GK_POLICY_KMM_BAD;
		emsg(msg, cap, "failed to validate device plugin volumes: %s", inner);
		return GK_POLICY_KMM_DENY;
	}
	if (dra && check_volumes(&c, dra, "dra", inner, sizeof inner)) {
		if (c.bad)
			return GK_POLICY_KMM_BAD;
		emsg(msg, cap, "failed to validate DRA volumes: %s", inner);
		return GK_POLICY_KMM_DENY;
	}

	const cJSON *ml = obj_of(&c, spec, "moduleLoader", "spec.moduleLoader");
	if (c.bad)
		return GK_POLICY_KMM_BAD;
	if (!ml)
		return GK_POLICY_KMM_ALLOW;
	const cJSON *cont = obj_of(&c, ml, "container", "spec.moduleLoader.container");
	const cJSON *mp = obj_of(&c, cont, "modprobe", "spec.moduleLoader.container.modprobe");
	if (c.bad)
		return GK_POLICY_KMM_BAD;
	if (check_container(&c, cont, inner, sizeof inner)) {
		if (c.bad)
			return GK_POLICY_KMM_BAD;
		emsg(msg, cap, "failed to validate kernel mappings: %s", inner);
		return GK_POLICY_KMM_DENY;
	}
	if (check_modprobe(&c, mp, inner, sizeof inner)) {
		if (c.bad)
			return GK_POLICY_KMM_BAD;
		emsg(msg, cap, "failed to validate modprobe: %s", inner);
		return GK_POLICY_KMM_DENY;
	}
	if (check_files_to_sign(&c, cont, mp, msg, cap))
		return c.bad ? GK_POLICY_KMM_BAD : GK_POLICY_KMM_DENY;
	return GK_POLICY_KMM_ALLOW;
}

int gk_policy_kmm_admit(const Gpukmm__Module *m, char *msg, size_t cap)
{
	cJSON *j = m ? gk_policy_module_to_json(m) : NULL;
	if (m && !j) {
		snprintf(msg, cap, "out of memory");
		return GK_POLICY_KMM_BAD;
	}
	int r = gk_policy_kmm_admit_json(j, NULL, NULL, msg, cap);
	cJSON_Delete(j);
	return r;
}
