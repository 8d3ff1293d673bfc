/* gpukmm-modmgr — placeholder until lib/ipc, lib/svc and lib/kube land on main:
 * the reconcile decision (decide.c) is complete and unit-tested; the service
 * loop comes next. Exits non-zero so nothing mistakes it for a running manager. */
#include <stdio.h>

int main(void)
{
	fprintf(stderr, "gpukmm-modmgr: service loop not built yet (needs lib/ipc, lib/svc, lib/kube)\n");
	return 1;
}
