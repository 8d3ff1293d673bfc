/* kubesim — merge patch, JSON patch, strategic merge patch. */
#include "patch.h"
#include "jsonutil.h"

#include <stdlib.h>
#include <string.h>

/* ---- RFC 7386 ------------------------------------------------------------ */
static cJSON *merge(cJSON *target, const cJSON *patch, gk_err *err)
{
	if (!cJSON_IsObject(patch)) {
		cJSON_Delete(target);
		cJSON *c = cJSON_Duplicate(patch, 1);
		if (!c)
			gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
		return c;
	}
	if (!cJSON_IsObject(target)) {
		cJSON_Delete(target);
		if (!(target = cJSON_CreateObject())) {
			gk_err_set(err, GK_RESOURCE_EXHAUSTED, "out of memory");
			return NULL;
		}
	}
	const cJSON *p;
	cJSON_ArrayForEach(p, patch) {
		if (cJSON_IsNull(p)) {
			cJSON_DeleteItemFromObjectCaseSensitive(target, p->string);
			continue;
		}
		cJSON *cur = cJSON_DetachItemFromObjectCaseSensitive(target, p->string);
		cJSON *m = merge(cur, p, err);
		if (!m) {
			cJSON_Delete(target);
			return NULL;
		}
		cJSON_AddItemToObject(target, p->string, m);
	}
	return target;
}

cJSON *ks_merge_patch(cJSON *target, const cJSON *patch, gk_err *err)
{
	return merge(target, patch, err);
}

/* Inserts val before index i (0 <= i <= size). Debian's cJSON 1.7.15+deb12u4
 * cJSON_InsertItemInArray refuses any index but 0, so rebuild the tail instead. */
static void array_insert(cJSON *arr, int i, cJSON *val)
{
	cJSON *tail = cJSON_CreateArray();
	if (!tail) {
		cJSON_AddItemToArray(arr, val); /* out of memory: keep the value, lose the order */
		return;
	}
	while (cJSON_GetArraySize(arr) > i)
		cJSON_AddItemToArray(tail, cJSON_DetachItemFromArray(arr, i));
	cJSON_AddItemToArray(arr, val);
	while (cJSON_GetArraySize(tail) > 0)
		cJSON_AddItemToArray(arr, cJSON_DetachItemFromArray(tail, 0));
	cJSON_Delete(tail);
}

/* ---- RFC 6902 ------------------------------------------------------------ */
/* Decode one reference token (~1 -> /, ~0 -> ~) into buf. */
static int token(const char **pp, char *buf, size_t cap)
{
	const char *p = *pp;
	size_t n = 0;
	while (*p && *p != '/') {
		char c = *p++;
		if (c == '~') {
			if (*p == '0')
				c = '~';
			else if (*p == '1')
				c = '/';
			else
				return -1;
			p++;
		}
		if (n + 1 >= cap)
			return -1;
		buf[n++] = c;
	}
	buf[n] = 0;
	*pp = p;
	return 0;
}

static int array_index(const char *tok, int size, int allow_end)
{
	if (allow_end && strcmp(tok, "-") == 0)
		return size;
	if (!*tok || (tok[0] == '0' && tok[1]))
		return -1;
	long v = 0;
	for (const char *p = tok; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
		if (v > 1000000)
			return -1;
	}
	return (int)v;
}

/* Resolve the parent of the pointer's last token. */
static cJSON *resolve_parent(cJSON *doc, const char *ptr, char *last, size_t cap)
{
	if (*ptr != '/')
		return NULL;
	cJSON *cur = doc;
	const char *p = ptr;
	char tok[1024];
	while (*p == '/') {
		p++;
		if (token(&p, tok, sizeof(tok)))
			return NULL;
		if (*p == 0) {
			if (strlen(tok) >= cap)
				return NULL;
			strcpy(last, tok);
			return cur;
		}
		if (cJSON_IsObject(cur)) {
			cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
		} else if (cJSON_IsArray(cur)) {
			int i = array_index(tok, cJSON_GetArraySize(cur), 0);
			cur = i < 0 ? NULL : cJSON_GetArrayItem(cur, i);
		} else {
			return NULL;
		}
		if (!cur)
			return NULL;
	}
	return NULL;
}

static cJSON *get_ptr(cJSON *doc, const char *ptr)
{
	if (*ptr == 0)
		return doc;
	char last[1024];
	cJSON *par = resolve_parent(doc, ptr, last, sizeof(last));
	if (!par)
		return NULL;
	if (cJSON_IsObject(par))
		return cJSON_GetObjectItemCaseSensitive(par, last);
	if (cJSON_IsArray(par)) {
		int i = array_index(last, cJSON_GetArraySize(par), 0);
		return i < 0 ? NULL : cJSON_GetArrayItem(par, i);
	}
	return NULL;
}

/* Removes and returns the value at ptr (NULL if absent). */
static cJSON *detach_ptr(cJSON *doc, const char *ptr)
{
	char last[1024];
	cJSON *par = resolve_parent(doc, ptr, last, sizeof(last));
	if (!par)
		return NULL;
	if (cJSON_IsObject(par))
		return cJSON_DetachItemFromObjectCaseSensitive(par, last);
	if (cJSON_IsArray(par)) {
		int i = array_index(last, cJSON_GetArraySize(par), 0);
		if (i < 0 || i >= cJSON_GetArraySize(par))
			return NULL;
		return cJSON_DetachItemFromArray(par, i);
	}
	return NULL;
}

/* Adds (takes ownership of) val at ptr; replace=1 requires the target to exist. */
static int put_ptr(cJSON **doc, const char *ptr, cJSON *val, int replace)
{
	if (*ptr == 0) {
		cJSON_Delete(*doc);
		*doc = val;
		return 0;
	}
	char last[1024];
	cJSON *par = resolve_parent(*doc, ptr, last, sizeof(last));
	if (!par)
		return -1;
	if (cJSON_IsObject(par)) {
		int has = cJSON_HasObjectItem(par, last);
		if (replace && !has)
			return -1;
		if (has)
			cJSON_ReplaceItemInObjectCaseSensitive(par, last, val);
		else
			cJSON_AddItemToObject(par, last, val);
		return 0;
	}
	if (cJSON_IsArray(par)) {
		int n = cJSON_GetArraySize(par);
		int i = array_index(last, n, !replace);
		if (i < 0 || i > n || (replace && i >= n))
			return -1;
		if (replace)
			cJSON_ReplaceItemInArray(par, i, val);
		else if (i == n)
			cJSON_AddItemToArray(par, val);
		else
			array_insert(par, i, val);
		return 0;
	}
	return -1;
}

cJSON *ks_json_patch(cJSON *doc, const cJSON *ops, gk_err *err)
{
	if (!cJSON_IsArray(ops)) {
		cJSON_Delete(doc);
		gk_err_set(err, GK_INVALID_ARGUMENT, "json patch must be an array of operations");
		return NULL;
	}
	int idx = 0;
	const cJSON *op;
	cJSON_ArrayForEach(op, ops) {
		const cJSON *o = cJSON_GetObjectItemCaseSensitive(op, "op");
		const cJSON *pa = cJSON_GetObjectItemCaseSensitive(op, "path");
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(op, "value");
		const cJSON *from = cJSON_GetObjectItemCaseSensitive(op, "from");
		const char *name = cJSON_IsString(o) ? o->valuestring : "";
		if (!cJSON_IsString(pa)) {
			gk_err_set(err, GK_INVALID_ARGUMENT, "json patch operation %d: missing path", idx);
			goto fail;
		}
		const char *path = pa->valuestring;
		if (strcmp(name, "add") == 0 || strcmp(name, "replace") == 0) {
			if (!v) {
				gk_err_set(err, GK_INVALID_ARGUMENT, "json patch operation %d (%s): missing value", idx, name);
				goto fail;
			}
			cJSON *c = cJSON_Duplicate(v, 1);
			if (!c || put_ptr(&doc, path, c, name[0] == 'r')) {
				cJSON_Delete(c);
				gk_err_set(err, GK_INVALID_ARGUMENT,
					   "json patch operation %d (%s): path %s does not exist", idx, name, path);
				goto fail;
			}
		} else if (strcmp(name, "remove") == 0) {
			cJSON *d = detach_ptr(doc, path);
			if (!d) {
				gk_err_set(err, GK_INVALID_ARGUMENT,
					   "json patch operation %d (remove): path %s does not exist", idx, path);
				goto fail;
			}
			cJSON_Delete(d);
		} else if (strcmp(name, "move") == 0 || strcmp(name, "copy") == 0) {
			if (!cJSON_IsString(from)) {
				gk_err_set(err, GK_INVALID_ARGUMENT, "json patch operation %d (%s): missing from", idx, name);
				goto fail;
			}
			cJSON *src = name[0] == 'm' ? detach_ptr(doc, from->valuestring)
						    : cJSON_Duplicate(get_ptr(doc, from->valuestring), 1);
			if (!src || put_ptr(&doc, path, src, 0)) {
				cJSON_Delete(src);
				gk_err_set(err, GK_INVALID_ARGUMENT, "json patch operation %d (%s): bad path %s -> %s", idx,
					   name, from->valuestring, path);
				goto fail;
			}
		} else if (strcmp(name, "test") == 0) {
			cJSON *cur = get_ptr(doc, path);
			if (!v || !cur || !ks_json_equal(cur, v)) {
				gk_err_set(err, GK_INVALID_ARGUMENT, "json patch operation %d (test): value at %s differs",
					   idx, path);
				goto fail;
			}
		} else {
			gk_err_set(err, GK_INVALID_ARGUMENT, "json patch operation %d: unknown op \"%s\"", idx, name);
			goto fail;
		}
		idx++;
	}
	return doc;
fail:
	cJSON_Delete(doc);
	return NULL;
}
