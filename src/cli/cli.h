/* cli.h - what every `eldr` subcommand shares.
 *
 * A subcommand is `int cmd_NAME(int argc, char **argv)` with argv[0] the
 * subcommand's name; it parses its options with getopt_long, and returns
 * the process exit status: 0 success, 2 bad input (one line on stderr
 * saying what and where, via cli_fail), 1 a failure that is not the
 * input's fault. Every subcommand has --help (usage on stdout, exit 0)
 * and, where it prints results, --json. */
#ifndef ELDR_CLI_H
#define ELDR_CLI_H

#include <getopt.h>
#include <jansson.h>
#include <stdint.h>

#define CLI_OK 0
#define CLI_RUNTIME 1
#define CLI_BADINPUT 2
/* The daemon (eldrd) did not answer at all: connection refused, no route,
 * timeout. The same status in every command that talks to eldrd (replay,
 * push, dash --attach); docs/replay.md, docs/dashboard.md. */
#define CLI_UNREACHABLE 3

/* "eldr CMD: message" on stderr; returns CLI_BADINPUT. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same, returning CLI_RUNTIME. */
int cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* For an unknown option or a missing argument: the message plus
 * "try 'eldr CMD --help'"; returns CLI_BADINPUT. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Strict number parsing of an option value: the whole string must be a
 * number within [lo, hi]; otherwise cli_fail names the option. Return 0
 * or CLI_BADINPUT. */
int cli_parse_int(const char *cmd, const char *opt, const char *s, long long lo,
                  long long hi, long long *out);
int cli_parse_double(const char *cmd, const char *opt, const char *s, double lo,
                     double hi, double *out);

/* --max-memory BYTES: a positive count with an optional K, M, G or T
 * suffix (powers of 1024; "KB", "KiB" read the same), e.g. 512M, 2G.
 * Anything else: cli_fail naming the option and the value (exit 2). */
int cli_parse_bytes(const char *cmd, const char *opt, const char *s, size_t *out);

/* A byte count for messages: "512.0 MiB", "2.00 GiB". */
void cli_format_bytes(double bytes, char *buf, size_t n);
/* Comma-separated integer list with ranges ("0,3,5-7"); *out malloc'd. */
int cli_parse_int_list(const char *cmd, const char *opt, const char *s, long long lo,
                       long long hi, long long **out, int *n);

/* The getopt_long loop of a subcommand: -h/--help calls help() and
 * returns -1; a missing value or an unknown option is a usage error
 * (CLI_BADINPUT); every other option goes to one(c, optarg, ctx), whose
 * non-zero status ends the loop and is returned. 0 when all parsed;
 * optind is then the first operand. */
int cli_getopt(const char *cmd, int argc, char **argv, const char *shortopts,
               const struct option *longopts, void (*help)(void),
               int (*one)(int c, const char *arg, void *ctx), void *ctx);

/* Before a command talks to eldrd: GET url/healthz within timeout_s.
 * 0 when the daemon answered (even with an error status: what that means
 * is the command's business); CLI_UNREACHABLE with one stderr line
 * ("eldr CMD: URL: daemon unreachable: ...") when nothing answered;
 * CLI_BADINPUT for a URL that is not http://HOST:PORT (reach.c). */
int cli_reach(const char *cmd, const char *url, double timeout_s);

/* Print a JSON value to stdout (indented, newline) and release it. */
void cli_print_json(json_t *v);

/* Seconds on a monotonic clock, for stage timings. */
double cli_now(void);

/* ---- the progress bar (progress_bar.c), one for every command ----
 *
 * Drawn on stderr, and only when stderr is a terminal: a pipe, a file or
 * a CI log gets nothing, and stdout (--json included) is never touched.
 * One line, redrawn in place:
 *     eldr fit: layer selection [#########.........]  12/24  0.8s  15.2/s
 * cli_progress_done erases it, so the command's own output starts on a
 * clean line. Redraws are limited to about 20 a second. */
typedef struct cli_progress {
    const char *label;   /* the command ("fit") */
    int tty;             /* stderr is a terminal: draw */
    int drawn;           /* a bar is on the line */
    const char *what;    /* current stage */
    double t0, t_stage;  /* start of the command, of the stage */
    double last_draw;
    int last_pct;
} cli_progress;
void cli_progress_start(cli_progress *p, const char *label);
/* A fraction in [0, 1] of the command's work (no counts to show). */
void cli_progress_update(cli_progress *p, double frac);
/* done of total units of stage what; unit follows the rate ("/s",
 * " req/s"), NULL for no rate. total <= 0: no bar, just done and the time. */
void cli_progress_count(cli_progress *p, const char *what, int64_t done, int64_t total,
                        const char *unit);
/* A progress_fn (src/core/progress.h) that draws on the cli_progress
 * given as ctx; the rate is "/s" of the stage's units. */
void cli_progress_core(void *ctx, const char *what, int64_t done, int64_t total);
void cli_progress_done(cli_progress *p);

#endif
