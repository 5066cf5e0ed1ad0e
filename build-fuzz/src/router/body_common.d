build-fuzz/src/router/body_common.o: src/router/body_common.c \
  src/router/body_json.h src/router/body.h

src/router/body_json.h:

src/router/body.h:
