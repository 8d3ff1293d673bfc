/* kubesim — label and field selectors (pure).
 *
 * Label selectors: "a=b", "a==b", "a!=b", "a in (x,y)", "a notin (x)", "a", "!a",
 * comma-separated, all terms ANDed (Kubernetes labels.Parse syntax).
 * Field selectors: "path=v", "path==v", "path!=v", comma-separated, where path is a
 * dotted JSON path into the object (metadata.name, spec.nodeName, involvedObject.uid...). */
#ifndef KUBESIM_SELECTOR_H
#define KUBESIM_SELECTOR_H

#include <cJSON.h>

#include "gpukmm/err.h"

enum ks_sel_op { KS_SEL_EQ, KS_SEL_NE, KS_SEL_IN, KS_SEL_NOTIN, KS_SEL_EXISTS, KS_SEL_NOTEXISTS };

#define KS_SEL_MAX_TERMS 32
#define KS_SEL_MAX_VALUES 32

typedef struct ks_sel_term {
	enum ks_sel_op op;
	char *key;
	int nvalues;
	char *values[KS_SEL_MAX_VALUES];
} ks_sel_term;

typedef struct ks_selector {
	int nterms;
	ks_sel_term terms[KS_SEL_MAX_TERMS];
} ks_selector;

/* Parse; NULL or "" gives the empty selector (matches everything). */
int ks_label_selector_parse(const char *s, ks_selector *out, gk_err *err);
int ks_field_selector_parse(const char *s, ks_selector *out, gk_err *err);
void ks_selector_free(ks_selector *s);

/* labels: the object's metadata.labels (may be NULL). */
int ks_label_selector_match(const ks_selector *s, const cJSON *labels);
/* obj: the whole object. */
int ks_field_selector_match(const ks_selector *s, const cJSON *obj);

/* Value at a dotted path as a string ("" if absent; numbers and bools printed). */
void ks_field_value(const cJSON *obj, const char *path, char *buf, size_t cap);

#endif
