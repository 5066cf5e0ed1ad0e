build-fuzz/tests/fuzz/fuzz_npz.o: tests/fuzz/fuzz_npz.c src/core/err.h \
  tests/fuzz/fuzz.h src/core/import.h src/core/trace.h

src/core/err.h:

tests/fuzz/fuzz.h:

src/core/import.h:

src/core/trace.h:
