/* fake-kmm — KMM's signing of module images (ModuleImagesConfig /
 * ModuleBuildSignConfig, internal/controllers/mic_reconciler.go and
 * build_sign_events_reconciler.go): a mapping with a sign (its own or the
 * container's) has its image for a kernel checked; absent, it NeedsSigning, a
 * sign job runs, and the image Exists afterwards. Until then the node is not
 * configured (not in desiredNumber). The sign job's Events go to its owner,
 * the ModuleBuildSignConfig of the Module's name: KMM's job type label is
 * "SignImage", title-cased by its recorder into "Signimage", so the reasons
 * are SignimageCreated / SignimageSucceeded / SignimageFailed and the kernel
 * in the message is the DNS-safe one of the sign pod's label. Pure. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakekmm.h"

int fk_mapping_signed(const fk_module *m, int i)
{
	return i >= 0 && (size_t)i < m->nmaps && (m->has_sign || m->maps[i].has_sign);
}

int fk_mapping_image(const fk_module *m, int i, const char *kernel, char *buf, size_t cap, char *msg, size_t mcap)
{
	const char *tmpl = i >= 0 && (size_t)i < m->nmaps && *m->maps[i].image ? m->maps[i].image : m->container_image;
	gk_policy_kmm_vars v;
	if (gk_policy_kmm_vars_for_kernel(kernel, &v, msg, mcap) != 0)
		return -1;
	v.mod_name = m->name;
	v.mod_namespace = m->ns;
	char *s = gk_policy_kmm_expand(tmpl, &v, msg, mcap);
	if (!s)
		return -1;
	int n = snprintf(buf, cap, "%s", s);
	free(s);
	if (n < 0 || (size_t)n >= cap) {
		snprintf(msg, mcap, "image name longer than %zu bytes", cap - 1);
		return -1;
	}
	return 0;
}

static const char *state_name(enum fk_image_state st)
{
	return st == FK_IMAGE_EXISTS ? "Exists" : st == FK_IMAGE_NEEDS_SIGNING ? "NeedsSigning" : "";
}

enum fk_image_state fk_image_state(const fk_module *m, const char *kernel, const char *image)
{
	char key[FK_KEY_MAX];
	fk_key_image(key, kernel);
	const char *v = fk_obj_str(m->annotations, key);
	if (!v)
		return FK_IMAGE_NONE;
	const char *sp = strchr(v, ' ');
	if (!sp || strcmp(sp + 1, image) != 0)
		return FK_IMAGE_NONE;
	size_t l = (size_t)(sp - v);
	if (l == 6 && !strncmp(v, "Exists", 6))
		return FK_IMAGE_EXISTS;
	if (l == 12 && !strncmp(v, "NeedsSigning", 12))
		return FK_IMAGE_NEEDS_SIGNING;
	return FK_IMAGE_NONE;
}

void fk_image_value(char *buf, size_t cap, enum fk_image_state st, const char *image)
{
	snprintf(buf, cap, "%s %s", state_name(st), image);
}

void fk_dns_safe_kernel(char *buf, size_t cap, const char *kernel)
{
	/* NormalizeVersion, lower case, '_' and '.' -> '-', '-' trimmed at both ends */
	size_t o = 0;
	const char *k = kernel;
	while (*k && o + 1 < cap) {
		char c = *k++;
		if (!isalnum((unsigned char)c) && c != '-')
			c = '-';
		buf[o++] = (char)tolower((unsigned char)c);
	}
	buf[o] = 0;
	size_t s = 0;
	while (buf[s] == '-')
		s++;
	while (o > s && buf[o - 1] == '-')
		buf[--o] = 0;
	memmove(buf, buf + s, o - s + 1);
}

cJSON *fk_sign_event(const fk_module *m, const char *kernel, const char *reason, const char *ts)
{
	char k[FK_KERNEL_MAX], pod[FK_KERNEL_MAX + 300], gen[300], msg[FK_KERNEL_MAX + 64];
	fk_dns_safe_kernel(k, sizeof k, kernel);
	snprintf(pod, sizeof pod, "%s-sign-%s", m->name, k);
	snprintf(gen, sizeof gen, "%s.", m->name);
	int warning = strstr(reason, "Failed") != NULL;
	if (!strcmp(reason, "SignimageCreated"))
		snprintf(msg, sizeof msg, "Signimage created for kernel %s", k);
	else
		snprintf(msg, sizeof msg, "Signimage job %s for kernel %s", warning ? "failed" : "succeeded", k);
	cJSON *o = cJSON_CreateObject();
	cJSON *md = o ? cJSON_AddObjectToObject(o, "metadata") : NULL;
	cJSON *ann = md ? cJSON_AddObjectToObject(md, "annotations") : NULL;
	cJSON *inv = o ? cJSON_AddObjectToObject(o, "involvedObject") : NULL;
	cJSON *src = o ? cJSON_AddObjectToObject(o, "source") : NULL;
	if (!ann || !inv || !src || !cJSON_AddStringToObject(o, "apiVersion", "v1") ||
	    !cJSON_AddStringToObject(o, "kind", "Event") || !cJSON_AddStringToObject(md, "generateName", gen) ||
	    !cJSON_AddStringToObject(md, "namespace", m->ns) || !cJSON_AddStringToObject(ann, "kernel-version", k) ||
	    !cJSON_AddStringToObject(ann, "pod-name", pod) ||
	    !cJSON_AddStringToObject(inv, "apiVersion", GK_POLICY_KMM_API_VERSION) ||
	    !cJSON_AddStringToObject(inv, "kind", "ModuleBuildSignConfig") ||
	    !cJSON_AddStringToObject(inv, "name", m->name) || !cJSON_AddStringToObject(inv, "namespace", m->ns) ||
	    !cJSON_AddStringToObject(o, "type", warning ? "Warning" : "Normal") ||
	    !cJSON_AddStringToObject(o, "reason", reason) || !cJSON_AddStringToObject(o, "message", msg) ||
	    !cJSON_AddNumberToObject(o, "count", 1) || !cJSON_AddStringToObject(o, "firstTimestamp", ts) ||
	    !cJSON_AddStringToObject(o, "lastTimestamp", ts) || !cJSON_AddStringToObject(src, "component", "kmm") ||
	    !cJSON_AddStringToObject(o, "reportingComponent", "kmm")) {
		cJSON_Delete(o);
		return NULL;
	}
	/* Go's time.String() of the pod's creationTimestamp: "2006-01-02 15:04:05 +0000 UTC" */
	char created[64];
	snprintf(created, sizeof created, "%.10s %.8s +0000 UTC", ts, strlen(ts) >= 19 ? ts + 11 : "00:00:00");
	if (!strcmp(reason, "SignimageCreated") && !cJSON_AddStringToObject(ann, "pod-creation-timestamp", created)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}
