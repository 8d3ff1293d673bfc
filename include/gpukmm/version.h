/* gpukmm — the version every binary prints with --version: `git describe`
 * of the source tree at build time (Makefile: $(BUILD)/gen/version.c), or
 * "unknown" when it was built from a tree without git (a release tarball). */
#ifndef GPUKMM_VERSION_H
#define GPUKMM_VERSION_H

extern const char gk_version[];

#endif
