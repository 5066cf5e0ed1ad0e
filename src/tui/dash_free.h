/* dash_free.h - destructors of a dashboard run and fit (dash_free.c). */
#ifndef ELDR_DASH_FREE_H
#define ELDR_DASH_FREE_H

#include "dash.h"

/* Free a run and all it owns; NULL is a no-op. */
void dash_sim_free(dash_sim *s);
/* Free a fit, its model included; NULL is a no-op. */
void dash_fit_free(dash_fit *f);

#endif
