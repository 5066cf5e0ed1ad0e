build-fuzz/tests/fuzz/fuzz_centroid_json.o: \
  tests/fuzz/fuzz_centroid_json.c src/core/err.h tests/fuzz/fuzz.h \
  src/core/model.h src/core/sha256.h src/core/signature.h \
  src/core/trace.h

src/core/err.h:

tests/fuzz/fuzz.h:

src/core/model.h:

src/core/sha256.h:

src/core/signature.h:

src/core/trace.h:
