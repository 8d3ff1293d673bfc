/* lib/probe — the names read from pci.ids, remembered while the file stays the
 * same (device, inode, size, modification time). The prober asks every interval
 * for the same few devices; a device pci.ids does not list made each probe read
 * the whole list (~1.3 MB, 30k lines). What is kept: at most GKP_IDS_CACHE_MAX
 * (vendor, device) answers, "not listed" among them; a full cache or another
 * file starts over. Safe from several threads. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "probe_int.h"

static struct {
	bool valid;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	char path[512];
	size_t n;
	struct {
		uint16_t vendor, device;
		char *name; /* NULL: not listed */
	} e[GKP_IDS_CACHE_MAX];
} cache;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static bool same_file(const char *path, const struct stat *st)
{
	return cache.valid && cache.dev == st->st_dev && cache.ino == st->st_ino && cache.size == st->st_size &&
	       cache.mtime.tv_sec == st->st_mtim.tv_sec && cache.mtime.tv_nsec == st->st_mtim.tv_nsec &&
	       strcmp(cache.path, path) == 0;
}

static void reset(void)
{
	for (size_t i = 0; i < cache.n; i++)
		free(cache.e[i].name);
	cache.n = 0;
	cache.valid = false;
}

int gkp_ids_cached(const char *path, const struct stat *st, uint16_t vendor, uint16_t device, char *name, size_t cap)
{
	int found = -1;
	pthread_mutex_lock(&mu);
	if (same_file(path, st))
		for (size_t i = 0; i < cache.n; i++)
			if (cache.e[i].vendor == vendor && cache.e[i].device == device) {
				found = cache.e[i].name != NULL;
				if (found)
					snprintf(name, cap, "%s", cache.e[i].name);
				break;
			}
	pthread_mutex_unlock(&mu);
	return found;
}

void gkp_ids_remember(const char *path, const struct stat *st, uint16_t vendor, uint16_t device, const char *name)
{
	if (strlen(path) >= sizeof cache.path)
		return;
	pthread_mutex_lock(&mu);
	size_t i = 0;
	if (same_file(path, st))
		while (i < cache.n && !(cache.e[i].vendor == vendor && cache.e[i].device == device))
			i++;
	if (!same_file(path, st) || i == GKP_IDS_CACHE_MAX) {
		reset();
		i = 0;
		cache.dev = st->st_dev;
		cache.ino = st->st_ino;
		cache.size = st->st_size;
		cache.mtime = st->st_mtim;
		snprintf(cache.path, sizeof cache.path, "%s", path);
		cache.valid = true;
	}
	char *copy = name ? strdup(name) : NULL;
	if (!name || copy) {
		if (i == cache.n)
			cache.n++;
		else
			free(cache.e[i].name);
		cache.e[i].vendor = vendor;
		cache.e[i].device = device;
		cache.e[i].name = copy;
	}
	pthread_mutex_unlock(&mu);
}

void gkp_ids_forget(void)
{
	pthread_mutex_lock(&mu);
	reset();
	pthread_mutex_unlock(&mu);
}
