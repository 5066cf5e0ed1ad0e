/* auth.c - bearer tokens and the bind rule (auth.h). */
#include "auth.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "sha256.h"
#include "token.h"

int auth_read_token(const char *path, const char *opt, char *out, size_t outlen, char *err,
                    size_t errlen)
{
    return token_read_file(path, opt, out, outlen, err, errlen);
}

const char *auth_token_for(const auth_t *a, auth_need need)
{
    if (need == AUTH_NONE)
        return NULL;
    if (need == AUTH_ROUTE)
        return a->route[0] ? a->route : NULL;
    if (need == AUTH_KV && a->kv[0])
        return a->kv;
    return a->admin[0] ? a->admin : NULL;
}

const char *auth_token_name(const auth_t *a, auth_need need)
{
    if (need == AUTH_ROUTE)
        return "route";
    return need == AUTH_KV && a->kv[0] ? "kv" : "admin";
}

int auth_bearer_ok(const char *header, const char *token)
{
    if (!header || strncasecmp(header, "Bearer ", 7) != 0)
        return 0;
    const char *given = header + 7;
    while (*given == ' ')
        given++;
    /* compare digests: the time does not depend on the length or on the
     * first differing byte of the secret */
    uint8_t a[SHA256_DIGEST], b[SHA256_DIGEST];
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, given, strlen(given));
    sha256_final(&c, a);
    sha256_init(&c);
    sha256_update(&c, token, strlen(token));
    sha256_final(&c, b);
    uint8_t diff = 0;
    for (int i = 0; i < SHA256_DIGEST; i++)
        diff |= (uint8_t)(a[i] ^ b[i]);
    return diff == 0;
}

int auth_host_is_loopback(const char *host, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai, *p;
    int gai = getaddrinfo(host, NULL, &hints, &ai);
    if (gai)
        return eldr_errf(err, errlen, "%s: %s", host, gai_strerror(gai));
    int loop = 1;
    for (p = ai; p; p = p->ai_next) {
        if (p->ai_family == AF_INET) {
            const struct sockaddr_in *s = (const struct sockaddr_in *)p->ai_addr;
            loop &= (ntohl(s->sin_addr.s_addr) >> 24) == 127;
        } else if (p->ai_family == AF_INET6) {
            const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)p->ai_addr;
            loop &= IN6_IS_ADDR_LOOPBACK(&s->sin6_addr) ||
                    (IN6_IS_ADDR_V4MAPPED(&s->sin6_addr) && s->sin6_addr.s6_addr[12] == 127);
        } else {
            loop = 0;
        }
    }
    freeaddrinfo(ai);
    return loop;
}

int auth_setup(auth_t *a, const eldrd_opts *o, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    if (o->admin_token_file &&
        auth_read_token(o->admin_token_file, "--admin-token-file", a->admin, sizeof a->admin,
                        err, errlen) < 0)
        return -1;
    if (o->kv_token_file &&
        auth_read_token(o->kv_token_file, "--kv-token-file", a->kv, sizeof a->kv, err,
                        errlen) < 0)
        return -1;
    if (o->route_token_file &&
        auth_read_token(o->route_token_file, "--route-token-file", a->route, sizeof a->route,
                        err, errlen) < 0)
        return -1;
    /* the admin endpoints' listener is the one that could replace the model */
    const char *opt = o->admin_host[0] ? "--admin-listen" : "--listen";
    const char *host = o->admin_host[0] ? o->admin_host : o->host;
    int port = o->admin_host[0] ? o->admin_port : o->port;
    char why[ELDR_ERRLEN];
    int loop = auth_host_is_loopback(host, why, sizeof why);
    if (loop < 0)
        return eldr_errf(err, errlen, "%s %s", opt, why);
    if (!loop && !a->admin[0] && !o->insecure)
        return eldr_errf(err, errlen, "%s %s:%d is not a loopback address: anyone who "
                         "reaches it could replace the model; give --admin-token-file FILE, "
                         "or --insecure to serve it open", opt, host, port);
    return 0;
}
