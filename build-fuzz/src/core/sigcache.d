build-fuzz/src/core/sigcache.o: src/core/sigcache.c src/core/err.h \
  src/core/sigcache.h

src/core/err.h:

src/core/sigcache.h:
