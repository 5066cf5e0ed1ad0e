build-fuzz/src/core/trace_mem.o: src/core/trace_mem.c src/core/trace.h \
  src/core/err.h

src/core/trace.h:

src/core/err.h:
