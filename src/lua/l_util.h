/* l_util.h - what the binding files of the `eldr` Lua module share:
 * argument checking with errors that name the function and the argument,
 * the help registry, class (metatable) registration, the cancel flag.
 *
 * Errors. Every module error is a Lua error whose message starts with the
 * function's full name: "eldr.kmeans: bad argument 'k' (integer 1..600
 * expected, got 0)". Core failures become "eldr.load: <core message>".
 * A raised error longjmps, so a binding checks its arguments before it
 * mallocs, and keeps temporary buffers in userdata boxes (l_box) that the
 * garbage collector frees whatever happens.
 *
 * Indices. Rows, clusters and workers are 1-based in Lua (positions in Lua
 * sequences); layer numbers are the model's 0-based layer ids, as in the
 * CLI, the JSON and the files.
 *
 * Help. Each binding file lists its functions in an l_fn table: name, C
 * function and a one-line help ("eldr.load(path [, opts]) -> Trace: ...").
 * Registering the table also records the help under the full name
 * ("eldr.load", "Trace:select"), so :help in the REPL, eldr.help() and
 * the docs test read one source. */
#ifndef ELDR_L_UTIL_H
#define ELDR_L_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <lauxlib.h>
#include <lua.h>

typedef struct l_fn {
    const char *name;      /* Lua name inside its table */
    lua_CFunction fn;
    const char *help;      /* one line: signature, then what it does */
} l_fn;

/* Class names (metatable keys in the registry). */
#define L_TRACE "eldr.Trace"
#define L_RECIPE "eldr.Recipe"
#define L_SIGS "eldr.Signatures"
#define L_MODEL "eldr.Model"

/* ---- errors ---- */

/* "eldr.FN: bad argument 'NAME' (WHAT)"; never returns. */
int l_argerror(lua_State *L, const char *fn, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "eldr.FN: MSG" (a core error message); never returns. */
int l_fail(lua_State *L, const char *fn, const char *msg);
/* Lua type name of the value at idx, or the integer/number itself, for
 * the "got X" part of a message (at most 40 chars, into buf). */
const char *l_got(lua_State *L, int idx, char *buf, size_t len);

/* ---- the coercion rule ----
 * One rule for every argument and option of every binding (docs/lua-api.md,
 * "Arguments"): an integer is a Lua integer or a float with an integral
 * value (5 or 5.0, not 5.5); a number is an integer or a float, finite;
 * a boolean is true or false; a string is a string. Nothing else converts:
 * not "5" to 5 (Lua's own string coercion is refused), not 5 to "5", not
 * 0/1 or nil to a boolean (nil means "not given": the default). */
typedef enum l_kind { L_INT, L_NUM, L_BOOL, L_STR } l_kind;
/* 1 when the value at idx is of kind under the rule (with the integer in
 * *i, the number in *d; either may be NULL), else 0. */
int l_coerce(lua_State *L, int idx, l_kind kind, lua_Integer *i, double *d);
/* A number at idx under the rule and in [lo, hi], else the bad-argument
 * error naming it ("number 0..1 expected, got '5', a string: write the
 * number without quotes"); -HUGE_VAL..HUGE_VAL: any finite number. The
 * integer twin is l_checkint below. */
double l_checknumin(lua_State *L, int idx, const char *fn, const char *name, double lo,
                    double hi);

/* ---- positional arguments (the rule above) ---- */

/* A userdata of class cls at idx, else a bad-argument error naming it. */
void *l_checkudata(lua_State *L, int idx, const char *cls, const char *fn,
                   const char *name);
lua_Integer l_checkint(lua_State *L, int idx, const char *fn, const char *name,
                       lua_Integer lo, lua_Integer hi);
double l_checknum(lua_State *L, int idx, const char *fn, const char *name);
const char *l_checkstr(lua_State *L, int idx, const char *fn, const char *name);

/* ---- option tables ----
 * An options table must hold only the keys in `known` (NULL-terminated):
 * an unknown key is an error listing the known ones, so a typo never
 * silently falls back to a default. idx may be none/nil (no options). */
void l_checkopts(lua_State *L, int idx, const char *fn, const char *const *known);
/* Field getters: the default when idx is none/nil or the key is nil. */
lua_Integer l_optint(lua_State *L, int idx, const char *fn, const char *key,
                     lua_Integer lo, lua_Integer hi, lua_Integer def);
double l_optnum(lua_State *L, int idx, const char *fn, const char *key, double lo,
                double hi, double def);
int l_optbool(lua_State *L, int idx, const char *fn, const char *key, int def);
const char *l_optstr(lua_State *L, int idx, const char *fn, const char *key,
                     const char *def);
/* A function at option key: its stack slot (the function stays pushed),
 * or 0 when absent (nothing pushed); else "WHAT expected, got X". */
int l_optfn(lua_State *L, int idx, const char *fn, const char *key, const char *what);
/* A number or a list of numbers in [lo, hi] at option key: at most max
 * into out; returns the count (0 when absent). */
int l_optnumlist(lua_State *L, int opts, const char *fn, const char *key, double lo,
                 double hi, double *out, int max);
/* Push field key of the options table (nil when absent); returns its type. */
int l_getopt(lua_State *L, int idx, const char *key);

/* ---- weak tables ----
 * Facts about objects that must not keep them alive (which Trace a Model
 * was fitted on, a Trace's rows in its root). l_newweak pushes a new table
 * with __mode = mode ("k", "v", "kv"); l_pushweakreg pushes registry[key],
 * made such a table the first time. */
void l_newweak(lua_State *L, const char *mode);
void l_pushweakreg(lua_State *L, const char *key, const char *mode);

/* ---- lists ---- */

/* A GC-owned scratch buffer of n bytes (zeroed), pushed on the stack. */
void *l_box(lua_State *L, size_t n);
/* A Lua sequence of integers in [lo, hi] at idx (what: the argument's name
 * in messages) into a new box pushed on the stack; *n gets the length.
 * Rejects holes, non-integers and out-of-range values naming the element. */
int64_t *l_checkintlist(lua_State *L, int idx, const char *fn, const char *what,
                        int64_t lo, int64_t hi, int64_t *n);
/* Same for numbers (finite). */
double *l_checknumlist(lua_State *L, int idx, const char *fn, const char *what,
                       int64_t *n);

/* Push a Lua sequence of n integers/doubles; `base` is added to integers
 * (1 to turn 0-based rows into Lua positions). */
void l_pushints(lua_State *L, const int *a, int64_t n, int base);
void l_pushint64s(lua_State *L, const int64_t *a, int64_t n, int base);
void l_pushnums(lua_State *L, const double *a, int64_t n);
/* A number, or nil for NaN (undefined rho etc.). */
void l_pushnum_or_nil(lua_State *L, double x);
/* t[k] = v for the table on top of the stack (a NaN number becomes nil). */
void l_setnum(lua_State *L, const char *k, double v);
void l_setint(lua_State *L, const char *k, lua_Integer v);

/* ---- classes and help ---- */

/* Set fields of the table at the top from fns; record help under
 * prefix..name (prefix "eldr." for module functions). */
void l_register(lua_State *L, const l_fn *fns, const char *prefix);
/* Create the metatable cls with __index = a table of the methods (so
 * completion can list them), __gc, __tostring, __len (any may be NULL),
 * recording the methods' help as "Display:name". */
void l_newclass(lua_State *L, const char *cls, const char *display, const l_fn *methods,
                lua_CFunction gc, lua_CFunction tostring, lua_CFunction len);
/* Record one help line under a full name. */
void l_sethelp(lua_State *L, const char *name, const char *help);
/* Push the help registry table (full name -> line). */
void l_pushhelp(lua_State *L);
/* The reverse map, function value -> full name (l_register fills it), so
 * that help can be asked of a function itself: help(eldr.fit). */
void l_pushhelpfn(lua_State *L);
void l_sethelpfn(lua_State *L, int fn_idx, const char *name);

/* ---- cancellation (Ctrl-C) ----
 * The REPL's SIGINT handler raises the flag; long C computations (k-means)
 * poll it and stop; bindings then raise "eldr.FN: interrupted". */
extern volatile int l_cancel_flag;
void l_cancel_reset(void);

/* ---- progress callbacks (l_progress.c) ----
 * The `progress = function(done, total, what)` option of the long calls
 * (eldr.fit, eldr.select_layers, ...). The core reports through
 * l_progress_call (a progress_fn, rate-limited by the core); the Lua
 * function runs under pcall, so an error in it cannot longjmp through the
 * core: it cancels the computation and l_progress_check re-raises it once
 * the core has returned. Ctrl-C still cancels (the flag is mirrored). */
typedef struct l_progress {
    lua_State *L;
    int fn_idx;             /* stack slot of the function; 0: none given */
    int failed;             /* stack slot of its error; 0: none */
    volatile int cancel;    /* the core's cancel flag when a function is given */
} l_progress;
/* Read opts.progress of the options table at opts (nil or a function; the
 * function stays on the stack); returns p->fn_idx != 0. */
int l_progress_opt(lua_State *L, int opts, const char *fn, l_progress *p);
void l_progress_call(void *ctx, const char *what, int64_t done, int64_t total);
/* The flag the core should poll: p's own with a function, else Ctrl-C's. */
volatile int *l_progress_cancel(l_progress *p);
/* After the core returned: raise the progress function's error, if any. */
void l_progress_check(lua_State *L, l_progress *p);

/* Without a progress function, a call that may run for seconds draws its
 * own one-line bar on stderr when stderr is a terminal ("eldr.gen [###...]
 * 45%"), at most ten times a second, and erases it when done; so the REPL
 * shows that it is working and Ctrl-C is not a guess. Silent otherwise. */
typedef struct l_tty_bar {
    const char *fn;
    int tty, drawn;
    double last;            /* monotonic seconds of the last draw */
} l_tty_bar;
void l_tty_bar_start(l_tty_bar *b, const char *fn);
void l_tty_bar_draw(l_tty_bar *b, double frac);
void l_tty_bar_done(l_tty_bar *b);

#endif
