build-fuzz/src/router/body_route.o: src/router/body_route.c \
  src/router/b64.h src/router/body_json.h src/router/body.h

src/router/b64.h:

src/router/body_json.h:

src/router/body.h:
