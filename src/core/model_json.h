/* model_json.h - what the fit JSON's writer (model_json.c) and reader
 * (model_json_read.c) share; internal to them. */
#ifndef ELDR_MODEL_JSON_H
#define ELDR_MODEL_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "model.h"
#include "signature.h"

/* The variant as the reference names it: gate_prob is their gate_prob_all. */
const char *mj_ref_variant_name(sig_variant v);

/* The wire dtype of the variant's signal: "<i2" counts, "<f4" gates. */
const char *mj_sig_dtype_of(sig_variant v);

/* layer_select between eldr's names (auto, all, list) and the reference's
 * (forward_greedy, all, list): to_ref 1 maps eldr -> reference, 0 back.
 * A name without a counterpart comes back as it is. */
const char *mj_layer_select(const char *name, int to_ref);

/* count_idf weights as the reference requires them: finite is checked
 * elsewhere; here >= 0 and not all 0. 0, or -1 with "sig_idf[i] = x is
 * negative" / "sig_idf is all zero" in msg. */
int mj_idf_check(const sig_recipe *r, char *msg, size_t len);

/* The model of a parsed centroid JSON object (model_from_json_text's
 * validator without the parse): snapshot.c hands it a snapshot's model
 * rewritten in these keys. where prefixes messages. */
int model_from_json_value(const json_t *o, const char *where, model_t **out, char *err,
                          size_t errlen);

#endif
