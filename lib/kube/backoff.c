/* Client-side QPS (token bucket) and retry backoff (client-go's defaults). Pure. */
#include "gpukmm/kube.h"

void gk_kube_bucket_init(gk_kube_bucket *b, double qps, int burst, int64_t now_ms)
{
	b->qps = qps;
	b->burst = burst > 0 ? burst : 1;
	b->tokens = b->burst;
	b->last_ms = now_ms;
}

int64_t gk_kube_bucket_take(gk_kube_bucket *b, int64_t now_ms)
{
	if (b->qps <= 0)
		return 0;
	if (now_ms > b->last_ms) {
		b->tokens += (double)(now_ms - b->last_ms) * b->qps / 1000.0;
		if (b->tokens > b->burst)
			b->tokens = b->burst;
		b->last_ms = now_ms;
	}
	b->tokens -= 1.0; /* reserve, possibly going negative: waiters queue up */
	if (b->tokens >= 0)
		return 0;
	double wait = -b->tokens * 1000.0 / b->qps;
	return (int64_t)(wait + 0.999);
}

static uint64_t xs(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ULL;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

void gk_kube_backoff_init(gk_kube_backoff *b, uint64_t seed)
{
	b->initial_ms = 800;
	b->max_ms = 30000;
	b->reset_after_ms = 120000;
	b->factor = 2.0;
	b->jitter = 1.0;
	b->cur_ms = b->initial_ms;
	b->last_ms = 0;
	b->rng = seed ? seed : 0x2545f4914f6cdd1dULL;
}

void gk_kube_backoff_reset(gk_kube_backoff *b)
{
	b->cur_ms = b->initial_ms;
	b->last_ms = 0;
}

int64_t gk_kube_rand_range(gk_kube_backoff *b, int64_t lo, int64_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + (int64_t)(xs(&b->rng) % (uint64_t)(hi - lo + 1));
}

int64_t gk_kube_backoff_next(gk_kube_backoff *b, int64_t now_ms)
{
	if (b->last_ms && now_ms - b->last_ms > b->reset_after_ms)
		b->cur_ms = b->initial_ms;
	b->last_ms = now_ms ? now_ms : 1;
	int64_t base = b->cur_ms;
	double u = (double)(xs(&b->rng) >> 11) / (double)(1ULL << 53);
	int64_t d = base + (int64_t)((double)base * b->jitter * u);
	if (d > b->max_ms) /* the cap bounds the jittered delay too: never above max */
		d = b->max_ms;
	double next = (double)b->cur_ms * b->factor;
	b->cur_ms = next > (double)b->max_ms ? b->max_ms : (int64_t)next;
	return d;
}

int gk_kube_conflict_delay(int *streak, int pause_ms)
{
	int n = *streak > 0 ? *streak : 0;
	if (n >= GK_KUBE_CONFLICT_ATTEMPTS) {
		*streak = 0;
		return pause_ms;
	}
	*streak = n + 1;
	return GK_KUBE_CONFLICT_MS << n;
}
