#!/usr/bin/env bash
# Self-test of the Envoy stand-in (envoy.js) against fake_epp.js: a correct
# fake must pass, and each way the fake misbehaves must make envoy.js exit 1.
# Light: one fake at a time on 127.0.0.1, short timeouts. Ends "N passed, N failed".
set -u
cd "$(dirname "$0")"
if [ ! -d node_modules/@grpc/grpc-js-xds ]; then
  echo "selftest.sh: tests/gateway/node_modules missing: run make deps" >&2; exit 1
fi
tmp=$(mktemp -d); fake=
trap '[ -n "$fake" ] && kill "$fake" 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0; fail=0
ok()  { pass=$((pass+1)); echo "ok   $*"; }
bad() { fail=$((fail+1)); echo "FAIL $*"; }

start_fake() { # args for fake_epp.js
  [ -n "$fake" ] && { kill "$fake" 2>/dev/null; wait "$fake" 2>/dev/null; }
  node fake_epp.js "$@" > "$tmp/fake.out" 2>&1 & fake=$!
  for _ in $(seq 50); do
    port=$(awk '/^listening/{print $2}' "$tmp/fake.out"); [ -n "$port" ] && return 0; sleep 0.1
  done
  echo "selftest.sh: fake_epp.js did not start" >&2; cat "$tmp/fake.out" >&2; exit 1
}
# expect RC DESCRIPTION -- envoy.js args (target added)
expect() {
  local want=$1 what=$2; shift 3
  node envoy.js "$1" --target 127.0.0.1:$port "${@:2}" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  if [ "$rc" = "$want" ]; then ok "$what (exit $rc)"; else bad "$what: exit $rc, want $want"; sed 's/^/     /' "$tmp/err" | head -5; fi
}
# field FILE KEY: a top-level field of the first JSON line
field() { node -e 'const l=require("fs").readFileSync(process.argv[1],"utf8").split("\n")[0]; const v=JSON.parse(l)[process.argv[2]]; console.log(typeof v==="object"?JSON.stringify(v):String(v))' "$1" "$2"; }
check() { # check DESCRIPTION KEY WANT
  local got; got=$(field "$tmp/out" "$2")
  if [ "$got" = "$3" ]; then ok "$1 ($2=$got)"; else bad "$1: $2=$got, want $3"; fi
}

node -e 'const b={model:"m",prompt:"p".repeat(150000),kv_transfer_params:{eldr_sig:[3,1,4,1,5]}}; require("fs").writeFileSync(process.argv[1],JSON.stringify(b))' "$tmp/body150k.json"
printf '{"model":"m","prompt":"short"}' > "$tmp/small.json"

start_fake --endpoints 10.0.0.1:8000,10.0.0.2:8000
expect 0 "good fake: 150 KB body" -- pick --body-file "$tmp/body150k.json" --timeout 5
check "echo byte-identical" echo_ok true
check "echo chunk within 62000" echo_max_chunk 62000
check "header = metadata" metadata_endpoint "$(field "$tmp/out" endpoint)"
expect 0 "good fake: subset obeyed" -- pick --body-file "$tmp/small.json" --subset 10.0.0.2:8000 --timeout 5
check "subset pick" endpoint 10.0.0.2:8000
expect 0 "good fake: empty subset" -- pick --body-file "$tmp/small.json" --subset '' --timeout 5
check "503 on empty subset" immediate_status 503
expect 0 "good fake: headers-only request" -- pick --no-body --timeout 5
expect 0 "good fake: 200 KB response echoed" -- pick --body-file "$tmp/small.json" --response-body-bytes 200000 --timeout 5
check "response echo" resp_echo_ok true
expect 0 "good fake: 40 requests, 20 streams" -- pick --body-file "$tmp/small.json" --repeat 40 --concurrency 20 --quiet --timeout 8
expect 1 "wrong pick vs --expect-endpoint" -- pick --body-file "$tmp/small.json" --subset 10.0.0.1:8000 --expect-endpoint 10.0.0.2:8000 --timeout 5
expect 0 "health SERVING" -- health --expect SERVING --timeout 5
expect 1 "health expectation NOT_SERVING fails" -- health --expect NOT_SERVING --timeout 5
expect 0 "raw malformed protobuf gets a gRPC error" -- raw --hex ffffffffff --timeout 5
expect 1 "raw: expecting OK fails" -- raw --hex ffffffffff --expect ok --timeout 5
expect 0 "cancel mid-body" -- cancel --body-file "$tmp/body150k.json" --after-bytes 40000 --timeout 5
expect 2 "usage error" -- pick

# One misbehaviour per stream (header x-fake-mode); each must exit 1 for
# the right reason (a pattern of envoy.js's stderr).
while IFS='|' read -r mode to why; do
  expect 1 "fake mode $mode is caught" -- pick --body-file "$tmp/body150k.json" --header "x-fake-mode=$mode" --timeout "$to"
  if grep -q -- "$why" "$tmp/err"; then ok "  ... because: $why"; else bad "  ... reason: want '$why', got: $(head -c 300 "$tmp/err")"; fi
done <<'MODES'
chunk70k|5|chunk of 70000 bytes exceeds 62000
flip-byte|5|request body echo differs
body-first|5|request_body response before the request_headers response
two-headers|5|request_headers response after the request headers were answered
plain-body|5|without body_mutation.streamed_response
no-header-mutation|5|sets no x-gateway-destination-endpoint header
close-early|5|server ended the stream with OK
error-status|5|INTERNAL "fake failure" after half-close
no-eos|2|timeout
resp-no-echo|2|timeout
MODES
start_fake --not-serving
expect 0 "health NOT_SERVING" -- health --expect NOT_SERVING --timeout 5

echo "gateway selftest: $pass passed, $fail failed"
[ "$fail" = 0 ]
