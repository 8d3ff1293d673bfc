/* kubesim — YAML to cJSON with libyaml's document API. Plain scalars become
 * numbers, booleans or null following YAML 1.1/1.2 core-schema rules; quoted
 * scalars stay strings. */
#include "yamljson.h"

#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define KS_YAML_MAX_DEPTH 64

static cJSON *scalar(const yaml_node_t *n)
{
	const char *v = (const char *)n->data.scalar.value;
	size_t len = n->data.scalar.length;
	if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
		if (len == 0 || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
		    strcmp(v, "NULL") == 0)
			return cJSON_CreateNull();
		if (strcmp(v, "true") == 0 || strcmp(v, "True") == 0 || strcmp(v, "TRUE") == 0)
			return cJSON_CreateTrue();
		if (strcmp(v, "false") == 0 || strcmp(v, "False") == 0 || strcmp(v, "FALSE") == 0)
			return cJSON_CreateFalse();
		char *end;
		double d = strtod(v, &end);
		if (end != v && *end == 0 && strspn(v, "+-0123456789.eE") == len)
			return cJSON_CreateNumber(d);
	}
	return cJSON_CreateString(v);
}

static cJSON *convert(yaml_document_t *doc, yaml_node_t *n, int depth, gk_err *err)
{
	if (!n) {
		gk_err_set(err, GK_INVALID_ARGUMENT, "dangling YAML node");
		return NULL;
	}
	if (depth > KS_YAML_MAX_DEPTH) {
		gk_err_set(err, GK_INVALID_ARGUMENT, "YAML nested too deeply");
		return NULL;
	}
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return scalar(n);
	case YAML_SEQUENCE_NODE: {
		cJSON *a = cJSON_CreateArray();
		for (yaml_node_item_t *i = n->data.sequence.items.start; a && i < n->data.sequence.items.top; i++) {
			cJSON *c = convert(doc, yaml_document_get_node(doc, *i), depth + 1, err);
			if (!c) {
				cJSON_Delete(a);
				return NULL;
			}
			cJSON_AddItemToArray(a, c);
		}
		return a;
	}
	case YAML_MAPPING_NODE: {
		cJSON *o = cJSON_CreateObject();
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start; o && p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(doc, p->key);
			if (!k || k->type != YAML_SCALAR_NODE) {
				gk_err_set(err, GK_INVALID_ARGUMENT, "YAML mapping keys must be scalars");
				cJSON_Delete(o);
				return NULL;
			}
			cJSON *c = convert(doc, yaml_document_get_node(doc, p->value), depth + 1, err);
			if (!c) {
				cJSON_Delete(o);
				return NULL;
			}
			cJSON_DeleteItemFromObjectCaseSensitive(o, (const char *)k->data.scalar.value);
			cJSON_AddItemToObject(o, (const char *)k->data.scalar.value, c);
		}
		return o;
	}
	default:
		gk_err_set(err, GK_INVALID_ARGUMENT, "empty YAML document");
		return NULL;
	}
}

cJSON *ks_yaml_to_json(const char *buf, size_t len, gk_err *err)
{
	yaml_parser_t p;
	yaml_document_t doc;
	if (!yaml_parser_initialize(&p)) {
		gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		return NULL;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
	if (!yaml_parser_load(&p, &doc)) {
		gk_err_set(err, GK_INVALID_ARGUMENT, "line %zu: %s", p.problem_mark.line + 1,
			   p.problem ? p.problem : "parse error");
		yaml_parser_delete(&p);
		return NULL;
	}
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	cJSON *j = root ? convert(&doc, root, 0, err) : NULL;
	if (!root)
		gk_err_set(err, GK_INVALID_ARGUMENT, "empty YAML document");
	else if (!j && err && !err->code)
		gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
	yaml_document_delete(&doc);
	yaml_parser_delete(&p);
	return j;
}
