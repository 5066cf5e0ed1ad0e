/* help.c - help in the REPL: the global help(x) (help(eldr.fit) prints the
 * function's documentation line), and showing help text on the terminal,
 * wrapped to its width and paged when it is longer than the screen.
 *
 * The pager is built in rather than $PAGER: help text is short, a pager
 * process would have to share the terminal with readline, and the prompt
 * must come back the same on every machine. On a terminal, text taller
 * than the screen stops after each screenful at
 *     -- more (N%): Space next page, Enter next line, q quit --
 * read as single keys (no echo, no signals: Ctrl-C and Esc quit too).
 * When stdout or stdin is not a terminal everything is printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <lauxlib.h>

#include "repl.h"

static void term_size(int *rows, int *cols)
{
    struct winsize ws;
    *rows = 24;
    *cols = 80;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 2 && ws.ws_col > 20) {
        *rows = ws.ws_row;
        *cols = ws.ws_col;
    }
}

/* One key from the terminal, without echo or signals; -1 on EOF/error. */
static int read_key(void)
{
    struct termios old, raw;
    if (tcgetattr(STDIN_FILENO, &old) != 0)
        return -1;
    raw = old;
    raw.c_lflag &= (tcflag_t) ~(ICANON | ECHO | ISIG);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    unsigned char c;
    ssize_t n = read(STDIN_FILENO, &c, 1);
    tcsetattr(STDIN_FILENO, TCSANOW, &old);
    return n == 1 ? c : -1;
}

/* Split text into screen lines of at most width columns: a long line
 * breaks at a space and goes on indented 4 more than it started. The
 * pieces are stored as (start, length, indent) triples in *out. */
typedef struct piece {
    const char *s;
    int len, indent;
} piece;

static int wrap(const char *text, int width, piece **out)
{
    int cap = 64, n = 0;
    piece *p = malloc((size_t)cap * sizeof *p);
    if (!p)
        return -1;
    const char *line = text;
    for (;;) {
        const char *end = strchr(line, '\n');
        int len = end ? (int)(end - line) : (int)strlen(line);
        int lead = 0;
        while (lead < len && line[lead] == ' ')
            lead++;
        int indent = 0, cont = lead + 4 < width / 2 ? lead + 4 : 0;
        const char *s = line;
        do {
            int room = width - indent, take = len;
            if (take > room) { /* break at the last space that fits */
                take = room;
                while (take > 0 && s[take] != ' ')
                    take--;
                if (take == 0)
                    take = room;
            }
            if (n == cap) {
                piece *q = realloc(p, (size_t)(cap *= 2) * sizeof *p);
                if (!q) {
                    free(p);
                    return -1;
                }
                p = q;
            }
            p[n++] = (piece){s, take, indent};
            s += take;
            len -= take;
            while (len > 0 && *s == ' ') {
                s++;
                len--;
            }
            indent = cont;
        } while (len > 0);
        if (!end)
            break;
        line = end + 1;
    }
    *out = p;
    return n;
}

void repl_show(const char *text)
{
    int tty = isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
    int rows, cols;
    term_size(&rows, &cols);
    piece *p = NULL;
    int n = tty ? wrap(text, cols - 1, &p) : -1;
    if (n < 0) { /* not a terminal (or no memory): as it is */
        printf("%s\n", text);
        fflush(stdout);
        return;
    }
    int page = rows - 1, shown = 0, until = n <= rows ? n : page;
    while (shown < n) {
        for (; shown < until && shown < n; shown++)
            printf("%*s%.*s\n", p[shown].indent, "", p[shown].len, p[shown].s);
        if (shown >= n)
            break;
        printf("-- more (%d%%): Space next page, Enter next line, q quit --",
               shown * 100 / n);
        fflush(stdout);
        int k = read_key();
        printf("\r\033[K");
        if (k < 0 || k == 'q' || k == 'Q' || k == 3 || k == 27)
            break;
        until = shown + (k == '\r' || k == '\n' ? 1 : page);
    }
    fflush(stdout);
    free(p);
}

/* help([x]): eldr.help(x) shown (paged); help() is :help */
static int l_repl_help(lua_State *L)
{
    int has = lua_gettop(L) >= 1;
    lua_getglobal(L, "eldr");
    lua_getfield(L, -1, "help");
    if (has)
        lua_pushvalue(L, 1);
    lua_call(L, has, 1);
    if (lua_isnil(L, -1)) {
        const char *what = has ? luaL_tolstring(L, 1, NULL) : "?";
        printf("no help for %s (:help lists everything; help(eldr.fit) for one function)\n",
               what);
        fflush(stdout);
        return 0;
    }
    repl_show(lua_tostring(L, -1));
    return 0;
}

void repl_help_open(lua_State *L)
{
    lua_pushcfunction(L, l_repl_help);
    lua_setglobal(L, "help");
}
