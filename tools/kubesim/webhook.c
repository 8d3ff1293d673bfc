/* kubesim — admission webhooks (placeholder until the admission chain lands). */
#include "api.h"

int ks_admit(ks_server *s, const ks_rtype *t, const char *sub, const char *op, const char *ns, const char *name,
	     cJSON **obj, const cJSON *old, const ks_opts *o, ks_resp *out)
{
	return 0;
}
