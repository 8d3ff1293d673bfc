/* lib/yamljson: libyaml events -> cJSON trees. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "gpukmm/kmap.h"
#include "gpukmm/yamljson.h"

typedef struct yj {
	yaml_parser_t p;
	gk_err *err;
	int depth;
} yj;

static int perr(yj *y, const yaml_event_t *ev, const char *what)
{
	size_t line = ev ? ev->start_mark.line + 1 : y->p.problem_mark.line + 1;
	size_t col = ev ? ev->start_mark.column + 1 : y->p.problem_mark.column + 1;
	return gk_err_set(y->err, GK_INVALID_ARGUMENT, "line %zu column %zu: %s", line, col, what);
}

static bool match_any(const char *s, const char *const *set)
{
	for (; *set; set++)
		if (strcmp(s, *set) == 0)
			return true;
	return false;
}

static bool is_int(const char *s)
{
	const char *p = s;
	if (*p == '-' || *p == '+')
		p++;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		p += 2;
		if (!*p)
			return false;
		for (; *p; p++)
			if (!strchr("0123456789abcdefABCDEF_", *p))
				return false;
		return true;
	}
	if (!*p)
		return false;
	for (; *p; p++)
		if ((*p < '0' || *p > '9') && *p != '_')
			return false;
	return true;
}

static bool is_float(const char *s)
{
	const char *p = s;
	bool digits = false;
	if (*p == '-' || *p == '+')
		p++;
	while (*p >= '0' && *p <= '9') {
		p++;
		digits = true;
	}
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9') {
			p++;
			digits = true;
		}
	}
	if (!digits)
		return false;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '-' || *p == '+')
			p++;
		if (*p < '0' || *p > '9')
			return false;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	return *p == 0;
}

static cJSON *scalar(const yaml_event_t *ev)
{
	const char *v = (const char *)ev->data.scalar.value;
	const char *tag = (const char *)ev->data.scalar.tag;
	if (tag && strcmp(tag, YAML_STR_TAG) == 0)
		return cJSON_CreateString(v);
	if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return cJSON_CreateString(v);
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL", NULL };
	static const char *const trues[] = { "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y", NULL };
	static const char *const falses[] = { "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N", NULL };
	if (match_any(v, nulls))
		return cJSON_CreateNull();
	if (match_any(v, trues))
		return cJSON_CreateTrue();
	if (match_any(v, falses))
		return cJSON_CreateFalse();
	if (is_int(v)) {
		char buf[64];
		size_t j = 0;
		for (const char *p = v; *p && j + 1 < sizeof(buf); p++)
			if (*p != '_')
				buf[j++] = *p;
		buf[j] = 0;
		char *end;
		double d = (double)strtoll(buf, &end, 0);
		if (*end == 0)
			return cJSON_CreateNumber(d);
		return cJSON_CreateString(v);
	}
	if (is_float(v))
		return cJSON_CreateNumber(strtod(v, NULL));
	return cJSON_CreateString(v);
}

static int node(yj *y, yaml_event_t *ev, cJSON **out);

/* parses the rest of a sequence/mapping whose start event was consumed */
static int collection(yj *y, const yaml_event_t *start, bool mapping, cJSON **out)
{
	if (++y->depth > GK_YAMLJSON_MAX_DEPTH)
		return perr(y, start, "nesting too deep");
	cJSON *c = mapping ? cJSON_CreateObject() : cJSON_CreateArray();
	if (!c)
		return gk_err_set(y->err, GK_RESOURCE_EXHAUSTED, "out of memory");
	/* the keys seen so far: a hash set, so the duplicate check costs O(1)
	 * per key (a lookup in the object itself is a list walk: 40k keys took
	 * seconds) */
	gk_kmap keys;
	gk_kmap_init(&keys);
	int rc = 0;
	for (;;) {
		yaml_event_t ev;
		if (!yaml_parser_parse(&y->p, &ev)) {
			rc = perr(y, NULL, y->p.problem ? y->p.problem : "invalid YAML");
			break;
		}
		if (ev.type == (mapping ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT)) {
			yaml_event_delete(&ev);
			break;
		}
		if (mapping) {
			if (ev.type != YAML_SCALAR_EVENT) {
				rc = perr(y, &ev, "mapping keys must be scalars");
				yaml_event_delete(&ev);
				break;
			}
			char *key = strdup((const char *)ev.data.scalar.value);
			yaml_event_delete(&ev);
			if (!key) {
				rc = gk_err_set(y->err, GK_RESOURCE_EXHAUSTED, "out of memory");
				break;
			}
			yaml_event_t vev;
			cJSON *val = NULL;
			if (!yaml_parser_parse(&y->p, &vev)) {
				free(key);
				rc = perr(y, NULL, y->p.problem ? y->p.problem : "invalid YAML");
				break;
			}
			if ((rc = node(y, &vev, &val))) {
				free(key);
				break;
			}
			int fresh = 0;
			if (!gk_kmap_put(&keys, key, NULL, &fresh))
				rc = gk_err_set(y->err, GK_RESOURCE_EXHAUSTED, "out of memory");
			else if (!fresh) /* like sigs.k8s.io/yaml (strict): duplicate keys are an error */
				rc = gk_err_set(y->err, GK_INVALID_ARGUMENT, "duplicate key \"%s\"", key);
			if (rc) {
				free(key);
				cJSON_Delete(val);
				break;
			}
			cJSON_AddItemToObject(c, key, val);
			free(key);
		} else {
			cJSON *val = NULL;
			if ((rc = node(y, &ev, &val)))
				break;
			cJSON_AddItemToArray(c, val);
		}
	}
	gk_kmap_clear(&keys);
	if (rc) {
		cJSON_Delete(c);
		return rc;
	}
	y->depth--;
	*out = c;
	return 0;
}

/* consumes ev */
static int node(yj *y, yaml_event_t *ev, cJSON **out)
{
	int rc = 0;
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		if (!(*out = scalar(ev)))
			rc = gk_err_set(y->err, GK_RESOURCE_EXHAUSTED, "out of memory");
		break;
	case YAML_SEQUENCE_START_EVENT:
		rc = collection(y, ev, false, out);
		break;
	case YAML_MAPPING_START_EVENT:
		rc = collection(y, ev, true, out);
		break;
	case YAML_ALIAS_EVENT:
		rc = perr(y, ev, "YAML aliases are not supported");
		break;
	default:
		rc = perr(y, ev, "unexpected YAML event");
	}
	yaml_event_delete(ev);
	return rc;
}

void gk_yamljson_free(gk_yamljson_docs *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		cJSON_Delete(d->doc[i]);
	free(d->doc);
	d->doc = NULL;
	d->n = 0;
}

int gk_yamljson_parse(const char *buf, size_t len, gk_yamljson_docs *out, gk_err *err)
{
	yj y = { .err = err };
	gk_yamljson_docs d = { 0 };
	int rc = 0;
	out->doc = NULL;
	out->n = 0;
	if (!yaml_parser_initialize(&y.p))
		return gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	yaml_parser_set_input_string(&y.p, (const unsigned char *)buf, len);
	for (;;) {
		yaml_event_t ev;
		if (!yaml_parser_parse(&y.p, &ev)) {
			rc = perr(&y, NULL, y.p.problem ? y.p.problem : "invalid YAML");
			break;
		}
		if (ev.type == YAML_STREAM_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		if (ev.type != YAML_DOCUMENT_START_EVENT) {
			yaml_event_delete(&ev);
			continue;
		}
		yaml_event_delete(&ev);
		yaml_event_t first;
		if (!yaml_parser_parse(&y.p, &first)) {
			rc = perr(&y, NULL, y.p.problem ? y.p.problem : "invalid YAML");
			break;
		}
		cJSON *doc = NULL;
		if ((rc = node(&y, &first, &doc)))
			break;
		yaml_event_t end;
		if (!yaml_parser_parse(&y.p, &end)) {
			cJSON_Delete(doc);
			rc = perr(&y, NULL, y.p.problem ? y.p.problem : "invalid YAML");
			break;
		}
		yaml_event_delete(&end);
		cJSON **v = realloc(d.doc, (d.n + 1) * sizeof(*v));
		if (!v) {
			cJSON_Delete(doc);
			rc = gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
			break;
		}
		d.doc = v;
		d.doc[d.n++] = doc;
	}
	yaml_parser_delete(&y.p);
	if (rc) {
		gk_yamljson_free(&d);
		return rc;
	}
	*out = d;
	return 0;
}
