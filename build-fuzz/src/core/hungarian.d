build-fuzz/src/core/hungarian.o: src/core/hungarian.c \
  src/core/hungarian.h src/core/err.h

src/core/hungarian.h:

src/core/err.h:
