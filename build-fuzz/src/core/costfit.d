build-fuzz/src/core/costfit.o: src/core/costfit.c src/core/costfit.h \
  src/core/costmodel.h src/core/err.h

src/core/costfit.h:

src/core/costmodel.h:

src/core/err.h:
