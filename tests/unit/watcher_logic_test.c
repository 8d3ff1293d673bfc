/* gpukmm-watcher pure parts: typed store with sources, lease decisions. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube.pb-c.h"
#include "../../services/watcher/lease.h"
#include "../../services/watcher/store.h"

static ProtobufCMessage *node(const char *name)
{
	Gpukmm__Node *n = malloc(sizeof *n);
	gpukmm__node__init(n);
	n->kernel_version = strdup(name);
	return &n->base;
}

static int put(ws_store *s, const char *key, const char *v, uint32_t src)
{
	ProtobufCMessage *m = node(v);
	int r = ws_put(s, key, m, src);
	protobuf_c_message_free_unpacked(m, NULL);
	return r;
}

Test(store, put_replace_drop_sources)
{
	ws_store s;
	ws_init(&s);
	cr_assert_eq(put(&s, "a", "1", 1), 1);
	cr_assert_eq(put(&s, "a", "2", 2), 0);
	cr_assert_eq(s.n, 1);
	Gpukmm__Node *got = (Gpukmm__Node *)ws_obj(&s, ws_get(&s, "a"));
	cr_assert_str_eq(got->kernel_version, "2", "kept packed, unpacked on demand");
	protobuf_c_message_free_unpacked(&got->base, NULL);
	cr_assert_gt(s.bytes, 0);
	ProtobufCMessage *gone;
	cr_assert_eq(ws_drop(&s, "a", 1, &gone), 0, "source 2 still reports it");
	cr_assert_null(gone);
	cr_assert_eq(ws_drop(&s, "a", 2, &gone), 1);
	cr_assert_not_null(gone);
	cr_assert_str_eq(((Gpukmm__Node *)gone)->kernel_version, "2");
	protobuf_c_message_free_unpacked(gone, NULL);
	cr_assert_eq(s.bytes, 0);
	cr_assert_eq(ws_drop(&s, "a", 2, &gone), -1);
	for (int i = 0; i < 1000; i++) {
		char k[16];
		snprintf(k, sizeof k, "k%d", i);
		cr_assert_eq(put(&s, k, k, 1), 1);
	}
	cr_assert_eq(s.n, 1000);
	cr_assert_not_null(ws_get(&s, "k999"));
	ws_clear(&s);
	cr_assert_eq(s.n, 0);
}

static const wl_config cfg = {15000, 10000, 2000};

static wl_lease lease_of(const char *json)
{
	cJSON *j = cJSON_Parse(json);
	wl_lease l;
	wl_lease_parse(&l, j);
	cJSON_Delete(j);
	return l;
}

Test(lease, create_when_absent_renew_when_mine)
{
	wl_state s = {0};
	wl_lease none = lease_of("null");
	cr_assert_eq(wl_decide(&s, &none, "me", &cfg, 1000), WL_CREATE);
	cr_assert(wl_result(&s, WL_CREATE, true, &cfg, 1000));
	cr_assert(s.leader);
	wl_lease mine = lease_of("{\"metadata\":{\"resourceVersion\":\"5\"},\"spec\":{\"holderIdentity\":\"me\","
				 "\"renewTime\":\"t1\",\"leaseDurationSeconds\":15,\"acquireTime\":\"t0\"}}");
	cr_assert_str_eq(mine.rv, "5");
	cr_assert_eq(wl_decide(&s, &mine, "me", &cfg, 3000), WL_RENEW);
	cr_assert_not(wl_result(&s, WL_RENEW, true, &cfg, 3000));
	/* renew failures: still leader until the renew deadline passes */
	cr_assert_not(wl_result(&s, WL_RENEW, false, &cfg, 9000));
	cr_assert(s.leader);
	cr_assert(wl_result(&s, WL_RENEW, false, &cfg, 13001));
	cr_assert_not(s.leader);
}

Test(lease, follower_takes_over_only_after_expiry)
{
	wl_state s = {0};
	wl_lease other = lease_of("{\"spec\":{\"holderIdentity\":\"other\",\"renewTime\":\"t1\","
				  "\"leaseDurationSeconds\":15}}");
	cr_assert_eq(wl_decide(&s, &other, "me", &cfg, 1000), WL_WAIT);
	cr_assert_eq(wl_decide(&s, &other, "me", &cfg, 15000), WL_WAIT);
	/* the holder renews: the clock restarts */
	wl_lease renewed = lease_of("{\"spec\":{\"holderIdentity\":\"other\",\"renewTime\":\"t2\","
				    "\"leaseDurationSeconds\":15}}");
	cr_assert_eq(wl_decide(&s, &renewed, "me", &cfg, 15500), WL_WAIT);
	cr_assert_eq(wl_decide(&s, &renewed, "me", &cfg, 30000), WL_WAIT);
	cr_assert_eq(wl_decide(&s, &renewed, "me", &cfg, 30501), WL_TAKE);
	/* a released lease (holder "") is taken at once */
	wl_state s2 = {0};
	wl_lease released = lease_of("{\"spec\":{\"holderIdentity\":\"\",\"renewTime\":\"t3\"}}");
	cr_assert_eq(wl_decide(&s2, &released, "me", &cfg, 100), WL_TAKE);
	/* losing the race (409) leaves us follower */
	cr_assert_not(wl_result(&s2, WL_TAKE, false, &cfg, 100));
	cr_assert_not(s2.leader);
}

Test(lease, leader_sees_another_holder)
{
	wl_state s = {.leader = true, .last_renew_ms = 1000};
	wl_lease other = lease_of("{\"spec\":{\"holderIdentity\":\"other\",\"renewTime\":\"x\"}}");
	cr_assert_eq(wl_decide(&s, &other, "me", &cfg, 2000), WL_WAIT);
	cr_assert_not(s.leader);
}

Test(lease, bodies)
{
	wl_lease cur = lease_of("{\"metadata\":{\"resourceVersion\":\"9\"},\"spec\":{\"holderIdentity\":\"old\","
				"\"leaseTransitions\":2,\"acquireTime\":\"a0\"}}");
	cJSON *b = wl_lease_body("ops", "gpukmm", &cur, WL_TAKE, "me", &cfg, "2026-12-02T13:00:00.000000Z");
	char *s = cJSON_PrintUnformatted(b);
	cr_assert(strstr(s, "\"resourceVersion\":\"9\""), "%s", s);
	cr_assert(strstr(s, "\"leaseTransitions\":3"), "%s", s);
	cr_assert(strstr(s, "\"holderIdentity\":\"me\""), "%s", s);
	cr_assert(strstr(s, "\"acquireTime\":\"2026-12-02T13:00:00.000000Z\""), "%s", s);
	cr_assert(strstr(s, "\"leaseDurationSeconds\":15"), "%s", s);
	free(s);
	cJSON_Delete(b);
	cur.holder[0] = 0;
	strcpy(cur.holder, "me");
	b = wl_lease_body("ops", "gpukmm", &cur, WL_RENEW, "me", &cfg, "t");
	s = cJSON_PrintUnformatted(b);
	cr_assert(strstr(s, "\"leaseTransitions\":2"), "%s", s);
	cr_assert(strstr(s, "\"acquireTime\":\"a0\""), "%s", s);
	free(s);
	cJSON_Delete(b);
}

/* ---- debounced discovery (disc.c) ---- */
#include "../../services/watcher/disc.h"

Test(disc, served_at_once_absent_only_after_three_reads_over_the_span)
{
	wd_gate g = {0};
	char why[256];
	cr_assert_not(wd_confirmed(&g), "never answered: unknown");
	wd_why(&g, "kmm.sigs.x-k8s.io/v1beta1", 0, 20000, why, sizeof why);
	cr_assert(strstr(why, "has not answered yet"), "%s", why);
	cr_assert(wd_note(&g, 1, 1000, 20000));
	cr_assert_eq(g.state, WD_SERVED);
	cr_assert(wd_confirmed(&g));
	/* one 404: still served, but unconfirmed */
	cr_assert_not(wd_note(&g, 0, 2000, 20000));
	cr_assert_eq(g.state, WD_SERVED);
	cr_assert_not(wd_confirmed(&g));
	wd_why(&g, "kmm.sigs.x-k8s.io/v1beta1", 2000, 20000, why, sizeof why);
	cr_assert(strstr(why, "was served, but is absent in 1 discovery read"), "%s", why);
	/* failed reads change nothing, neither way */
	cr_assert_not(wd_note(&g, -503, 3000, 20000));
	cr_assert_eq(g.absent_reads, 1);
	/* served again: the streak is over */
	wd_note(&g, 1, 4000, 20000);
	cr_assert(wd_confirmed(&g));
	cr_assert_eq(g.absent_reads, 0);
	/* many absent reads in a short time: not believed */
	for (int t = 5000; t < 24000; t += 1000)
		cr_assert_not(wd_note(&g, 0, t, 20000));
	cr_assert_eq(g.state, WD_SERVED);
	/* 20 s after the first: gone */
	cr_assert(wd_note(&g, 0, 25000, 20000));
	cr_assert_eq(g.state, WD_ABSENT);
	cr_assert(wd_confirmed(&g));
	/* 20 s with only two reads: not yet */
	wd_gate h = {0};
	wd_note(&h, 0, 0, 20000);
	wd_note(&h, 0, 30000, 20000);
	cr_assert_eq(h.state, WD_UNKNOWN, "two reads are not enough, however far apart");
	wd_note(&h, -1, 31000, 20000);
	cr_assert(wd_note(&h, 0, 32000, 20000));
	cr_assert_eq(h.state, WD_ABSENT);
}

Test(disc, dra_version_newest_served)
{
	wd_gate g[WD_DRA_N] = {0};
	cr_assert_eq(wd_dra_pick(g), -1);
	cr_assert_not(wd_dra_none(g), "unknown is not 'not enabled'");
	/* Kubernetes 1.33: v1beta1 + v1beta2 */
	wd_note(&g[1], 1, 0, 1000);
	wd_note(&g[2], 1, 0, 1000);
	cr_assert_str_eq(wd_dra_versions[wd_dra_pick(g)], "v1beta2");
	/* upgraded to 1.34: v1 served */
	wd_note(&g[0], 1, 0, 1000);
	cr_assert_str_eq(wd_dra_versions[wd_dra_pick(g)], "v1");
	/* v1 blips: still picked while its absence is debounced */
	wd_note(&g[0], 0, 100, 1000);
	cr_assert_str_eq(wd_dra_versions[wd_dra_pick(g)], "v1");
	/* nothing served, every version confirmed absent: DRA is not enabled */
	wd_gate n[WD_DRA_N] = {0};
	for (int v = 0; v < WD_DRA_N; v++)
		for (int t = 0; t <= 2000; t += 1000)
			wd_note(&n[v], 0, t, 1000);
	cr_assert(wd_dra_none(n));
	cr_assert_eq(wd_dra_pick(n), -1);
}
