/* gpukmm — YAML (multi-document) to cJSON, the way kubectl reads manifests
 * (sigs.k8s.io/yaml: YAML 1.1 scalars, so yes/no/on/off are booleans).
 * Aliases/anchors are rejected (no billion-laughs), nesting is bounded. JSON is
 * YAML, so JSON input works too. */
#ifndef GPUKMM_YAMLJSON_H
#define GPUKMM_YAMLJSON_H

#include <cJSON.h>
#include <stddef.h>

#include "gpukmm/err.h"

#define GK_YAMLJSON_MAX_DEPTH 64

typedef struct gk_yamljson_docs {
	cJSON **doc;   /* documents in order; an empty document is a JSON null */
	size_t n;
} gk_yamljson_docs;

/* Parses every document of buf. On error nothing is returned and err says
 * where ("line L column C: ..."). */
int gk_yamljson_parse(const char *buf, size_t len, gk_yamljson_docs *out, gk_err *err);
void gk_yamljson_free(gk_yamljson_docs *d);

#endif
