build-fuzz/tests/fuzz/fuzz_kv_events.o: tests/fuzz/fuzz_kv_events.c \
  src/router/body.h tests/fuzz/fuzz.h

src/router/body.h:

tests/fuzz/fuzz.h:
