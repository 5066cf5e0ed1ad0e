/* push_key.h - the dashboard's key P: the model it shows, pushed to a
 * running eldrd (eldr dash TRACE --push-to URL), lined up with the live
 * workers as `eldr push` does (src/client/push.h, the one plan and the
 * one PUT): the plan is drawn over the view first (dash_t.confirm), and
 * only y sends it; any other key keeps the live model.
 *
 * The calls block the interface for one HTTP exchange each (bounded by
 * the client's timeout): a push is rare and asked for. */
#ifndef ELDR_TUI_PUSH_KEY_H
#define ELDR_TUI_PUSH_KEY_H

#include <stddef.h>

#include "../client/client.h"
#include "dash.h"
#include "../client/push.h"

typedef struct dash_push {
    client_t *c;                 /* NULL: no --push-to */
    push_plan plan;
    int planned;                 /* plan holds a prepared push */
} dash_push;

/* The client for url with its admin token (token_file may be NULL):
 * before the terminal is touched, so a bad URL or token file fails
 * cleanly. url NULL: no push (p->c NULL), 0. */
int dash_push_open(dash_push *p, const char *url, const char *token_file, double timeout_s,
                   char *err, size_t errlen);
void dash_push_close(dash_push *p);

/* Key P: align the model d shows to the live one and put the plan in
 * d->confirm; or say in d->status why not (no --push-to, a job running,
 * the router's answer, a geometry mismatch). */
void dash_push_ask(dash_push *p, dash_t *d);

/* The answer to the question: yes sends (PUT /v1/model), no keeps the
 * live model; d->status says what happened, and the question closes. */
void dash_push_answer(dash_push *p, dash_t *d, int yes);

#endif
