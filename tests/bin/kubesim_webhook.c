/* Test helper: an admission webhook server for kubesim's e2e tests.
 *   kubesim_webhook [--tls-cert F --tls-key F]
 * Prints "webhook: listening on PORT" when ready. Paths:
 *   /mutate    adds label mutated=yes (JSONPatch) to every object
 *   /validate  denies objects labelled deny=yes ("label deny=yes is forbidden"),
 *              allows everything else with a warning
 *   /wrong-uid answers with a uid that does not match
 * Exits on SIGTERM/SIGINT. */
#include <cJSON.h>
#include <microhttpd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct conn {
	char *body;
	size_t len;
};

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	char *b = calloc(1, 1 << 20);
	if (b)
		fread(b, 1, (1 << 20) - 1, f);
	fclose(f);
	return b;
}

static enum MHD_Result reply(struct MHD_Connection *c, int code, const char *body)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "application/json");
	enum MHD_Result ret = MHD_queue_response(c, (unsigned)code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			      const char *version, const char *upload, size_t *upload_size, void **ptr)
{
	(void)cls;
	(void)method;
	(void)version;
	struct conn *k = *ptr;
	if (!k) {
		k = calloc(1, sizeof(*k));
		*ptr = k;
		return k ? MHD_YES : MHD_NO;
	}
	if (*upload_size) {
		char *nb = realloc(k->body, k->len + *upload_size + 1);
		if (!nb)
			return MHD_NO;
		k->body = nb;
		memcpy(k->body + k->len, upload, *upload_size);
		k->len += *upload_size;
		k->body[k->len] = 0;
		*upload_size = 0;
		return MHD_YES;
	}
	cJSON *rev = k->body ? cJSON_Parse(k->body) : NULL;
	cJSON *req = cJSON_GetObjectItem(rev, "request");
	cJSON *uid = cJSON_GetObjectItem(req, "uid");
	if (!cJSON_IsString(uid)) {
		cJSON_Delete(rev);
		return reply(c, 400, "{\"error\":\"not an AdmissionReview\"}");
	}
	cJSON *obj = cJSON_GetObjectItem(req, "object");
	cJSON *labels = cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "labels");
	cJSON *out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "apiVersion", "admission.k8s.io/v1");
	cJSON_AddStringToObject(out, "kind", "AdmissionReview");
	cJSON *resp = cJSON_AddObjectToObject(out, "response");
	cJSON_AddStringToObject(resp, "uid", strcmp(url, "/wrong-uid") == 0 ? "nope" : uid->valuestring);
	if (strcmp(url, "/mutate") == 0) {
		cJSON_AddBoolToObject(resp, "allowed", 1);
		const char *p = labels ? "[{\"op\":\"add\",\"path\":\"/metadata/labels/mutated\",\"value\":\"yes\"}]"
				       : "[{\"op\":\"add\",\"path\":\"/metadata/labels\",\"value\":{\"mutated\":\"yes\"}}]";
		char b64[512];
		/* tiny base64 encoder */
		static const char tb[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
		size_t n = strlen(p), o = 0;
		for (size_t i = 0; i < n; i += 3) {
			unsigned v = (unsigned)(unsigned char)p[i] << 16;
			if (i + 1 < n)
				v |= (unsigned)(unsigned char)p[i + 1] << 8;
			if (i + 2 < n)
				v |= (unsigned char)p[i + 2];
			b64[o++] = tb[(v >> 18) & 63];
			b64[o++] = tb[(v >> 12) & 63];
			b64[o++] = i + 1 < n ? tb[(v >> 6) & 63] : '=';
			b64[o++] = i + 2 < n ? tb[v & 63] : '=';
		}
		b64[o] = 0;
		cJSON_AddStringToObject(resp, "patchType", "JSONPatch");
		cJSON_AddStringToObject(resp, "patch", b64);
	} else {
		cJSON *d = cJSON_GetObjectItem(labels, "deny");
		int deny = cJSON_IsString(d) && strcmp(d->valuestring, "yes") == 0;
		cJSON_AddBoolToObject(resp, "allowed", !deny);
		if (deny) {
			cJSON *st = cJSON_AddObjectToObject(resp, "status");
			cJSON_AddStringToObject(st, "message", "label deny=yes is forbidden");
			cJSON_AddNumberToObject(st, "code", 403);
		} else {
			const char *w[] = { "validated by the test webhook" };
			cJSON_AddItemToObject(resp, "warnings", cJSON_CreateStringArray(w, 1));
		}
	}
	char *s = cJSON_PrintUnformatted(out);
	enum MHD_Result ret = reply(c, 200, s ? s : "{}");
	free(s);
	cJSON_Delete(out);
	cJSON_Delete(rev);
	return ret;
}

static void done(void *cls, struct MHD_Connection *c, void **ptr, enum MHD_RequestTerminationCode t)
{
	(void)cls;
	(void)c;
	(void)t;
	struct conn *k = *ptr;
	if (k) {
		free(k->body);
		free(k);
	}
	*ptr = NULL;
}

int main(int argc, char **argv)
{
	char *cert = NULL, *key = NULL;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--tls-cert") == 0)
			cert = slurp(argv[i + 1]);
		else if (strcmp(argv[i], "--tls-key") == 0)
			key = slurp(argv[i + 1]);
	}
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | (cert ? MHD_USE_TLS : 0);
	struct MHD_Daemon *d =
		cert ? MHD_start_daemon(flags, 0, NULL, NULL, handle, NULL, MHD_OPTION_SOCK_ADDR, &sa,
					MHD_OPTION_NOTIFY_COMPLETED, done, NULL, MHD_OPTION_HTTPS_MEM_CERT, cert,
					MHD_OPTION_HTTPS_MEM_KEY, key, MHD_OPTION_END)
		     : MHD_start_daemon(flags, 0, NULL, NULL, handle, NULL, MHD_OPTION_SOCK_ADDR, &sa,
					MHD_OPTION_NOTIFY_COMPLETED, done, NULL, MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "webhook: cannot start\n");
		return 1;
	}
	printf("webhook: listening on %u\n", MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port);
	fflush(stdout);
	int sig;
	sigwait(&set, &sig);
	MHD_stop_daemon(d);
	free(cert);
	free(key);
	return 0;
}
