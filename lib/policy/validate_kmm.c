/* lib/policy: gpukmm's rules for what KMM does with kernelModule.parameters,
 * kernelModule.sign / kernelMappings[].sign and the template variables — each
 * checked before KMM sees the Module, with the field in the message.
 *
 * parameters: KMM's worker runs `modprobe -vd /tmp/<dirName> <moduleName>
 * <parameters...>`; the kernel parses each "key=value" (parse_args). An entry
 * is refused unless its key is a module-parameter name and its value is
 * non-empty and free of whitespace, quotes and shell metacharacters; a key
 * given twice ('-' and '_' are the same to the kernel) is refused too.
 *
 * sign (KMM's Sign, per level): keySecret and certSecret name Secrets (the
 * CRD requires both per level); filesToSign entries are absolute paths under
 * dirName (KMM's webhook), with no ".." and nothing the sign job's shell would
 * interpret beyond globs and KMM's ${KERNEL_*} variables (KMM pastes each
 * entry into a `for file in /opt<entry>` line of a Dockerfile RUN); KMM
 * refuses an empty list per level and appends a mapping's list to the
 * container's, so a mapping-level sign under a container-level one must list
 * its own files (the default would be signed twice); a mapping that does not
 * build needs an unsignedImage (KMM pulls it, signs, pushes containerImage),
 * and that must not be the containerImage itself (KMM would find it present,
 * skip signing and load the unsigned module). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/policy.h"
#include "internal.h"

#define MSG_MAX 1024
#define SAMPLE_KERNEL "6.8.0-45-generic"
#define KERNEL_VAR_LIST "KERNEL_FULL_VERSION, KERNEL_VERSION, KERNEL_XYZ, KERNEL_X, KERNEL_Y, KERNEL_Z"

#define Q(var, s) char *var = gk_policy_quote(s); if (!var) { r->oom = true; return; }

static bool empty(const char *s)
{
	return !s || !*s;
}

static bool alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* "the character ';'", "whitespace", "a control character" */
static void describe_char(char c, char *buf, size_t cap)
{
	if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f')
		snprintf(buf, cap, "whitespace");
	else if ((unsigned char)c < 0x20 || c == 0x7f)
		snprintf(buf, cap, "a control character");
	else if ((unsigned char)c >= 0x80)
		snprintf(buf, cap, "a non-ASCII byte");
	else
		snprintf(buf, cap, "the character '%c'", c);
}

/* ---- parameters ------------------------------------------------------------------ */

static bool value_char(char c)
{
	return alnum(c) || strchr("._,:+/@%=-", c);
}

/* the kernel compares parameter names with '-' == '_' (parameq) */
static bool same_key(const char *a, size_t la, const char *b, size_t lb)
{
	if (la != lb)
		return false;
	for (size_t i = 0; i < la; i++) {
		char x = a[i] == '-' ? '_' : a[i], y = b[i] == '-' ? '_' : b[i];
		if (x != y)
			return false;
	}
	return true;
}

static void validate_parameters(const Gpukmm__KernelModuleSpec *km, gk_policy_report *r)
{
	char field[96], what[64];
	for (size_t i = 0; i < km->n_parameters; i++) {
		const char *p = km->parameters[i] ? km->parameters[i] : "";
		const char *eq = strchr(p, '=');
		snprintf(field, sizeof(field), "spec.kernelModule.parameters[%zu]", i);
		Q(q, p);
		size_t kl = eq ? (size_t)(eq - p) : strlen(p);
		bool key_ok = kl > 0 && (p[0] == '_' || (alnum(p[0]) && !(p[0] >= '0' && p[0] <= '9')));
		for (size_t j = 1; key_ok && j < kl; j++)
			key_ok = alnum(p[j]) || p[j] == '_' || p[j] == '-';
		if (!eq) {
			gk_policy_reportf(r, field, "kernelModule.parameters[%zu] %s must be key=value (a parameter of the "
					  "module and its value)", i, q);
		} else if (!key_ok) {
			char *k = strndup(p, kl), *qk = k ? gk_policy_quote(k) : NULL;
			if (!qk)
				r->oom = true;
			else
				gk_policy_reportf(r, field, "kernelModule.parameters[%zu] %s: %s is not a module parameter "
						  "name (a letter or '_', then letters, digits, '_' or '-')", i, q, qk);
			free(k);
			free(qk);
		} else if (!eq[1]) {
			gk_policy_reportf(r, field, "kernelModule.parameters[%zu] %s: the value is empty", i, q);
		} else {
			const char *bad = eq + 1;
			while (*bad && value_char(*bad))
				bad++;
			if (*bad) {
				describe_char(*bad, what, sizeof(what));
				gk_policy_reportf(r, field, "kernelModule.parameters[%zu] %s: the value contains %s; a "
						  "value is letters, digits and . _ , : + / @ %% = - only (no whitespace, "
						  "quotes or shell metacharacters)", i, q, what);
			} else {
				for (size_t j = 0; j < i; j++) {
					const char *o = km->parameters[j] ? km->parameters[j] : "";
					const char *oeq = strchr(o, '=');
					if (oeq && same_key(p, kl, o, (size_t)(oeq - o))) {
						gk_policy_reportf(r, field, "kernelModule.parameters[%zu] %s: parameter "
								  "%.*s is already set by parameters[%zu]", i, q,
								  (int)kl, p, j);
						break;
					}
				}
			}
		}
		free(q);
	}
}

/* ---- template variables ------------------------------------------------------------ */

/* 0 ok; else one violation for `what` (a field's value) naming the variable. */
static int check_vars(gk_policy_report *r, const char *field, const char *label, const char *value, bool with_mod)
{
	char name[128];
	int u = gk_policy_kmm_unknown_var(value, with_mod, name, sizeof(name));
	if (u == 0)
		return 0;
	char *q = gk_policy_quote(value);
	if (!q) {
		r->oom = true;
		return -1;
	}
	if (u < 0)
		gk_policy_reportf(r, field, "%s %s: \"${\" without a closing \"}\": KMM fails to substitute it", label, q);
	else if (with_mod)
		gk_policy_reportf(r, field, "%s %s: $%s is not a variable KMM substitutes (" KERNEL_VAR_LIST
				  ", MOD_NAME, MOD_NAMESPACE): KMM would make it \"\"", label, q, name);
	else
		gk_policy_reportf(r, field, "%s %s: $%s is not a variable KMM substitutes here (" KERNEL_VAR_LIST
				  "; not MOD_NAME or MOD_NAMESPACE): KMM would make it \"\"", label, q, name);
	free(q);
	return -1;
}

/* the image as KMM would pull it for a sample kernel; NULL when it has a
 * variable KMM would not substitute (reported by check_vars) or on OOM (r->oom) */
static char *sample(gk_policy_report *r, const char *tmpl, bool with_mod)
{
	gk_policy_kmm_vars v;
	char msg[256];
	if (gk_policy_kmm_unknown_var(tmpl, with_mod, msg, sizeof(msg)) != 0)
		return NULL;
	gk_policy_kmm_vars_for_kernel(SAMPLE_KERNEL, &v, msg, sizeof(msg));
	if (with_mod) {
		v.mod_name = "gpu-gpu";
		v.mod_namespace = GK_POLICY_DEFAULT_NAMESPACE;
	}
	char *s = gk_policy_kmm_expand(tmpl, &v, msg, sizeof(msg));
	if (!s)
		r->oom = true;
	return s;
}

/* ---- sign ------------------------------------------------------------------------------ */

static bool path_char(char c)
{
	return alnum(c) || strchr("._-+/,:@*?[]!^", c);
}

static void check_file(gk_policy_report *r, const char *p, size_t j, const char *f)
{
	char field[160], label[160], what[64];
	snprintf(field, sizeof(field), "spec.%s.filesToSign[%zu]", p, j);
	snprintf(label, sizeof(label), "%s.filesToSign[%zu]", p, j);
	if (empty(f)) {
		gk_policy_reportf(r, field, "%s is empty", label);
		return;
	}
	Q(q, f);
	size_t dl = strlen(GK_POLICY_KMM_DIRNAME_DEFAULT);
	if (strncmp(f, GK_POLICY_KMM_DIRNAME_DEFAULT, dl) != 0 || f[dl] != '/') {
		gk_policy_reportf(r, field, "%s %s must be under KMM's dirName \"%s/\" (the module image's tree "
				  "KMM signs and loads from), e.g. \"%s/lib/modules/${KERNEL_FULL_VERSION}/xe.ko\"", label,
				  q, GK_POLICY_KMM_DIRNAME_DEFAULT, GK_POLICY_KMM_DIRNAME_DEFAULT);
		goto out;
	}
	/* variables first ($ and braces are only allowed as ${KERNEL_*} / $KERNEL_*) */
	if (check_vars(r, field, label, f, false))
		goto out;
	for (const char *c = f; *c;) {
		if (*c == '$') {
			const char *e = c + 1;
			bool braced = *e == '{';
			if (braced)
				e++;
			while (alnum(*e) || *e == '_')
				e++;
			if (e == c + 1 + braced || (braced && *e != '}')) {
				gk_policy_reportf(r, field, "%s %s: '$' only as ${KERNEL_...} (" KERNEL_VAR_LIST ")", label,
						  q);
				goto out;
			}
			c = e + braced;
			continue;
		}
		if (!path_char(*c)) {
			describe_char(*c, what, sizeof(what));
			gk_policy_reportf(r, field, "%s %s: %s is not allowed: KMM's sign job pastes each entry into a "
					  "shell command; use letters, digits, . _ - + / , : @, the globs * ? [ ] and "
					  "${KERNEL_...} variables", label, q, what);
			goto out;
		}
		c++;
	}
	for (const char *s = f; *s;) {
		size_t l = strcspn(s, "/");
		if (l == 2 && s[0] == '.' && s[1] == '.') {
			gk_policy_reportf(r, field, "%s %s: \"..\" would leave dirName", label, q);
			goto out;
		}
		s += l;
		while (*s == '/')
			s++;
	}
out:
	free(q);
}

static void check_secret(gk_policy_report *r, const char *p, const char *which, const char *name, const char *key,
			 const char *holds)
{
	char field[160], msg[MSG_MAX];
	snprintf(field, sizeof(field), "spec.%s.%s.name", p, which);
	if (empty(name)) {
		gk_policy_reportf(r, field, "%s.%s.name is required: the Secret (in the operator namespace) whose key "
				  "\"%s\" holds %s", p, which, key, holds);
		return;
	}
	if (gk_policy_check_dns1123_subdomain(name, msg, sizeof(msg)) == 0)
		return;
	Q(q, name);
	gk_policy_reportf(r, field, "%s.%s.name %s is not a valid Kubernetes object name: %s", p, which, q, msg);
	free(q);
}

static void check_unsigned_image(gk_policy_report *r, const char *p, const char *img)
{
	char field[160], label[160], msg[MSG_MAX];
	if (empty(img))
		return;
	snprintf(field, sizeof(field), "spec.%s.unsignedImage", p);
	snprintf(label, sizeof(label), "%s.unsignedImage", p);
	if (check_vars(r, field, label, img, false))
		return;
	char *s = sample(r, img, false);
	if (!s)
		return;
	Q(q, img);
	if (gk_policy_check_image_ref(s, msg, sizeof(msg)) != 0)
		gk_policy_reportf(r, field, "invalid image reference in %s: %s: %s", label, q, msg);
	else if (!strchr(s, ':') && !strchr(s, '@'))
		gk_policy_reportf(r, field, "%s: image %s must include an explicit tag or digest", label, q);
	free(q);
	free(s);
}

/* one level: kernelModule.sign or kernelMappings[i].sign (p without "spec.") */
static void check_level(gk_policy_report *r, const char *p, const Gpukmm__Sign *s)
{
	check_secret(r, p, "keySecret", s->key_secret, "key", "the private signing key");
	check_secret(r, p, "certSecret", s->cert_secret, "cert", "the signing certificate");
	for (size_t j = 0; j < s->n_files_to_sign; j++)
		check_file(r, p, j, s->files_to_sign[j]);
	check_unsigned_image(r, p, s->unsigned_image);
}

static void validate_sign(const Gpukmm__KernelModuleSpec *km, gk_policy_report *r)
{
	char p[96], field[160];
	if (km->sign)
		check_level(r, "kernelModule.sign", km->sign);
	for (size_t i = 0; i < km->n_kernel_mappings; i++) {
		const Gpukmm__KernelMapping *m = km->kernel_mappings[i];
		const Gpukmm__Sign *ms = m->sign;
		snprintf(p, sizeof(p), "kernelModule.kernelMappings[%zu].sign", i);
		if (ms) {
			check_level(r, p, ms);
			if (km->sign && ms->n_files_to_sign == 0) {
				snprintf(field, sizeof(field), "spec.%s.filesToSign", p);
				gk_policy_reportf(r, field, "%s.filesToSign is required when kernelModule.sign is set too: KMM "
						  "appends a mapping's filesToSign to kernelModule.sign.filesToSign and "
						  "refuses an empty list; list the files this mapping signs in addition, or "
						  "set sign on each mapping instead of kernelModule.sign", p);
			}
			for (size_t j = 0; km->sign && j < ms->n_files_to_sign; j++)
				for (size_t k = 0; k < km->sign->n_files_to_sign; k++)
					if (ms->files_to_sign[j] && km->sign->files_to_sign[k] &&
					    strcmp(ms->files_to_sign[j], km->sign->files_to_sign[k]) == 0) {
						gk_policy_report_warnf(r, "%s.filesToSign[%zu] \"%s\" is also in "
								       "kernelModule.sign.filesToSign: KMM appends the "
								       "two lists and signs it twice", p, j,
								       ms->files_to_sign[j]);
						break;
					}
		}
		if (!gk_policy_mapping_signed(km, i))
			continue;
		if (m->build) {
			if (ms && !empty(ms->unsigned_image))
				gk_policy_report_warnf(r, "%s.unsignedImage is ignored: kernelMappings[%zu] builds its "
						       "image in-cluster and KMM signs what it built", p, i);
			continue;
		}
		const char *uimg = gk_policy_mapping_unsigned_image(km, i);
		if (!uimg) {
			snprintf(field, sizeof(field), "spec.%s.unsignedImage", ms ? p : "kernelModule.sign");
			gk_policy_reportf(r, field, "kernelModule.kernelMappings[%zu]: signing needs an unsignedImage "
					  "(kernelMappings[%zu].sign.unsignedImage or kernelModule.sign.unsignedImage): "
					  "the image KMM pulls, signs and pushes as containerImage; only a mapping with "
					  "build signs the image it built", i, i);
			continue;
		}
		if (empty(m->container_image))
			continue;
		char *a = sample(r, uimg, false), *b = sample(r, m->container_image, true);
		if (a && b && strcmp(a, b) == 0) {
			snprintf(field, sizeof(field), "spec.%s.unsignedImage",
				 ms && !empty(ms->unsigned_image) ? p : "kernelModule.sign");
			char *q = gk_policy_quote(uimg);
			if (!q)
				r->oom = true;
			else
				gk_policy_reportf(r, field, "kernelModule.kernelMappings[%zu]: sign.unsignedImage %s is the "
						  "containerImage: KMM pushes the signed image to containerImage (and "
						  "skips signing when it exists), so the unsigned image must be another tag "
						  "or repository", i, q);
			free(q);
		}
		free(a);
		free(b);
	}
}

void gk_policy_validate_kmm(const Gpukmm__KernelModuleSpec *km, gk_policy_report *r)
{
	if (!km)
		return;
	validate_parameters(km, r);
	for (size_t i = 0; i < km->n_kernel_mappings; i++) {
		const Gpukmm__KernelMapping *m = km->kernel_mappings[i];
		char field[96], label[96];
		if (empty(m->container_image))
			continue;
		snprintf(field, sizeof(field), "spec.kernelModule.kernelMappings[%zu].containerImage", i);
		snprintf(label, sizeof(label), "kernelModule.kernelMappings[%zu].containerImage", i);
		check_vars(r, field, label, m->container_image, true);
	}
	validate_sign(km, r);
}
