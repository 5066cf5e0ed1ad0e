build-fuzz/src/core/sha256.o: src/core/sha256.c src/core/sha256.h \
  src/core/err.h

src/core/sha256.h:

src/core/err.h:
