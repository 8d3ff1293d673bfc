/* fake-kmm — typed, borrowed views of Module and Node JSON (what the
 * controller needs, nothing more) and the label/annotation keys. */
#include <stdio.h>
#include <string.h>

#include "fakekmm.h"

static const cJSON *get(const cJSON *o, const char *k)
{
	if (!o || !cJSON_IsObject(o))
		return NULL;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return (v && !cJSON_IsNull(v)) ? v : NULL;
}

const char *fk_obj_str(const cJSON *obj, const char *key)
{
	const cJSON *v = get(obj, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const char *s_or(const cJSON *o, const char *k, const char *dflt)
{
	const char *s = fk_obj_str(o, k);
	return s ? s : dflt;
}

int fk_module_parse(const cJSON *obj, fk_module *m, gk_err *err)
{
	memset(m, 0, sizeof *m);
	const cJSON *meta = get(obj, "metadata"), *spec = get(obj, "spec"), *st = get(obj, "status");
	m->ns = s_or(meta, "namespace", "");
	m->name = s_or(meta, "name", "");
	m->rv = s_or(meta, "resourceVersion", "");
	if (!*m->name)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "Module without metadata.name");
	m->deleting = fk_obj_str(meta, "deletionTimestamp") != NULL;
	const cJSON *f;
	cJSON_ArrayForEach(f, get(meta, "finalizers")) {
		if (cJSON_IsString(f) && !strcmp(f->valuestring, FK_FINALIZER))
			m->has_finalizer = 1;
	}
	const cJSON *it;
	cJSON_ArrayForEach(it, get(spec, "selector")) {
		if (!cJSON_IsString(it))
			continue;
		if (m->nselector == FK_MAX_ITEMS)
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "Module %s/%s: more than %d selector labels",
					  m->ns, m->name, FK_MAX_ITEMS);
		m->selector[m->nselector++] = (fk_kv){ it->string, it->valuestring };
	}
	cJSON_ArrayForEach(it, get(spec, "tolerations")) {
		if (m->ntols == FK_MAX_ITEMS)
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "Module %s/%s: more than %d tolerations",
					  m->ns, m->name, FK_MAX_ITEMS);
		m->tols[m->ntols++] = (fk_toleration){ s_or(it, "key", ""), s_or(it, "operator", ""),
						       s_or(it, "value", ""), s_or(it, "effect", "") };
	}
	const cJSON *ml = get(spec, "moduleLoader");
	const cJSON *cont = get(ml, "container");
	m->has_loader = cJSON_IsObject(ml);
	m->version = s_or(cont, "version", "");
	m->container_image = s_or(cont, "containerImage", "");
	m->has_sign = cJSON_IsObject(get(cont, "sign"));
	m->annotations = get(meta, "annotations");
	cJSON_ArrayForEach(it, get(cont, "kernelMappings")) {
		if (m->nmaps == FK_MAX_ITEMS)
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "Module %s/%s: more than %d kernel mappings",
					  m->ns, m->name, FK_MAX_ITEMS);
		const char *lit = s_or(it, "literal", ""), *re = s_or(it, "regexp", "");
		m->maps[m->nmaps++] = (fk_mapping){ *lit ? lit : NULL, *re ? re : NULL, s_or(it, "containerImage", ""),
						    cJSON_IsObject(get(it, "sign")) };
	}
	const cJSON *sml = get(st, "moduleLoader");
	if (cJSON_IsObject(sml)) {
		const cJSON *v;
		m->st_present = 1;
		if ((v = get(sml, "nodesMatchingSelectorNumber")) && cJSON_IsNumber(v))
			m->st_matching = v->valueint;
		if ((v = get(sml, "desiredNumber")) && cJSON_IsNumber(v))
			m->st_desired = v->valueint;
		if ((v = get(sml, "availableNumber")) && cJSON_IsNumber(v))
			m->st_available = v->valueint;
	}
	return 0;
}

unsigned fk_faults_parse(const char *v)
{
	unsigned f = 0;
	if (!v)
		return 0;
	while (*v) {
		while (*v == ',' || *v == ' ')
			v++;
		size_t n = strcspn(v, ", ");
		if (n == 18 && !strncmp(v, "image-pull-failure", n))
			f |= FK_FAULT_PULL;
		else if (n == 12 && !strncmp(v, "load-failure", n))
			f |= FK_FAULT_LOAD;
		else if (n == 14 && !strncmp(v, "unload-refused", n))
			f |= FK_FAULT_UNLOAD;
		v += n;
	}
	return f;
}

int fk_node_parse(const cJSON *obj, fk_node *n, gk_err *err)
{
	memset(n, 0, sizeof *n);
	const cJSON *meta = get(obj, "metadata"), *spec = get(obj, "spec"), *st = get(obj, "status");
	n->name = s_or(meta, "name", "");
	if (!*n->name)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "Node without metadata.name");
	n->kernel = s_or(get(st, "nodeInfo"), "kernelVersion", "");
	n->unschedulable = cJSON_IsTrue(get(spec, "unschedulable"));
	n->labels = get(meta, "labels");
	n->annotations = get(meta, "annotations");
	const cJSON *t;
	cJSON_ArrayForEach(t, get(spec, "taints")) {
		if (n->ntaints == FK_MAX_ITEMS)
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "Node %s: more than %d taints", n->name,
					  FK_MAX_ITEMS);
		n->taints[n->ntaints++] = (fk_taint){ s_or(t, "key", ""), s_or(t, "value", ""), s_or(t, "effect", "") };
	}
	n->faults = fk_faults_parse(fk_obj_str(n->annotations, FK_FAULT_ANNOTATION));
	n->secure = fk_report_secure(fk_obj_str(n->annotations, FK_REPORT_ANNOTATION));
	return 0;
}

int fk_report_secure(const char *report_json)
{
	/* every pass looks at every node: parse only a report that can say so (the
	 * gpukmm.io/v1alpha1 report, or the release before's: "secure_boot":"TRI_YES") */
	if (!report_json || (!strstr(report_json, "secureBoot") && !strstr(report_json, "TRI_YES") &&
			     !strstr(report_json, "integrity") && !strstr(report_json, "confidentiality")))
		return 0;
	cJSON *r = cJSON_Parse(report_json);
	const char *sb = fk_obj_str(r, "secureBoot"), *old = fk_obj_str(r, "secure_boot");
	const char *ld = fk_obj_str(r, "lockdown");
	int secure = (sb && !strcmp(sb, "true")) || (old && !strcmp(old, "TRI_YES")) ||
		     (ld && (!strcmp(ld, "integrity") || !strcmp(ld, "confidentiality")));
	cJSON_Delete(r);
	return secure;
}

void fk_key_ready(char *buf, const fk_module *m)
{
	snprintf(buf, FK_KEY_MAX, FK_LABEL_PREFIX "%s.%s.ready", m->ns, m->name);
}

void fk_key_version_ready(char *buf, const fk_module *m)
{
	snprintf(buf, FK_KEY_MAX, FK_LABEL_PREFIX "%s.%s.version.ready", m->ns, m->name);
}

void fk_key_version_module(char *buf, const fk_module *m)
{
	snprintf(buf, FK_KEY_MAX, FK_VERSION_LABEL_PREFIX "%s.%s", m->ns, m->name);
}

void fk_key_loaded(char *buf, const fk_module *m)
{
	snprintf(buf, FK_KEY_MAX, FK_LOADED_PREFIX "%s.%s", m->ns, m->name);
}

void fk_key_image(char *buf, const char *kernel)
{
	gk_policy_kmm_vars v;
	char msg[256];
	if (gk_policy_kmm_vars_for_kernel(kernel, &v, msg, sizeof msg) != 0)
		snprintf(v.full, sizeof v.full, "%s", "invalid");
	snprintf(buf, FK_KEY_MAX, FK_IMAGE_PREFIX "%s", v.full);
}
