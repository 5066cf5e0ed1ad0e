/* l_types.h - the userdata of the eldr Lua module and how binding files
 * create and check them. Each userdata owns its core object and frees it
 * in __gc; a binding pushes the userdata (empty) before it calls the core,
 * so the object has an owner even when a later step raises an error. */
#ifndef ELDR_L_TYPES_H
#define ELDR_L_TYPES_H

#include <stdint.h>

#include <lua.h>

#include "layersel.h"
#include "model.h"
#include "signature.h"
#include "trace.h"

/* Trace: an in-memory trace. */
typedef struct l_trace {
    trace_t *t;
    char *path;             /* the file eldr.load read it whole from, or NULL */
} l_trace;

/* Recipe: variant, layer mask, idf. */
typedef struct l_recipe {
    sig_recipe r;
    int ready;              /* r initialised (free it in __gc) */
} l_recipe;

/* Signatures: a dense row-major float32 matrix n x d (signatures, or
 * centroids). The data stays in C; Lua sees it through methods. */
typedef struct l_sigs {
    int64_t n, d;
    float *x;               /* [n][d] */
    uint8_t *zero;          /* [n] 1 for an all-zero row, or NULL */
    int64_t n_zero;
    char variant[24];       /* recipe variant, "" when unknown */
} l_sigs;

/* Model: a fitted or loaded model. */
typedef struct l_model {
    model_t *m;
} l_model;

/* ---- constructors and checkers (l_types.c) ---- */

/* Push a new empty userdata of each class (its pointer fields NULL). */
l_trace *l_newtrace(lua_State *L);
l_recipe *l_newrecipe(lua_State *L);
l_model *l_newmodel(lua_State *L);
/* A Signatures of n x d zeroed floats (raises on overflow/memory). */
l_sigs *l_newsigs(lua_State *L, int64_t n, int64_t d, const char *fn);

/* Check argument idx (a Trace ...) naming it in errors; a released or
 * empty object is an error too. */
trace_t *l_checktrace(lua_State *L, int idx, const char *fn, const char *name);
l_sigs *l_checksigs(lua_State *L, int idx, const char *fn, const char *name);
sig_recipe *l_checkrecipe(lua_State *L, int idx, const char *fn, const char *name);
model_t *l_checkmodel(lua_State *L, int idx, const char *fn, const char *name);

/* The file a Trace argument was loaded from whole (eldr.load without
 * rows), or NULL (derived, generated, imported, or not a Trace). */
const char *l_trace_path(lua_State *L, int idx);

/* Which Trace a Model was fitted on in this session (eldr.fit): recorded
 * in a weak table, so neither object is kept alive by it.
 * l_push_fitted_on pushes that Trace, or nil (also for model_idx 0). */
void l_mark_fitted_on(lua_State *L, int model_idx, int trace_idx);
void l_push_fitted_on(lua_State *L, int model_idx);

/* Lineage: a Trace made of rows of another (Trace:select, Trace:split,
 * eldr.calib_split) records which rows of the loaded Trace at the root of
 * its family it holds (weak table: dies with it). l_set_lineage: the
 * Trace at child holds rows[0..n) (0-based) of the Trace at parent.
 * l_rows_shared: how many of rows_b[0..n) of the Trace at b (NULL: its
 * first n rows) are rows the Trace at a holds too; 0 when the two are of
 * different families. */
void l_set_lineage(lua_State *L, int child, int parent, const int64_t *rows, int64_t n);
int64_t l_rows_shared(lua_State *L, int a, int b, const int64_t *rows_b, int64_t n);

/* Variant from a name, raising "bad argument 'variant'" when unknown. */
sig_variant l_checkvariant(lua_State *L, const char *fn, const char *name);

/* Layer spec of an options table field `key` at idx: "all", "auto" or a
 * list of 0-based layers. Returns 0 all, 1 auto, 2 list (then *list is a
 * box pushed on the stack with *n layers; else nothing is pushed). */
int l_checklayers(lua_State *L, int idx, const char *fn, const char *key, int nlayers,
                  const char *def, int **list, int *n);

/* ---- tables shared across binding files ---- */

/* Push Model:info()'s table of m (l_model.c; eldr.info of a model file
 * too, l_trace.c). */
void l_push_model_info(lua_State *L, const model_t *m);
/* Push a greedy layer selection as {order, curve, mask, n_star, rho}
 * (l_calib.c: eldr.select_layers; eldr.recipe{layers = "auto"} too,
 * l_sig.c). */
void l_push_selection(lua_State *L, const layersel_result *g);

/* Registration of each binding file into the module table at the top. */
void l_open_trace(lua_State *L);
void l_open_sig(lua_State *L);
void l_open_calib(lua_State *L);
void l_open_kmeans(lua_State *L);
void l_open_model(lua_State *L);
void l_open_sim(lua_State *L);
void l_open_split(lua_State *L);   /* l_split.c: eldr.calib_split */
void l_open_grid(lua_State *L);    /* l_grid.c: eldr.advise */
void l_open_cost(lua_State *L);
void l_open_pca(lua_State *L);
void l_open_attach(lua_State *L);  /* l_attach.c: eldr.attach, live router */
void l_open_pprint(lua_State *L);

/* Pretty-print the value at idx into a new string pushed on the stack
 * (l_pprint.c): tables nested at most depth levels, at most width entries
 * per table, userdata through __tostring. */
void l_pprint(lua_State *L, int idx, int depth, int width);

#endif
