/* lib/kube private: a JSON parser that builds read-only cJSON trees in an arena.
 *
 * The watch stream and list pages are parsed once and only read (borrowed by
 * callbacks), so the thousands of small cJSON_malloc/cJSON_Delete calls per
 * document (half of the decoding time) become bump allocations and one reset.
 * The trees are ordinary cJSON nodes for every reader (cJSON_GetObjectItem…,
 * cJSON_Print…, cJSON_Duplicate) but must never be freed or modified with
 * cJSON calls. Accepts what cJSON_ParseWithLength accepts (same escapes,
 * surrogate rules, nesting limit, numbers through strtod). Not installed. */
#ifndef GPUKMM_KUBE_JPARSE_H
#define GPUKMM_KUBE_JPARSE_H

#include <cJSON.h>
#include <stddef.h>

typedef struct gk_jblk gk_jblk;
typedef struct gk_jarena {
	gk_jblk *b;     /* newest block first */
	gk_jblk *spare; /* blocks a rewind kept, used again before any new one */
} gk_jarena;

/* Parses one JSON value at s (leading whitespace skipped), reading at most len
 * bytes; *used = bytes up to the end of the value (what follows is not
 * looked at). NULL when it is not valid JSON or memory ran out; the arena may
 * then hold garbage: reset it. */
cJSON *gk_jparse(gk_jarena *a, const char *s, size_t len, size_t *used);
/* Drops every tree of the arena; keeps one block of moderate size for reuse. */
void gk_jarena_reset(gk_jarena *a);
/* Drops every tree but keeps every block for the next documents: between the
 * pages of one list, each of which needs megabytes (a fresh mapping per page
 * costs its page faults again); reset once the list is over. */
void gk_jarena_rewind(gk_jarena *a);
void gk_jarena_free(gk_jarena *a);

#endif
