/* gpukmm — resuming a watcher bus subscription from a Watcher.Snapshot reply:
 * the one place a consumer (modmgr, gater, statusd) takes the snapshot's
 * sequence numbers and publisher epoch (see gk_ipc_sub_set_seq). */
#ifndef GPUKMM_WSUB_H
#define GPUKMM_WSUB_H

#include <stddef.h>
#include <stdint.h>

#include "events.pb-c.h"
#include "gpukmm/ipc.h"

/* The bus sequence number of `topic` at the time of the snapshot (0 if absent). */
uint64_t gk_wsub_snapshot_seq(const Gpukmm__SnapshotReply *s, const char *topic);
/* Expect, on each of the n topics, the message after the snapshot's number,
 * from the snapshot's publisher epoch. */
void gk_wsub_resume(gk_ipc_sub *sub, const char *const *topics, size_t n, const Gpukmm__SnapshotReply *s);

#endif
