/* fuzz_proxy_request.c - libFuzzer harness: eldrd's proxy reading a
 * client's request (src/router/proxy_req.c) - untrusted text from any
 * client. The first byte picks a completion or a chat; the rest is the
 * body.
 *
 * The body is read by both readers: the text scanner every request takes
 * and the jansson tree (the oracle). Promises checked: never a crash or
 * an overread (ASan); what the tree accepts the scanner accepts, with the
 * same stream flag, prompt key and flags; what the scanner refuses the
 * tree refuses with the same status, and the same place unless the tree
 * names the body (jansson refuses numbers past int64 or double, which
 * the scanner leaves to the engine where the proxy does not read them);
 * a refusal is one line. Bodies with a raw NUL byte are skipped: jansson
 * reads up to it only. test_router_proxy replays the corpus. */
#include "proxy_msg.h"
#include "fuzz.h"

static int fuzz_request_one(const uint8_t *data, size_t size)
{
    /* a raw NUL: jansson stops reading there, so it is no oracle (the
     * scanner refuses it, and only text the scanner found valid ever
     * reaches the tree reader in eldrd) */
    if (size < 1 || memchr(data + 1, 0, size - 1))
        return 0;
    pm_kind kind = data[0] & 1 ? PM_CHAT : PM_COMPLETIONS;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    pm_client a, b;
    rb_err ea = {0}, eb = {0};
    int ra = pm_client_parse(text, len, kind, &a, &ea);
    int rb = pm_client_parse_tree(text, len, kind, &b, &eb);
    if (ra < 0)
        fuzz_check_err(ea.error, sizeof ea.error);
    if (rb < 0)
        fuzz_check_err(eb.error, sizeof eb.error);
    if (rb == 0) {
        fuzz_check(ra == 0);
        fuzz_check(a.stream == b.stream && a.return_ids == b.return_ids);
        fuzz_check(a.include_usage == b.include_usage && a.continuous_usage == b.continuous_usage);
        fuzz_check(a.key_len == b.key_len && (!a.key_len || !memcmp(a.key, b.key, a.key_len)));
    } else if (ra == 0) {
        fuzz_check(!strcmp(eb.where, "body"));
    } else {
        fuzz_check(ea.status == eb.status);
        fuzz_check(!strcmp(ea.where, eb.where) || !strcmp(eb.where, "body"));
    }
    if (ra == 0)
        pm_client_free(&a);
    if (rb == 0)
        pm_client_free(&b);
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_request_one(data, size);
}
#endif
