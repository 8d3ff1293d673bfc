/* gpukmm-prober — inotify watches (see watch.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "watch.h"

size_t gk_pwatch_paths(const char *root, const char *module, const Gpukmm__NodeReport *r, char (*out)[512],
		       size_t max)
{
	size_t n = 0;
	const char *sep = root[0] && root[strlen(root) - 1] == '/' ? "" : "/";
#define ADD(...)                                                                      \
	do {                                                                          \
		if (n < max) {                                                        \
			int k_ = snprintf(out[n], sizeof out[n], __VA_ARGS__);        \
			if (k_ > 0 && (size_t)k_ < sizeof out[n])                     \
				n++;                                                  \
		}                                                                     \
	} while (0)
	ADD("%s%ssys/bus/pci/devices", root, sep);
	ADD("%s%ssys/module", root, sep);
	ADD("%s%ssys/module/%s", root, sep, module);
	if (r && r->kernel_version)
		ADD("%s%slib/modules/%s", root, sep, r->kernel_version);
	for (size_t i = 0; r && i < r->n_gpus; i++)
		if (!r->gpus[i]->is_vf && r->gpus[i]->address)
			ADD("%s%ssys/bus/pci/devices/%s", root, sep, r->gpus[i]->address);
#undef ADD
	return n;
}

int gk_pwatch_open(gk_pwatch *w, gk_err *err)
{
	memset(w, 0, sizeof *w);
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd < 0)
		return gk_err_set(err, GK_UNAVAILABLE, "inotify: %s", strerror(errno));
	return GK_OK;
}

void gk_pwatch_arm(gk_pwatch *w, const char *root, const char *module, const Gpukmm__NodeReport *r)
{
	if (w->fd < 0)
		return;
	for (size_t i = 0; i < w->n; i++)
		inotify_rm_watch(w->fd, w->wd[i]);
	w->n = 0;
	char paths[GK_PWATCH_MAX][512];
	size_t np = gk_pwatch_paths(root, module, r, paths, GK_PWATCH_MAX);
	for (size_t i = 0; i < np; i++) {
		int wd = inotify_add_watch(w->fd, paths[i],
					   IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM |
						   IN_MOVED_TO | IN_ATTRIB);
		if (wd >= 0)
			w->wd[w->n++] = wd;
	}
}

int gk_pwatch_drain(gk_pwatch *w)
{
	if (w->fd < 0)
		return 0;
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	int count = 0;
	for (int rounds = 0; rounds < 64; rounds++) { /* bounded: a storm is coalesced by the caller */
		ssize_t n = read(w->fd, buf, sizeof buf);
		if (n <= 0)
			break;
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *e = (struct inotify_event *)p;
			count++;
			p += sizeof *e + e->len;
		}
	}
	w->events += (unsigned long long)count;
	return count;
}

void gk_pwatch_close(gk_pwatch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	w->n = 0;
}
