/* fake-kmm — the webhook listen address and the ValidatingWebhookConfiguration
 * fake-kmm registers through the API, as KMM's install does
 * (config/webhook/manifests.yaml: vmodule.kb.io). Pure. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "fakekmm.h"

int fk_listen_parse(const char *url, fk_listen *l, gk_err *err)
{
	memset(l, 0, sizeof *l);
	const char *p;
	if (!url)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "webhook listen URL missing");
	if (!strncmp(url, "http://", 7)) {
		p = url + 7;
	} else if (!strncmp(url, "https://", 8)) {
		p = url + 8;
		l->tls = 1;
	} else {
		return gk_err_set(err, GK_INVALID_ARGUMENT, "webhook listen URL '%s': scheme must be http:// or https://", url);
	}
	const char *colon = strrchr(p, ':');
	if (!colon || colon == p || (size_t)(colon - p) >= sizeof l->host)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "webhook listen URL '%s': want SCHEME://IPV4:PORT", url);
	memcpy(l->host, p, (size_t)(colon - p));
	l->host[colon - p] = 0;
	struct in_addr a;
	if (inet_pton(AF_INET, l->host, &a) != 1)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "webhook listen URL '%s': host must be a numeric IPv4 address", url);
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (end == colon + 1 || (*end && strcmp(end, "/") != 0) || port < 0 || port > 65535)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "webhook listen URL '%s': bad port", url);
	l->port = (int)port;
	return 0;
}

static cJSON *str_array(const char *const *v, size_t n)
{
	return cJSON_CreateStringArray(v, (int)n);
}

cJSON *fk_webhook_config_object(const char *name, const char *url, const char *ca_pem)
{
	static const char *const groups[] = { "kmm.sigs.x-k8s.io" }, *const versions[] = { "v1beta1" },
				 *const ops[] = { "CREATE", "UPDATE" }, *const res[] = { "modules" },
				 *const review[] = { "v1" };
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON *meta = cJSON_AddObjectToObject(o, "metadata");
	cJSON *hooks = cJSON_AddArrayToObject(o, "webhooks");
	cJSON *h = cJSON_CreateObject();
	cJSON *rule = cJSON_CreateObject();
	cJSON *rules = cJSON_CreateArray();
	if (!meta || !hooks || !h || !rule || !rules) {
		cJSON_Delete(h);
		cJSON_Delete(rule);
		cJSON_Delete(rules);
		goto fail;
	}
	cJSON_AddItemToArray(hooks, h);
	cJSON_AddItemToArray(rules, rule);
	cJSON_AddItemToObject(h, "rules", rules);
	cJSON *cc = cJSON_AddObjectToObject(h, "clientConfig");
	if (!cJSON_AddStringToObject(o, "apiVersion", "admissionregistration.k8s.io/v1") ||
	    !cJSON_AddStringToObject(o, "kind", "ValidatingWebhookConfiguration") ||
	    !cJSON_AddStringToObject(meta, "name", name) || !cc ||
	    !cJSON_AddStringToObject(h, "name", FK_WEBHOOK_NAME) || !cJSON_AddStringToObject(cc, "url", url) ||
	    !cJSON_AddStringToObject(h, "failurePolicy", "Fail") || !cJSON_AddStringToObject(h, "sideEffects", "None") ||
	    !cJSON_AddNumberToObject(h, "timeoutSeconds", 10))
		goto fail;
	cJSON *items[] = { str_array(review, 1), str_array(groups, 1), str_array(versions, 1), str_array(ops, 2),
			   str_array(res, 1) };
	const char *keys[] = { "admissionReviewVersions", "apiGroups", "apiVersions", "operations", "resources" };
	for (int i = 0; i < 5; i++) {
		if (!items[i]) {
			for (int j = i; j < 5; j++)
				cJSON_Delete(items[j]);
			goto fail;
		}
		cJSON_AddItemToObject(i == 0 ? h : rule, keys[i], items[i]);
	}
	if (ca_pem && *ca_pem) {
		size_t n = strlen(ca_pem);
		char *b64 = malloc(4 * ((n + 2) / 3) + 1);
		if (!b64)
			goto fail;
		EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)ca_pem, (int)n);
		cJSON *b = cJSON_AddStringToObject(cc, "caBundle", b64);
		free(b64);
		if (!b)
			goto fail;
	}
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}
