/* lib/policy: which kernelMapping a node's kernel selects (KMM's rule). */
#include <string.h>

#include "gpukmm/policy.h"

int gk_policy_kernel_mapping(const Gpukmm__KernelModuleSpec *km, const char *kernel)
{
	if (!km || !kernel || !*kernel)
		return -1;
	/* KMM trims one trailing "+" (kernels built from a dirty tree) before matching */
	char k[256];
	size_t n = strlen(kernel);
	if (n >= sizeof(k))
		return -1;
	memcpy(k, kernel, n + 1);
	if (n > 1 && k[n - 1] == '+')
		k[n - 1] = 0;
	for (size_t i = 0; i < km->n_kernel_mappings; i++) {
		const Gpukmm__KernelMapping *m = km->kernel_mappings[i];
		if (m && m->regexp && gk_policy_re2go_match(m->regexp, k) == 1)
			return (int)i;
	}
	return -1;
}
