/* lib/probe — product names for Intel discrete/data-centre GPUs that Debian 12's
 * pci.ids (2023.04) does not know or names only by code name. Ids checked
 * against the Linux kernel's xe/i915 PCI id lists (BMG G21/G31, DG2, ATS-M, PVC)
 * and Intel's compute-runtime device lists; marketing names only where they are
 * unambiguous, the family name otherwise. */
#include <stddef.h>

#include "gpukmm/probe.h"

static const struct {
	uint16_t device;
	const char *name;
} intel_gpus[] = {
	/* Battlemage G21 (Xe2) */
	{ 0xe202, "Battlemage G21" },
	{ 0xe209, "Battlemage G21" },
	{ 0xe20b, "Battlemage G21 [Arc B580]" },
	{ 0xe20c, "Battlemage G21 [Arc B570]" },
	{ 0xe20d, "Battlemage G21" },
	{ 0xe210, "Battlemage G21" },
	{ 0xe211, "Battlemage G21 [Arc Pro]" },
	{ 0xe212, "Battlemage G21 [Arc Pro]" },
	{ 0xe215, "Battlemage G21" },
	{ 0xe216, "Battlemage G21" },
	/* Battlemage G31 */
	{ 0xe220, "Battlemage G31" },
	{ 0xe221, "Battlemage G31" },
	{ 0xe222, "Battlemage G31" },
	{ 0xe223, "Battlemage G31" },
	/* Alchemist DG2 (Arc A-series) */
	{ 0x56a0, "DG2 [Arc A770]" },
	{ 0x56a1, "DG2 [Arc A750]" },
	{ 0x56a2, "DG2 [Arc A580]" },
	{ 0x56a5, "DG2 [Arc A380]" },
	{ 0x56a6, "DG2 [Arc A310]" },
	{ 0x56b0, "DG2 [Arc Pro A30M]" },
	{ 0x56b1, "DG2 [Arc Pro A40/A50]" },
	/* ATS-M (Data Center GPU Flex) */
	{ 0x56c0, "ATS-M [Data Center GPU Flex 170]" },
	{ 0x56c1, "ATS-M [Data Center GPU Flex 140]" },
	/* Ponte Vecchio (Data Center GPU Max) */
	{ 0x0bd0, "Ponte Vecchio [Data Center GPU Max]" },
	{ 0x0bd5, "Ponte Vecchio XT [Data Center GPU Max 1550]" },
	{ 0x0bd6, "Ponte Vecchio XT [Data Center GPU Max 1550]" },
	{ 0x0bd7, "Ponte Vecchio XT [Data Center GPU Max 1350]" },
	{ 0x0bd8, "Ponte Vecchio XT [Data Center GPU Max 1350]" },
	{ 0x0bd9, "Ponte Vecchio XT [Data Center GPU Max 1100]" },
	{ 0x0bda, "Ponte Vecchio XT [Data Center GPU Max 1100]" },
	{ 0x0bdb, "Ponte Vecchio XT [Data Center GPU Max 1100]" },
};

const char *gk_probe_product_name(uint16_t vendor, uint16_t device)
{
	if (vendor != 0x8086)
		return NULL;
	for (size_t i = 0; i < sizeof intel_gpus / sizeof intel_gpus[0]; i++)
		if (intel_gpus[i].device == device)
			return intel_gpus[i].name;
	return NULL;
}
