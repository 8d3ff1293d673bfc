/* fake-kmm — a fake KMM controller for tests: serves KMM's Module admission
 * webhook and (with API access) loads/unloads modules on nodes by labels,
 * talking to the Kubernetes API only. See fakekmm.h for the node annotations. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpukmm/log.h"

#include "fakekmm.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fake-kmm [options]\n"
		"  --webhook-listen URL     http[s]://IPV4:PORT for the admission webhook (default http://127.0.0.1:0)\n"
		"  --tls-cert FILE          PEM certificate for https (also sent as the caBundle)\n"
		"  --tls-key FILE           PEM key for https\n"
		"  --url-file FILE          write the webhook base URL there once listening\n"
		"  --kube-version MAJ.MIN   Kubernetes version for KMM's DRA gate (default: asked from the API, else 1.32)\n"
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

int main(int argc, char **argv)
{
	const char *listen = "http://127.0.0.1:0", *cert = NULL, *key = NULL, *url_file = NULL;
	const char *log_level = NULL, *log_format = NULL;
	fk_kube_version kv = { 1, 32 };
	int webhook_only = 0;
	enum { O_LISTEN = 256, O_CERT, O_KEY, O_URLFILE, O_KV, O_WHONLY, O_LL, O_LF };
	static const struct option opts[] = {
		{ "webhook-listen", required_argument, NULL, O_LISTEN },
		{ "tls-cert", required_argument, NULL, O_CERT },
		{ "tls-key", required_argument, NULL, O_KEY },
		{ "url-file", required_argument, NULL, O_URLFILE },
		{ "kube-version", required_argument, NULL, O_KV },
		{ "webhook-only", no_argument, NULL, O_WHONLY },
		{ "log-level", required_argument, NULL, O_LL },
		{ "log-format", required_argument, NULL, O_LF },
		{ "help", no_argument, NULL, 'h' },
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
			break;
		case O_WHONLY: webhook_only = 1; break;
		case O_LL: log_level = optarg; break;
		case O_LF: log_format = optarg; break;
		case 'h': usage(stdout); return 0;
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
	(void)webhook_only;

	fk_listen l;
	gk_err err = { 0 };
	if (fk_listen_parse(listen, &l, &err) != 0) {
		GK_ERROR("%s", err.msg);
		return 2;
	}
	/* Signals are taken synchronously (sigwait); the webhook thread inherits
	 * the blocked mask. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	fk_webhook *wh = NULL;
	if (fk_webhook_start(&wh, &l, cert, key, &kv, &err) != 0) {
		GK_ERROR("%s", err.msg);
		return 1;
	}
	GK_INFO("webhook listening on %s%s", fk_webhook_base_url(wh), FK_WEBHOOK_PATH);
	if (url_file && write_url_file(url_file, fk_webhook_base_url(wh)) != 0) {
		GK_ERROR("cannot write %s: %s", url_file, strerror(errno));
		fk_webhook_stop(wh);
		return 1;
	}
	int sig = 0;
	while (sigwait(&set, &sig) == 0 && sig == SIGHUP)
		;
	GK_INFO("signal %d: stopping", sig);
	fk_webhook_stop(wh);
	return 0;
}
