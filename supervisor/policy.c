/* Pure restart policy: no clocks, no processes — numbers in, numbers out.
 *
 * Backoff is kubelet-shaped (exponential, capped, reset after sustained health)
 * with jitter so that services that died together do not restart in lockstep.
 * The intensity window is kept apart from the backoff (OTP's MaxR/MaxT): the
 * backoff slows a crash loop down, the intensity limit ends it by escalation. */
#include "sup.h"

#include <signal.h>

int64_t gk_sup_backoff_delay(const gk_sup_backoff *b, unsigned failures, double u)
{
	if (failures == 0 || b->initial_ms <= 0)
		return 0;
	int64_t d = b->initial_ms;
	for (unsigned i = 1; i < failures && d < b->max_ms; i++)
		d = d > INT64_MAX / 2 ? INT64_MAX : d * 2;
	if (d > b->max_ms)
		d = b->max_ms;
	if (u < 0)
		u = 0;
	if (u >= 1)
		u = 0.999999;
	if (b->jitter > 0)
		d += (int64_t)((double)d * b->jitter * u);
	if (d > b->max_ms)
		d = b->max_ms;
	return d;
}

int gk_sup_stop_signals(int stop_signal, int out[2])
{
	out[0] = SIGCONT;
	out[1] = stop_signal;
	return 2;
}

enum gk_sup_exit_verdict gk_sup_exit_decide(enum gk_sup_restart r, bool clean)
{
	switch (r) {
	case GK_SUP_PERMANENT:
		return GK_SUP_RESTART;
	case GK_SUP_TRANSIENT:
		return clean ? GK_SUP_DONE : GK_SUP_RESTART;
	case GK_SUP_TEMPORARY:
	default:
		return clean ? GK_SUP_DONE : GK_SUP_GIVE_UP;
	}
}

unsigned gk_sup_failures_after(unsigned failures, int64_t ready_for_ms, int64_t reset_after_ms)
{
	if (ready_for_ms >= 0 && ready_for_ms >= reset_after_ms)
		return 1;       /* healthy long enough: this death starts a new series */
	return failures >= 64 ? 64 : failures + 1;
}

void gk_sup_intensity_init(gk_sup_intensity *w, int max, int64_t window_ms)
{
	w->max = max < 0 ? 0 : (max >= GK_SUP_INTENSITY_CAP ? GK_SUP_INTENSITY_CAP - 1 : max);
	w->window_ms = window_ms;
	w->head = w->count = 0;
}

int gk_sup_intensity_count(const gk_sup_intensity *w, int64_t now_ms)
{
	int n = 0;
	for (unsigned i = 0; i < w->count; i++) {
		unsigned k = (w->head + GK_SUP_INTENSITY_CAP - 1 - i) % GK_SUP_INTENSITY_CAP;
		if (now_ms - w->t[k] >= w->window_ms)
			break;      /* older entries are older still */
		n++;
	}
	return n;
}

bool gk_sup_intensity_add(gk_sup_intensity *w, int64_t now_ms)
{
	w->t[w->head] = now_ms;
	w->head = (w->head + 1) % GK_SUP_INTENSITY_CAP;
	if (w->count < GK_SUP_INTENSITY_CAP)
		w->count++;
	return gk_sup_intensity_count(w, now_ms) > w->max;
}

double gk_sup_rand01(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ULL;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return (double)((x * 0x2545F4914F6CDD1DULL) >> 11) / (double)(1ULL << 53);
}
