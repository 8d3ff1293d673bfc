/* Helper of tests/e2e/leak_check.sh (not a test by itself): a supervised
 * service that behaves well (Ready, heartbeats, exits 0 on SIGTERM) but, with
 * --leak, loses one allocation on the way out — what a real leak in a service
 * looks like to LeakSanitizer at exit. */
#include <stdlib.h>
#include <string.h>

#include "gpukmm/err.h"
#include "gpukmm/svc.h"

static int set_flag(void *dst, const char *v)
{
	(void)v;
	*(int *)dst = 1;
	return 0;
}

int main(int argc, char **argv)
{
	static gk_svc svc;
	int leak = 0;
	const gk_svc_opt extra[] = {
		{ "leak", 0, "lose one allocation at exit", set_flag, &leak },
		{ 0 },
	};
	gk_err err;
	int rc = gk_svc_init(&svc, "leaky", argc, argv, extra, &err);
	if (rc)
		return rc;
	gk_svc_ready(&svc);
	rc = gk_loop_run(svc.loop);
	gk_svc_fini(&svc);
	if (leak) {
		char *volatile p = malloc(4096);
		if (p)
			memset(p, 1, 4096);
		p = NULL; /* the only reference is gone: a leak */
	}
	return rc;
}
