/* gpukmm — clocks for deadlines (wall clock, on the wire) and local timers. */
#include <time.h>

#include "gpukmm/ipc.h"

static int64_t ms_of(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t gk_now_ms(void)
{
	return ms_of(CLOCK_REALTIME);
}

int64_t gk_mono_ms(void)
{
	return ms_of(CLOCK_MONOTONIC);
}
