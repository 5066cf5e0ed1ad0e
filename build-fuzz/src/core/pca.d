build-fuzz/src/core/pca.o: src/core/pca.c \
  /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h \
  /usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h \
  src/core/err.h src/core/pca.h

/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h:

/usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h:

src/core/err.h:

src/core/pca.h:
