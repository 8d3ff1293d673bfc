/* Client configuration: in-cluster service account, or a kubeconfig (libyaml).
 * Certificate/key `*-data` stay in memory (handed to curl as BLOBs), never in
 * temp files. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "gpukmm/kube.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define KUBECONFIG_MAX (4u << 20)

void gk_kube_config_free(gk_kube_config *c)
{
	if (!c)
		return;
	free(c->server);
	free(c->ca_file);
	free(c->cert_file);
	free(c->key_file);
	free(c->token_file);
	free(c->tls_server_name);
	if (c->token) {
		explicit_bzero(c->token, strlen(c->token));
		free(c->token);
	}
	free(c->ca.data);
	free(c->cert.data);
	if (c->key.data) {
		explicit_bzero(c->key.data, c->key.len);
		free(c->key.data);
	}
	memset(c, 0, sizeof *c);
}

static int oom(gk_err *err)
{
	return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
}

/* ---- in-cluster ---------------------------------------------------------- */

int gk_kube_config_in_cluster(gk_kube_config *c, const char *sa_dir, gk_err *err)
{
	memset(c, 0, sizeof *c);
	const char *host = secure_getenv("KUBERNETES_SERVICE_HOST");
	const char *port = secure_getenv("KUBERNETES_SERVICE_PORT");
	if (!host || !*host || !port || !*port)
		return gk_err_set(err, GK_FAILED_PRECONDITION,
				  "not running in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set");
	for (const char *p = port; *p; p++)
		if (*p < '0' || *p > '9')
			return gk_err_set(err, GK_INVALID_ARGUMENT,
					  "KUBERNETES_SERVICE_PORT is not a number: \"%.20s\"", port);
	if (!sa_dir)
		sa_dir = SA_DIR;
	bool v6 = strchr(host, ':') != NULL && host[0] != '[';
	if (asprintf(&c->server, v6 ? "https://[%s]:%s" : "https://%s:%s", host, port) < 0 ||
	    asprintf(&c->token_file, "%s/token", sa_dir) < 0 ||
	    asprintf(&c->ca_file, "%s/ca.crt", sa_dir) < 0) {
		c->server = c->token_file = c->ca_file = NULL;
		gk_kube_config_free(c);
		return oom(err);
	}
	if (access(c->token_file, R_OK) != 0) {
		int e = errno;
		gk_err_set(err, GK_FAILED_PRECONDITION, "in-cluster: cannot read token %s: %s",
			   c->token_file, strerror(e));
		gk_kube_config_free(c);
		return err ? err->code : GK_FAILED_PRECONDITION;
	}
	if (access(c->ca_file, R_OK) != 0) {
		int e = errno;
		gk_err_set(err, GK_FAILED_PRECONDITION, "in-cluster: cannot read CA %s: %s",
			   c->ca_file, strerror(e));
		gk_kube_config_free(c);
		return err ? err->code : GK_FAILED_PRECONDITION;
	}
	return 0;
}

/* ---- YAML → cJSON (scalars as strings) -------------------------------------- */

static cJSON *node_to_json(yaml_document_t *d, yaml_node_t *n, int depth)
{
	if (!n || depth > 64)
		return NULL;
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return cJSON_CreateString((const char *)n->data.scalar.value);
	case YAML_SEQUENCE_NODE: {
		cJSON *a = cJSON_CreateArray();
		for (yaml_node_item_t *it = n->data.sequence.items.start;
		     a && it < n->data.sequence.items.top; it++) {
			cJSON *v = node_to_json(d, yaml_document_get_node(d, *it), depth + 1);
			if (!v || !cJSON_AddItemToArray(a, v)) {
				cJSON_Delete(v);
				cJSON_Delete(a);
				return NULL;
			}
		}
		return a;
	}
	case YAML_MAPPING_NODE: {
		cJSON *o = cJSON_CreateObject();
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
		     o && p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(d, p->key);
			if (!k || k->type != YAML_SCALAR_NODE)
				continue;
			cJSON *v = node_to_json(d, yaml_document_get_node(d, p->value), depth + 1);
			if (!v || !cJSON_AddItemToObject(o, (const char *)k->data.scalar.value, v)) {
				cJSON_Delete(v);
				cJSON_Delete(o);
				return NULL;
			}
		}
		return o;
	}
	default:
		return NULL;
	}
}

