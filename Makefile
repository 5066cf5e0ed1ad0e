# eldr - expert-locality-aware decode routing: router daemon and workbench.
#
#   make deps     install the Debian packages that are missing (as root)
#   make          build bin/eldr
#   make run      deps, build, sample, then open the workbench on the sample
#   make test     deps, build, sample, then every test; ends "N passed, N failed"
#   make asan     the unit and CLI tests under AddressSanitizer + UBSan
#   make bench    benchmarks, printed as a table
#   make fuzz     every libFuzzer harness for FUZZ_SECONDS (60) each; make fuzz-smoke: 6 s
#   make soak     eldrd under replay with hot swaps for SOAK_SECONDS (300); RSS flat, no failure
#   make samples  the larger generated traces (samples/*.h5 beside small.h5)
#   make install PREFIX=/usr/local   (DESTDIR too); make uninstall the same way

PREFIX ?= /usr/local
CC ?= gcc
CFLAGS ?= -O2 -g
# Warnings and the language level are not negotiable; kept apart from CFLAGS
# so that `make CFLAGS=-O0` still builds with them.
WARN := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -pthread
PKGS := hdf5 lua5.4 lapacke openblas jansson libzip
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lreadline -lncursesw -lm
TEST_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null)

# Debian packages: build, runtime, and the test oracles (numpy/scipy/h5py
# under /usr/bin/python3 are oracles and benchmark peers, never the product;
# prometheus ships promtool, the checker of every /metrics page;
# python3-jsonschema checks the manifests against the CRDs, tests/manifests).
DEB_PKGS := build-essential pkg-config libhdf5-dev liblua5.4-dev \
	libreadline-dev libncurses-dev liblapacke-dev libopenblas-dev \
	libmicrohttpd-dev libjansson-dev libcurl4-openssl-dev libzip-dev \
	libyaml-dev libcmocka-dev tmux valgrind curl wrk python3 python3-numpy python3-scipy \
	python3-h5py python3-yaml clang libclang-rt-14-dev iproute2 \
	libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler prometheus \
	libzmq3-dev libmsgpack-dev python3-zmq python3-msgpack python3-jsonschema

BUILD ?= build
BIN ?= bin
# The builds of run, test, asan, bench and fuzz use every core (the tests
# themselves run two at a time, tests/run.sh); JOBS=1 builds one file at
# a time.
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
CORE_SRC := $(wildcard src/core/*.c)
CLI_SRC := $(wildcard src/cli/*.c src/lua/*.c src/repl/*.c src/tui/*.c src/client/*.c)
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/unit/test_*.c)
TEST_UTIL := $(wildcard tests/unit/util_*.c)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BIN)/%)
TEST_UTIL_OBJ := $(TEST_UTIL:%.c=$(BUILD)/%.o)
BENCH_SRC := $(wildcard tests/bench/bench_*.c)
BENCH_BIN := $(BENCH_SRC:tests/bench/%.c=$(BIN)/%)
CORE_LIB := $(BUILD)/libeldrcore.a
# eldrd: src/router/<floor>/*.c (docs/architecture.md: base, net, engine,
# the front ends api and pdproxy, main); all but main go into a library
# that the test_router_* unit tests link too. Each floor's headers are
# found by name (-I per floor); tests/cli/layers.sh checks that a file
# includes only what its floor may.
ROUTER_FLOORS := base net engine api pdproxy extproc main
ROUTER_INC := $(ROUTER_FLOORS:%=-Isrc/router/%) -I$(BUILD)/gen
ROUTER_SRC := $(wildcard $(ROUTER_FLOORS:%=src/router/%/*.c))
# The gateway picker's protobuf messages (a trimmed copy of Envoy's
# ext_proc protocol with Envoy's field numbers, src/router/extproc/xp.proto)
# become C at build time, by protoc-c; the object sits in the extproc
# floor with the code that uses it.
XP_PROTO := src/router/extproc/xp.proto
XP_GEN_C := $(BUILD)/gen/xp.pb-c.c
XP_GEN_H := $(BUILD)/gen/xp.pb-c.h
XP_GEN_OBJ := $(BUILD)/src/router/extproc/xp.pb-c.o
ROUTER_OBJ := $(ROUTER_SRC:%.c=$(BUILD)/%.o) $(XP_GEN_OBJ)
ROUTER_MAIN := $(BUILD)/src/router/main/eldrd.o
ROUTER_LIB := $(BUILD)/libeldrrouter.a
# libcurl: the eldrd client (src/client, eldr replay/attach) and eldrd's
# --load-from vllm poller.
CURL_LIBS := $(shell pkg-config --libs libcurl 2>/dev/null)
# libyaml: the YAML form of --endpoints FILE (src/router/engine/endpoints_doc.c);
# nghttp2 and protobuf-c: the gateway picker (--ext-proc, src/router/extproc);
# libzmq and msgpack-c: vLLM's KV events (--kv-events, src/router/engine/kv_sub.c).
ROUTER_LIBS := $(shell pkg-config --libs libmicrohttpd jansson yaml-0.1 libnghttp2 \
	libprotobuf-c libzmq msgpack 2>/dev/null) $(CURL_LIBS)
SAMPLE := samples/small.h5
# The first screen: the sample's own arrivals (20 req/s) leave every batch
# at about one request, where no routing policy can matter; at 800 req/s
# the batches hold about 20 and ELDR's effect can be seen.
RUN_RATE := 800

.PHONY: all deps run run-built test test-built asan bench bench-built samples clean install readme-frame frames \
	unit-tests fuzz fuzz-smoke soak

all: $(BIN)/eldr $(BIN)/eldrd

deps:
	@missing=$$(for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "make deps: run as root to install:" $$missing >&2; exit 1; fi; \
	  echo "make deps: installing" $$missing; \
	  apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
	  case " $$missing " in *" prometheus "*) \
	    command -v systemctl >/dev/null 2>&1 && systemctl disable --now prometheus >/dev/null 2>&1 || true; \
	  esac; \
	fi
	@# prometheus is here for its promtool (tests/e2e/metrics_lint.sh), not
	@# its server: on a systemd host the service it starts is stopped above.
	@# tests/gateway: the Envoy ext_proc stand-in (Node), from the committed
	@# package-lock.json; Debian's nodejs and npm only when npm is missing.
	@if ! command -v npm >/dev/null 2>&1; then \
	  if [ "$$(id -u)" != 0 ]; then echo "make deps: run as root to install: nodejs npm" >&2; exit 1; fi; \
	  echo "make deps: installing nodejs npm"; \
	  apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null || exit 1; \
	fi
	@stamp=tests/gateway/node_modules/.package-lock.json; \
	if [ ! -f $$stamp ] || [ tests/gateway/package-lock.json -nt $$stamp ]; then \
	  echo "make deps: npm ci in tests/gateway"; \
	  npm ci --prefix tests/gateway --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null || exit 1; \
	  touch $$stamp; \
	fi

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(PKG_CFLAGS) -Isrc/core $(INC) -MMD -MP -c $< -o $@

# the router's floors see each other's headers by name (the layer check
# says which they may include); so do the tests and benchmarks of them
$(BUILD)/src/router/%.o $(BUILD)/tests/%.o: INC := $(ROUTER_INC)

$(XP_GEN_C) $(XP_GEN_H) &: $(XP_PROTO)
	@mkdir -p $(dir $(XP_GEN_C))
	protoc-c --c_out=$(dir $(XP_GEN_C)) -Isrc/router/extproc $<

# protoc-c's INIT macros brace a oneof's union as one value, which
# -Wmissing-braces flags: off for the generated file only
$(XP_GEN_OBJ): $(XP_GEN_C)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) -Wno-missing-braces $(CFLAGS) $(PKG_CFLAGS) -I$(dir $(XP_GEN_C)) -MMD -MP -c $< -o $@

# the picker's objects include the generated header, and so does the
# unit test that holds the hand-framed messages to protobuf-c's packing
$(filter-out $(XP_GEN_OBJ),$(filter $(BUILD)/src/router/extproc/%,$(ROUTER_OBJ))) \
	$(BUILD)/tests/unit/test_router_xpmsg.o: $(XP_GEN_H)

$(CORE_LIB): $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN)/eldr: $(CLI_OBJ) $(CORE_LIB)
	@mkdir -p $(BIN)
	$(CC) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $(CLI_OBJ) $(CORE_LIB) $(PKG_LIBS) $(CURL_LIBS)

$(ROUTER_LIB): $(filter-out $(ROUTER_MAIN),$(ROUTER_OBJ))
	@rm -f $@
	ar rcs $@ $^

$(BIN)/eldrd: $(ROUTER_MAIN) $(ROUTER_LIB) $(CORE_LIB)
	@mkdir -p $(BIN)
	$(CC) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(ROUTER_LIBS)

# test_tui_*: the dashboard's views and canvas (src/tui) without a terminal;
# live mode (src/tui/live.c) speaks to eldrd through src/client.
TUI_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard src/tui/*.c)) $(BUILD)/src/client/client.o \
	$(BUILD)/src/client/push.o
$(BIN)/test_tui_%: $(BUILD)/tests/unit/test_tui_%.o $(TEST_UTIL_OBJ) $(TUI_OBJ) $(CORE_LIB)
	@mkdir -p $(BIN)
	$(CC) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(CURL_LIBS) $(TEST_LIBS)

# the dense-layer step of eldr capture runs on decoded answers, into a trace
$(BIN)/test_capture_dense: $(BUILD)/tests/unit/test_capture_dense.o $(TEST_UTIL_OBJ) \
	$(BUILD)/src/client/capture_dense.o $(BUILD)/src/client/capture_trace.o $(CORE_LIB)
	@mkdir -p $(BIN)
	$(CC) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(TEST_LIBS)

$(BIN)/test_router_%: $(BUILD)/tests/unit/test_router_%.o $(TEST_UTIL_OBJ) $(ROUTER_LIB) $(CORE_LIB)
	@mkdir -p $(BIN)
	$(CC) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(ROUTER_LIBS) $(TEST_LIBS)

$(BIN)/test_%: $(BUILD)/tests/unit/test_%.o $(TEST_UTIL_OBJ) $(CORE_LIB)
	@mkdir -p $(BIN)
	$(CC) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(TEST_LIBS)

$(BIN)/bench_%: $(BUILD)/tests/bench/bench_%.o $(CORE_LIB)
	@mkdir -p $(BIN)
	$(CC) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

# the stand-in engine of the capture benchmark (tests/bench/capture.sh)
$(BIN)/capture_engine: tests/bench/capture_engine.c $(CORE_LIB)
	@mkdir -p $(BIN)
	$(CC) $(WARN) $(CFLAGS) -Isrc/core $(LDFLAGS) -o $@ $^

# instant prefill/decode stand-ins for the proxy benchmark (tests/bench/proxy.sh)
$(BIN)/pd_instant: $(BUILD)/tests/bench/pd_instant.o $(CORE_LIB)
	@mkdir -p $(BIN)
	$(CC) $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(ROUTER_LIBS)

unit-tests: $(TEST_BIN)

$(SAMPLE): | $(BIN)/eldr
	$(BIN)/eldr gen -o $@ --requests 600 --layers 16 --experts 64 --top-k 4 \
	  --domains 4 --prompt-tokens 96 --decode-tokens 48 --seed 7 --arrival-rate 20

samples: $(SAMPLE) $(BIN)/eldr
	@test -f samples/medium.h5 || $(BIN)/eldr gen -o samples/medium.h5 --requests 5000 \
	  --layers 48 --experts 128 --top-k 8 --domains 8 --seed 11 --arrival-rate 60
	@test -f samples/prefix.h5 || $(BIN)/eldr gen -o samples/prefix.h5 --requests 2000 \
	  --layers 24 --experts 64 --top-k 4 --domains 4 --prompt-tokens 96 \
	  --decode-tokens 48 --prefix-groups 20 --prefix-blocks 8 --tokens --gates --seed 13
	@ls -l samples/*.h5

# The workbench on the sample: the dashboard when there is a terminal,
# otherwise what the sample holds and the commands to try.
# run, test, bench: `make deps` first, then a fresh make for the rest, so
# that the pkg-config flags above are computed after the install (a make
# reads them once, when it starts: on a fresh machine, before the packages
# that provide them exist).
run: deps
	@$(MAKE) --no-print-directory -j$(JOBS) run-built

run-built: all $(SAMPLE)
	@if [ -t 0 ] && [ -t 1 ]; then exec $(BIN)/eldr dash $(SAMPLE) --rate $(RUN_RATE); fi; \
	$(BIN)/eldr info $(SAMPLE); echo; \
	echo "No terminal for the dashboard. Next: $(BIN)/eldr --help, for example:"; \
	echo "  $(BIN)/eldr dash $(SAMPLE) --rate $(RUN_RATE) --frame - --view balance --width 80 --height 24"; \
	echo "  $(BIN)/eldr sim $(SAMPLE) --policy eldr,rr,jsq --rate 60"; \
	echo "  $(BIN)/eldr repl"

# The README's dashboard frame, written again from the command in its
# block (tests/cli/readme_frame.sh fails when it is stale); `make frames`
# does the same for every frame of docs/dashboard.md (about 30 s).
readme-frame: all
	@/usr/bin/python3 tests/cli/frames.py write $(BIN)/eldr README.md

frames: all
	@/usr/bin/python3 tests/cli/frames.py write $(BIN)/eldr README.md docs/dashboard.md

test: deps
	@$(MAKE) --no-print-directory -j$(JOBS) test-built

test-built: all $(SAMPLE) unit-tests $(BIN)/pd_instant
	@BIN=$(BIN) sh tests/run.sh

# Under the sanitizers every test runs but these: front-end runs of the
# simulator, advise, sweep and the dashboard whose C paths the unit tests
# (test_sim, test_grid, test_kmeans, test_tui_*) already run under ASan
# and UBSan, and which cost the most there; CI's whole run must stay under
# 20 minutes (docs/reliability.md, "Memory errors and leaks"). manifests.sh
# runs no C code of the project at all (it checks deploy/ and the docs' YAML).
ASAN_SKIP := tests/cli/tour.sh tests/e2e/tour_live.sh tests/cli/splits.sh tests/cli/sweep.sh tests/cli/advise.sh \
	tests/cli/sim.sh tests/cli/kmeans_large.sh tests/e2e/dash.sh tests/e2e/gateway_standin.sh \
	tests/cli/fit.sh tests/cli/import.sh tests/cli/faults.sh tests/e2e/soak_short.sh \
	tests/cli/manifests.sh tests/e2e/verdict_same.sh tests/e2e/dash_screens.sh \
	tests/e2e/dash_progressive.sh
# (verdict_same.sh: advise, eldr.advise and the dashboard on two traces;
# its C path, verdict.c, runs under the sanitizers in test_verdict,
# test_grid and test_tui_views. dash_screens.sh and e2e/dash_progressive.sh
# check layout and key timing in tmux, 40 s under ASan; their C paths run
# under the sanitizers in test_tui_canvas, test_tui_views and
# tests/cli/dash_progressive.sh, which draws every view from computed and
# cached results)
# and of the Lua tests, the three that rerun whole simulations, seeds and
# the samples (about 90 s under ASan); the other Lua tests still drive
# every binding under the sanitizers
ASAN_LUA_SKIP := test_seeds test_samples test_docs

asan: deps
	@$(MAKE) --no-print-directory -j$(JOBS) BUILD=build-asan BIN=bin-asan \
	  CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  LDFLAGS="-fsanitize=address,undefined" bin-asan/eldr bin-asan/eldrd bin-asan/pd_instant \
	  unit-tests
	@ASAN_OPTIONS=detect_leaks=1 BIN=bin-asan SAMPLE=$(SAMPLE) RUN_SKIP="$(ASAN_SKIP)" \
	  LUA_SKIP="$(ASAN_LUA_SKIP)" sh tests/run.sh

bench: deps
	@$(MAKE) --no-print-directory -j$(JOBS) bench-built

bench-built: all $(BENCH_BIN) $(BIN)/capture_engine $(BIN)/pd_instant
	@BIN=$(BIN) sh tests/bench/run.sh

# Fuzzing (tests/fuzz/, docs/reliability.md): clang's libFuzzer with ASan
# and UBSan. The core and the body parsers are compiled again by clang into
# build-fuzz/ with coverage instrumentation; each tests/fuzz/fuzz_X.c
# becomes build-fuzz/fuzz_X. No -Werror here: clang warns differently, and
# the gcc build is the one that holds the line.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_BUILD := build-fuzz
FUZZ_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
	-fno-sanitize-recover=undefined
FUZZ_SRC := $(CORE_SRC) $(wildcard src/router/api/body_*.c) \
	src/router/base/wire.c \
	src/router/pdproxy/proxy_msg.c src/router/pdproxy/proxy_req.c src/router/base/jspan.c \
	src/router/net/upstream_parse.c src/router/net/framing.c src/router/base/strbuf.c \
	src/router/extproc/xp_msg.c src/router/extproc/xp_sig.c src/router/engine/json_in.c \
	src/router/engine/kv_event.c src/router/engine/kv_msgpack.c
# the gateway picker's protobuf messages, generated by protoc-c into
# build-fuzz/gen (as into build/gen for eldrd) and compiled with the rest
FUZZ_GEN_C := $(FUZZ_BUILD)/gen/xp.pb-c.c
FUZZ_GEN_H := $(FUZZ_BUILD)/gen/xp.pb-c.h
FUZZ_GEN_OBJ := $(FUZZ_BUILD)/gen/xp.pb-c.o
FUZZ_INC := $(ROUTER_FLOORS:%=-Isrc/router/%) -I$(FUZZ_BUILD)/gen
FUZZ_OBJ := $(FUZZ_SRC:%.c=$(FUZZ_BUILD)/%.o) $(FUZZ_GEN_OBJ)
FUZZ_HARNESS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_HARNESS:tests/fuzz/%.c=$(FUZZ_BUILD)/%)

$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=c11 -D_GNU_SOURCE -Wall -Wextra -pthread $(FUZZ_FLAGS) \
	  -fsanitize=fuzzer-no-link $(PKG_CFLAGS) -Isrc/core $(FUZZ_INC) -MMD -MP -c $< -o $@

$(FUZZ_GEN_C) $(FUZZ_GEN_H) &: $(XP_PROTO)
	@mkdir -p $(dir $(FUZZ_GEN_C))
	protoc-c --c_out=$(dir $(FUZZ_GEN_C)) -Isrc/router/extproc $<

$(FUZZ_GEN_OBJ): $(FUZZ_GEN_C)
	$(FUZZ_CC) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-missing-braces -pthread $(FUZZ_FLAGS) \
	  -fsanitize=fuzzer-no-link $(PKG_CFLAGS) -I$(dir $(FUZZ_GEN_C)) -MMD -MP -c $< -o $@

# the picker's messages and their harness include the generated header
$(FUZZ_BUILD)/src/router/extproc/xp_msg.o $(FUZZ_BUILD)/src/router/extproc/xp_sig.o \
	$(FUZZ_BUILD)/tests/fuzz/fuzz_extproc_msg.o: $(FUZZ_GEN_H)

$(FUZZ_BUILD)/libfuzzcore.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_BUILD)/libfuzzcore.a
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $^ $(PKG_LIBS) $(ROUTER_LIBS)

# keep the harness objects (make would delete them as intermediates)
.SECONDARY: $(FUZZ_HARNESS:%.c=$(FUZZ_BUILD)/%.o) $(TEST_SRC:%.c=$(BUILD)/%.o) \
	$(TEST_UTIL:%.c=$(BUILD)/%.o) $(BENCH_SRC:%.c=$(BUILD)/%.o)

fuzz: $(FUZZ_BIN)
	@FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_BUILD=$(FUZZ_BUILD) sh tests/fuzz/run.sh $(FUZZ_BIN)

fuzz-smoke: deps
	@$(MAKE) --no-print-directory -j$(JOBS) fuzz FUZZ_SECONDS=6

# The soak test (tests/soak/soak.sh, docs/reliability.md): not in `make
# test`, which runs its 20 s form (tests/e2e/soak_short.sh).
SOAK_SECONDS ?= 300
soak: all $(SAMPLE)
	@ROOT=$(CURDIR) BIN=$(BIN) SOAK_SECONDS=$(SOAK_SECONDS) sh tests/soak/soak.sh

# install: the binaries; the Lua modules where eldr looks for them
# (BINDIR/../share/eldr/lua); the man pages; bash completion (one script
# for both commands, under each command's name, as bash-completion loads
# it); README.md and docs/*.md as the documentation. uninstall removes
# exactly these (tests/cli/install.sh installs into a temporary DESTDIR).
MANDIR ?= $(PREFIX)/share/man
COMPDIR ?= $(PREFIX)/share/bash-completion/completions
DOCDIR ?= $(PREFIX)/share/doc/eldr
DOCS := README.md $(wildcard docs/*.md)
LUA_FILES := $(shell find lua -type f 2>/dev/null)

.PHONY: uninstall
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/eldr/lua \
	  $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(COMPDIR) $(DESTDIR)$(DOCDIR)
	install -m 755 $(BIN)/eldr $(BIN)/eldrd $(DESTDIR)$(PREFIX)/bin/
	cp -r lua/. $(DESTDIR)$(PREFIX)/share/eldr/lua/
	install -m 644 docs/man/eldr.1 $(DESTDIR)$(MANDIR)/man1/eldr.1
	install -m 644 docs/man/eldrd.8 $(DESTDIR)$(MANDIR)/man8/eldrd.8
	install -m 644 docs/completion/eldr.bash $(DESTDIR)$(COMPDIR)/eldr
	install -m 644 docs/completion/eldr.bash $(DESTDIR)$(COMPDIR)/eldrd
	install -m 644 $(DOCS) $(DESTDIR)$(DOCDIR)/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/eldr $(DESTDIR)$(PREFIX)/bin/eldrd \
	  $(DESTDIR)$(MANDIR)/man1/eldr.1 $(DESTDIR)$(MANDIR)/man8/eldrd.8 \
	  $(DESTDIR)$(COMPDIR)/eldr $(DESTDIR)$(COMPDIR)/eldrd \
	  $(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(DOCS))) \
	  $(addprefix $(DESTDIR)$(PREFIX)/share/eldr/,$(LUA_FILES))
	-find $(DESTDIR)$(PREFIX)/share/eldr $(DESTDIR)$(DOCDIR) -depth -type d -empty \
	  -exec rmdir {} \; 2>/dev/null

clean:
	rm -rf build build-asan build-fuzz bin bin-asan

-include $(shell find build build-asan build-fuzz -name '*.d' 2>/dev/null)
