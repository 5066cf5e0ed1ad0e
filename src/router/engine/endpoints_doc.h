/* endpoints_doc.h - the endpoints file as a small tree with line numbers,
 * built from YAML (libyaml's document loader) or JSON (jansson checks the
 * syntax and places its errors; json_scan walks the text for the lines).
 * endpoints_file.c validates the tree; nothing else uses it.
 *
 * Scalars are typed as llm-d's loader (sigs.k8s.io/yaml, YAML 1.1) would
 * type them: a quoted YAML scalar or a JSON string is a string; a plain
 * YAML scalar that reads as null ("", ~, null) is null, one that reads as
 * a number or a boolean (8000, 1e3, 0x1f, yes, off, ...) is "other", as
 * JSON numbers and booleans are. */
#ifndef ELDR_ROUTER_ENDPOINTS_DOC_H
#define ELDR_ROUTER_ENDPOINTS_DOC_H

#include <stddef.h>

enum { TN_NULL, TN_STR, TN_OTHER, TN_SEQ, TN_MAP };

typedef struct tnode {
    int kind;
    int line;                    /* 1-based */
    char *s;                     /* TN_STR, TN_OTHER: the text (NUL-terminated) */
    size_t n;
    struct tnode *kid;           /* TN_SEQ: items; TN_MAP: key, value, key, value, ... */
    int nkid;
} tnode;

/* Build the tree of text[len]: 0 and *root (free with tdoc_free), or -1
 * and err ("SOURCE:LINE: what", as the parser says it). json: 1 for the
 * JSON reader, 0 for YAML. The tree's size is bounded (nodes, bytes and
 * depth), so that YAML aliases cannot blow it up. */
int tdoc_build(const char *text, size_t len, int json, const char *source, tnode *root,
               char *err, size_t errlen);
void tdoc_free(tnode *root);

#endif
