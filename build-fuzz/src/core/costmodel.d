build-fuzz/src/core/costmodel.o: src/core/costmodel.c \
  src/core/costmodel.h src/core/err.h

src/core/costmodel.h:

src/core/err.h:
