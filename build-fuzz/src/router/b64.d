build-fuzz/src/router/b64.o: src/router/b64.c src/router/b64.h

src/router/b64.h:
