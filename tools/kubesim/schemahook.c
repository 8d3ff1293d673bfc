/* kubesim — the schema step of a write: for custom resources prune (or reject under
 * fieldValidation=Strict, or warn under Warn), default and validate against the
 * CRD's schema; for built-ins the same with builtin.c's checks. */
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "builtin.h"
#include "schema.h"

int ks_api_schema(const ks_rtype *t, cJSON *obj, const ks_opts *o, ks_resp *out)
{
	ks_schema_result r;
	int n;
	if (!t->is_crd) {
		ks_builtin_default(t, obj);
		n = ks_builtin_validate(t, obj, &r);
	}
	else if (!t->schema)
		return 0;
	else
		n = ks_schema_apply(t->schema, obj, &r);
	if (n < 0) {
		cJSON_Delete(r.causes);
		ks_resp_status(out, 500, "InternalError", NULL, NULL, NULL, NULL, "out of memory");
		return -1;
	}
	const char *name = ks_meta_str(obj, "name");
	if (r.nunknown && o->validation == KS_VALIDATE_STRICT) {
		cJSON_Delete(r.causes);
		ks_resp_status(out, 400, "BadRequest", NULL, NULL, NULL, NULL,
			       "%s in version \"%s\" cannot be handled as a %s: strict decoding error: %s", t->kind,
			       t->version, t->kind, r.unknown);
		return -1;
	}
	if (r.nunknown && o->validation == KS_VALIDATE_WARN) {
		/* one warning per unknown field */
		size_t j = 0;
		for (const char *p = r.unknown; *p && j + 1 < sizeof(out->warning); p++) {
			if (p[0] == ',' && p[1] == ' ' && strncmp(p + 2, "unknown field", 13) == 0) {
				out->warning[j++] = '\n';
				p++;
				continue;
			}
			out->warning[j++] = *p;
		}
		out->warning[j] = 0;
	}
	if (n) {
		char qk[512];
		snprintf(qk, sizeof(qk), "%s%s%s", t->kind, t->group[0] ? "." : "", t->group);
		ks_resp_status(out, 422, "Invalid", t->kind, name ? name : "", t->group, r.causes,
			       "%s \"%s\" is invalid: %s%s%s", qk, name ? name : "", n > 1 ? "[" : "", r.summary,
			       n > 1 ? "]" : "");
		return -1;
	}
	cJSON_Delete(r.causes);
	return 0;
}
