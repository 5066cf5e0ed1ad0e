build-fuzz/tests/fuzz/fuzz_npy.o: tests/fuzz/fuzz_npy.c src/core/err.h \
  tests/fuzz/fuzz.h src/core/npy.h

src/core/err.h:

tests/fuzz/fuzz.h:

src/core/npy.h:
