/* fake-kmm — a fake KMM controller for tests: serves KMM's Module admission
 * webhook and loads/unloads modules on nodes by labels, talking to the
 * Kubernetes API only (like KMM). Node annotations: see fakekmm.h / README.md. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpukmm/log.h"
#include "gpukmm/version.h"
#include "gpukmm/loop.h"

#include "ctrl.h"
#include "fakekmm.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fake-kmm [options]\n"
		"  --kubeconfig FILE        API access (default: $KUBECONFIG, in-cluster, ~/.kube/config)\n"
		"  --webhook-listen URL     http[s]://IPV4:PORT for the admission webhook (default http://127.0.0.1:0)\n"
		"  --webhook-url URL        base URL the API server calls (default: the listen URL with the bound port)\n"
		"  --webhook-config NAME    ValidatingWebhookConfiguration to register (default fake-kmm-validating-webhook-configuration)\n"
		"  --tls-cert FILE          PEM certificate for https (also registered as the caBundle)\n"
		"  --tls-key FILE           PEM key for https\n"
		"  --load-delay-ms N        time a load takes (default 500)\n"
		"  --unload-delay-ms N      time an unload takes (default 500)\n"
		"  --sign-delay-ms N        time KMM's sign job for a module image takes (default 500)\n"
		"  --url-file FILE          write the webhook base URL there once listening\n"
		"  --kube-version MAJ.MIN   Kubernetes version for KMM's DRA gate (default: the API's /version, else 1.32)\n"
		"  --webhook-only           serve the webhook only, no API access\n"
		"  --log-level L, --log-format F\n"
		"  -h, --help\n");
}

static int parse_kv(const char *s, fk_kube_version *kv)
{
	char *end;
	long ma = strtol(s, &end, 10);
	if (end == s || *end != '.')
		return -1;
	const char *m = end + 1;
	long mi = strtol(m, &end, 10);
	if (end == m || *end || ma < 0 || mi < 0 || ma > 1000 || mi > 1000)
		return -1;
	kv->major = (int)ma;
	kv->minor = (int)mi;
	return 0;
}

static int parse_ms(const char *s, int64_t *out)
{
	char *end;
	long long v = strtoll(s, &end, 10);
	if (end == s || *end || v < 0 || v > 86400000LL)
		return -1;
	*out = v;
	return 0;
}

static int write_url_file(const char *path, const char *url)
{
	char tmp[4096];
	if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
		return -1;
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -1;
	int bad = fprintf(f, "%s\n", url) < 0;
	bad |= fclose(f) != 0;
	if (bad || rename(tmp, path) != 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

static void on_signal(gk_loop *l, int signo, void *u)
{
	GK_INFO("signal %d: stopping", signo);
	gk_loop_stop(l, 0);
}

int main(int argc, char **argv)
{
	const char *listen = "http://127.0.0.1:0", *cert = NULL, *key = NULL, *url_file = NULL;
	const char *log_level = NULL, *log_format = NULL, *webhook_url = NULL;
	fk_ctrl_opts co = { .load_delay_ms = 500, .unload_delay_ms = 500, .sign_delay_ms = 500 };
	fk_kube_version kv = { 1, 32 };
	int webhook_only = 0, kv_given = 0;
	enum { O_LISTEN = 256, O_CERT, O_KEY, O_URLFILE, O_KV, O_WHONLY, O_LL, O_LF, O_KCFG, O_WHURL, O_WHCFG, O_LOAD, O_UNLOAD, O_SIGN };
	static const struct option opts[] = {
		{ "webhook-listen", required_argument, NULL, O_LISTEN },
		{ "tls-cert", required_argument, NULL, O_CERT },
		{ "tls-key", required_argument, NULL, O_KEY },
		{ "url-file", required_argument, NULL, O_URLFILE },
		{ "kube-version", required_argument, NULL, O_KV },
		{ "webhook-only", no_argument, NULL, O_WHONLY },
		{ "log-level", required_argument, NULL, O_LL },
		{ "log-format", required_argument, NULL, O_LF },
		{ "kubeconfig", required_argument, NULL, O_KCFG },
		{ "webhook-url", required_argument, NULL, O_WHURL },
		{ "webhook-config", required_argument, NULL, O_WHCFG },
		{ "load-delay-ms", required_argument, NULL, O_LOAD },
		{ "unload-delay-ms", required_argument, NULL, O_UNLOAD },
		{ "sign-delay-ms", required_argument, NULL, O_SIGN },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case O_LISTEN: listen = optarg; break;
		case O_CERT: cert = optarg; break;
		case O_KEY: key = optarg; break;
		case O_URLFILE: url_file = optarg; break;
		case O_KV:
			if (parse_kv(optarg, &kv) != 0) {
				fprintf(stderr, "fake-kmm: --kube-version wants MAJOR.MINOR, got '%s'\n", optarg);
				return 2;
			}
			kv_given = 1;
			break;
		case O_WHONLY: webhook_only = 1; break;
		case O_LL: log_level = optarg; break;
		case O_LF: log_format = optarg; break;
		case O_KCFG: co.kubeconfig = optarg; break;
		case O_WHURL: webhook_url = optarg; break;
		case O_WHCFG: co.webhook_config = optarg; break;
		case O_LOAD:
		case O_UNLOAD:
		case O_SIGN:
			if (parse_ms(optarg, c == O_LOAD ? &co.load_delay_ms : c == O_UNLOAD ? &co.unload_delay_ms
											: &co.sign_delay_ms) != 0) {
				fprintf(stderr, "fake-kmm: %s wants milliseconds (0..86400000), got '%s'\n",
					c == O_LOAD ? "--load-delay-ms" : c == O_UNLOAD ? "--unload-delay-ms" : "--sign-delay-ms",
					optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("fake-kmm %s\n", gk_version); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	gk_log_init_env("fake-kmm");
	if (log_level || log_format) {
		int lv = log_level ? gk_log_parse_level(log_level) : GK_LOG_INFO;
		int lf = log_format ? gk_log_parse_format(log_format) : GK_LOG_TEXT;
		if (lv < 0 || lf < 0) {
			fprintf(stderr, "fake-kmm: bad --log-level or --log-format\n");
			return 2;
		}
		gk_log_init("fake-kmm", (enum gk_log_format)lf, (enum gk_log_level)lv);
	}

	fk_listen l;
	gk_err err = { 0 };
	if (fk_listen_parse(listen, &l, &err) != 0) {
		GK_ERROR("%s", err.msg);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	gk_loop *loop = NULL;
	fk_webhook *wh = NULL;
	fk_ctrl *ctrl = NULL;
	int rc = 1;
	/* signals first: the webhook thread must inherit the blocked mask */
	if (gk_loop_new(&loop, &err) || gk_loop_signal(loop, SIGTERM, on_signal, NULL, &err) ||
	    gk_loop_signal(loop, SIGINT, on_signal, NULL, &err)) {
		GK_ERROR("%s", err.msg);
		goto out;
	}
	if (!webhook_only && !kv_given) {
		if (fk_ctrl_kube_version(co.kubeconfig, &kv.major, &kv.minor, &err) != 0)
			GK_WARN("Kubernetes version unknown (%s): assuming %d.%d", err.msg, kv.major, kv.minor);
		else
			GK_INFO("Kubernetes %d.%d", kv.major, kv.minor);
	}
	if (fk_webhook_start(&wh, &l, cert, key, &kv, &err) != 0) {
		GK_ERROR("%s", err.msg);
		goto out;
	}
	GK_INFO("webhook listening on %s%s", fk_webhook_base_url(wh), FK_WEBHOOK_PATH);
	if (url_file && write_url_file(url_file, fk_webhook_base_url(wh)) != 0) {
		GK_ERROR("cannot write %s", url_file);
		goto out;
	}
	char full[1024];
	if (!webhook_only) {
		snprintf(full, sizeof full, "%s%s", webhook_url ? webhook_url : fk_webhook_base_url(wh), FK_WEBHOOK_PATH);
		co.webhook_url = full;
		co.ca_pem = fk_webhook_cert_pem(wh);
		if (fk_ctrl_start(&ctrl, loop, &co, &err) != 0) {
			GK_ERROR("%s", err.msg);
			goto out;
		}
	}
	rc = gk_loop_run(loop);
out:
	fk_ctrl_stop(ctrl);
	fk_webhook_stop(wh);
	gk_loop_free(loop);
	return rc;
}
