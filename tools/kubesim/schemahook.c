/* kubesim — the schema step of a write for CR kinds (see schema.c). */
#include "api.h"

int ks_api_schema(const ks_rtype *t, cJSON *obj, const ks_opts *o, ks_resp *out)
{
	return 0;
}
