/* live.h - the dashboard's live data source: eldrd's GET /v1/snapshot
 * (docs/http-api.md) turned into the dash_live and dash_fit the views read
 * (dash.h).
 *
 * Attached (`eldr dash --attach URL`): live_attach polls once, in the
 * caller's thread, so that an unreachable daemon or a foreign answer fails
 * before any terminal is touched; live_start then runs a poller thread
 * that fetches a snapshot every interval (with the centroids again
 * whenever the daemon's model generation changes) and leaves each digested
 * poll in a one-slot mailbox. The UI thread calls live_update between
 * frames: it takes the newest poll (never waiting on the network), appends
 * the in-flight counts and the mean similarity to the histories, and swaps
 * in a new fit. A failed poll is not fatal: its message shows in the
 * header and the next poll retries.
 *
 * Offline (`--router-snapshot FILE`): live_open_file reads a saved
 * snapshot as one frozen poll.
 *
 * A dashboard opened here has d->live set and no trace; dash_free frees
 * it. The live_t (poller) is owned by its caller and must be stopped
 * (live_stop) before the dash_t it feeds is freed. */
#ifndef ELDR_LIVE_H
#define ELDR_LIVE_H

#include <jansson.h>
#include <stddef.h>

#include "dash.h"

#define LIVE_DEFAULT_INTERVAL 0.5   /* seconds between polls */

typedef struct live live_t;

/* Open d on the daemon at url: one synchronous poll (with centroids).
 * timeout_s bounds each HTTP call. *out gets the poller, not yet started. */
int live_attach(dash_t *d, const char *url, double interval_s, double timeout_s,
                live_t **out, char *err, size_t errlen);
/* Start polling in the background. */
int live_start(live_t *l, char *err, size_t errlen);
/* Move the newest poll (if any) and the connection state into d; returns
 * 1 when a new snapshot arrived. */
int live_update(live_t *l, dash_t *d);
/* Stop the thread (if started), join it and free l. NULL is fine. */
void live_stop(live_t *l);

/* Open d on a saved snapshot file, or on a parsed one (where names it in
 * messages). A snapshot without centroids still shows loads, decisions
 * and drift; the scatter then says why it is empty. */
int live_open_file(dash_t *d, const char *path, char *err, size_t errlen);
int live_open_json(dash_t *d, const json_t *snap, const char *where, char *err,
                   size_t errlen);

/* Merge one more snapshot into d as its next poll, answered at monotonic
 * time at (seconds): what live_update does with a poll, for tests and
 * for replaying saved snapshots. The worker count must not change. */
int live_absorb_json(dash_t *d, const json_t *snap, const char *where, double at, char *err,
                     size_t errlen);

/* 1 when snapshot b (the newer) comes from a restarted daemon: its
 * uptime, its routed or finished total, or its newest decision's seq is
 * lower than a's. */
int live_restarted(const dash_live_now *a, const dash_live_now *b);

/* Pause (on = 1) or resume the decisions list (the space key): paused,
 * the decisions view keeps the list of that moment. */
void live_pause(dash_live *L, int on);
/* Decisions newer than the paused list's newest (0 when not paused). */
int64_t live_newer(const dash_live *L);

/* Free d->live (dash_free calls this). */
void dash_live_free(dash_live *l);

#endif
