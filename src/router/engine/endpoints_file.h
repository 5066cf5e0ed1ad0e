/* endpoints_file.h - eldrd --endpoints FILE: the decode endpoints in
 * llm-d's file-discovery format (docs/endpoints.md), their mapping onto
 * the model's K decode workers, and a table that reloads the file when it
 * is replaced.
 *
 *   endpoints:
 *     - name: vllm-0            required, a string
 *       namespace: inference    optional, "default" when absent
 *       address: "10.0.0.1"     required, a dotted IPv4 address
 *       port: "8000"            required, a string holding 1..65535
 *       labels: {rank: "0"}     optional, string keys and values
 *
 * A role: labels["llm-d.ai/role"] (llm-d's key, bylabel/roles.go), else
 * labels["role"]: decode, prefill, encode, prefill-decode (or its old name
 * both), encode-prefill, encode-prefill-decode; no role is decode, as
 * llm-d's decode filter takes unlabelled endpoints and its prefill filter
 * does not. Another value is refused. The model's K decode workers map
 * onto the entries with the decode role; the prefill workers
 * (--prefill-workers) onto those with the prefill role.
 *
 * YAML (libyaml) or JSON (jansson; the file is JSON when its first byte
 * that is not white space is '{'). A file is taken whole or not at all:
 * every error is one line naming the file, the line and the field, as
 * "endpoints.yaml:7: endpoints[2].port: \"80a\" is not a port (1..65535)".
 * The header is named endpoints_file.h because api/endpoints.h (the HTTP
 * API's handlers) holds the short name; headers are found by name.
 *
 * No logging and no transport: every function returns a code and, on
 * failure, a message in err[errlen] for the caller to log. */
#ifndef ELDR_ROUTER_ENDPOINTS_FILE_H
#define ELDR_ROUTER_ENDPOINTS_FILE_H

#include <stddef.h>
#include <stdint.h>

#define EP_MAX 4096                  /* endpoints in one file */
#define EP_FILE_MAX (4u << 20)       /* bytes of the file (llm-d: 1 MiB) */
#define EP_STR_MAX 1024              /* bytes of one name, address, label, ... */
#define EP_LABELS_MAX 256            /* labels of one endpoint */
#define EP_HOSTPORT_MAX 22           /* "255.255.255.255:65535" and its NUL */

typedef struct ep_label {
    char *key;
    char *value;
} ep_label;

typedef struct endpoint {
    char *name;
    char *ns;                        /* namespace; "default" when absent */
    char *address;                   /* dotted IPv4, as written */
    int port;                        /* 1..65535 */
    char hostport[EP_HOSTPORT_MAX];  /* "address:port", the port in decimal */
    ep_label *labels;
    int nlabels;
    int line;                        /* where the entry starts (1-based) */
    int roles;                       /* EP_ROLE_* bits, from the role label */
} endpoint;

#define EP_ROLE_DECODE 1
#define EP_ROLE_PREFILL 2
#define EP_ROLE_ENCODE 4

/* One file's endpoints, in file order. Owns everything it points to. */
typedef struct endpoint_set {
    endpoint *v;
    int n;
    char *source;                    /* the path (or name) given to the parser */
} endpoint_set;

/* Parse text[len] (not NUL-terminated) named `source` in messages. 0 and
 * *out filled (free it with endpoints_free), or -1 and err; *out is then
 * empty. Refused: no endpoints, more than EP_MAX, a field missing or not
 * a string, an address that is not dotted IPv4, a port outside 1..65535,
 * the same namespace/name or the same address:port twice, a key given
 * twice in one mapping. Unknown keys (llm-d's metricsHost among them) are
 * ignored. */
int endpoints_parse(const char *text, size_t len, const char *source, endpoint_set *out,
                    char *err, size_t errlen);

/* Read a regular file of at most EP_FILE_MAX bytes: *buf (malloc'd, the
 * caller frees it), *len. 0, or -1 and err. */
int endpoints_read(const char *path, char **buf, size_t *len, char *err, size_t errlen);

/* endpoints_read, then endpoints_parse with the path as the source. */
int endpoints_load(const char *path, endpoint_set *out, char *err, size_t errlen);

void endpoints_free(endpoint_set *s);

/* Map s onto the K workers: ep_of_worker[k] (K entries) gets the index in
 * s of worker k's endpoint. When the K worker names are distinct and every
 * endpoint's name is one of them, by name (returns 1); otherwise endpoint
 * i serves worker i (returns 0; err then holds a note when some, but not
 * all, names matched, else ""). workers may be NULL (no names: by order).
 * -1 when s->n != K: "endpoints.yaml has 3 endpoints; the model has 4
 * workers". */
int endpoints_map(const endpoint_set *s, char *const *workers, int K, int *ep_of_worker,
                  char *err, size_t errlen);
/* The same over the entries with a role (EP_ROLE_*) only: endpoints_map
 * is it for EP_ROLE_DECODE. The count's message then says "decode" or
 * "prefill" endpoints when the file holds others. */
int endpoints_map_role(const endpoint_set *s, int role, char *const *workers, int K,
                       int *ep_of_worker, char *err, size_t errlen);

/* "a.b.c.d:port" (len bytes, no NUL needed) as one number, or -1 when it
 * is not a dotted IPv4 address and a port 1..65535. */
int64_t endpoints_hostport_key(const char *hp, size_t len);
/* A bare "a.b.c.d" (no port) as the key of its port 0: the keys of every
 * port at that address are (key, key + 65535]. -1 when not an address. */
int64_t endpoints_address_key(const char *a, size_t len);

/* ---- the table: the current set and its mapping, reloaded ----
 *
 * One writer at a time (poll, remap: a writer lock orders them), readers
 * on any thread (a mutex held only to copy out or swap). The generation
 * starts at 1 and grows by one at every change of set or mapping. */
typedef struct endpoints_table endpoints_table;

typedef struct ep_stats {
    uint64_t generation;
    uint64_t reloads;                /* changes taken from the file */
    uint64_t failed;                 /* reloads refused (each bad content once) */
    int n;                           /* endpoints in the current set */
    int K;                           /* workers of the current mapping */
    int by_name;                     /* 1 mapped by name, 0 by file order */
    double loaded_at;                /* the `now` of the last change */
} ep_stats;

/* Load path and map it onto workers[K] (copied; may be NULL). NULL and
 * err when the file cannot be read, parsed or mapped. */
endpoints_table *endpoints_table_open(const char *path, char *const *workers, int K, double now,
                                      char *err, size_t errlen);
void endpoints_table_free(endpoints_table *t);

/* For a timer (once a second): stat the path (following symlinks, as a
 * Kubernetes ConfigMap swaps its ..data link) and, when its device,
 * inode, size or mtime changed, read, parse and map it and swap it in.
 * 1 swapped in; 0 nothing to do (unchanged, the same content, or the same
 * bad file as before); -1 refused, err says why, the previous set stays,
 * and this file is not tried again until it changes. */
int endpoints_table_poll(endpoints_table *t, double now, char *err, size_t errlen);

/* The model changed: map the current set onto workers[K] (copied) and
 * swap the mapping in (0), or -1 and err, keeping the previous mapping
 * (endpoints_table_k then differs from K). Either way later reloads map
 * onto these workers. */
int endpoints_table_remap(endpoints_table *t, char *const *workers, int K, char *err,
                          size_t errlen);

/* The K the current mapping was made for. */
int endpoints_table_k(endpoints_table *t);
uint64_t endpoints_table_generation(endpoints_table *t);
void endpoints_table_stats(endpoints_table *t, ep_stats *out);

/* Worker k's "ip:port" copied into out: 0, or -1 when k is not a worker
 * of the current mapping. */
int endpoints_table_hostport(endpoints_table *t, int k, char out[EP_HOSTPORT_MAX]);

/* The worker whose endpoint is "ip:port" (hp[len], for Envoy's subset
 * hint), or -1 when none is. */
int endpoints_table_worker_of(endpoints_table *t, const char *hp, size_t len);

/* The prefill workers (--prefill-workers names[n]) that the entries with
 * the prefill role map onto, by name or by order (endpoints_map_role);
 * kept for later reloads. A file without such entries maps none (the
 * prefill profile then has no endpoint). -1 and err when the current file
 * does not map (the previous mapping stays). */
int endpoints_table_set_prefill(endpoints_table *t, char *const *names, int n, char *err,
                                size_t errlen);
/* The prefill workers mapped (0: none), and prefill worker i's "ip:port"
 * (0, or -1 when i is not one). */
int endpoints_table_n_prefill(endpoints_table *t);
int endpoints_table_prefill_hostport(endpoints_table *t, int i, char out[EP_HOSTPORT_MAX]);

/* One entry of Envoy's subset hint (s[len]): mask[k] = 1 for the decode
 * worker at that "ip:port", or, for a bare "ip" without a port, for every
 * decode worker at that address (GIE keeps only the address of an entry,
 * requestcontrol/candidates.go). Returns how many it newly marked, or -1
 * when s is neither. */
int endpoints_table_subset(endpoints_table *t, const char *s, size_t len, uint8_t *mask);

/* fn(cls, k, endpoint of worker k) for every worker, in worker order,
 * under the table's lock (fn must not call the table). */
void endpoints_table_each(endpoints_table *t, void (*fn)(void *cls, int k, const endpoint *e),
                          void *cls);

#endif
