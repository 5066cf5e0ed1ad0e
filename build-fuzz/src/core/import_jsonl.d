build-fuzz/src/core/import_jsonl.o: src/core/import_jsonl.c \
  src/core/import.h src/core/trace.h src/core/err.h

src/core/import.h:

src/core/trace.h:

src/core/err.h:
