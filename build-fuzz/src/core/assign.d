build-fuzz/src/core/assign.o: src/core/assign.c src/core/assign.h \
  src/core/err.h

src/core/assign.h:

src/core/err.h:
