/* gpukmm — resuming a watcher bus subscription from a snapshot (gpukmm/wsub.h). */
#include <string.h>

#include "gpukmm/wsub.h"

uint64_t gk_wsub_snapshot_seq(const Gpukmm__SnapshotReply *s, const char *topic)
{
	for (size_t i = 0; i < s->n_seqs; i++)
		if (s->seqs[i]->topic && strcmp(s->seqs[i]->topic, topic) == 0)
			return s->seqs[i]->seq;
	return 0;
}

void gk_wsub_resume(gk_ipc_sub *sub, const char *const *topics, size_t n, const Gpukmm__SnapshotReply *s)
{
	for (size_t i = 0; i < n; i++)
		gk_ipc_sub_set_seq(sub, topics[i], gk_wsub_snapshot_seq(s, topics[i]), s->epoch);
}