static cJSON *yaml_to_json(const char *text, size_t len, gk_err *err)
{
	yaml_parser_t p;
	yaml_document_t d;
	if (!yaml_parser_initialize(&p)) {
		oom(err);
		return NULL;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	if (!yaml_parser_load(&p, &d)) {
		gk_err_set(err, GK_INVALID_ARGUMENT, "kubeconfig: YAML error at line %zu: %s",
			   p.problem_mark.line + 1, p.problem ? p.problem : "unknown");
		yaml_parser_delete(&p);
		return NULL;
	}
	yaml_node_t *root = yaml_document_get_root_node(&d);
	cJSON *j = root ? node_to_json(&d, root, 0) : NULL;
	if (!j)
		gk_err_set(err, GK_INVALID_ARGUMENT, "kubeconfig: empty or not a mapping");
	yaml_document_delete(&d);
	yaml_parser_delete(&p);
	return j;
}

/* ---- kubeconfig ------------------------------------------------------------- */

static const char *str_at(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

/* Find the entry `name` in a named list (clusters/contexts/users) → its `field`. */
static const cJSON *named(const cJSON *root, const char *list, const char *field, const char *name)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, list), *it;
	cJSON_ArrayForEach(it, a) {
		const char *n = str_at(it, "name");
		if (n && !strcmp(n, name))
			return cJSON_GetObjectItemCaseSensitive(it, field);
	}
	return NULL;
}

static int b64_val(unsigned char ch)
{
	if (ch >= 'A' && ch <= 'Z') return ch - 'A';
	if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9') return ch - '0' + 52;
	if (ch == '+' || ch == '-') return 62;
	if (ch == '/' || ch == '_') return 63;
	return -1;
}

static int b64_decode(const char *in, gk_kube_blob *out)
{
	size_t n = strlen(in);
	unsigned char *o = malloc(n / 4 * 3 + 4);
	if (!o)
		return -1;
	size_t olen = 0;
	uint32_t acc = 0;
	int bits = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)in[i];
		if (ch == '=' ) break;
		if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
			continue;
		int v = b64_val(ch);
		if (v < 0) {
			free(o);
			return -2;
		}
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			o[olen++] = (unsigned char)(acc >> bits);
		}
	}
	if (olen == 0) {
		free(o);
		return -2;
	}
	out->data = o;
	out->len = olen;
	return 0;
}

static int set_path(char **dst, const char *v, const char *base_dir)
{
	int r;
	if (v[0] == '/' || !base_dir || !*base_dir)
		r = asprintf(dst, "%s", v);
	else
		r = asprintf(dst, "%s/%s", base_dir, v);
	if (r < 0) {
		*dst = NULL;
		return -1;
	}
	return 0;
}

static int set_blob(gk_kube_blob *b, const char *v, const char *what, gk_err *err)
{
	int r = b64_decode(v, b);
	if (r == -1)
		return oom(err);
	if (r)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "kubeconfig: %s is not valid base64", what);
	return 0;
}

static int fill(gk_kube_config *c, const cJSON *root, const char *context, const char *base_dir,
		gk_err *err)
{
	const char *ctx_name = context ? context : str_at(root, "current-context");
	if (!ctx_name)
		return gk_err_set(err, GK_FAILED_PRECONDITION,
				  "kubeconfig: no current-context and no context given");
	const cJSON *ctx = named(root, "contexts", "context", ctx_name);
	if (!cJSON_IsObject(ctx))
		return gk_err_set(err, GK_NOT_FOUND, "kubeconfig: context \"%s\" not found", ctx_name);
	const char *cl_name = str_at(ctx, "cluster");
	if (!cl_name)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "kubeconfig: context \"%s\" names no cluster",
				  ctx_name);
	const cJSON *cl = named(root, "clusters", "cluster", cl_name);
	if (!cJSON_IsObject(cl))
		return gk_err_set(err, GK_NOT_FOUND, "kubeconfig: cluster \"%s\" not found", cl_name);
	const char *server = str_at(cl, "server");
	if (!server)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "kubeconfig: cluster \"%s\" has no server",
				  cl_name);
	if (strncmp(server, "https://", 8) && strncmp(server, "http://", 7))
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "kubeconfig: cluster \"%s\": server \"%.200s\" is not an http(s) URL",
				  cl_name, server);
	c->server = strdup(server);
	if (!c->server)
		return oom(err);
	size_t sl = strlen(c->server);
	while (sl > 8 && c->server[sl - 1] == '/')
		c->server[--sl] = 0;
	const char *v;
	if ((v = str_at(cl, "certificate-authority-data"))) {
		if (set_blob(&c->ca, v, "certificate-authority-data", err))
			return err ? err->code : GK_INVALID_ARGUMENT;
	} else if ((v = str_at(cl, "certificate-authority"))) {
		if (set_path(&c->ca_file, v, base_dir))
			return oom(err);
	}
	if ((v = str_at(cl, "insecure-skip-tls-verify")))
		c->insecure = !strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "yes");
	if ((v = str_at(cl, "tls-server-name")) && !(c->tls_server_name = strdup(v)))
		return oom(err);

	const char *user_name = str_at(ctx, "user");
	if (!user_name)
		return 0; /* anonymous */
	const cJSON *u = named(root, "users", "user", user_name);
	if (!cJSON_IsObject(u))
		return gk_err_set(err, GK_NOT_FOUND, "kubeconfig: user \"%s\" not found", user_name);
	if (cJSON_GetObjectItemCaseSensitive(u, "exec") ||
	    cJSON_GetObjectItemCaseSensitive(u, "auth-provider"))
		return gk_err_set(err, GK_UNIMPLEMENTED,
				  "kubeconfig: user \"%s\" uses an exec/auth-provider plugin, which "
				  "gpukmm does not run; use a token, tokenFile or client certificate",
				  user_name);
	if ((v = str_at(u, "client-certificate-data"))) {
		if (set_blob(&c->cert, v, "client-certificate-data", err))
			return err ? err->code : GK_INVALID_ARGUMENT;
	} else if ((v = str_at(u, "client-certificate"))) {
		if (set_path(&c->cert_file, v, base_dir))
			return oom(err);
	}
	if ((v = str_at(u, "client-key-data"))) {
		if (set_blob(&c->key, v, "client-key-data", err))
			return err ? err->code : GK_INVALID_ARGUMENT;
	} else if ((v = str_at(u, "client-key"))) {
		if (set_path(&c->key_file, v, base_dir))
			return oom(err);
	}
	bool has_cert = c->cert.data || c->cert_file, has_key = c->key.data || c->key_file;
	if (has_cert != has_key)
		return gk_err_set(err, GK_INVALID_ARGUMENT,
				  "kubeconfig: user \"%s\" has a client %s without a %s", user_name,
				  has_cert ? "certificate" : "key", has_cert ? "key" : "certificate");
	if ((v = str_at(u, "token")) && !(c->token = strdup(v)))
		return oom(err);
	if ((v = str_at(u, "tokenFile")) && set_path(&c->token_file, v, base_dir))
		return oom(err);
	return 0;
}

