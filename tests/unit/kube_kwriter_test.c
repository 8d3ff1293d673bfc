/* lib/kube kwriter: the bounded table of an asynchronous writer — find/add,
 * an idle entry makes room at the bound (a busy one never does), release only
 * when nothing is left to remember, the failure backoff keeps the message. */
#include <criterion/criterion.h>
#include <string.h>

#include "gpukmm/kwriter.h"
#include "gpukmm/loop.h"

static int fired;
static void on_timer(void *user, gk_kw_ent *e, bool reread)
{
	fired++;
}

Test(kwriter, bound_release_and_backoff)
{
	gk_loop *l = NULL;
	gk_err err;
	cr_assert_eq(gk_loop_new(&l, &err), 0);
	gk_kw *kw;
	cr_assert_eq(gk_kw_new(&kw, l, 2, 16, on_timer, NULL), 0);
	bool created;
	gk_kw_ent *a = gk_kw_get(kw, "a", &created);
	cr_assert(a && created);
	cr_assert_eq(gk_kw_get(kw, "a", &created), a);
	cr_assert_not(created);
	cr_assert_not_null(a->data);
	gk_kw_ent *b = gk_kw_get(kw, "b", NULL);
	cr_assert_not_null(b);
	/* a failed call: the message is kept, a timer wakes the owner later */
	gk_kw_failed(a, "boom");
	cr_assert_str_eq(a->err, "boom");
	cr_assert_eq(a->failures, 1);
	cr_assert(a->timer != 0);
	gk_kw_release(a);
	cr_assert_eq(gk_kw_find(kw, "a"), a, "an entry with an error and a timer stays");
	/* at the bound an idle entry makes room (b), a busy one (a: timer) does not */
	gk_kw_ent *c = gk_kw_get(kw, "c", NULL);
	cr_assert_not_null(c);
	cr_assert_null(gk_kw_find(kw, "b"));
	gk_kw_after(c, 60000, true);
	cr_assert(c->reread_due);
	cr_assert_eq(gk_kw_inflight(kw), 1);
	cr_assert_null(gk_kw_get(kw, "d", NULL), "full of busy entries");
	gk_kw_ok(a);
	cr_assert_eq(a->err[0], 0);
	cr_assert_eq(a->failures, 0);
	gk_kw_free(kw); /* cancels the timers */
	gk_loop_free(l);
	cr_assert_eq(fired, 0);
}
