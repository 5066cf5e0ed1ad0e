build-fuzz/src/core/signature.o: src/core/signature.c \
  src/core/signature.h src/core/trace.h src/core/err.h

src/core/signature.h:

src/core/trace.h:

src/core/err.h:
