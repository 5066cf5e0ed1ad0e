/* pd_instant.c - instant stand-ins for a prefill and a decode instance,
 * for the proxy benchmark (tests/bench/proxy.sh); test-only.
 *
 *     pd_instant PORTFILE LAYERS EXPERTS [eldr|vllm-sig|vllm-routed]
 *
 * Serves on 127.0.0.1, free ports written to PORTFILE as "PREFILL
 * DECODE". The prefill answers every POST with one precomputed
 * prefill-first handoff (a 64-token prompt, the first token, KV params and
 * eldr_sig: LAYERS x EXPERTS little-endian int16 counts in base64); the
 * decode answers a small completion, or when the body asks for a stream,
 * three SSE chunks and [DONE]. Nothing is computed per request, so what
 * the benchmark measures is eldrd. Runs until killed.
 * vllm-sig: the prefill answers as stock vLLM's P/D handoff does (a plain
 * completion, NixlConnector's kv_transfer_params, the prompt's token ids)
 * with eldr_sig in the transfer; vllm-routed: the same with no eldr_sig
 * and choices[0].routed_experts, the base64 of a uint8 .npy (64, LAYERS,
 * 4) as vLLM >= 0.22 writes it with --enable-return-routed-experts. */
#include <microhttpd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "b64.h"

static char *prefill_answer;
static size_t prefill_len;
static const char decode_answer[] =
    "{\"id\":\"cmpl-d\",\"object\":\"text_completion\",\"model\":\"instant\",\"choices\":"
    "[{\"index\":0,\"text\":\" a b c d e f g\",\"finish_reason\":\"length\"}],"
    "\"usage\":{\"prompt_tokens\":64,\"completion_tokens\":8,\"total_tokens\":72}}";
static const char decode_stream[] =
    "data: {\"id\":\"cmpl-d\",\"choices\":[{\"index\":0,\"text\":\" a\"}]}\n\n"
    "data: {\"id\":\"cmpl-d\",\"choices\":[{\"index\":0,\"text\":\" b\"}]}\n\n"
    "data: {\"id\":\"cmpl-d\",\"choices\":[{\"index\":0,\"text\":\" c\"}]}\n\n"
    "data: [DONE]\n\n";

/* A uint8 .npy (64, L, 4) of the routing whose counts eldr_sig holds
 * (token t of layer l picks (l*7 + j*5) % E, j < 4), in base64. */
static char *routed_npy(int L, int E)
{
    char hdr[128];
    int hl = snprintf(hdr, sizeof hdr, "{'descr': '|u1', 'fortran_order': False, "
                      "'shape': (64, %d, 4), }", L);
    while ((10 + hl + 1) % 64)
        hdr[hl++] = ' ';
    hdr[hl++] = '\n';
    size_t n = 10 + (size_t)hl + (size_t)64 * L * 4;
    uint8_t *npy = malloc(n);
    memcpy(npy, "\x93NUMPY\x01\x00", 8);
    npy[8] = (uint8_t)hl;
    npy[9] = 0;
    memcpy(npy + 10, hdr, (size_t)hl);
    uint8_t *x = npy + 10 + hl;
    for (int t = 0; t < 64; t++)
        for (int l = 0; l < L; l++)
            for (int j = 0; j < 4; j++)
                *x++ = (uint8_t)((l * 7 + j * 5) % E);
    char *b = malloc(b64_encoded_size(n));
    b64_encode(npy, n, b);
    free(npy);
    return b;
}

/* The stock handoff's answer (mode 1: eldr_sig, 2: routed experts). */
static void build_vllm(const char *ids, const char *sig, int mode, int L, int E)
{
    char *routed = mode == 2 ? routed_npy(L, E) : NULL;
    size_t cap = strlen(sig) + (routed ? strlen(routed) : 0) + 2048;
    prefill_answer = malloc(cap);
    prefill_len = (size_t)snprintf(
        prefill_answer, cap,
        "{\"id\":\"cmpl-p\",\"object\":\"text_completion\",\"created\":1700000000,"
        "\"model\":\"instant\",\"choices\":[{\"index\":0,\"text\":\"x\",\"token_ids\":[7],"
        "\"prompt_token_ids\":[%s],\"finish_reason\":\"length\",\"stop_reason\":null%s%s%s}],"
        "\"usage\":{\"prompt_tokens\":64,\"completion_tokens\":1,\"total_tokens\":65},"
        "\"kv_transfer_params\":{\"do_remote_prefill\":true,\"do_remote_decode\":false,"
        "\"remote_block_ids\":[1,2,3,4],\"remote_engine_id\":\"p0\",\"remote_request_id\":"
        "\"cmpl-p-0\",\"remote_host\":\"127.0.0.1\",\"remote_port\":5600,\"tp_size\":1%s%s%s}}",
        ids, routed ? ",\"routed_experts\":\"" : "", routed ? routed : "", routed ? "\"" : "",
        mode == 1 ? ",\"eldr_sig\":\"" : "", mode == 1 ? sig : "", mode == 1 ? "\"" : "");
    free(routed);
}

/* 64 prompt tokens, top-4 routing: each layer's counts sum to 256. */
static void build_prefill(int L, int E, int mode)
{
    size_t cells = (size_t)L * (size_t)E;
    uint8_t *raw = calloc(cells, 2);
    for (int l = 0; l < L; l++)
        for (int j = 0; j < 4; j++) {
            int e = (l * 7 + j * 5) % E;
            raw[2 * ((size_t)l * E + e)] = 64;
        }
    char *sig = malloc(b64_encoded_size(cells * 2));
    b64_encode(raw, cells * 2, sig);
    char ids[64 * 8] = "";
    for (int i = 0; i < 64; i++)
        snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d", i ? "," : "", 1000 + i);
    if (mode) {
        build_vllm(ids, sig, mode, L, E);
        free(raw);
        free(sig);
        return;
    }
    size_t cap = strlen(sig) + 2048;
    prefill_answer = malloc(cap);
    prefill_len = (size_t)snprintf(
        prefill_answer, cap,
        "{\"id\":\"cmpl-p\",\"object\":\"text_completion\",\"created\":1700000000,"
        "\"model\":\"instant\",\"choices\":[{\"index\":0,\"text\":\"x\",\"token_ids\":[7],"
        "\"prompt_token_ids\":[%s],\"finish_reason\":\"length\",\"stop_reason\":null}],"
        "\"usage\":{\"prompt_tokens\":64,\"completion_tokens\":1,\"total_tokens\":65},"
        "\"kv_transfer_params\":{\"do_remote_prefill\":true,\"do_remote_decode\":false,"
        "\"remote_block_ids\":[1,2,3,4],\"remote_engine_id\":\"p0\",\"remote_host\":"
        "\"127.0.0.1\",\"remote_port\":5600,\"tp_size\":1,\"remote_num_tokens\":64,"
        "\"prefill_first_token_id\":7,\"prefill_prompt_tokens\":64,"
        "\"prefill_continues\":true,\"eldr_sig\":\"%s\"}}",
        ids, sig);
    free(raw);
    free(sig);
}

typedef struct seen {
    int stream;
} seen;

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *data,
                              size_t *size, void **con_cls)
{
    (void)url;
    (void)method;
    (void)version;
    int is_prefill = cls != NULL;
    if (!*con_cls) {
        seen *s = calloc(1, sizeof *s);
        *con_cls = s;
        return MHD_YES;
    }
    seen *s = *con_cls;
    if (*size) {
        if (memmem(data, *size, "\"stream\":true", 13))
            s->stream = 1;
        *size = 0;
        return MHD_YES;
    }
    const char *body = is_prefill ? prefill_answer
                       : s->stream ? decode_stream : decode_answer;
    size_t len = is_prefill ? prefill_len
                 : s->stream ? sizeof decode_stream - 1 : sizeof decode_answer - 1;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Content-Type",
                            !is_prefill && s->stream ? "text/event-stream" : "application/json");
    enum MHD_Result rc = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return rc;
}

static void done(void *cls, struct MHD_Connection *c, void **con_cls,
                 enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    free(*con_cls);
    *con_cls = NULL;
}

static struct MHD_Daemon *serve(void *role)
{
    return MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, NULL, NULL,
                            answer, role, MHD_OPTION_NOTIFY_COMPLETED, done, NULL,
                            MHD_OPTION_CONNECTION_LIMIT, 4000U, MHD_OPTION_END);
}

int main(int argc, char **argv)
{
    int mode = argc == 5 ? (!strcmp(argv[4], "vllm-sig") ? 1 : !strcmp(argv[4], "vllm-routed")
                                                                     ? 2 : !strcmp(argv[4], "eldr") ? 0 : -1)
                         : 0;
    if ((argc != 4 && argc != 5) || mode < 0) {
        fprintf(stderr, "usage: pd_instant PORTFILE LAYERS EXPERTS [eldr|vllm-sig|vllm-routed]\n");
        return 2;
    }
    build_prefill(atoi(argv[2]), atoi(argv[3]), mode);
    static int prefill_role = 1;
    struct MHD_Daemon *p = serve(&prefill_role), *d = serve(NULL);
    if (!p || !d) {
        fprintf(stderr, "pd_instant: cannot serve\n");
        return 1;
    }
    const union MHD_DaemonInfo *pi = MHD_get_daemon_info(p, MHD_DAEMON_INFO_BIND_PORT);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return 1;
    fprintf(f, "%u %u\n", (unsigned)pi->port, (unsigned)di->port);
    fclose(f);
    rename(tmp, argv[1]);
    for (;;)
        pause();
}
