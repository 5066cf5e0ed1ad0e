build-fuzz/src/core/npy.o: src/core/npy.c src/core/npy.h src/core/err.h

src/core/npy.h:

src/core/err.h:
