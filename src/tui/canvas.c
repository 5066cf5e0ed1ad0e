/* canvas.c - cells, text, boxes, bars and the text form (canvas.h). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "canvas.h"

const char CANVAS_RAMP[] = " .:-=+*#%@";

canvas_t *canvas_new(int w, int h, int unicode, int colors)
{
    if (w < 1 || h < 1 || w > 4096 || h > 4096)
        return NULL;
    canvas_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cells = calloc((size_t)w * (size_t)h, sizeof *c->cells);
    if (!c->cells) {
        free(c);
        return NULL;
    }
    c->w = w;
    c->h = h;
    c->unicode = unicode;
    c->colors = colors;
    canvas_clear(c);
    return c;
}

void canvas_free(canvas_t *c)
{
    if (!c)
        return;
    free(c->cells);
    free(c);
}

void canvas_clear(canvas_t *c)
{
    for (size_t i = 0; i < (size_t)c->w * (size_t)c->h; i++)
        c->cells[i] = (cv_cell){' ', cv_plain()};
}

cv_cell *canvas_at(canvas_t *c, int x, int y)
{
    if (x < 0 || y < 0 || x >= c->w || y >= c->h)
        return NULL;
    return &c->cells[(size_t)y * c->w + x];
}

void canvas_put(canvas_t *c, int x, int y, uint32_t ch, cv_style st)
{
    cv_cell *cell = canvas_at(c, x, y);
    if (cell)
        *cell = (cv_cell){ch, st};
}

/* Decode one UTF-8 sequence at s; *len gets its byte length. Malformed
 * input decodes to '?' one byte at a time. */
static uint32_t utf8_next(const unsigned char *s, int *len)
{
    int n = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3
          : (s[0] >> 3) == 30 ? 4 : 0;
    if (n == 0) {
        *len = 1;
        return '?';
    }
    uint32_t cp = n == 1 ? s[0] : s[0] & (0x7F >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *len = 1;
            return '?';
        }
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    *len = n;
    return cp;
}

int canvas_text(canvas_t *c, int x, int y, cv_style st, const char *utf8)
{
    /* text that would run past the right edge is fitted to it by the one
     * rule (canvas_fit: "..." after the last whole word, a number dropped
     * whole), so no view cuts a word at the edge of a narrow terminal */
    char fit[1024];
    int room = c->w - x;
    if (room > 0 && x >= 0 && strlen(utf8) < sizeof fit && canvas_cols(utf8) > room) {
        memcpy(fit, utf8, strlen(utf8) + 1);
        canvas_fit(fit, room);
        utf8 = fit;
    }
    const unsigned char *s = (const unsigned char *)utf8;
    int col = 0;
    while (*s) {
        int len;
        uint32_t cp = utf8_next(s, &len);
        s += len;
        if (cp < 0x20)
            cp = ' ';
        canvas_put(c, x + col, y, cp, st);
        col++;
    }
    return col;
}

/* Columns of the next word of s (up to a blank or the end) and its bytes. */
static int word_cols(const unsigned char *s, int *bytes)
{
    int cols = 0, b = 0;
    while (s[b] && s[b] != ' ') {
        int len;
        utf8_next(s + b, &len);
        b += len;
        cols++;
    }
    *bytes = b;
    return cols;
}

int canvas_wrap(canvas_t *c, int x, int y, int w, int max_lines, cv_style st, const char *utf8)
{
    const unsigned char *s = (const unsigned char *)utf8;
    int line = 0, col = 0;
    if (w < 1 || max_lines < 1)
        return 0;
    while (*s && line < max_lines) {
        if (*s == ' ') {
            s++;
            continue;
        }
        int bytes, cols = word_cols(s, &bytes);
        if (col > 0 && col + 1 + cols > w) {   /* the word goes to the next line */
            if (++line >= max_lines) {
                line--;
                if (col + 3 <= w)   /* words left over: say so after the last whole one */
                    canvas_text(c, x + col, y + line, st, CANVAS_ELLIPSIS);
                break;
            }
            col = 0;
        }
        col += col > 0;                        /* the blank before it */
        int keep = cols > w && w > 3 ? w - 3 : w;   /* a word wider than the panel */
        for (int b = 0, i = 0; b < bytes; i++) {
            int len;
            uint32_t cp = utf8_next(s + b, &len);
            if (col < w && i < keep)
                canvas_put(c, x + col, y + line, cp < 0x20 ? ' ' : cp, st);
            col++;
            b += len;
        }
        if (keep < w)
            canvas_text(c, x + keep, y + line, st, CANVAS_ELLIPSIS);
        s += bytes;
    }
    int used = col > 0 || line > 0 ? line + 1 : 0;
    return used > max_lines ? max_lines : used;
}

int canvas_textf(canvas_t *c, int x, int y, cv_style st, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return canvas_text(c, x, y, st, buf);
}

void canvas_fill(canvas_t *c, int x, int y, int w, int h, uint32_t ch, cv_style st)
{
    for (int j = 0; j < h; j++)
        for (int i = 0; i < w; i++)
            canvas_put(c, x + i, y + j, ch, st);
}

void canvas_box(canvas_t *c, int x, int y, int w, int h, cv_style st, const char *title)
{
    if (w < 2 || h < 2)
        return;
    uint32_t hz = c->unicode ? 0x2500 : '-', vt = c->unicode ? 0x2502 : '|';
    uint32_t tl = c->unicode ? 0x250C : '+', tr = c->unicode ? 0x2510 : '+';
    uint32_t bl = c->unicode ? 0x2514 : '+', br = c->unicode ? 0x2518 : '+';
    for (int i = 1; i < w - 1; i++) {
        canvas_put(c, x + i, y, hz, st);
        canvas_put(c, x + i, y + h - 1, hz, st);
    }
    for (int j = 1; j < h - 1; j++) {
        canvas_put(c, x, y + j, vt, st);
        canvas_put(c, x + w - 1, y + j, vt, st);
    }
    canvas_put(c, x, y, tl, st);
    canvas_put(c, x + w - 1, y, tr, st);
    canvas_put(c, x, y + h - 1, bl, st);
    canvas_put(c, x + w - 1, y + h - 1, br, st);
    if (title && *title) {
        char buf[256];
        snprintf(buf, sizeof buf, " %s ", title);
        /* keep the corners: clip the title to the inner width */
        int room = w - 4;
        if (room > 0) {
            size_t end = strlen(buf);
            while (canvas_cols(buf) > room && end > 1 && buf[end - 1] == ' ' && buf[end - 2] == ' ')
                buf[--end] = '\0';   /* padding first */
            if (canvas_cols(buf) > room) {   /* cut whole words, marked, blank-ended */
                canvas_fit(buf, room - 1);
                strcat(buf, " ");
            }
            canvas_text(c, x + 2, y, (cv_style){st.fg, st.bg, st.attr | CV_BOLD}, buf);
        }
    }
}

void canvas_hbar(canvas_t *c, int x, int y, int width, double frac, cv_style st)
{
    if (width <= 0)
        return;
    if (!(frac > 0))
        frac = 0;
    if (frac > 1)
        frac = 1;
    int eighths = (int)(frac * width * 8 + 0.5);
    for (int i = 0; i < width; i++) {
        int e = eighths - i * 8;
        uint32_t ch = ' ';
        if (e >= 8)
            ch = c->unicode ? 0x2588 : '#';
        else if (e > 0)
            ch = c->unicode ? 0x2590 - e : (e >= 4 ? '#' : ' ');
        canvas_put(c, x + i, y, ch, st);
    }
}

uint32_t canvas_spark(const canvas_t *c, double level)
{
    static const char ascii[] = " .-=+*#";
    if (!(level > 0))
        return ' ';
    if (level > 1)
        level = 1;
    if (c->unicode) {
        int i = (int)(level * 8 + 0.5);
        return i <= 0 ? 0x2581 : 0x2580 + (uint32_t)(i > 8 ? 8 : i);
    }
    int i = 1 + (int)(level * 5.999);
    return (uint32_t)ascii[i > 6 ? 6 : i];
}

uint32_t canvas_ramp(double level)
{
    if (!(level > 0))
        return ' ';
    int i = 1 + (int)(level * 8.999);   /* 1..9: blank is kept for exactly 0 */
    return (uint32_t)CANVAS_RAMP[i > 9 ? 9 : i];
}

/* Append the UTF-8 form of cp to buf (at least 4 bytes free). */
static int utf8_put(uint32_t cp, char *buf)
{
    if (cp < 0x80) {
        buf[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        buf[0] = (char)(0xC0 | (cp >> 6));
        buf[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        buf[0] = (char)(0xE0 | (cp >> 12));
        buf[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        buf[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    buf[0] = (char)(0xF0 | (cp >> 18));
    buf[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    buf[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    buf[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

char *canvas_to_string(const canvas_t *c)
{
    size_t cap = (size_t)c->h * ((size_t)c->w * 4 + 1) + 1;
    char *out = malloc(cap), *p = out;
    if (!out)
        return NULL;
    for (int y = 0; y < c->h; y++) {
        const cv_cell *row = c->cells + (size_t)y * c->w;
        int last = c->w - 1;
        while (last >= 0 && row[last].ch == ' ')
            last--;
        for (int x = 0; x <= last; x++)
            p += utf8_put(row[x].ch, p);
        *p++ = '\n';
    }
    *p = '\0';
    return out;
}

int canvas_write_text(const canvas_t *c, FILE *f)
{
    char *s = canvas_to_string(c);
    if (!s)
        return -1;
    size_t n = strlen(s);
    int rc = fwrite(s, 1, n, f) == n ? 0 : -1;
    free(s);
    return rc;
}

/* ---- fitting text ---- */

int canvas_cols(const char *utf8)
{
    int n = 0;
    for (const unsigned char *s = (const unsigned char *)utf8; *s; s++)
        n += (*s & 0xC0) != 0x80;
    return n;
}

/* Byte offset of column col of s (its length when s is shorter). */
static size_t col_byte(const char *s, int col)
{
    size_t b = 0;
    for (int n = 0; s[b]; b++) {
        if (((unsigned char)s[b] & 0xC0) != 0x80 && n++ == col)
            return b;
    }
    return b;
}

/* The ellipsis alone, as much of it as w columns hold. */
static int just_dots(char *s, int w)
{
    int n = w < 0 ? 0 : w > 3 ? 3 : w;
    memcpy(s, CANVAS_ELLIPSIS, (size_t)n);
    s[n] = '\0';
    return n;
}

static int is_sep(char ch)
{
    return ch == ' ' || ch == ',' || ch == ';' || ch == ':' || ch == '|' || ch == '(' ||
           ch == '[';
}

int canvas_fit(char *s, int w)
{
    int cols = canvas_cols(s);
    if (cols <= w)
        return cols;
    if (w <= 3)
        return just_dots(s, w);
    size_t room = col_byte(s, w - 3);   /* the head may take bytes [0, room) */
    size_t cut = room;   /* a blank, or after a comma (lists: "0,1,2...") */
    while (cut > 0 && s[cut] != ' ' && s[cut - 1] != ',')
        cut--;
    while (cut > 0 && is_sep(s[cut - 1]))
        cut--;
    if (cut == 0) {   /* one word longer than the room */
        size_t end = strcspn(s, " ");
        if (strpbrk(s, "0123456789") && strpbrk(s, "0123456789") < s + end)
            return just_dots(s, w);   /* a number is dropped, never cut */
        cut = room;
    }
    memcpy(s + cut, CANVAS_ELLIPSIS, 4);
    return canvas_cols(s);
}

int canvas_fit_tail(char *s, int w)
{
    int cols = canvas_cols(s);
    if (cols <= w)
        return cols;
    if (w <= 3)
        return just_dots(s, w);
    size_t from = col_byte(s, cols - (w - 3));
    memmove(s + 3, s + from, strlen(s + from) + 1);
    memcpy(s, CANVAS_ELLIPSIS, 3);
    return w;
}

int canvas_fit_url(char *s, int w)
{
    int len = (int)strlen(s);
    if (len <= w)
        return len;
    if (w < 4)
        return just_dots(s, w);
    const char *colon = strrchr(s, ':');
    int tail = colon ? len - (int)(colon - s) : 0;
    if (tail < 2 || w - 3 - tail < 4)
        tail = 0;
    memmove(s + w - tail, s + len - tail, (size_t)tail + 1);
    memcpy(s + w - tail - 3, CANVAS_ELLIPSIS, 3);
    s[w] = '\0';
    return w;
}

int canvas_put_fit(canvas_t *c, int x, int y, int w, cv_style st, const char *utf8)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", utf8);
    canvas_fit(buf, w);
    return canvas_text(c, x, y, st, buf);
}

int canvas_put_fitf(canvas_t *c, int x, int y, int w, cv_style st, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return canvas_put_fit(c, x, y, w, st, buf);
}
