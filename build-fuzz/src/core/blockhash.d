build-fuzz/src/core/blockhash.o: src/core/blockhash.c \
  src/core/blockhash.h

src/core/blockhash.h:
