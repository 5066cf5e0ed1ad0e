build-fuzz/src/core/trace_validate.o: src/core/trace_validate.c \
  src/core/err.h src/core/trace.h

src/core/err.h:

src/core/trace.h:
