#!/bin/sh
# tests/cli/manifests.sh - every Kubernetes manifest eldr ships applies (issue 29,
# item 4): the documents of deploy/*.yaml, as one set, and the ```yaml blocks of
# docs/*.md and README.md that hold a kind:, checked by tests/manifests/validate.py
# against the CRDs' own openAPIV3Schema (tests/fixtures/crd/: GIE v1.6.0's
# InferencePool, Gateway API v1.6.1's standard HTTPRoute) with their CEL rules,
# Deployment/Service/ConfigMap by hand, and eldr's own rules (eldrd's options,
# NixlConnector, --enable-return-routed-experts, kv-nixl). The validator must
# count every document (counted again here with awk), accept GIE's own conformance
# manifests, and refuse each broken manifest of tests/fixtures/manifests/ and each
# broken copy of deploy/ with a message naming the field. Text only: no project C
# code runs (it is in the Makefile's ASAN_SKIP).
. "$ROOT/tests/cli/lib.sh"
PY=/usr/bin/python3
CRD="$ROOT/tests/fixtures/crd"
FX="$ROOT/tests/fixtures/manifests"
V() {
    $PY "$ROOT/tests/manifests/validate.py" \
        --crd "$CRD/inference.networking.k8s.io_inferencepools.yaml" \
        --crd "$CRD/gateway.networking.k8s.io_httproutes.yaml" \
        --eldrd-opts "$ROOT/src/router/base/opts.c" "$@"
}
cd "$ROOT" || exit 2

# counted NAME OUT RC WANT MIN: the validator exited RC (0 wanted) with WANT
# documents passed in OUT (counted independently by the caller), WANT >= MIN
counted() {
    n=$(grep -c ': ok' "$2")
    if [ "$3" -eq 0 ] && [ "$n" -eq "$4" ] && [ "$4" -ge "$5" ]; then ok "$1: all $4 valid"; else
        notok "$1: all valid" "exit $3, $n ok of $4 (at least $5 wanted)" \
            "$(grep -v ': ok' "$2" | head -c 1500)"; fi
}

# --- what eldr ships -------------------------------------------------------
V --set deploy/*.yaml >"$TMP/deploy.out" 2>&1
counted "deploy/, as one set" "$TMP/deploy.out" $? "$(cat deploy/*.yaml | grep -c '^kind:')" 10
for k in InferencePool HTTPRoute Deployment Service ConfigMap; do
    expect_in "deploy/ has a $k, checked" "$TMP/deploy.out" ": $k/[a-z0-9-]+: ok"
done
expect_in "deploy/: the model's ConfigMap is named as the one to create" "$TMP/deploy.out" \
    "Deployment/eldr-epp: ok; external ConfigMap eldr-model"

# the ```yaml blocks of the docs that hold a top-level kind:, counted by awk
V docs/*.md README.md >"$TMP/docs.out" 2>&1
counted "docs/ and README.md" "$TMP/docs.out" $? \
    "$(awk '/^```yaml/ {y = 1; next} /^```/ {y = 0} y && /^kind:/ {n++} END {print n + 0}' \
        docs/*.md README.md)" 2
expect_in "docs/gateway.md's InferencePool is checked" "$TMP/docs.out" \
    "^docs/gateway.md:[0-9]+: InferencePool/[a-z0-9-]+: ok$"
expect_in "docs/gateway.md's HTTPRoute is checked" "$TMP/docs.out" \
    "^docs/gateway.md:[0-9]+: HTTPRoute/[a-z0-9-]+: ok$"

# --- known good: GIE's own conformance manifests -----------------------------
# its Namespaces, Gateways and RBAC are refused as kinds without a schema here
V "$FX"/gie-conformance-*.yaml >"$TMP/gie.all" 2>&1
grep -v ': no schema here' "$TMP/gie.all" >"$TMP/gie.out"
counted "GIE v1.6.0's conformance InferencePools, HTTPRoutes, Deployments, Services" \
    "$TMP/gie.out" 0 \
    "$(cat "$FX"/gie-conformance-*.yaml | grep -cE '^kind: (InferencePool|HTTPRoute|Deployment|Service)$')" 15

# --- the rules the validator implements are the CRDs' -----------------------
$PY "$ROOT/tests/manifests/validate.py" --crd "$CRD/inference.networking.k8s.io_inferencepools.yaml" \
    --crd "$CRD/gateway.networking.k8s.io_httproutes.yaml" --rules >"$TMP/rules.out" 2>&1
rc=$?
n=$(grep -c '^checked .*/v1 ' "$TMP/rules.out")
if [ "$rc" -eq 0 ] && [ "$n" -eq 24 ]; then
    ok "CEL: 24 rules of the v1 CRDs checked, none stale"
else
    notok "CEL: 24 rules of the v1 CRDs checked, none stale" "exit $rc, $n checked" \
        "$(grep stale "$TMP/rules.out" | head -c 600)"
fi

# --- known bad: each refused, naming the field ------------------------------
# bad NAME FILE PATTERN...: the validator exits 1 on FILE, and its output has
# every PATTERN (grep -F)
bad() {
    name=$1; f=$2; shift 2
    V "$f" >"$TMP/bad.out" 2>&1
    rc=$?
    miss=""
    for p in "$@"; do grep -qF -- "$p" "$TMP/bad.out" || miss="$miss [$p]"; done
    if [ "$rc" -eq 1 ] && [ -z "$miss" ]; then ok "refused: $name"; else
        notok "refused: $name" "exit $rc (want 1), missing:$miss" "$(head -c 800 "$TMP/bad.out")"; fi
}
bad "docs/gateway.md's old InferencePool (portNumber)" "$FX/bad-old-gateway-md.yaml" \
    "spec.endpointPickerRef.portNumber: unknown field" \
    "spec.endpointPickerRef: port is required when kind is 'Service'"
bad "a port without its number" "$FX/bad-no-port-number.yaml" \
    "spec.endpointPickerRef.port.number: required field missing" \
    "spec.targetPorts[0].number: required field missing"
bad "an unknown field in an HTTPRoute" "$FX/bad-unknown-field.yaml" \
    "spec.rules[0].backendRef: unknown field"
bad "a target port twice (CEL)" "$FX/bad-duplicate-target-ports.yaml" \
    "spec.targetPorts: port number must be unique"
bad "a Service backend without a port, a relative path (CEL)" \
    "$FX/bad-route-service-without-port.yaml" \
    "spec.rules[0].backendRefs[0]: Must have port for Service reference" \
    "spec.rules[0].matches[0].path: value must be an absolute path"
bad "a CEL rule the validator does not implement is not passed" "$FX/bad-route-timeouts.yaml" \
    "spec.rules[0].timeouts: the CRD's rule \"backendRequest timeout cannot be longer"
bad "GIE's alpha group" "$FX/bad-inferencepool-alpha.yaml" \
    "apiVersion: 'inference.networking.x-k8s.io/v1alpha2': the CRD serves inference.networking.k8s.io/v1 only"
bad "a Deployment: selector, an integer arg, an eldrd option that is not" "$FX/bad-deployment.yaml" \
    "spec.selector: does not match spec.template.metadata.labels" \
    "containers[0].args[7]: 9002 is not a string" \
    "'--ext-proc-port' is not an option of eldrd"
bad "a prefill vLLM: shared-storage connector, no routed experts" \
    "$FX/bad-vllm-shared-storage.yaml" \
    "kv_connector 'SharedStorageConnector'" \
    "without --enable-return-routed-experts"
bad "a prefill vLLM 0.22 or unpinned, with routed experts beside NIXL" "$FX/bad-vllm-022.yaml" \
    "containers[0].image: 'docker.io/vllm/vllm-openai:v0.22.1': vLLM 0.22 refuses" \
    "containers[1].image: 'vllm/vllm-openai': pin the vLLM version"
bad "the coordinator on kv-shared-storage" "$FX/bad-coordinator-shared-storage.yaml" \
    "data.coordinator.yaml.pipeline.kv_connector: 'kv-shared-storage'"

# a bad block in a Markdown file: named by the file and the block's line
printf '# t\n\ntext\n\n```yaml\n' >"$TMP/doc.md"
sed '/^#/d' "$FX/bad-old-gateway-md.yaml" >>"$TMP/doc.md"
printf '```\n\n```yaml\nendpoints:\n  - name: w0\n```\n' >>"$TMP/doc.md"
V "$TMP/doc.md" >"$TMP/md.out" 2>&1
rc=$?
if [ "$rc" -eq 1 ] && grep -q "doc.md:6: InferencePool/decode-pool: spec.endpointPickerRef.portNumber" \
    "$TMP/md.out" && [ "$(wc -l <"$TMP/md.out")" -eq 2 ]; then
    ok "a Markdown block: refused at its line; a block without kind: left alone"
else
    notok "a Markdown block: refused at its line" "exit $rc" "$(head -c 600 "$TMP/md.out")"
fi

# --- broken copies of deploy/: the set's references -------------------------
# mutate NAME FILE SED PATTERN: deploy/ copied, FILE edited by SED, refused with PATTERN
mutate() {
    rm -rf "$TMP/d"; cp -r deploy "$TMP/d"
    sed -i "$3" "$TMP/d/$2"
    if cmp -s "deploy/$2" "$TMP/d/$2"; then notok "set: $1" "the edit '$3' changed nothing"; return; fi
    V --set "$TMP"/d/*.yaml >"$TMP/set.out" 2>&1
    rc=$?
    if [ "$rc" -eq 1 ] && grep -qF -- "$4" "$TMP/set.out"; then ok "set: $1"; else
        notok "set: $1" "exit $rc (want 1), want '$4'" "$(grep -v ': ok' "$TMP/set.out" | head -c 800)"; fi
}
mutate "decode replicas differ from the decode endpoints" vllm-decode.yaml \
    's/replicas: 4/replicas: 3/' "4 role: decode endpoints for the 3 pods of vllm-decode"
mutate "the picker's port is not the Service's" inferencepools.yaml \
    '0,/number: 9002/s//number: 9003/' "spec.endpointPickerRef.port.number: 9003 is no port of Service eldr-epp"
mutate "one EPP-Profile value sent to two pools" httproute.yaml \
    '/value: decode/,+0{s/value: decode/value: prefill/}' "EPP-Profile 'prefill' goes to eldr-decode and to eldr-prefill"
mutate "two pools, the decode rule without its EPP-Profile match" httproute.yaml \
    ':a;N;$!ba;s/name: EPP-Profile/name: X-Phase/2' "a rule to eldr-decode matches no EPP-Profile header"
mutate "a backend pool that does not exist" httproute.yaml \
    's/name: eldr-decode/name: eldr-decodes/' "'eldr-decodes' is no InferencePool of the set"
mutate "an endpoint's port unquoted (llm-d reads strings)" eldr-epp.yaml \
    '0,/port: "8000"/s//port: 8000/' "endpoints[0].port: 8000 is not a port string"
mutate "an endpoint role llm-d does not have" eldr-epp.yaml \
    '0,/ role: prefill$/s// role: prefil/' "endpoints[0].labels.role: 'prefil' is not one of llm-d's roles"
mutate "prefill endpoints other than --prefill-workers" eldr-epp.yaml \
    's/"p0,p1"/"p0,p2"/' "role: prefill endpoints p0,p1, eldrd's --prefill-workers p0,p2"
mutate "a pool's target port the pods lack" inferencepools.yaml \
    '0,/number: 8000/s//number: 8001/' "spec.targetPorts[0].number: 8001 is no container port of vllm-prefill"
mutate "eldrd's --block-size other than the prefill engines'" eldr-epp.yaml \
    '/- "--block-size"/{n;s/"16"/"32"/}' "--block-size 32, and vllm-prefill's vLLM --block-size 16"
mutate "the Service's target port the pod lacks" eldr-epp.yaml \
    's/targetPort: 9002/targetPort: 9012/' "spec.ports[0].targetPort: 9012 is no port of eldr-epp's pods"

# --- usage ---------------------------------------------------------------
expect_status "no input: exit 2" 2 $PY "$ROOT/tests/manifests/validate.py" --crd "$CRD/inference.networking.k8s.io_inferencepools.yaml"
expect_status "a missing file: exit 2" 2 V "$TMP/none.yaml"
