build-fuzz/src/router/body_kv.o: src/router/body_kv.c \
  src/router/body_json.h src/router/body.h

src/router/body_json.h:

src/router/body.h:
