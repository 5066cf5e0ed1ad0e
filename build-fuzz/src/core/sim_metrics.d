build-fuzz/src/core/sim_metrics.o: src/core/sim_metrics.c src/core/err.h \
  src/core/sim_internal.h src/core/rng.h src/core/sim.h \
  src/core/costmodel.h src/core/route.h src/core/signature.h \
  src/core/trace.h

src/core/err.h:

src/core/sim_internal.h:

src/core/rng.h:

src/core/sim.h:

src/core/costmodel.h:

src/core/route.h:

src/core/signature.h:

src/core/trace.h:
