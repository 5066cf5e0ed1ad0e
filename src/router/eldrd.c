/* eldrd.c - the router daemon's main: options, model, HTTP service, and
 * the signals (SIGTERM/SIGINT drain and exit 0; SIGHUP reloads the
 * model). See docs/eldrd.md.
 *
 * Signals are blocked in every thread (the HTTP threads inherit the mask)
 * and taken synchronously here with sigwait, so no handler runs
 * inside a request. */
#include <cblas.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "err.h"
#include "http.h"
#include "opts.h"
#include "version.h"


static void say(const eldrd_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const eldrd_opts *o, const char *fmt, ...)
{
    if (o->quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "eldrd: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int serve(eldrd_t *d, struct MHD_Daemon *mhd, const sigset_t *set)
{
    for (;;) {
        int sig;
        if (sigwait(set, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            char err[ELDR_ERRLEN];
            if (daemon_reload(d, err, sizeof err) < 0) {
                atomic_fetch_add(&d->met.reload_failures, 1);
                say(d->o, "SIGHUP: reload failed, keeping the current model: %s", err);
            }
            else
                say(d->o, "SIGHUP: model reloaded (generation %llu)",
                    (unsigned long long)d->model.cur->gen);
            continue;
        }
        say(d->o, "%s: draining (new routes get 503, every answer closes its connection)",
            sig == SIGTERM ? "SIGTERM" : "SIGINT");
        int cut = http_stop(d, mhd, d->o->drain);
        if (cut) {
            say(d->o, "drain: %d request%s still in progress after %g s were cut", cut,
                cut == 1 ? "" : "s", d->o->drain);
            return 1;
        }
        say(d->o, "drained");
        return 0;
    }
}

int main(int argc, char **argv)
{
    eldrd_opts o;
    char err[ELDR_ERRLEN];
    if (opts_parse(argc, argv, &o, err, sizeof err) < 0) {
        fprintf(stderr, "eldrd: %s\n", err);
        return 2;
    }
    if (o.help) {
        opts_usage(stdout);
        opts_free(&o);
        return 0;
    }
    if (o.version) {
        printf("eldrd %s\n", ELDR_VERSION);
        opts_free(&o);
        return 0;
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* concurrency comes from the HTTP threads; a K x dim product is too
     * small for BLAS threads to pay for their hand-offs */
    openblas_set_num_threads(1);

    eldrd_t d;
    int rc = 2;
    if (daemon_init(&d, &o, err, sizeof err) < 0 ||
        daemon_check_security(&d, err, sizeof err) < 0) {
        fprintf(stderr, "eldrd: %s\n", err);
    } else {
        struct MHD_Daemon *mhd = http_start(&d, err, sizeof err);
        if (!mhd) {
            fprintf(stderr, "eldrd: %s\n", err);
        } else {
            say(&o, "serving %d workers on %s:%d (model %s, %d threads; %s)", d.K, o.host,
                o.port, d.model.cur->source, o.threads,
                d.auth.admin[0] ? (d.auth.kv[0] ? "admin and kv tokens required"
                                                : "admin token required")
                                : "open: no admin token");
            rc = serve(&d, mhd, &set);
        }
    }
    daemon_free(&d);
    opts_free(&o);
    return rc;
}
