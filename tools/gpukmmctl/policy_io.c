/* gpukmmctl: ClusterPolicy file reading shared by validate and render. */
#include "policy_io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukmm/policy.h"

static int read_all(const char *path, char **buf, size_t *len)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "%s: cannot open: %s\n", path, strerror(errno));
		return 2;
	}
	size_t cap = 65536, n = 0;
	char *b = malloc(cap + 1);
	int rc = 0;
	if (!b) {
		fprintf(stderr, "%s: out of memory\n", path);
		rc = 2;
		goto out;
	}
	for (;;) {
		if (n == cap) {
			if (cap >= GKCTL_MAX_INPUT) {
				fprintf(stderr, "%s: larger than %u bytes, not a ClusterPolicy file\n", path, GKCTL_MAX_INPUT);
				rc = 2;
				goto out;
			}
			cap *= 2;
			char *nb = realloc(b, cap + 1);
			if (!nb) {
				fprintf(stderr, "%s: out of memory\n", path);
				rc = 2;
				goto out;
			}
			b = nb;
		}
		size_t r = fread(b + n, 1, cap - n, f);
		n += r;
		if (r == 0) {
			if (ferror(f)) {
				fprintf(stderr, "%s: read error: %s\n", path, strerror(errno));
				rc = 2;
				goto out;
			}
			break;
		}
	}
	b[n] = 0;
	if (memchr(b, 0, n)) {
		fprintf(stderr, "%s: binary data (NUL byte), not YAML or JSON\n", path);
		rc = 2;
		goto out;
	}
out:
	if (f != stdin)
		fclose(f);
	if (rc) {
		free(b);
		return rc;
	}
	*buf = b;
	*len = n;
	return 0;
}

int gkctl_load_docs(const char *path, gk_yamljson_docs *docs)
{
	memset(docs, 0, sizeof(*docs));
	char *buf;
	size_t len;
	int rc = read_all(path, &buf, &len);
	if (rc)
		return rc;
	gk_err e = { 0 };
	rc = gk_yamljson_parse(buf, len, docs, &e);
	free(buf);
	if (rc) {
		fprintf(stderr, "%s: not valid YAML or JSON: %s\n", path, e.msg);
		return 2;
	}
	return 0;
}

int gkctl_load_policies(const char *path, gkctl_policies *out)
{
	memset(out, 0, sizeof(*out));
	int rc = gkctl_load_docs(path, &out->docs);
	if (rc)
		return rc;
	size_t nd = out->docs.n;
	out->cp = calloc(nd ? nd : 1, sizeof(*out->cp));
	out->docno = calloc(nd ? nd : 1, sizeof(*out->docno));
	if (!out->cp || !out->docno) {
		fprintf(stderr, "%s: out of memory\n", path);
		gkctl_policies_free(out);
		return 2;
	}
	size_t nonempty = 0;
	for (size_t i = 0; i < nd; i++)
		nonempty += !cJSON_IsNull(out->docs.doc[i]);
	out->multi = nonempty > 1;
	for (size_t i = 0; i < nd; i++) {
		const cJSON *d = out->docs.doc[i];
		if (cJSON_IsNull(d))
			continue;
		const cJSON *kind = cJSON_IsObject(d) ? cJSON_GetObjectItemCaseSensitive(d, "kind") : NULL;
		if (out->multi && cJSON_IsString(kind) && strcmp(kind->valuestring, GK_POLICY_KIND) != 0) {
			fprintf(stderr, "%s (document %zu): skipped: kind %s is not %s\n", path, i + 1, kind->valuestring,
				GK_POLICY_KIND);
			continue;
		}
		out->cp[out->n] = d;
		out->docno[out->n] = i + 1;
		out->n++;
	}
	return 0;
}

void gkctl_policies_free(gkctl_policies *p)
{
	gk_yamljson_free(&p->docs);
	free(p->cp);
	free(p->docno);
	memset(p, 0, sizeof(*p));
}

void gkctl_doc_label(char *buf, size_t cap, const char *path, const gkctl_policies *p, size_t i)
{
	if (p->multi)
		snprintf(buf, cap, "%s (document %zu)", path, p->docno[i]);
	else
		snprintf(buf, cap, "%s", path);
}