int gk_kube_config_parse(gk_kube_config *c, const char *yaml, size_t len, const char *context,
			 const char *base_dir, gk_err *err)
{
	memset(c, 0, sizeof *c);
	cJSON *root = yaml_to_json(yaml, len, err);
	if (!root)
		return err ? err->code : GK_INVALID_ARGUMENT;
	int rc = cJSON_IsObject(root) ? fill(c, root, context, base_dir, err)
				      : gk_err_set(err, GK_INVALID_ARGUMENT,
						   "kubeconfig: top level is not a mapping");
	cJSON_Delete(root);
	if (rc)
		gk_kube_config_free(c);
	return rc;
}

int gk_kube_config_file(gk_kube_config *c, const char *path, const char *context, gk_err *err)
{
	memset(c, 0, sizeof *c);
	FILE *f = fopen(path, "re");
	if (!f)
		return gk_err_set(err, errno == ENOENT ? GK_NOT_FOUND : GK_PERMISSION_DENIED,
				  "kubeconfig %s: %s", path, strerror(errno));
	char *buf = malloc(KUBECONFIG_MAX);
	if (!buf) {
		fclose(f);
		return oom(err);
	}
	size_t n = fread(buf, 1, KUBECONFIG_MAX, f);
	int too_big = n == KUBECONFIG_MAX;
	fclose(f);
	if (too_big) {
		free(buf);
		return gk_err_set(err, GK_INVALID_ARGUMENT, "kubeconfig %s: larger than %u bytes", path,
				  KUBECONFIG_MAX);
	}
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	else
		snprintf(dir, sizeof dir, ".");
	int rc = gk_kube_config_parse(c, buf, n, context, dir, err);
	free(buf);
	if (rc)
		gk_err_wrap(err, "%s", path);
	return rc;
}

int gk_kube_config_load(gk_kube_config *c, const char *kubeconfig, gk_err *err)
{
	if (kubeconfig && *kubeconfig)
		return gk_kube_config_file(c, kubeconfig, NULL, err);
	const char *env = secure_getenv("KUBECONFIG");
	if (env && *env) {
		char *list = strdup(env), *save = NULL;
		if (!list)
			return oom(err);
		for (char *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
			if (access(p, F_OK) == 0) {
				int rc = gk_kube_config_file(c, p, NULL, err);
				free(list);
				return rc;
			}
		}
		free(list);
		return gk_err_set(err, GK_NOT_FOUND, "no file of $KUBECONFIG exists");
	}
	if (secure_getenv("KUBERNETES_SERVICE_HOST"))
		return gk_kube_config_in_cluster(c, NULL, err);
	const char *home = secure_getenv("HOME");
	char path[PATH_MAX];
	if (home && snprintf(path, sizeof path, "%s/.kube/config", home) < (int)sizeof path &&
	    access(path, F_OK) == 0)
		return gk_kube_config_file(c, path, NULL, err);
	memset(c, 0, sizeof *c);
	return gk_err_set(err, GK_FAILED_PRECONDITION,
			  "no Kubernetes configuration: give --kubeconfig, set $KUBECONFIG, or run "
			  "in a pod (KUBERNETES_SERVICE_HOST)");
}
