/* capture_http.h - the HTTP side of `eldr capture`: send every job's
 * request over libcurl's multi interface, C at a time on keep-alive
 * connections, new ones paced at R per second when asked; retry a failed
 * attempt (no answer, or an HTTP status other than 2xx) up to
 * CAPTURE_RETRIES times; decode each 2xx answer as it arrives; a 401 or
 * 403 (the engine's API key check) stops the run at once. One
 * thread: decoding is cheap next to the engine (docs/capture.md, Speed). */
#ifndef ELDR_CAPTURE_HTTP_H
#define ELDR_CAPTURE_HTTP_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "capture.h"
#include "routed.h"

enum { JOB_PENDING, JOB_FLIGHT, JOB_OK, JOB_FAILED };

typedef struct capture_job {
    const char *path;            /* endpoint path */
    char *body;                  /* request body (owned) */
    size_t len;
    int attempts;
    int state;                   /* JOB_* */
    double sent_s;               /* first attempt, seconds after the start */
    double retry_at;             /* not before (seconds after the start) */
    routed_t routes;       /* JOB_OK */
    char error[200];             /* the last failed attempt's */
} capture_job;

typedef struct capture_drive {
    const char *url;             /* http://HOST:PORT, no trailing '/' */
    capture_job *jobs;
    int64_t n;
    int concurrency;
    double rate, timeout_s;
    routed_hint hint;          /* L and k are fixed by the first answer when 0 */
    const char *auth;            /* "Authorization: Bearer KEY" header line, or NULL */
    const char *key_file;        /* where the key came from, for messages */
    volatile sig_atomic_t *stop;
    capture_progress_fn progress;
    void *progress_arg;
    /* out */
    int64_t ok, failed, unsent, attempts_failed;
    int interrupted;
    double seconds;
} capture_drive;

/* Run every job. 0 when the run took place (jobs say how each went); -1
 * with err when an answer could not be decoded or the engine refused the
 * key (the run stops at once; the message names the request) or libcurl
 * could not start. */
int capture_drive_run(capture_drive *d, char *err, size_t errlen);

#endif
