/* gpukmm-modmgr: deduplicated Events (count bumped, repeats coalesced, bounded). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../services/modmgr/evrec.h"

static gk_mm_event mkev(const char *reason, const char *msg, bool warning)
{
	gk_mm_event e = { .warning = warning };
	snprintf(e.reason, sizeof(e.reason), "%s", reason);
	snprintf(e.message, sizeof(e.message), "%s", msg);
	return e;
}

Test(evrec, repeat_bumps_count_at_most_once_per_interval)
{
	gk_mm_evrec *r;
	cr_assert_eq(gk_mm_evrec_new(&r, 0, 1000, NULL), 0);
	gk_mm_event e = mkev("ModuleDeletionBlocked", "blocked", true);
	gk_mm_evwrite w;
	gk_mm_evrec_note(r, "gpu", "u1", &e, 0, &w);
	cr_assert_eq(w.op, GK_MM_EV_CREATE);
	cr_assert_eq(w.count, 1);
	cr_assert(strncmp(w.name, "gpu.", 4) == 0 && strlen(w.name) == 4 + 16, "%s", w.name);
	char first[sizeof(w.name)];
	strcpy(first, w.name);
	gk_mm_evrec_note(r, "gpu", "u1", &e, 500, &w);
	cr_assert_eq(w.op, GK_MM_EV_SKIP, "coalesced");
	gk_mm_evrec_note(r, "gpu", "u1", &e, 900, &w);
	cr_assert_eq(w.op, GK_MM_EV_SKIP);
	gk_mm_evrec_note(r, "gpu", "u1", &e, 1000, &w);
	cr_assert_eq(w.op, GK_MM_EV_BUMP);
	cr_assert_eq(w.count, 4, "every repeat counted");
	cr_assert_str_eq(w.name, first);
	/* a different message is a different Event */
	gk_mm_event e2 = mkev("ModuleDeletionBlocked", "other", true);
	gk_mm_evrec_note(r, "gpu", "u1", &e2, 1000, &w);
	cr_assert_eq(w.op, GK_MM_EV_CREATE);
	cr_assert_str_neq(w.name, first);
	/* same event on another object / uid: new */
	gk_mm_evrec_note(r, "gpu", "u2", &e, 1000, &w);
	cr_assert_eq(w.op, GK_MM_EV_CREATE);
	gk_mm_evrec_free(r);
}

Test(evrec, names_are_deterministic_across_restarts)
{
	gk_mm_evrec *a, *b;
	gk_mm_evrec_new(&a, 0, 0, NULL);
	gk_mm_evrec_new(&b, 0, 0, NULL);
	gk_mm_event e = mkev("ModuleCreated", "Created KMM Module ns/gpu-gpu", false);
	gk_mm_evwrite wa, wb;
	gk_mm_evrec_note(a, "gpu", "u1", &e, 0, &wa);
	gk_mm_evrec_note(b, "gpu", "u1", &e, 99, &wb);
	cr_assert_str_eq(wa.name, wb.name);
	gk_mm_evrec_free(a);
	gk_mm_evrec_free(b);
}

Test(evrec, bounded_lru)
{
	gk_mm_evrec *r;
	gk_mm_evrec_new(&r, 2, 1, NULL);
	gk_mm_event a = mkev("A", "a", false), b = mkev("B", "b", false), c = mkev("C", "c", false);
	gk_mm_evwrite w;
	gk_mm_evrec_note(r, "p", "u", &a, 0, &w);
	gk_mm_evrec_note(r, "p", "u", &b, 1, &w);
	gk_mm_evrec_note(r, "p", "u", &a, 2, &w); /* a used recently */
	cr_assert_eq(w.op, GK_MM_EV_BUMP);
	gk_mm_evrec_note(r, "p", "u", &c, 3, &w); /* evicts b */
	cr_assert_eq(w.op, GK_MM_EV_CREATE);
	gk_mm_evrec_note(r, "p", "u", &a, 10, &w);
	cr_assert_eq(w.op, GK_MM_EV_BUMP);
	gk_mm_evrec_note(r, "p", "u", &b, 10, &w);
	cr_assert_eq(w.op, GK_MM_EV_CREATE, "evicted: created again (the API answers 409, then bumped)");
	gk_mm_evrec_free(r);
}

Test(evrec, event_json_shape)
{
	gk_mm_event e = mkev("ModuleCreated", "Created KMM Module ns/gpu-gpu", false);
	gk_mm_evwrite w = { .op = GK_MM_EV_CREATE, .name = "gpu.0123456789abcdef", .count = 1 };
	cJSON *o = gk_mm_event_json(NULL, "gpu", "u1", &e, &w, "2026-12-02T12:00:00Z", "host");
	cr_assert_not_null(o);
	char *s = cJSON_PrintUnformatted(o);
	cr_assert(strstr(s, "\"namespace\":\"default\""), "%s", s);
	cr_assert(strstr(s, "\"involvedObject\":{\"apiVersion\":\"intel.com/v1alpha1\",\"kind\":\"ClusterPolicy\",\"name\":\"gpu\",\"uid\":\"u1\"}"), "%s", s);
	cr_assert(strstr(s, "\"type\":\"Normal\""));
	cr_assert(strstr(s, "\"reason\":\"ModuleCreated\""));
	cr_assert(strstr(s, "\"count\":1"));
	free(s);
	cJSON_Delete(o);
	char *p = gk_mm_event_bump_patch(7, "2026-12-02T12:00:01Z");
	cr_assert_str_eq(p, "{\"count\":7,\"lastTimestamp\":\"2026-12-02T12:00:01Z\"}");
	free(p);
}
