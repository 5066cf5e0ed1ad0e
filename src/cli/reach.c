/* reach.c - is eldrd there? (cli_reach in cli.h). Every command that
 * talks to the daemon asks first, so that "nothing answers at that
 * address" gets one message and one exit status (CLI_UNREACHABLE) in all
 * of them, apart from the failures of a daemon that did answer. */
#include "../client/client.h"
#include "cli.h"
#include "err.h"

int cli_reach(const char *cmd, const char *url, double timeout_s)
{
    char err[ELDR_ERRLEN];
    client_t *c = client_new(url, timeout_s, err, sizeof err);
    if (!c)
        return cli_fail(cmd, "%s", err);
    long status = 0;
    int rc = client_call(c, "GET", "/healthz", NULL, 0, &status, NULL, err, sizeof err);
    client_free(c);
    /* status 0: no HTTP answer at all (refused, unresolvable, timed out) */
    if (rc < 0 && status == 0) {
        fprintf(stderr, "eldr %s: daemon unreachable: %s\n", cmd, err);
        return CLI_UNREACHABLE;
    }
    return 0;
}
