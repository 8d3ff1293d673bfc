/* lib/policy internal: helpers shared by the lib/policy sources only. */
#ifndef GPUKMM_LIB_POLICY_INTERNAL_H
#define GPUKMM_LIB_POLICY_INTERNAL_H

/* Go's %q for the strings messages quote (validate.c). malloc'd, NULL on OOM. */
char *gk_policy_quote(const char *s);

#endif
