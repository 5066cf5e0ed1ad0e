build-fuzz/tests/fuzz/fuzz_route_body.o: tests/fuzz/fuzz_route_body.c \
  src/router/b64.h src/router/body.h tests/fuzz/fuzz.h

src/router/b64.h:

src/router/body.h:

tests/fuzz/fuzz.h:
