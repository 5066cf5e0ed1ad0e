/* opts.h - eldrd's command line (docs/eldrd.md). Parsing only: no
 * files are opened here. */
#ifndef ELDR_ROUTER_OPTS_H
#define ELDR_ROUTER_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct eldrd_opts {
    const char *model_path;      /* -m */
    char host[64];               /* --listen HOST:PORT */
    int port;
    char **workers;              /* --workers, NULL = the model's names */
    int n_workers;
    char **prefill;              /* --prefill-workers, default {"default"} */
    int n_prefill;
    double tau;                  /* --tau, NaN = the model's */
    int threads;                 /* --threads (MHD thread pool) */
    const char *state_dir;       /* --state-dir, NULL = none */
    long long max_body;          /* --max-body bytes */
    int decisions;               /* --decisions: ring size */
    int window;                  /* --window: recent signatures kept */
    long long cache_blocks;      /* --cache-blocks per prefill worker */
    int timeout;                 /* --timeout: idle connection seconds */
    int quiet;                   /* --quiet: no log lines on stderr */
    int load_vllm;               /* --load-from vllm (0: own in-flight counts) */
    const char *worker_urls;     /* --worker-urls URL,... or NAME=URL,... */
    int poll_ms;                 /* --poll-ms: /metrics poll interval */
    int help;                    /* --help given */
    int version;                 /* --version given */
} eldrd_opts;

/* Parse argv into o (defaults first). Returns 0, or -1 with one line in
 * err (no newline) naming the option. */
int opts_parse(int argc, char **argv, eldrd_opts *o, char *err, size_t errlen);
void opts_free(eldrd_opts *o);
void opts_usage(FILE *f);

/* "a,b,c" into a malloc'd list of unique non-empty names. */
int opts_split_names(const char *s, const char *opt, char ***out, int *n, char *err,
                     size_t errlen);

#endif
