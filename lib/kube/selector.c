/* lib/kube: label and field selectors (Kubernetes labels.Parse / fields.Parse
 * syntax), parsed and matched. Pure. */
#include "gpukmm/kube.h"
#include "kube.pb-c.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gk_selector_free(gk_selector *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->nterms; i++) {
		free(s->terms[i].key);
		for (int j = 0; j < s->terms[i].nvalues; j++)
			free(s->terms[i].values[j]);
	}
	s->nterms = 0;
}

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

static int key_char(int c)
{
	return isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/';
}

static int value_char(int c)
{
	return isalnum(c) || c == '-' || c == '_' || c == '.';
}

static char *dupn(const char *p, size_t n)
{
	char *s = malloc(n + 1);
	if (!s)
		return NULL;
	memcpy(s, p, n);
	s[n] = 0;
	return s;
}

static int add_value(gk_sel_term *t, const char *p, size_t n, gk_err *err)
{
	if (t->nvalues >= GK_SEL_MAX_VALUES)
		return gk_err_set(err, GK_INVALID_ARGUMENT, "too many values in selector term for %s", t->key);
	if (!(t->values[t->nvalues] = dupn(p, n)))
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	t->nvalues++;
	return 0;
}

static int parse_common(const char *s, gk_selector *out, int labels, gk_err *err)
{
	memset(out, 0, sizeof(*out));
	if (!s)
		return 0;
	const char *p = skip_ws(s);
	if (!*p)
		return 0;
	for (;;) {
		p = skip_ws(p);
		if (out->nterms >= GK_SEL_MAX_TERMS) {
			gk_selector_free(out);
			return gk_err_set(err, GK_INVALID_ARGUMENT, "selector has too many terms");
		}
		gk_sel_term *t = &out->terms[out->nterms];
		memset(t, 0, sizeof(*t));
		int neg = 0;
		if (labels && *p == '!') {
			neg = 1;
			p = skip_ws(p + 1);
		}
		const char *k = p;
		while (*p && (key_char((unsigned char)*p) || (!labels && *p != '=' && *p != '!' && *p != ',' && *p != ' ')))
			p++;
		if (p == k)
			goto bad;
		if (!(t->key = dupn(k, (size_t)(p - k)))) {
			gk_selector_free(out);
			return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		}
		out->nterms++;
		p = skip_ws(p);
		if (neg) {
			t->op = GK_SEL_NOTEXISTS;
		} else if (*p == '=' || (*p == '!' && p[1] == '=')) {
			if (*p == '!') {
				t->op = GK_SEL_NE;
				p += 2;
			} else {
				t->op = GK_SEL_EQ;
				p += (p[1] == '=') ? 2 : 1;
			}
			p = skip_ws(p);
			const char *v = p;
			if (labels)
				while (*p && value_char((unsigned char)*p))
					p++;
			else
				while (*p && *p != ',')
					p++;
			size_t n = (size_t)(p - v);
			while (!labels && n && v[n - 1] == ' ')
				n--;
			if (add_value(t, v, n, err)) {
				gk_selector_free(out);
				return err ? err->code : GK_INVALID_ARGUMENT;
			}
		} else if (labels && (strncmp(p, "in", 2) == 0 || strncmp(p, "notin", 5) == 0) &&
			   (p[0] == 'i' ? (p[2] == ' ' || p[2] == '(') : (p[5] == ' ' || p[5] == '('))) {
			t->op = p[0] == 'i' ? GK_SEL_IN : GK_SEL_NOTIN;
			p = skip_ws(p + (p[0] == 'i' ? 2 : 5));
			if (*p != '(')
				goto bad;
			p++;
			for (;;) {
				p = skip_ws(p);
				const char *v = p;
				while (*p && value_char((unsigned char)*p))
					p++;
				if (add_value(t, v, (size_t)(p - v), err)) {
					gk_selector_free(out);
					return err ? err->code : GK_INVALID_ARGUMENT;
				}
				p = skip_ws(p);
				if (*p == ',') {
					p++;
					continue;
				}
				if (*p == ')') {
					p++;
					break;
				}
				goto bad;
			}
		} else if (labels && (*p == ',' || *p == 0)) {
			t->op = GK_SEL_EXISTS;
		} else {
			goto bad;
		}
		p = skip_ws(p);
		if (*p == 0)
			return 0;
		if (*p != ',')
			goto bad;
		p++;
	}
bad:
	gk_selector_free(out);
	return gk_err_set(err, GK_INVALID_ARGUMENT, "unable to parse requirement: invalid %s selector \"%s\"",
			  labels ? "label" : "field", s);
}

int gk_label_selector_parse(const char *s, gk_selector *out, gk_err *err)
{
	return parse_common(s, out, 1, err);
}

int gk_field_selector_parse(const char *s, gk_selector *out, gk_err *err)
{
	return parse_common(s, out, 0, err);
}

int gk_selector_term_match(const gk_sel_term *t, const char *val)
{
	int in = 0;
	switch (t->op) {
	case GK_SEL_EXISTS:
		return val != NULL;
	case GK_SEL_NOTEXISTS:
		return val == NULL;
	case GK_SEL_EQ:
		return val && strcmp(val, t->values[0]) == 0;
	case GK_SEL_NE:
		return !val || strcmp(val, t->values[0]) != 0;
	case GK_SEL_IN:
	case GK_SEL_NOTIN:
		for (int i = 0; val && i < t->nvalues; i++)
			if (strcmp(val, t->values[i]) == 0)
				in = 1;
		return t->op == GK_SEL_IN ? in : !in;
	}
	return 0;
}

int gk_label_selector_match_json(const gk_selector *s, const cJSON *labels)
{
	for (int i = 0; i < s->nterms; i++) {
		const cJSON *v = labels ? cJSON_GetObjectItemCaseSensitive(labels, s->terms[i].key) : NULL;
		const char *val = cJSON_IsString(v) ? v->valuestring : NULL;
		if (!gk_selector_term_match(&s->terms[i], val))
			return 0;
	}
	return 1;
}

void gk_field_value(const cJSON *obj, const char *path, char *buf, size_t cap)
{
	char seg[256];
	const cJSON *cur = obj;
	buf[0] = 0;
	while (cur && *path) {
		const char *dot = strchr(path, '.');
		size_t n = dot ? (size_t)(dot - path) : strlen(path);
		if (n >= sizeof(seg))
			return;
		memcpy(seg, path, n);
		seg[n] = 0;
		cur = cJSON_IsObject(cur) ? cJSON_GetObjectItemCaseSensitive(cur, seg) : NULL;
		path += n + (dot ? 1 : 0);
	}
	if (!cur)
		return;
	if (cJSON_IsString(cur))
		snprintf(buf, cap, "%s", cur->valuestring);
	else if (cJSON_IsBool(cur))
		snprintf(buf, cap, "%s", cJSON_IsTrue(cur) ? "true" : "false");
	else if (cJSON_IsNumber(cur))
		snprintf(buf, cap, "%.17g", cur->valuedouble);
}

int gk_field_selector_match_json(const gk_selector *s, const cJSON *obj)
{
	char val[512];
	for (int i = 0; i < s->nterms; i++) {
		gk_field_value(obj, s->terms[i].key, val, sizeof(val));
		if (!gk_selector_term_match(&s->terms[i], val))
			return 0;
	}
	return 1;
}

int gk_label_selector_match_kv(const gk_selector *s, const Gpukmm__KeyValue *const *kv, size_t n)
{
	for (int i = 0; i < s->nterms; i++) {
		const char *val = NULL;
		for (size_t j = 0; j < n && !val; j++)
			if (kv[j] && kv[j]->key && !strcmp(kv[j]->key, s->terms[i].key))
				val = kv[j]->value ? kv[j]->value : "";
		if (!gk_selector_term_match(&s->terms[i], val))
			return 0;
	}
	return 1;
}
