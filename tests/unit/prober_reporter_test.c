/* gpukmm-prober send decisions (services/prober/reporter.c) and watch paths. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../../services/prober/reporter.h"
#include "../../services/prober/watch.h"
#include "gpukmm/probe.h"

/* A small report whose content is determined by `vfs`. */
static Gpukmm__NodeReport *mk(uint32_t vfs)
{
	Gpukmm__NodeReport *r = calloc(1, sizeof *r);
	cr_assert_not_null(r);
	gpukmm__node_report__init(r);
	r->node_name = strdup("n1");
	r->gpus = calloc(1, sizeof *r->gpus);
	r->gpus[0] = calloc(1, sizeof **r->gpus);
	gpukmm__pci_gpu__init(r->gpus[0]);
	r->gpus[0]->address = strdup("0000:03:00.0");
	r->gpus[0]->has_sriov_numvfs = 1;
	r->gpus[0]->sriov_numvfs = vfs;
	r->n_gpus = 1;
	r->has_probed_at_ms = 1;
	r->probed_at_ms = rand();
	return r;
}

Test(prober_reporter, first_report_is_sent_unchanged_is_not)
{
	gk_reporter rp;
	gk_reporter_init(&rp, 100, 1000);
	cr_expect_eq(gk_reporter_offer(&rp, mk(4), false), GK_REP_SEND);
	const Gpukmm__NodeReport *s = gk_reporter_take_send(&rp);
	cr_assert_not_null(s);
	cr_expect_eq(s->generation, 1);
	cr_expect_null(gk_reporter_take_send(&rp), "one send at a time");
	cr_expect_eq(gk_reporter_done(&rp, GK_OK), -1);
	for (int i = 0; i < 5; i++)
		cr_expect_eq(gk_reporter_offer(&rp, mk(4), false), GK_REP_IDLE, "same content: nothing to send");
	cr_expect_eq(rp.unchanged, 5);
	cr_expect_eq(rp.sent, 1);
	cr_expect_eq(rp.generation, 1);
	cr_expect_eq(gk_reporter_offer(&rp, mk(0), false), GK_REP_SEND);
	s = gk_reporter_take_send(&rp);
	cr_expect_eq(s->generation, 2);
	cr_expect_eq(gk_reporter_done(&rp, GK_OK), -1);
	gk_reporter_fini(&rp);
}

Test(prober_reporter, backoff_and_latest_wins)
{
	gk_reporter rp;
	gk_reporter_init(&rp, 100, 350);
	cr_expect_eq(gk_reporter_offer(&rp, mk(1), false), GK_REP_SEND);
	gk_reporter_take_send(&rp);
	cr_expect_eq(gk_reporter_done(&rp, GK_UNAVAILABLE), 100);
	/* while waiting for the retry a newer report replaces the pending one */
	cr_expect_eq(gk_reporter_offer(&rp, mk(2), false), GK_REP_IDLE, "retry timer armed: wait for it");
	cr_expect_eq(rp.replaced, 1);
	cr_expect_eq(gk_reporter_retry_due(&rp), GK_REP_SEND);
	const Gpukmm__NodeReport *s = gk_reporter_take_send(&rp);
	cr_expect_eq(s->gpus[0]->sriov_numvfs, 2, "the latest report is the one sent");
	cr_expect_eq(s->generation, 2);
	cr_expect_eq(gk_reporter_done(&rp, GK_DEADLINE_EXCEEDED), 200);
	cr_expect_eq(gk_reporter_retry_due(&rp), GK_REP_SEND);
	gk_reporter_take_send(&rp);
	cr_expect_eq(gk_reporter_done(&rp, GK_UNAVAILABLE), 350, "capped");
	cr_expect_eq(gk_reporter_retry_due(&rp), GK_REP_SEND);
	gk_reporter_take_send(&rp);
	cr_expect_eq(gk_reporter_done(&rp, GK_UNAVAILABLE), 350);
	cr_expect_eq(gk_reporter_retry_due(&rp), GK_REP_SEND);
	gk_reporter_take_send(&rp);
	cr_expect_eq(gk_reporter_done(&rp, GK_OK), -1);
	cr_expect_eq(rp.backoff_ms, 0, "reset by a success");
	cr_expect_eq(rp.failed, 4);
	cr_expect_eq(rp.sent, 1);
	cr_expect_null(rp.pending);
	gk_reporter_fini(&rp);
}

Test(prober_reporter, change_while_in_flight_is_sent_after)
{
	gk_reporter rp;
	gk_reporter_init(&rp, 100, 1000);
	gk_reporter_offer(&rp, mk(1), false);
	gk_reporter_take_send(&rp);
	cr_expect_eq(gk_reporter_offer(&rp, mk(2), false), GK_REP_IDLE, "in flight");
	cr_expect_eq(gk_reporter_done(&rp, GK_OK), 0, "a newer report waits: send now");
	const Gpukmm__NodeReport *s = gk_reporter_take_send(&rp);
	cr_expect_eq(s->gpus[0]->sriov_numvfs, 2);
	cr_expect_eq(gk_reporter_done(&rp, GK_OK), -1);
	/* back to the first state while in flight: it must still be sent (statusd has 2) */
	gk_reporter_offer(&rp, mk(3), false);
	gk_reporter_take_send(&rp);
	gk_reporter_offer(&rp, mk(2), false);
	cr_expect_eq(gk_reporter_done(&rp, GK_OK), 0);
	s = gk_reporter_take_send(&rp);
	cr_expect_eq(s->gpus[0]->sriov_numvfs, 2);
	cr_expect_eq(gk_reporter_done(&rp, GK_OK), -1);
	/* the same content again while in flight: dropped after the ack */
	gk_reporter_offer(&rp, mk(5), false);
	gk_reporter_take_send(&rp);
	gk_reporter_offer(&rp, mk(5), false);
	cr_expect_eq(gk_reporter_done(&rp, GK_OK), -1);
	cr_expect_null(rp.pending);
	gk_reporter_fini(&rp);
}

/* statusd keeps the report in memory only: one restarted after its ack has
 * nothing to hand in; the interval's restatement tells it again */
Test(prober_reporter, restated_unchanged_report_is_sent_again)
{
	gk_reporter rp;
	gk_reporter_init(&rp, 100, 1000);
	gk_reporter_offer(&rp, mk(4), false);
	gk_reporter_take_send(&rp);
	cr_expect_eq(gk_reporter_done(&rp, GK_OK), -1);
	cr_expect_eq(gk_reporter_offer(&rp, mk(4), false), GK_REP_IDLE, "unchanged, not restated: nothing");
	cr_expect_eq(gk_reporter_offer(&rp, mk(4), true), GK_REP_SEND, "restated: sent again");
	const Gpukmm__NodeReport *s = gk_reporter_take_send(&rp);
	cr_assert_not_null(s);
	cr_expect_eq(s->generation, 1, "the same state keeps its generation");
	cr_expect_eq(gk_reporter_done(&rp, GK_OK), -1);
	cr_expect_eq(rp.restated, 1);
	cr_expect_eq(rp.unchanged, 2);
	cr_expect_eq(rp.sent, 2);
	/* a restatement that fails is retried like any send */
	cr_expect_eq(gk_reporter_offer(&rp, mk(4), true), GK_REP_SEND);
	gk_reporter_take_send(&rp);
	cr_expect_eq(gk_reporter_done(&rp, GK_UNAVAILABLE), 100);
	cr_expect_eq(gk_reporter_offer(&rp, mk(4), true), GK_REP_IDLE, "retry timer armed: wait for it");
	cr_expect_eq(gk_reporter_retry_due(&rp), GK_REP_SEND);
	gk_reporter_take_send(&rp);
	cr_expect_eq(gk_reporter_done(&rp, GK_OK), -1);
	cr_expect_null(rp.pending);
	/* restated while the same state is in flight: nothing more after the ack */
	gk_reporter_offer(&rp, mk(6), false);
	gk_reporter_take_send(&rp);
	gk_reporter_offer(&rp, mk(6), true);
	cr_expect_eq(gk_reporter_done(&rp, GK_OK), -1);
	cr_expect_null(rp.pending);
	gk_reporter_fini(&rp);
}

Test(prober_reporter, done_without_send_is_ignored)
{
	gk_reporter rp;
	gk_reporter_init(&rp, 0, 0);
	cr_expect_eq(rp.min_backoff_ms, 100);
	cr_expect_eq(rp.max_backoff_ms, 30000);
	cr_expect_eq(gk_reporter_done(&rp, GK_OK), -1);
	cr_expect_eq(gk_reporter_retry_due(&rp), GK_REP_IDLE);
	cr_expect_null(gk_reporter_take_send(&rp));
	gk_reporter_fini(&rp);
}

Test(prober_watch, paths)
{
	Gpukmm__NodeReport *r = mk(1);
	r->kernel_version = strdup("6.8.0");
	char p[16][512];
	size_t n = gk_pwatch_paths("/x/", "xe", r, p, 16);
	cr_assert_eq(n, 5);
	cr_expect_str_eq(p[0], "/x/sys/bus/pci/devices");
	cr_expect_str_eq(p[1], "/x/sys/module");
	cr_expect_str_eq(p[2], "/x/sys/module/xe");
	cr_expect_str_eq(p[3], "/x/lib/modules/6.8.0");
	cr_expect_str_eq(p[4], "/x/sys/bus/pci/devices/0000:03:00.0");
	n = gk_pwatch_paths("/", "xe", NULL, p, 2);
	cr_expect_eq(n, 2, "bounded");
	cr_expect_str_eq(p[0], "/sys/bus/pci/devices");
	gk_probe_report_free(r);
}
