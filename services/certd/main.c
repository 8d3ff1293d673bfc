/* gpukmm-certd — the webhook's serving certificate, made, rotated and handed
 * to the webhook (ARCHITECTURE.md §5).
 *
 * Every replica reads the Secret (--secret, operator namespace) every --sync
 * and writes its pair into --dir (files.h), where the webhook of the pod reads
 * it: every replica serves the same certificate. The leader (the watcher's
 * Lease, from its bus) also reads the two webhook configurations and carries
 * out what decide.c says, one write at a time, each followed by a fresh read:
 * a CA and a pair when there is none, a rotation with overlap well before
 * expiry, the configurations' caBundle kept equal to the Secret's ca.crt. A
 * Secret without the annotation gpukmm.io/managed-by: gpukmm-certd (e.g.
 * cert-manager's) is only served, never written; a configuration with
 * cert-manager's CA-injector annotation keeps its caBundle. Every write is
 * guarded by the resourceVersion read (a 409 is re-read, never retried
 * blindly). Rights: get/patch of that Secret and of the two configurations,
 * by name (deploy/rbac). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decide.h"
#include "events.pb-c.h"
#include "files.h"
#include "gpukmm/https.h"
#include "gpukmm/ctl.h"
#include "gpukmm/kube.h"
#include "gpukmm/kwriter.h"
#include "gpukmm/log.h"
#include "gpukmm/metrics.h"
#include "objects.h"

#define N_CONFS 2
#define RETRY_MIN_MS 500
#define CONFLICT_MS 200

static const char *const TOPICS[] = { "leadership" };

typedef struct certd {
	gk_ctl c;                    /* flags, the bus (lib/svc/ctl.c; no queue) */
	bool leader;
	uint64_t term;
	/* configuration */
	const char *dir, *secret, *service;
	const char *conf_name[N_CONFS];
	const char *conf_res[N_CONFS];
	int64_t sync_s;
	cd_cfg cfg;
	char dns[2][300];
	/* the API */
	gk_kube_conn kc;
	gk_kube_call *call;          /* the one call in flight */
	gk_timer_id timer;
	bool again;                  /* a read was asked for while a call was in flight */
	int failures;
	/* the last read */
	cd_secret_obj sec;
	cd_conf_obj conf[N_CONFS];
	size_t ci;
	cd_plan plan;
	char said[400];              /* the last state logged (said once) */
	/* metrics */
	uint64_t reads, secret_writes, bundle_writes, made, rotations, files_written, errors, conflicts, not_after;
} certd;

static int64_t now_s(void)
{
	return (int64_t)time(NULL);
}

static void say(certd *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(certd *d, const char *fmt, ...)
{
	char m[sizeof(d->said)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	if (strcmp(m, d->said) != 0) {
		GK_INFO("%s", m);
		snprintf(d->said, sizeof(d->said), "%s", m);
	}
}

static void tick(certd *d);

static void on_timer(gk_loop *l, gk_timer_id id, void *user)
{
	certd *d = user;
	d->timer = 0;
	tick(d);
}

static void after(certd *d, int64_t ms)
{
	if (d->timer)
		gk_loop_cancel(d->c.svc.loop, d->timer);
	d->timer = gk_loop_timer(d->c.svc.loop, ms, on_timer, d);
}

/* The chain ends: read again at wake (unix s; 0 = the sync interval), sooner
 * when asked meanwhile. */
static void rest(certd *d, int64_t wake)
{
	d->call = NULL;
	int64_t ms = d->sync_s * 1000;
	if (wake) {
		int64_t w = (wake - now_s()) * 1000 + 100;
		if (w < ms)
			ms = w < 200 ? 200 : w;
	}
	if (d->again) {
		d->again = false;
		ms = 0;
	}
	after(d, ms);
}

static void fail(certd *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(certd *d, const char *fmt, ...)
{
	char m[sizeof(d->said)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	d->errors++;
	if (strcmp(m, d->said) != 0) {
		GK_WARN("%s (retried)", m);
		snprintf(d->said, sizeof(d->said), "%s", m);
	}
	int64_t ms = RETRY_MIN_MS;
	for (int i = 0; i < d->failures && ms < d->sync_s * 1000; i++)
		ms *= 2;
	d->failures++;
	d->call = NULL;
	after(d, ms < d->sync_s * 1000 ? ms : d->sync_s * 1000);
}

static gk_kube_ref secret_ref(certd *d)
{
	return (gk_kube_ref){ .version = "v1", .resource = "secrets", .ns = d->c.svc.ns, .name = d->secret };
}

static gk_kube_ref conf_ref(certd *d, size_t i)
{
	return (gk_kube_ref){ .group = "admissionregistration.k8s.io", .version = "v1", .resource = d->conf_res[i],
			      .name = d->conf_name[i] };
}

/* ---- writes ---------------------------------------------------------------------- */

static void on_written(void *user, int code, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	certd *d = user;
	cJSON_Delete(out);
	d->call = NULL;
	if (code == GK_ABORTED || (st && st->http == 409)) {
		d->conflicts++;
		GK_DEBUG("409 on a write: read again");
		after(d, CONFLICT_MS);
		return;
	}
	if (code != GK_OK) {
		fail(d, "%s: %s", cd_act_name(d->plan.act), st && st->message[0] ? st->message : err->msg);
		return;
	}
	d->failures = 0;
	tick(d); /* every write is followed by a fresh read */
}

static void patch_secret(certd *d, const cd_material *m)
{
	char *body = cd_secret_patch(&d->sec, &d->plan, m, now_s());
	gk_err err;
	gk_kube_ref r = secret_ref(d);
	if (!body) {
		fail(d, "out of memory");
		return;
	}
	int rc = gk_kube_call_patch(d->kc.mux, &r, GK_PATCH_MERGE, body, NULL, false, NULL, on_written, d, &d->call,
				    &err);
	explicit_bzero(body, strlen(body));
	free(body);
	if (rc) {
		fail(d, "writing Secret %s/%s: %s", d->c.svc.ns, d->secret, err.msg);
		return;
	}
	d->secret_writes++;
	if (d->plan.act == CD_SWITCH)
		d->rotations++;
}

static void patch_conf(certd *d)
{
	size_t i = 0;
	while (i < N_CONFS && !d->plan.patch[i])
		i++;
	if (i == N_CONFS || !d->sec.s.ca_crt) {
		rest(d, 0);
		return;
	}
	d->plan.patch[i] = false; /* one at a time: the next read says what is left */
	char *body = cd_conf_patch(&d->conf[i], d->sec.s.ca_crt);
	gk_kube_ref r = conf_ref(d, i);
	gk_err err;
	int rc = body ? gk_kube_call_patch(d->kc.mux, &r, GK_PATCH_JSON, body, NULL, false, NULL, on_written, d, &d->call,
					   &err)
		      : gk_err_set(&err, GK_RESOURCE_EXHAUSTED, "out of memory");
	free(body);
	if (rc) {
		fail(d, "writing the caBundle of %s %s: %s", d->conf_res[i], d->conf_name[i], err.msg);
		return;
	}
	d->bundle_writes++;
	GK_INFO("caBundle of %s %s set to the Secret's ca.crt", d->conf_res[i], d->conf_name[i]);
}

/* ---- what the last read says ----------------------------------------------------- */

static void serve(certd *d)
{
	const cd_secret *s = &d->sec.s;
	if (!d->plan.serve || cd_files_same(d->dir, s->tls_crt, s->tls_key))
		return;
	gk_err err;
	if (cd_files_write(d->dir, s->tls_crt, s->tls_key, s->ca_crt, &err) != 0) {
		GK_WARN("cannot write the serving certificate into %s: %s", d->dir, err.msg);
		d->errors++;
		return;
	}
	d->files_written++;
	gk_tls_info in;
	if (gk_tls_cert_info(s->tls_crt, &in) == 0) {
		char exp[GK_KUBE_TIME_LEN];
		gk_kube_time(exp, sizeof(exp), in.not_after);
		d->not_after = in.not_after > 0 ? (uint64_t)in.not_after : 0;
		GK_INFO("serving certificate written to %s: %s, sha256 %.16s…, expires %s", d->dir, in.cn, in.sha256,
			exp);
	}
}

static void act(certd *d)
{
	cd_conf cs[N_CONFS];
	for (size_t i = 0; i < N_CONFS; i++)
		cs[i] = d->conf[i].c;
	cd_plan_free(&d->plan);
	int64_t now = now_s();
	if (cd_decide(&d->cfg, &d->sec.s, cs, d->leader && d->sec.s.ours ? N_CONFS : 0, d->leader, now, &d->plan)) {
		fail(d, "out of memory");
		return;
	}
	serve(d);
	say(d, "%s%s", d->leader ? "leader: " : "", d->plan.why);
	cd_material m = { 0 };
	gk_err err;
	switch (d->plan.act) {
	case CD_NOTHING:
		rest(d, d->plan.wake);
		return;
	case CD_PUBLISH:
		patch_conf(d);
		return;
	case CD_ISSUE:
	case CD_STAGE:
		if (cd_make(&d->cfg, now, &m, &err)) {
			fail(d, "%s", err.msg);
			return;
		}
		d->made++;
		GK_INFO("%s: a new CA and serving certificate for %s", cd_act_name(d->plan.act), d->cfg.dns[0]);
		break;
	default:
		break;
	}
	GK_INFO("Secret %s/%s: %s (%s)", d->c.svc.ns, d->secret, cd_act_name(d->plan.act), d->plan.why);
	patch_secret(d, &m);
	cd_material_free(&m);
}

/* ---- reads ----------------------------------------------------------------------- */

static void read_conf(certd *d);

static void on_conf(void *user, int code, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	certd *d = user;
	d->call = NULL;
	size_t i = d->ci;
	if (code != GK_OK && code != GK_NOT_FOUND) {
		cJSON_Delete(out);
		fail(d, "reading %s %s: %s", d->conf_res[i], d->conf_name[i],
		     st && st->message[0] ? st->message : err->msg);
		return;
	}
	gk_err e;
	cd_conf_obj_free(&d->conf[i]);
	int rc = cd_conf_read(&d->conf[i], d->conf_name[i], code == GK_OK ? out : NULL, d->sec.s.ca_crt,
			      d->sec.s.tls_crt, &e);
	cJSON_Delete(out);
	if (rc) {
		fail(d, "%s", e.msg);
		return;
	}
	if (!d->conf[i].c.exists)
		say(d, "%s %s does not exist: its caBundle is not kept", d->conf_res[i], d->conf_name[i]);
	d->ci++;
	read_conf(d);
}

static void read_conf(certd *d)
{
	if (d->ci >= N_CONFS) {
		act(d);
		return;
	}
	gk_kube_ref r = conf_ref(d, d->ci);
	gk_err err;
	if (gk_kube_call_get(d->kc.mux, &r, NULL, on_conf, d, &d->call, &err))
		fail(d, "reading %s %s: %s", d->conf_res[d->ci], d->conf_name[d->ci], err.msg);
}

static void on_secret(void *user, int code, cJSON *out, const gk_kube_status *st, const gk_err *err)
{
	certd *d = user;
	d->call = NULL;
	if (code != GK_OK && code != GK_NOT_FOUND) {
		cJSON_Delete(out);
		fail(d, "reading Secret %s/%s: %s", d->c.svc.ns, d->secret, st && st->message[0] ? st->message : err->msg);
		return;
	}
	gk_err e;
	cd_secret_obj_free(&d->sec);
	int rc = cd_secret_read(&d->sec, code == GK_OK ? out : NULL, &e);
	cJSON_Delete(out);
	if (rc) {
		fail(d, "Secret %s/%s: %s", d->c.svc.ns, d->secret, e.msg);
		return;
	}
	d->failures = 0;
	d->reads++;
	gk_svc_ready(&d->c.svc); /* once: the API answers us */
	for (size_t i = 0; i < N_CONFS; i++)
		cd_conf_obj_free(&d->conf[i]);
	d->ci = 0;
	if (d->leader && d->sec.s.ours)
		read_conf(d);
	else
		act(d);
}

static void tick(certd *d)
{
	if (d->c.svc.stopping)
		return;
	if (d->call) {
		d->again = true;
		return;
	}
	if (d->timer) {
		gk_loop_cancel(d->c.svc.loop, d->timer);
		d->timer = 0;
	}
	gk_kube_ref r = secret_ref(d);
	gk_err err;
	if (gk_kube_call_get(d->kc.mux, &r, NULL, on_secret, d, &d->call, &err))
		fail(d, "reading Secret %s/%s: %s", d->c.svc.ns, d->secret, err.msg);
}

/* ---- leadership (the watcher's bus) --------------------------------------------- */

static void set_leader(certd *d, bool leader)
{
	if (leader == d->leader)
		return;
	d->leader = leader;
	GK_INFO("%s", leader ? "leading: the certificate is ours to make and rotate" : "following: serving only");
	tick(d);
}

/* no leadership information = no election configured: we lead */
static void lead(certd *d, const Gpukmm__Leadership *l)
{
	bool leader = d->leader;
	gk_wsub_lead_update(&leader, &d->term, l);
	set_leader(d, leader);
}

static int view_reset(void *user, const Gpukmm__SnapshotReply *s, gk_err *err)
{
	lead(user, s->leadership);
	return 0;
}

static int view_apply(void *user, const char *topic, const Gpukmm__Event *ev, gk_err *err)
{
	if (ev->object_case == GPUKMM__EVENT__OBJECT_LEADERSHIP)
		lead(user, ev->leadership);
	return 0;
}

/* ---- main ------------------------------------------------------------------------ */

static const char *check(void *user)
{
	certd *d = user;
	if (!d->dir || !*d->dir || !d->c.svc.addr.events || !d->c.svc.addr.watcher)
		return "--dir, and --events and --watcher (or --runtime-dir), are required";
	if (d->cfg.renew_before_s >= d->cfg.validity_s)
		return "--renew-before must be shorter than --validity";
	return NULL;
}

static int opt_str(void *user, const char *arg)
{
	*(const char **)user = arg;
	return 0;
}

/* "90d", "12h", "30m", "45s" or seconds */
static int parse_dur(const char *s, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	int64_t mul = !*end ? 1 : strcmp(end, "s") == 0 ? 1 : strcmp(end, "m") == 0 ? 60 : strcmp(end, "h") == 0 ? 3600
		      : strcmp(end, "d") == 0 ? 86400 : 0;
	if (errno || end == s || v <= 0 || !mul || v > 100LL * 365 * 86400 / mul)
		return -1;
	*out = (int64_t)v * mul;
	return 0;
}

static int opt_dur(void *user, const char *arg)
{
	return parse_dur(arg, user);
}

static int env_dur(const char *name, int64_t *out)
{
	const char *v = getenv(name);
	if (v && *v && parse_dur(v, out)) {
		fprintf(stderr, "gpukmm-certd: $%s: not a duration (90d, 12h, 30m, 45s)\n", name);
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static certd D = {
		.secret = "gpukmm-webhook-cert", .service = "gpukmm-webhook-service",
		.conf_name = { "gpukmm-mutating-webhook-configuration", "gpukmm-validating-webhook-configuration" },
		.conf_res = { "mutatingwebhookconfigurations", "validatingwebhookconfigurations" },
		.sync_s = 10,
		.cfg = { .validity_s = 90 * 86400, .renew_before_s = 30 * 86400, .propagation_s = 120, .grace_s = 120 },
	};
	certd *d = &D;
	gk_err err;
	if (env_dur("GPUKMM_CERTD_VALIDITY", &d->cfg.validity_s) || env_dur("GPUKMM_CERTD_RENEW_BEFORE", &d->cfg.renew_before_s) ||
	    env_dur("GPUKMM_CERTD_PROPAGATION", &d->cfg.propagation_s) || env_dur("GPUKMM_CERTD_GRACE", &d->cfg.grace_s) ||
	    env_dur("GPUKMM_CERTD_SYNC", &d->sync_s))
		return 2;
	const gk_svc_opt extra[] = {
		{ "dir", 1, "write the serving pair here: tls.crt, tls.key, ca.crt (required)", opt_str, &d->dir },
		{ "secret", 1, "the Secret of the certificate, operator namespace (default gpukmm-webhook-cert)", opt_str,
		  &d->secret },
		{ "service", 1, "the webhook's Service: the certificate is for SERVICE.NAMESPACE.svc (default "
				"gpukmm-webhook-service)", opt_str, &d->service },
		{ "mutating-config", 1, "its MutatingWebhookConfiguration (default gpukmm-mutating-webhook-configuration)",
		  opt_str, &d->conf_name[0] },
		{ "validating-config", 1,
		  "its ValidatingWebhookConfiguration (default gpukmm-validating-webhook-configuration)", opt_str,
		  &d->conf_name[1] },
		{ "validity", 1, "lifetime of a new CA and certificate (default 90d; $GPUKMM_CERTD_VALIDITY)", opt_dur,
		  &d->cfg.validity_s },
		{ "renew-before", 1, "rotate when less than this is left (default 30d; $GPUKMM_CERTD_RENEW_BEFORE)",
		  opt_dur, &d->cfg.renew_before_s },
		{ "propagation", 1, "rotation: the new CA in every caBundle this long before the new certificate "
				    "serves (default 2m; $GPUKMM_CERTD_PROPAGATION)", opt_dur, &d->cfg.propagation_s },
		{ "grace", 1, "rotation: the old CA stays trusted this long after the switch (default 2m; "
			      "$GPUKMM_CERTD_GRACE)", opt_dur, &d->cfg.grace_s },
		{ "sync", 1, "read the Secret this often (default 10s; $GPUKMM_CERTD_SYNC)", opt_dur, &d->sync_s },
		{ 0 },
	};
	const gk_ctl_cfg cfg = { .name = "certd", .topics = TOPICS, .n_topics = 1, .user = d, .check = check,
				 .reset = view_reset, .apply = view_apply };
	int rc = gk_ctl_init(&d->c, &cfg, argc, argv, extra, &err);
	if (rc)
		return rc;
	snprintf(d->dns[0], sizeof(d->dns[0]), "%s.%s.svc", d->service, d->c.svc.ns);
	snprintf(d->dns[1], sizeof(d->dns[1]), "%s.%s.svc.cluster.local", d->service, d->c.svc.ns);
	d->cfg.cn = d->dns[0];
	d->cfg.dns[0] = d->dns[0];
	d->cfg.dns[1] = d->dns[1];
	d->cfg.n_dns = 2;
	if (gk_kube_conn_open(&d->kc, d->c.svc.kubeconfig, 5, "gpukmm-certd", d->c.svc.loop, &err))
		goto fail;
	if (gk_ctl_start(&d->c, &err))
		goto fail;
	gk_metric_counter_var("gpukmm_certd_secret_reads_total", "Reads of the certificate Secret.", &d->reads);
	gk_metric_counter_var("gpukmm_certd_secret_writes_total", "Writes of the certificate Secret.",
			      &d->secret_writes);
	gk_metric_counter_var("gpukmm_certd_cabundle_writes_total", "caBundle writes of the webhook configurations.",
			      &d->bundle_writes);
	gk_metric_counter_var("gpukmm_certd_certificates_made_total", "CAs and serving certificates made.", &d->made);
	gk_metric_counter_var("gpukmm_certd_rotations_total", "Switches to a staged certificate.", &d->rotations);
	gk_metric_counter_var("gpukmm_certd_files_written_total", "Serving pairs written for the webhook.",
			      &d->files_written);
	gk_metric_counter_var("gpukmm_certd_errors_total", "Failed reads and writes (retried).", &d->errors);
	gk_metric_counter_var("gpukmm_certd_conflicts_total", "409 conflicts (read again).", &d->conflicts);
	gk_metric_gauge_var("gpukmm_certd_cert_expiry_timestamp_seconds",
			    "notAfter of the certificate written for the webhook, unix seconds.", &d->not_after);
	GK_INFO("started: Secret %s/%s, certificate for %s, files in %s", d->c.svc.ns, d->secret, d->dns[0], d->dir);
	tick(d);
	rc = gk_ctl_run(&d->c);
	goto out;
fail:
	GK_ERROR("%s", err.msg);
	rc = 1;
out:
	gk_ctl_stop(&d->c);
	if (d->call)
		gk_kube_call_cancel(d->call);
	gk_kube_conn_close(&d->kc);
	cd_plan_free(&d->plan);
	cd_secret_obj_free(&d->sec);
	for (size_t i = 0; i < N_CONFS; i++)
		cd_conf_obj_free(&d->conf[i]);
	gk_ctl_fini(&d->c);
	return rc;
}
