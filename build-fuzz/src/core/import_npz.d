build-fuzz/src/core/import_npz.o: src/core/import_npz.c src/core/import.h \
  src/core/trace.h src/core/err.h src/core/npy.h

src/core/import.h:

src/core/trace.h:

src/core/err.h:

src/core/npy.h:
