/* fuzz_upstream_answer.c - libFuzzer harness: the proxy's reader of an
 * upstream's HTTP/1.x answer (src/router/upstream_parse.h) - untrusted
 * bytes from a prefill or decode instance, in whatever pieces the socket
 * gives them.
 *
 * The first byte seeds where the rest is cut into pieces; the answer is
 * read twice, whole and in those pieces. Promises checked: never a crash
 * or an overread (ASan); both readings agree on the outcome, the status,
 * the body bytes and how many bytes the answer used (framing never
 * depends on how the bytes arrive); the body is never longer than the
 * input; a refusal is one line. test_router_upstream replays the corpus. */
#include "upstream_parse.h"
#include "fuzz.h"

typedef struct fz_read {
    char *body;
    size_t len, cap;
    int statuses, status;
} fz_read;

static void fz_status(void *cls, int status)
{
    fz_read *r = cls;
    r->statuses++;
    r->status = status;
}

static int fz_body(void *cls, const char *d, size_t n)
{
    fz_read *r = cls;
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        while (cap < r->len + n)
            cap *= 2;
        char *b = realloc(r->body, cap);
        fuzz_check(b != NULL);
        r->body = b;
        r->cap = cap;
    }
    memcpy(r->body + r->len, d, n);
    r->len += n;
    return 0;
}

/* Read data[0..n) in pieces (cut after piece[i] bytes, cycling; 0 means
 * whole). Returns the final code; *used: bytes of this answer; eof: then
 * close the connection (when the answer is not over). */
static upa_rc fz_read_answer(const uint8_t *data, size_t n, const uint8_t *piece, size_t npiece,
                             fz_read *r, size_t *used)
{
    upa a = {0};
    upa_sink s = {fz_status, fz_body, r};
    char why[256] = "";
    upa_rc rc = UPA_MORE;
    size_t at = 0, k = 0;
    *used = 0;
    while (at < n && rc == UPA_MORE) {
        size_t take = npiece ? (size_t)piece[k++ % npiece] % 17 + 1 : n;
        if (take > n - at)
            take = n - at;
        size_t u = 0;
        rc = upa_feed(&a, (const char *)data + at, take, &u, &s, why, sizeof why);
        fuzz_check(u <= take);
        fuzz_check(rc == UPA_DONE || rc < 0 || u == take);
        at += u;
        *used += u;
    }
    if (rc == UPA_MORE)
        rc = upa_close(&a, why, sizeof why);
    if (rc < 0)
        fuzz_check_err(why, sizeof why);
    upa_free(&a);
    return rc;
}

static int fuzz_upstream_one(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t npiece = data[0] % 8 + 1;
    if (npiece > size - 1)
        npiece = size - 1;
    const uint8_t *piece = data + 1, *text = data + 1;
    size_t n = size - 1;
    fz_read whole = {0}, cut = {0};
    size_t used_whole, used_cut;
    upa_rc a = fz_read_answer(text, n, NULL, 0, &whole, &used_whole);
    upa_rc b = fz_read_answer(text, n, piece, npiece, &cut, &used_cut);
    fuzz_check(a == b);
    fuzz_check(whole.statuses <= 1 && whole.statuses == cut.statuses);
    fuzz_check(whole.status == cut.status);
    fuzz_check(whole.len == cut.len && whole.len <= n);
    fuzz_check(!whole.len || !memcmp(whole.body, cut.body, whole.len));
    if (a == UPA_DONE)
        fuzz_check(used_whole == used_cut);
    free(whole.body);
    free(cut.body);
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_upstream_one(data, size);
}
#endif
