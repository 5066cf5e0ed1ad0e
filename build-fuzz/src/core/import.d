build-fuzz/src/core/import.o: src/core/import.c src/core/import.h \
  src/core/trace.h src/core/err.h

src/core/import.h:

src/core/trace.h:

src/core/err.h:
