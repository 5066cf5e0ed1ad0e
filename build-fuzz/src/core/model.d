build-fuzz/src/core/model.o: src/core/model.c src/core/model.h \
  src/core/sha256.h src/core/signature.h src/core/trace.h src/core/err.h

src/core/model.h:

src/core/sha256.h:

src/core/signature.h:

src/core/trace.h:

src/core/err.h:
