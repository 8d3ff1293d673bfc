/* lib/policy: what a ClusterPolicy's signing settings mean per kernel mapping
 * (KMM's merge of container-level and mapping-level sign, kernelmapper.go
 * getRelevantSign) and the default filesToSign.
 *
 * The default file: KMM's loader copies <dirName>/lib/modules/<kernel>/ out of
 * the module image and runs `modprobe -d /tmp/<dirName> <moduleName>`, which
 * finds the .ko through the image's modules.dep — at any depth: where it sits
 * (top level, updates/, extra/) is the image's choice and cannot be known from
 * the policy. The default is KMM's documented kmod image layout (kmod_image.md:
 * the .ko files directly in <dirName>/lib/modules/<kernel>/, `depmod -b /opt`),
 * <dirName>/lib/modules/${KERNEL_FULL_VERSION}/<moduleName>.ko. An image with
 * another layout, or shipping dependencies that must be signed too, lists
 * filesToSign. A wrong path is never silent: KMM's sign job fails on a file
 * that does not exist (its loop ends in `[ -e "$file" ] && sign-file ...`), the
 * image stays unavailable and nothing loads. */
#include <stdio.h>
#include <string.h>

#include "gpukmm/policy.h"

int gk_policy_sign_default_file(char *buf, size_t cap, const char *module_name)
{
	int n = snprintf(buf, cap, "%s/lib/modules/${KERNEL_FULL_VERSION}/%s.ko", GK_POLICY_KMM_DIRNAME_DEFAULT,
			 module_name && *module_name ? module_name : GK_POLICY_DEFAULT_MODULE);
	return n < 0 || (size_t)n >= cap ? GK_OUT_OF_RANGE : 0;
}

static const Gpukmm__KernelMapping *mapping(const Gpukmm__KernelModuleSpec *km, size_t i)
{
	return km && i < km->n_kernel_mappings ? km->kernel_mappings[i] : NULL;
}

bool gk_policy_mapping_signed(const Gpukmm__KernelModuleSpec *km, size_t i)
{
	const Gpukmm__KernelMapping *m = mapping(km, i);
	return m && (km->sign || m->sign);
}

const char *gk_policy_mapping_unsigned_image(const Gpukmm__KernelModuleSpec *km, size_t i)
{
	const Gpukmm__KernelMapping *m = mapping(km, i);
	if (!m || m->build || !gk_policy_mapping_signed(km, i))
		return NULL;
	/* the mapping's unsignedImage overrides when set */
	if (m->sign && m->sign->unsigned_image && *m->sign->unsigned_image)
		return m->sign->unsigned_image;
	if (km->sign && km->sign->unsigned_image && *km->sign->unsigned_image)
		return km->sign->unsigned_image;
	return NULL;
}
