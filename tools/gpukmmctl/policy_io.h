/* gpukmmctl: reading ClusterPolicy files (YAML or JSON, multi-document, "-" = stdin)
 * for the validate, render and images subcommands. */
#ifndef GPUKMMCTL_POLICY_IO_H
#define GPUKMMCTL_POLICY_IO_H

#include <cJSON.h>
#include <stddef.h>

#include "gpukmm/yamljson.h"

#define GKCTL_MAX_INPUT (16u << 20)   /* 16 MiB: far beyond any real policy */

/* The ClusterPolicy documents of one file (borrowed from docs), their numbers
 * (1-based) and whether the file held several documents. */
typedef struct gkctl_policies {
	gk_yamljson_docs docs;
	const cJSON **cp;
	size_t *docno;
	size_t n;
	int multi;
} gkctl_policies;

/* Every YAML/JSON document of a file ("-" = stdin): 0, or 2 with a message on
 * stderr naming the file and the problem. */
int gkctl_load_docs(const char *path, gk_yamljson_docs *docs);
/* 0 ok (possibly n == 0); 2 unreadable or not YAML/JSON, with a message on stderr
 * naming the file and the problem. Documents of other kinds are noted on stderr. */
int gkctl_load_policies(const char *path, gkctl_policies *out);
void gkctl_policies_free(gkctl_policies *p);
/* "FILE" or "FILE (document N)" */
void gkctl_doc_label(char *buf, size_t cap, const char *path, const gkctl_policies *p, size_t i);

#endif
