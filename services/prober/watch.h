/* gpukmm-prober — inotify on the inputs that can change (an early trigger;
 * the interval is the real fallback).
 *
 * sysfs and procfs do not generate inotify events for changes the kernel
 * makes (a module loading, VFs appearing, sriov_numvfs changing); watches on
 * them succeed but stay silent. Events do arrive for real filesystems
 * (<root>/lib/modules/<kver> when a driver is installed on the host) and for
 * fixture trees in tests. So: watch cheaply, never rely on it. */
#ifndef GPUKMM_PROBER_WATCH_H
#define GPUKMM_PROBER_WATCH_H

#include <stddef.h>

#include "gpukmm/err.h"
#include "status.pb-c.h"

#define GK_PWATCH_MAX 64

typedef struct gk_pwatch {
	int fd;                  /* inotify fd, -1 when unavailable */
	int wd[GK_PWATCH_MAX];
	size_t n;
	unsigned long long events;
} gk_pwatch;

int gk_pwatch_open(gk_pwatch *w, gk_err *err);
/* Re-arm the watches for this report: <root>/sys/bus/pci/devices, the GPU PF
 * directories, <root>/sys/module, <root>/sys/module/<module>,
 * <root>/lib/modules/<kver>. Paths that do not exist are skipped. */
void gk_pwatch_arm(gk_pwatch *w, const char *root, const char *module, const Gpukmm__NodeReport *r);
/* Drain pending events (non-blocking); returns how many were read. */
int gk_pwatch_drain(gk_pwatch *w);
void gk_pwatch_close(gk_pwatch *w);

/* The path list gk_pwatch_arm uses (pure; for tests). Returns the count written. */
size_t gk_pwatch_paths(const char *root, const char *module, const Gpukmm__NodeReport *r, char (*out)[512],
		       size_t max);

#endif
