build-fuzz/src/core/rank.o: src/core/rank.c src/core/rank.h \
  src/core/err.h

src/core/rank.h:

src/core/err.h:
