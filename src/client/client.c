/* client.c - the eldrd HTTP/JSON client over libcurl (client.h). */
#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "client.h"
#include "err.h"
#include "token.h"

struct client {
    CURL *curl;
    struct curl_slist *headers;
    char url[CLIENT_URL_MAX];
    long timeout_ms;
    char *buf;                   /* the last answer's body */
    size_t len, cap;
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

/* curl_global_init is not thread-safe: once per process, before any
 * handle. (Never cleaned up: other clients may live until exit.) */
static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int client_buf_append(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 4096;
        while (c < *len + n + 1)
            c *= 2;
        char *b = realloc(*buf, c);
        if (!b)
            return -1;
        *buf = b;
        *cap = c;
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    client_t *c = arg;
    /* 0 bytes taken: curl reports a write error */
    return client_buf_append(&c->buf, &c->len, &c->cap, p, size * n) < 0 ? 0 : size * n;
}

client_t *client_new(const char *url, double timeout_s, char *err, size_t errlen)
{
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK) {
        eldr_errf(err, errlen, "libcurl: %s", curl_easy_strerror(global_rc));
        return NULL;
    }
    const char *scheme = strstr(url, "://") ? "" : "http://";
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/')
        n--;
    if (n == 0 || strncmp(url, "https://", 8) == 0 ||
        (strstr(url, "://") && strncmp(url, "http://", 7))) {
        eldr_errf(err, errlen, "URL '%.200s': give http://HOST:PORT", url);
        return NULL;
    }
    if (!(timeout_s > 0 && timeout_s < 86400)) {
        eldr_errf(err, errlen, "client timeout %g s: must be in (0, 86400)", timeout_s);
        return NULL;
    }
    client_t *c = calloc(1, sizeof *c);
    if (!c || (size_t)snprintf(c->url, sizeof c->url, "%s%.*s", scheme, (int)n, url) >=
                  sizeof c->url) {
        free(c);
        eldr_errf(err, errlen, "URL '%.200s': too long", url);
        return NULL;
    }
    c->timeout_ms = (long)ceil(timeout_s * 1000);
    c->curl = curl_easy_init();
    c->headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (!c->curl || !c->headers) {
        client_free(c);
        eldr_errf(err, errlen, "%s: out of memory for the HTTP client", url);
        return NULL;
    }
    return c;
}

void client_free(client_t *c)
{
    if (!c)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    curl_slist_free_all(c->headers);
    free(c->buf);
    free(c);
}

int client_add_header(client_t *c, const char *line, char *err, size_t errlen)
{
    struct curl_slist *h = curl_slist_append(c->headers, line);
    if (!h)
        return eldr_errf(err, errlen, "%s: out of memory for a header", c->url);
    c->headers = h;
    return 0;
}

int client_token_header(const char *path, const char *opt, char *line, size_t len, char *err,
                        size_t errlen)
{
    char tok[TOKEN_MAX];
    if (token_read_file(path, opt, tok, sizeof tok, err, errlen) < 0)
        return -1;
    if ((size_t)snprintf(line, len, "Authorization: Bearer %s", tok) >= len)
        return eldr_errf(err, errlen, "%s %s: the token is too long", opt, path);
    return 0;
}

int client_use_token_file(client_t *c, const char *path, const char *opt, char *err,
                          size_t errlen)
{
    char line[CLIENT_TOKEN_HEADER_MAX];
    if (client_token_header(path, opt, line, sizeof line, err, errlen) < 0)
        return -1;
    return client_add_header(c, line, err, errlen);
}

const char *client_url(const client_t *c)
{
    return c->url;
}

/* "HTTP 404: <error> (<where>)" from an error answer, or its first bytes. */
static void http_failure(client_t *c, const char *path, long status, char *err, size_t errlen)
{
    json_t *j = c->len ? json_loadb(c->buf, c->len, 0, NULL) : NULL;
    json_t *e = j ? json_object_get(j, "error") : NULL;
    /* OpenAI's shape, {"error": {"message", "param", ...}}; an older
     * eldrd's {"error": "...", "where": "..."} too */
    const char *msg = json_is_object(e) ? json_string_value(json_object_get(e, "message"))
                                        : json_string_value(e);
    const char *where = json_is_object(e) ? json_string_value(json_object_get(e, "param"))
                                          : j ? json_string_value(json_object_get(j, "where"))
                                              : NULL;
    if (msg)
        eldr_errf(err, errlen, "%s%s: HTTP %ld: %s%s%s%s", c->url, path, status, msg,
                  where ? " (" : "", where ? where : "", where ? ")" : "");
    else
        eldr_errf(err, errlen, "%s%s: HTTP %ld: %.120s", c->url, path, status,
                  c->len ? c->buf : "(empty answer)");
    json_decref(j);
}

int client_call(client_t *c, const char *method, const char *path, const char *body,
                size_t len, long *status, json_t **out, char *err, size_t errlen)
{
    char full[CLIENT_URL_MAX + 1024];
    long st = 0;
    if (status)
        *status = 0;
    if (out)
        *out = NULL;
    if ((size_t)snprintf(full, sizeof full, "%s%s", c->url, path) >= sizeof full)
        return eldr_errf(err, errlen, "%s: path too long (%zu bytes)", c->url, strlen(path));
    CURL *h = c->curl;
    c->len = 0;
    curl_easy_reset(h);  /* keeps the open connection */
    curl_easy_setopt(h, CURLOPT_URL, full);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
    if (strcmp(method, "GET"))
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    CURLcode rc = curl_easy_perform(h);
    if (rc != CURLE_OK)
        return eldr_errf(err, errlen, "%s: %s", full, curl_easy_strerror(rc));
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
    if (status)
        *status = st;
    if (st < 200 || st > 299) {
        http_failure(c, path, st, err, errlen);
        return -1;
    }
    if (!out)
        return 0;
    json_error_t je;
    *out = json_loadb(c->buf ? c->buf : "", c->len, 0, &je);
    if (!*out)
        return eldr_errf(err, errlen, "%s: answer is not JSON: %s (line %d column %d)", full,
                         je.text, je.line, je.column);
    return 0;
}

/* Send a jansson body (consumed). */
static int call_json(client_t *c, const char *method, const char *path, json_t *body,
                     long *status, json_t **out, char *err, size_t errlen)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text)
        return eldr_errf(err, errlen, "%s%s: out of memory for the request body", c->url,
                         path);
    int rc = client_call(c, method, path, text, strlen(text), status, out, err, errlen);
    free(text);
    return rc;
}

int client_health(client_t *c, json_t **out, char *err, size_t errlen)
{
    return client_call(c, "GET", "/healthz", NULL, 0, NULL, out, err, errlen);
}

int client_snapshot(client_t *c, int centroids, int decisions, json_t **out, char *err,
                    size_t errlen)
{
    char path[96];
    if (decisions >= 0)
        snprintf(path, sizeof path, "/v1/snapshot?centroids=%d&decisions=%d", !!centroids,
                 decisions);
    else
        snprintf(path, sizeof path, "/v1/snapshot?centroids=%d", !!centroids);
    return client_call(c, "GET", path, NULL, 0, NULL, out, err, errlen);
}

/* cells values as base64 of their little-endian bytes (malloc'd): width 2
 * for uint16 counts (sent as int16), 4 for float32 gate values. */
static char *le_b64(const void *vals, size_t cells, size_t width)
{
    uint8_t *le = malloc(cells * width);
    char *b = malloc(b64_encoded_size(cells * width));
    if (!le || !b) {
        free(le);
        free(b);
        return NULL;
    }
    for (size_t i = 0; i < cells; i++) {
        uint32_t u;
        if (width == 2)
            u = ((const uint16_t *)vals)[i];
        else
            memcpy(&u, (const float *)vals + i, sizeof u);
        for (size_t j = 0; j < width; j++)
            le[i * width + j] = (uint8_t)(u >> (8 * j));
    }
    b64_encode(le, cells * width, b);
    free(le);
    return b;
}

static void copy_str(char *dst, size_t n, json_t *v)
{
    const char *s = json_string_value(v);
    snprintf(dst, n, "%s", s ? s : "");
}

static int route_body(client_t *c, const char *request_id, const char *key, char *b,
                      client_routed *r, json_t **answer, long *status, char *err,
                      size_t errlen);

int client_route(client_t *c, const char *request_id, const uint16_t *counts, size_t cells,
                 client_routed *r, json_t **answer, long *status, char *err, size_t errlen)
{
    if (status)
        *status = 0;
    for (size_t i = 0; i < cells; i++)
        if (counts[i] > 32767)
            return eldr_errf(err, errlen, "route: count %u at cell %zu exceeds 32767",
                             counts[i], i);
    return route_body(c, request_id, "counts", le_b64(counts, cells, 2), r, answer, status, err,
                      errlen);
}

int client_route_gates(client_t *c, const char *request_id, const float *gates, size_t cells,
                       client_routed *r, json_t **answer, long *status, char *err,
                       size_t errlen)
{
    return route_body(c, request_id, "gates", le_b64(gates, cells, 4), r, answer, status, err,
                      errlen);
}

/* POST /v1/route {key: b (taken over), request_id}. */
static int route_body(client_t *c, const char *request_id, const char *key, char *b,
                      client_routed *r, json_t **answer, long *status, char *err,
                      size_t errlen)
{
    json_t *body = b ? json_pack("{s:s}", key, b) : NULL;
    free(b);
    if (body && request_id && *request_id)
        json_object_set_new(body, "request_id", json_string(request_id));
    if (!body)
        return eldr_errf(err, errlen, "route: out of memory for the body");
    json_t *a;
    if (call_json(c, "POST", "/v1/route", body, status, &a, err, errlen) < 0)
        return -1;
    json_t *wi = json_object_get(a, "worker_index");
    if (!json_is_integer(wi)) {
        json_decref(a);
        return eldr_errf(err, errlen, "%s/v1/route: answer lacks worker_index", c->url);
    }
    if (r) {
        copy_str(r->request_id, sizeof r->request_id, json_object_get(a, "request_id"));
        copy_str(r->worker, sizeof r->worker, json_object_get(a, "worker"));
        copy_str(r->rule, sizeof r->rule, json_object_get(a, "rule"));
        r->worker_index = (int)json_integer_value(wi);
        r->seq = (uint64_t)json_integer_value(json_object_get(a, "seq"));
    }
    if (answer)
        *answer = a;
    else
        json_decref(a);
    return 0;
}

int client_finish(client_t *c, const char *request_id, int *worker_index, long *status,
                  char *err, size_t errlen)
{
    json_t *a;
    if (call_json(c, "POST", "/v1/finish", json_pack("{s:s}", "request_id", request_id),
                  status, &a, err, errlen) < 0)
        return -1;
    if (worker_index)
        *worker_index = (int)json_integer_value(json_object_get(a, "worker_index"));
    json_decref(a);
    return 0;
}

int client_explain(client_t *c, const char *request_id, json_t **out, char *err,
                   size_t errlen)
{
    char *esc = curl_easy_escape(c->curl, request_id, 0);
    if (!esc)
        return eldr_errf(err, errlen, "explain: out of memory");
    char path[1024];
    int n = snprintf(path, sizeof path, "/v1/explain/%s", esc);
    curl_free(esc);
    if ((size_t)n >= sizeof path)
        return eldr_errf(err, errlen, "explain: request id too long");
    return client_call(c, "GET", path, NULL, 0, NULL, out, err, errlen);
}

int client_set_tau(client_t *c, double tau, char *err, size_t errlen)
{
    if (!isfinite(tau) || tau < 0)
        return eldr_errf(err, errlen, "set_tau: tau %g must be finite and >= 0", tau);
    return call_json(c, "PUT", "/v1/config", json_pack("{s:f}", "tau", tau), NULL, NULL, err,
                     errlen);
}

int client_window(client_t *c, int n, json_t **out, char *err, size_t errlen)
{
    char path[64];
    if (n >= 0)
        snprintf(path, sizeof path, "/v1/window?n=%d", n);
    else
        snprintf(path, sizeof path, "/v1/window");
    return client_call(c, "GET", path, NULL, 0, NULL, out, err, errlen);
}
