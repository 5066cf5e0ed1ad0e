build-fuzz/src/core/sim_arrivals.o: src/core/sim_arrivals.c \
  src/core/err.h src/core/sim_internal.h src/core/rng.h src/core/sim.h \
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
