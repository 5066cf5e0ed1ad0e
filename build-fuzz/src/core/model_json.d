build-fuzz/src/core/model_json.o: src/core/model_json.c src/core/err.h \
  src/core/model.h src/core/sha256.h src/core/signature.h \
  src/core/trace.h

src/core/err.h:

src/core/model.h:

src/core/sha256.h:

src/core/signature.h:

src/core/trace.h:
