/* gpukmm-certd: certificates made with lib/https (a CA, the pair it signs), the
 * decision (a first pair; a rotation with overlap, step by step; what a
 * follower and a Secret of someone else's do), the Secret and webhook
 * configuration objects and their patches, and the files swapped atomically. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../services/certd/decide.h"
#include "../../services/certd/files.h"
#include "../../services/certd/objects.h"
#include "gpukmm/https.h"

#define NOW 1800000000LL
#define DAY 86400LL

static cd_cfg cfg(void)
{
	cd_cfg c = { .cn = "gpukmm-webhook-service.ns.svc",
		     .dns = { "gpukmm-webhook-service.ns.svc", "gpukmm-webhook-service.ns.svc.cluster.local" },
		     .n_dns = 2, .validity_s = 90 * DAY, .renew_before_s = 30 * DAY, .propagation_s = 120,
		     .grace_s = 120 };
	return c;
}

static cd_material make(const cd_cfg *c, int64_t now)
{
	cd_material m;
	gk_err e;
	cr_assert_eq(cd_make(c, now, &m, &e), 0, "%s", e.msg);
	return m;
}

/* ---- lib/https: issuing ------------------------------------------------------------ */

Test(certd, a_ca_signs_a_serving_certificate_for_the_service_names)
{
	cd_cfg c = cfg();
	cd_material m = make(&c, NOW);
	gk_tls_info ca, leaf;
	cr_assert_eq(gk_tls_cert_info(m.ca, &ca), 0);
	cr_assert_eq(gk_tls_cert_info(m.crt, &leaf), 0);
	cr_assert(ca.ca);
	cr_assert_not(leaf.ca);
	cr_assert_str_eq(leaf.cn, "gpukmm-webhook-service.ns.svc");
	cr_assert_eq(leaf.not_after, NOW + 90 * DAY);
	cr_assert(leaf.not_before < NOW && ca.not_after >= leaf.not_after, "valid from before now, CA outlives it");
	cr_assert(gk_tls_cert_issued_by(m.crt, m.ca));
	cr_assert_not(gk_tls_cert_issued_by(m.ca, m.crt));
	cr_assert(gk_tls_cert_has_dns(m.crt, "gpukmm-webhook-service.ns.svc"));
	cr_assert(gk_tls_cert_has_dns(m.crt, "gpukmm-webhook-service.ns.svc.cluster.local"));
	cr_assert_not(gk_tls_cert_has_dns(m.crt, "other.ns.svc"));
	char msg[128];
	cr_assert_eq(gk_tls_pair_check(m.crt, m.key, msg, sizeof(msg)), 0);
	cd_material o = make(&c, NOW);
	cr_assert_not(gk_tls_cert_issued_by(m.crt, o.ca), "another CA did not sign it");
	cr_assert_eq(gk_tls_pair_check(m.crt, o.key, msg, sizeof(msg)), -3);
	cr_assert_str_eq(msg, "the key does not match the certificate");
	cr_assert_str_neq(ca.sha256, leaf.sha256);
	cr_assert_eq(strlen(leaf.sha256), 64);
	cd_material_free(&o);
	cd_material_free(&m);
}

Test(certd, issuing_refuses_bad_requests)
{
	char *crt, *key;
	gk_err e;
	gk_tls_issue o = { .cn = "x", .not_before = NOW, .not_after = NOW };
	cr_assert_eq(gk_tls_issue_cert(&o, &crt, &key, &e), GK_INVALID_ARGUMENT);
	o.not_after = NOW + 1;
	o.issuer_cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
	cr_assert_eq(gk_tls_issue_cert(&o, &crt, &key, &e), GK_INVALID_ARGUMENT, "a cert without its key");
	o.issuer_key = "nope";
	cr_assert_eq(gk_tls_issue_cert(&o, &crt, &key, &e), GK_INVALID_ARGUMENT);
	cr_assert(strstr(e.msg, "issuer"));
}

Test(certd, pem_split_reads_each_certificate_of_a_bundle)
{
	cd_cfg c = cfg();
	cd_material a = make(&c, NOW), b = make(&c, NOW);
	char bundle[16384], *v[8];
	snprintf(bundle, sizeof(bundle), "%s%s", a.ca, b.ca);
	cr_assert_eq(gk_tls_pem_split(bundle, v, 8), 2);
	cr_assert(gk_tls_cert_issued_by(a.crt, v[0]) && gk_tls_cert_issued_by(b.crt, v[1]));
	free(v[0]);
	free(v[1]);
	cr_assert_eq(gk_tls_pem_split(bundle, v, 1), 1, "bounded");
	free(v[0]);
	cr_assert_eq(gk_tls_pem_split("junk", v, 8), 0);
	cd_material_free(&a);
	cd_material_free(&b);
}

/* ---- the decision ----------------------------------------------------------------- */

/* a configuration whose caBundle is the Secret's ca.crt (current), or an older one
 * that still trusts the pair served (trusts) */
static cd_conf conf2(bool current, bool trusts)
{
	return (cd_conf){ .name = "c", .exists = true, .current = current, .trusts = trusts };
}

static cd_conf conf(bool current)
{
	return conf2(current, current);
}

static char *cat(const char *a, const char *b)
{
	char *s = malloc(strlen(a) + strlen(b) + 1);
	cr_assert_not_null(s);
	strcpy(s, a);
	strcat(s, b);
	return s;
}

Test(certd, an_empty_secret_gets_a_ca_and_a_pair_and_is_served_once_trusted)
{
	cd_cfg c = cfg();
	cd_secret s = { .exists = true, .ours = true };
	cd_conf cs[2] = { conf(false), conf(false) };
	cd_plan p;
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, NOW, &p), 0);
	cr_assert_eq(p.act, CD_ISSUE, "%s", p.why);
	cr_assert_not(p.serve);
	cd_plan_free(&p);
	/* after the write: the configurations lag */
	cd_material m = make(&c, NOW);
	s.tls_crt = m.crt, s.tls_key = m.key, s.ca_crt = m.ca;
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, NOW + 1, &p), 0);
	cr_assert_eq(p.act, CD_PUBLISH, "%s", p.why);
	cr_assert(p.patch[0] && p.patch[1]);
	cr_assert_not(p.serve, "the leader serves a new pair once the API servers trust it");
	cd_plan_free(&p);
	/* a follower serves what the Secret holds */
	cr_assert_eq(cd_decide(&c, &s, cs, 0, false, NOW + 1, &p), 0);
	cr_assert_eq(p.act, CD_NOTHING);
	cr_assert(p.serve);
	cd_plan_free(&p);
	cs[0] = cs[1] = conf(true);
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, NOW + 2, &p), 0);
	cr_assert_eq(p.act, CD_NOTHING, "%s", p.why);
	cr_assert(p.serve);
	cr_assert_eq(p.wake, NOW + 60 * DAY, "the rotation is due 30 days before expiry");
	cd_plan_free(&p);
	cd_material_free(&m);
}

Test(certd, a_rotation_adds_the_new_ca_before_the_new_pair_serves_and_drops_the_old_ca_after)
{
	cd_cfg c = cfg();
	cd_material old = make(&c, NOW);
	cd_secret s = { .exists = true, .ours = true, .tls_crt = old.crt, .tls_key = old.key, .ca_crt = old.ca };
	cd_conf cs[2] = { conf(true), conf(true) };
	cd_plan p;
	int64_t t = NOW + 60 * DAY;
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, t - 1, &p), 0);
	cr_assert_eq(p.act, CD_NOTHING);
	cd_plan_free(&p);
	/* STAGE: the new CA joins ca.crt, the old pair keeps serving */
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, t, &p), 0);
	cr_assert_eq(p.act, CD_STAGE, "%s", p.why);
	cr_assert(p.serve);
	cr_assert_str_eq(p.bundle, old.ca, "the bundle keeps the serving certificate's CA");
	cd_material nw = make(&c, t);
	cd_secret_obj o = { .s = s };
	strcpy(o.rv, "7");
	char *patch = cd_secret_patch(&o, &p, &nw, t);
	cr_assert_not_null(patch);
	cJSON *pj = cJSON_Parse(patch);
	char *b64 = cd_b64(nw.crt);
	cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(pj, "data"), "next.crt")->valuestring, b64);
	cr_assert(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(pj, "metadata")->child, CD_PUBLISHED)));
	cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(pj, "metadata"), "resourceVersion")->valuestring, "7");
	free(b64);
	cJSON_Delete(pj);
	free(patch);
	cd_plan_free(&p);
	char *both = cat(old.ca, nw.ca);
	s.ca_crt = both, s.next_crt = nw.crt, s.next_key = nw.key;
	/* PUBLISH: the configurations still trust the old CA only */
	cs[0] = cs[1] = conf2(false, true);
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, t + 1, &p), 0);
	cr_assert_eq(p.act, CD_PUBLISH);
	cr_assert(p.serve, "an old pair still trusted keeps serving");
	cd_plan_free(&p);
	/* MARK once every configuration trusts both */
	cs[0] = cs[1] = conf(true);
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, t + 2, &p), 0);
	cr_assert_eq(p.act, CD_MARK, "%s", p.why);
	cd_plan_free(&p);
	s.published = t + 2;
	/* wait for the API servers */
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, t + 100, &p), 0);
	cr_assert_eq(p.act, CD_NOTHING);
	cr_assert_eq(p.wake, t + 122);
	cd_plan_free(&p);
	/* SWITCH */
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, t + 122, &p), 0);
	cr_assert_eq(p.act, CD_SWITCH, "%s", p.why);
	o.s = s;
	patch = cd_secret_patch(&o, &p, NULL, t + 122);
	pj = cJSON_Parse(patch);
	b64 = cd_b64(nw.crt);
	cJSON *data = cJSON_GetObjectItem(pj, "data");
	cr_assert_str_eq(cJSON_GetObjectItem(data, "tls.crt")->valuestring, b64);
	cr_assert(cJSON_IsNull(cJSON_GetObjectItem(data, "next.crt")) && cJSON_IsNull(cJSON_GetObjectItem(data, "next.key")));
	cr_assert_null(cJSON_GetObjectItem(data, "ca.crt"), "ca.crt keeps both CAs at the switch");
	free(b64);
	cJSON_Delete(pj);
	free(patch);
	cd_plan_free(&p);
	s.tls_crt = nw.crt, s.tls_key = nw.key, s.next_crt = s.next_key = NULL, s.published = 0, s.switched = t + 122;
	/* grace: followers read the Secret */
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, t + 200, &p), 0);
	cr_assert_eq(p.act, CD_NOTHING);
	cr_assert(p.serve);
	cr_assert_eq(p.wake, t + 242);
	cd_plan_free(&p);
	/* PRUNE: only the new CA */
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, t + 242, &p), 0);
	cr_assert_eq(p.act, CD_PRUNE);
	cr_assert_str_eq(p.bundle, nw.ca);
	cd_plan_free(&p);
	s.ca_crt = nw.ca, s.switched = 0;
	cs[0] = cs[1] = conf2(false, true);
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, t + 243, &p), 0);
	cr_assert_eq(p.act, CD_PUBLISH);
	cr_assert(p.serve, "a pair already served keeps serving while the caBundle shrinks");
	cd_plan_free(&p);
	free(both);
	cd_material_free(&old);
	cd_material_free(&nw);
}

Test(certd, an_expired_pair_is_replaced_at_once_and_a_usable_staged_one_preferred)
{
	cd_cfg c = cfg();
	cd_material old = make(&c, NOW), nw = make(&c, NOW + 60 * DAY);
	cd_secret s = { .exists = true, .ours = true, .tls_crt = old.crt, .tls_key = old.key, .ca_crt = old.ca };
	cd_conf cs[2] = { conf(true), conf(true) };
	cd_plan p;
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, NOW + 91 * DAY, &p), 0);
	cr_assert_eq(p.act, CD_ISSUE, "%s", p.why);
	cr_assert(strstr(p.why, "expired"));
	cr_assert_not(p.serve);
	cd_plan_free(&p);
	char *both = cat(old.ca, nw.ca);
	s.ca_crt = both, s.next_crt = nw.crt, s.next_key = nw.key;
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, NOW + 91 * DAY, &p), 0);
	cr_assert_eq(p.act, CD_SWITCH, "%s", p.why);
	cd_plan_free(&p);
	/* a follower serves nothing expired */
	cr_assert_eq(cd_decide(&c, &s, cs, 0, false, NOW + 91 * DAY, &p), 0);
	cr_assert_not(p.serve);
	cr_assert(strstr(p.why, "expired"), "%s", p.why);
	cd_plan_free(&p);
	free(both);
	cd_material_free(&old);
	cd_material_free(&nw);
}

Test(certd, a_service_renamed_rotates_with_overlap_and_stale_cas_are_pruned)
{
	cd_cfg c = cfg();
	cd_material m = make(&c, NOW), other = make(&c, NOW);
	c.dns[0] = c.cn = "renamed.ns.svc";
	cd_secret s = { .exists = true, .ours = true, .tls_crt = m.crt, .tls_key = m.key, .ca_crt = m.ca };
	cd_conf cs[1] = { conf(true) };
	cd_plan p;
	cr_assert_eq(cd_decide(&c, &s, cs, 1, true, NOW + 1, &p), 0);
	cr_assert_eq(p.act, CD_STAGE);
	cr_assert(strstr(p.why, "renamed.ns.svc"), "%s", p.why);
	cr_assert(p.serve, "the old pair serves meanwhile");
	cd_plan_free(&p);
	c = cfg();
	char *both = cat(m.ca, other.ca);
	s.ca_crt = both;
	cr_assert_eq(cd_decide(&c, &s, cs, 1, true, NOW + 1, &p), 0);
	cr_assert_eq(p.act, CD_PRUNE, "a CA that signs nothing we serve goes: %s", p.why);
	cr_assert_str_eq(p.bundle, m.ca);
	cd_plan_free(&p);
	free(both);
	cd_material_free(&m);
	cd_material_free(&other);
}

Test(certd, someone_elses_secret_and_injected_configurations_are_left_alone)
{
	cd_cfg c = cfg();
	cd_material m = make(&c, NOW);
	cd_secret s = { .exists = true, .ours = false, .tls_crt = m.crt, .tls_key = m.key, .ca_crt = m.ca };
	cd_conf cs[2] = { conf(false), conf(false) };
	cd_plan p;
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, NOW + 91 * DAY, &p), 0);
	cr_assert_eq(p.act, CD_NOTHING, "cert-manager's expired certificate is cert-manager's to renew");
	cr_assert_not(p.serve);
	cd_plan_free(&p);
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, NOW + 1, &p), 0);
	cr_assert_eq(p.act, CD_NOTHING);
	cr_assert(p.serve, "served all the same");
	cd_plan_free(&p);
	/* ours, but the configurations carry cert-manager's CA-injector annotation */
	s.ours = true;
	cs[0].injected = cs[1].injected = true;
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, NOW + 1, &p), 0);
	cr_assert_eq(p.act, CD_NOTHING, "%s", p.why);
	cr_assert_not(p.patch[0] || p.patch[1]);
	cd_plan_free(&p);
	/* a missing configuration is not waited for */
	cs[0] = (cd_conf){ .name = "gone" };
	cs[1] = conf(false);
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, NOW + 1, &p), 0);
	cr_assert_eq(p.act, CD_PUBLISH);
	cr_assert(!p.patch[0] && p.patch[1]);
	cd_plan_free(&p);
	/* no Secret: nothing to do (no right to create one) */
	s = (cd_secret){ .exists = false };
	cr_assert_eq(cd_decide(&c, &s, cs, 2, true, NOW, &p), 0);
	cr_assert_eq(p.act, CD_NOTHING);
	cr_assert(strstr(p.why, "does not exist"));
	cd_plan_free(&p);
	cd_material_free(&m);
}

/* ---- objects ------------------------------------------------------------------------ */

Test(certd, a_secret_is_read_with_its_annotations_and_bad_data_is_absent)
{
	char *crt = cd_b64("CERT"), buf[1024];
	snprintf(buf, sizeof(buf),
		 "{\"kind\":\"Secret\",\"metadata\":{\"resourceVersion\":\"12\",\"annotations\":{"
		 "\"gpukmm.io/managed-by\":\"gpukmm-certd\",\"gpukmm.io/ca-published\":\"2027-01-15T08:00:00Z\"}},"
		 "\"data\":{\"tls.crt\":\"%s\",\"tls.key\":\"!!notbase64\"}}", crt);
	cJSON *j = cJSON_Parse(buf);
	cd_secret_obj o;
	gk_err e;
	cr_assert_eq(cd_secret_read(&o, j, &e), 0);
	cr_assert(o.s.exists && o.s.ours);
	cr_assert_str_eq(o.rv, "12");
	cr_assert_str_eq(o.s.tls_crt, "CERT");
	cr_assert_null(o.s.tls_key);
	cr_assert_eq(o.s.published, 1800000000LL);
	cr_assert_eq(o.s.switched, 0);
	cd_secret_obj_free(&o);
	cJSON_Delete(j);
	/* cert-manager took the Secret over: its annotation wins */
	snprintf(buf, sizeof(buf), "{\"metadata\":{\"annotations\":{\"gpukmm.io/managed-by\":\"gpukmm-certd\","
		 "\"cert-manager.io/certificate-name\":\"c\"}}}");
	j = cJSON_Parse(buf);
	cr_assert_eq(cd_secret_read(&o, j, &e), 0);
	cr_assert(o.s.exists && !o.s.ours);
	cd_secret_obj_free(&o);
	cJSON_Delete(j);
	cr_assert_eq(cd_secret_read(&o, NULL, &e), 0);
	cr_assert_not(o.s.exists);
	j = cJSON_Parse("{\"kind\":\"ConfigMap\"}");
	cr_assert_neq(cd_secret_read(&o, j, &e), 0);
	cJSON_Delete(j);
	free(crt);
}

Test(certd, a_configuration_is_current_when_every_webhook_trusts_ca_crt_and_its_patch_is_guarded)
{
	char *b = cd_b64("CA"), buf[1024];
	snprintf(buf, sizeof(buf),
		 "{\"metadata\":{\"resourceVersion\":\"5\"},\"webhooks\":[{\"name\":\"a\",\"clientConfig\":{\"caBundle\":\"%s\"}},"
		 "{\"name\":\"b\",\"clientConfig\":{}}]}", b);
	cJSON *j = cJSON_Parse(buf);
	cd_conf_obj o;
	gk_err e;
	cr_assert_eq(cd_conf_read(&o, "m", j, "CA", NULL, &e), 0);
	cr_assert(o.c.exists && !o.c.injected);
	cr_assert_not(o.c.current, "webhook b has no caBundle");
	char *patch = cd_conf_patch(&o, "CA");
	char want[1024];
	snprintf(want, sizeof(want),
		 "[{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"5\"},"
		 "{\"op\":\"test\",\"path\":\"/webhooks/0/name\",\"value\":\"a\"},"
		 "{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"%s\"},"
		 "{\"op\":\"test\",\"path\":\"/webhooks/1/name\",\"value\":\"b\"},"
		 "{\"op\":\"add\",\"path\":\"/webhooks/1/clientConfig/caBundle\",\"value\":\"%s\"}]", b, b);
	cr_assert_str_eq(patch, want);
	free(patch);
	cd_conf_obj_free(&o);
	cJSON_Delete(j);
	j = cJSON_Parse("{\"metadata\":{\"annotations\":{\"cert-manager.io/inject-ca-from\":\"ns/c\"}},\"webhooks\":[]}");
	cr_assert_eq(cd_conf_read(&o, "m", j, "CA", NULL, &e), 0);
	cr_assert(o.c.injected);
	cd_conf_obj_free(&o);
	cJSON_Delete(j);
	free(b);
}

Test(certd, a_configuration_trusts_a_pair_when_a_ca_of_its_bundle_signed_it)
{
	cd_cfg c = cfg();
	cd_material a = make(&c, NOW), b = make(&c, NOW);
	char *both = cat(a.ca, b.ca), *b64 = cd_b64(both), buf[16384];
	snprintf(buf, sizeof(buf), "{\"webhooks\":[{\"name\":\"a\",\"clientConfig\":{\"caBundle\":\"%s\"}}]}", b64);
	cJSON *j = cJSON_Parse(buf);
	cd_conf_obj o;
	gk_err e;
	cr_assert_eq(cd_conf_read(&o, "m", j, b.ca, b.crt, &e), 0);
	cr_assert(o.c.trusts && !o.c.current);
	cd_conf_obj_free(&o);
	cr_assert_eq(cd_conf_read(&o, "m", j, both, a.crt, &e), 0);
	cr_assert(o.c.trusts && o.c.current);
	cd_conf_obj_free(&o);
	cJSON_Delete(j);
	free(b64);
	b64 = cd_b64(a.ca);
	snprintf(buf, sizeof(buf), "{\"webhooks\":[{\"name\":\"a\",\"clientConfig\":{\"caBundle\":\"%s\"}}]}", b64);
	j = cJSON_Parse(buf);
	cr_assert_eq(cd_conf_read(&o, "m", j, b.ca, b.crt, &e), 0);
	cr_assert_not(o.c.trusts);
	cd_conf_obj_free(&o);
	cJSON_Delete(j);
	free(b64);
	free(both);
	cd_material_free(&a);
	cd_material_free(&b);
}

/* ---- files ----------------------------------------------------------------------------- */

Test(certd, the_files_switch_as_one_and_the_old_ones_go)
{
	char dir[] = "/tmp/certd-test-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	gk_err e;
	cr_assert_not(cd_files_same(dir, "C1", "K1"));
	cr_assert_eq(cd_files_write(dir, "C1", "K1", "A1", &e), 0, "%s", e.msg);
	cr_assert(cd_files_same(dir, "C1", "K1"));
	char p[512], link1[256], link2[256];
	snprintf(p, sizeof(p), "%s/..data", dir);
	ssize_t n = readlink(p, link1, sizeof(link1) - 1);
	cr_assert(n > 0);
	link1[n] = 0;
	struct stat st;
	snprintf(p, sizeof(p), "%s/tls.key", dir);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	cr_assert_eq(cd_files_write(dir, "C2", "K2", "A2", &e), 0, "%s", e.msg);
	cr_assert(cd_files_same(dir, "C2", "K2"));
	snprintf(p, sizeof(p), "%s/..data", dir);
	n = readlink(p, link2, sizeof(link2) - 1);
	link2[n] = 0;
	cr_assert_str_neq(link1, link2);
	snprintf(p, sizeof(p), "%s/%s", dir, link1);
	cr_assert_neq(stat(p, &st), 0, "the old pair's directory is gone");
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

/* The previous pair's directory is named by ..data, which anyone writing to the
 * directory can point anywhere: DIR/<it> cut short at the buffer's end must not
 * name (and remove) a sibling whose name is its beginning. */
Test(certd, a_previous_pair_path_too_long_to_build_removes_nothing)
{
	char top[] = "/tmp/certd-test-XXXXXX";
	cr_assert_not_null(mkdtemp(top));
	static const char victim[] = "victim-directory-12345"; /* 22 */
	/* DIR + "/" + victim is exactly 4095 characters: DIR/<victim + more> is cut there */
	size_t want = 4095 - 1 - strlen(victim);
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", top);
	while (strlen(dir) < want) {
		size_t room = want - strlen(dir) - 1; /* "/" + a name */
		size_t len = room > 200 ? 200 : room;
		if (room > 200 && room - 200 < 2)
			len = 190; /* leave room for one more "/x" */
		size_t at = strlen(dir);
		dir[at++] = '/';
		memset(dir + at, 'd', len);
		dir[at + len] = 0;
		cr_assert_eq(mkdir(dir, 0700), 0, "%s", strerror(errno));
	}
	cr_assert_eq(strlen(dir), want);
	cr_assert_eq(chdir(dir), 0);
	cr_assert_eq(mkdir(victim, 0700), 0);
	char old[64];
	snprintf(old, sizeof(old), "%sxx", victim);
	cr_assert_eq(symlink(old, "..data"), 0);
	gk_err e;
	cr_assert_eq(cd_files_write(dir, "C1", "K1", "A1", &e), 0, "%s", e.msg);
	cr_assert(cd_files_same(dir, "C1", "K1"));
	struct stat st;
	cr_assert_eq(stat(victim, &st), 0, "the sibling %s was removed", victim);
	cr_assert_eq(chdir("/"), 0);
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	cr_assert_eq(system(cmd), 0);
}
