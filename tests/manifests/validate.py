#!/usr/bin/env python3
"""tests/manifests/validate.py - check Kubernetes manifests as the API server would take them.

usage: validate.py --crd FILE [--crd FILE ...] [--eldrd-opts src/router/base/opts.c]
                   [--set] FILE ...
       validate.py --crd FILE [--crd FILE ...] --rules

FILE is a .yaml file (every document in it) or a .md file (every ```yaml block
that holds a `kind:`). Each document gets one line:
    FILE:LINE: Kind/name: ok
or one line per error, naming the field:
    FILE:LINE: Kind/name: spec.endpointPickerRef.portNumber: unknown field ...
Exit 0 when every document passes, 1 when any fails, 2 on a usage error or an
unreadable input. --rules lists each CEL rule of the CRDs, "checked" or "not
checked" here, and exits 1 if CEL_RULES holds a rule that no CRD has.

What is checked, and how:

1. Kinds served by a CRD (--crd: InferencePool, HTTPRoute): the served
   version's own openAPIV3Schema, with python3-jsonschema (Draft 4, which
   OpenAPI v3.0's schema dialect follows), after these translations of
   Kubernetes' structural-schema rules:
   - an object schema with `properties` takes no other field (kubectl apply's
     default --validate=strict refuses an unknown field; without it the API
     server would drop it silently, which is no better for a manifest);
   - `format: int32` / `int64` bound the integer;
   - `x-kubernetes-list-type: set` wants distinct items, `map` distinct keys
     (`x-kubernetes-list-map-keys`, defaults filled in);
   - `nullable` is honoured if a schema has it (these CRDs do not);
   - `x-kubernetes-preserve-unknown-fields` leaves an object open.
   Then the CRD's `default`s are applied, as the API server does before it
   runs the CEL rules, and the CEL rules (`x-kubernetes-validations`) are
   checked by the hand-written equivalents in CEL_RULES below, each keyed by
   the rule's exact text in the CRD:
   - InferencePool: spec.targetPorts' numbers unique; spec.endpointPickerRef
     needs `port` when its kind is Service (the default);
   - HTTPRoute: spec.parentRefs' two sectionName rules; at most 128 matches
     in all rules; a RequestRedirect filter not beside backendRefs; the four
     replacePrefixMatch rules of a rule; backendRefs[] of a Service need a
     port; the eleven rules on matches[].path.
   A rule of the CRD that is not among them, on a field the manifest has
   (HTTPRoute filters' and timeouts' rules, for instance), is an error: the
   manifest is never passed unchecked.
2. Core kinds (Deployment apps/v1, Service v1, ConfigMap v1) have no CRD. The
   structure that decides whether they apply and work is checked by hand,
   with the field names of kubernetes/api core/v1/types.go and
   apps/v1/types.go @ 10b39a39bcee995dfe7cd5e8e7b922be5e46f1e2 (an unknown
   field is refused, down to containers, ports, probes, env and volumes):
   apiVersion/kind; a Deployment's selector matches its template's labels;
   containers named, with an image; command and args lists of strings;
   container ports in 1..65535, port names IANA service names, unique; probes
   with one handler and a port that exists; volume mounts naming a volume;
   extended resources (nvidia.com/gpu) requested as limited; a Service's
   ports and target ports; a ConfigMap's data keys and string values.
3. metadata of every kind: a name (DNS-1123 subdomain; a Service's a
   DNS-1035 label), namespace, label keys and values as Kubernetes takes them.
4. eldr's own rules, on any document:
   - a container that runs eldrd uses only eldrd's long options (read from
     the option table of --eldrd-opts), and has --ext-proc and --endpoints;
   - a vLLM container (`vllm serve`) has a --kv-transfer-config that is JSON
     naming NixlConnector (the coordinator's kv-nixl path; docs/gateway.md),
     and a pod labelled llm-d.ai/role: prefill has
     --enable-return-routed-experts (the stock-engine signature); beside a
     KV connector that flag wants a pinned vLLM image other than 0.22, which
     refuses the two together (docs/eldrd.md);
   - a ConfigMap holding llm-d's coordinator.yaml sets pipeline.kv_connector
     kv-nixl (kv-shared-storage drops kv_transfer_params).
5. --set: the files are one deployment (deploy/), so the references between
   documents must resolve: an InferencePool's endpointPickerRef names a
   Service of the set with that port, whose target port is a port of the pod
   it selects; a pool's selector selects a Deployment whose pods have every
   target port; an HTTPRoute's backendRefs name pools and Services (with the
   port) of the set; where one route reaches several pools, each pool's rule
   matches its own EPP-Profile header value; a Service selects a Deployment;
   eldrd's --endpoints file is a key of a ConfigMap of the set, in llm-d's
   file-discovery format (docs/endpoints.md), with one decode entry per
   pod of the decode pool's Deployment and one prefill entry per
   --prefill-workers name, on the pools' target ports (the role is the label
   llm-d.ai/role or role, read as llm-d's role filters read it); eldrd's --block-size
   is the prefill engines' (default 16 on both sides). A ConfigMap a volume
   names but the set does not hold is listed as `external` (one you create).
"""
import copy
import ipaddress
import json
import os
import re
import shlex
import sys

import jsonschema
import yaml

# ------------------------------------------------------------------ reading


class DupKeyLoader(yaml.SafeLoader):
    """YAML 1.1 as sigs.k8s.io/yaml reads it, but a key given twice in one
    mapping is an error (kubectl's strict decoding refuses it too)."""


def _mapping(loader, node, deep=False):
    seen = {}
    for knode, _ in node.value:
        key = loader.construct_object(knode, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, "key %r given twice (line %d and %d)" %
                (key, seen[key] + 1, knode.start_mark.line + 1), knode.start_mark)
        seen[key] = knode.start_mark.line
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


DupKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


class Doc:
    def __init__(self, path, line, obj):
        self.path, self.line, self.obj = path, line, obj
        self.errors, self.notes = [], []

    def label(self):
        o = self.obj if isinstance(self.obj, dict) else {}
        meta = o.get("metadata") if isinstance(o.get("metadata"), dict) else {}
        return "%s/%s" % (o.get("kind", "?"), meta.get("name", "?"))

    def err(self, field, msg):
        self.errors.append("%s: %s" % (field, msg) if field else msg)


def load_yaml_text(path, text, line0):
    """The documents of one YAML text, each with the line it starts on."""
    docs = []
    try:
        loader = DupKeyLoader(text)
        try:
            while loader.check_node():
                node = loader.get_node()
                if node is None:
                    continue
                obj = loader.construct_document(node)
                if obj is not None:
                    docs.append(Doc(path, line0 + node.start_mark.line, obj))
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        d = Doc(path, line0 + (mark.line if mark else 0), None)
        d.err("", "not YAML: %s" % (getattr(e, "problem", None) or e))
        docs.append(d)
    return docs


FENCE = re.compile(r"^```yaml\s*$")


def load_file(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if not path.endswith(".md"):
        return load_yaml_text(path, text, 1)
    docs, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            block = "\n".join(lines[i + 1:j])
            if re.search(r"^\s*kind:", block, re.M):
                docs.extend(load_yaml_text(path, block, i + 2))
            i = j
        i += 1
    return docs


# ------------------------------------------------------------------ paths and names


def fpath(parts):
    out = ""
    for p in parts:
        out += "[%d]" % p if isinstance(p, int) else ("." if out else "") + str(p)
    return out


DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUB = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
IANA_SVC = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def check_dns(doc, field, v, kind="subdomain"):
    if not isinstance(v, str) or not v:
        return doc.err(field, "wanted a non-empty string")
    if kind == "label" and (len(v) > 63 or not DNS1123_LABEL.match(v)):
        doc.err(field, "%r is not a DNS-1123 label (lower case, digits, '-', at most 63)" % v)
    elif kind == "1035" and (len(v) > 63 or not DNS1035_LABEL.match(v)):
        doc.err(field, "%r is not a DNS-1035 label (a letter first; lower case, digits, '-')" % v)
    elif kind == "subdomain" and (len(v) > 253 or not DNS1123_SUB.match(v)):
        doc.err(field, "%r is not a DNS-1123 subdomain" % v)


def check_label_map(doc, field, m):
    if not isinstance(m, dict):
        return doc.err(field, "wanted a map of strings")
    for k, v in m.items():
        ks = str(k)
        prefix, _, name = ks.rpartition("/")
        if prefix and (len(prefix) > 253 or not DNS1123_SUB.match(prefix)):
            doc.err("%s.%s" % (field, ks), "the key's prefix is not a DNS-1123 subdomain")
        if not name or len(name) > 63 or not LABEL_NAME.match(name):
            doc.err("%s.%s" % (field, ks), "not a label key")
        if not isinstance(v, str):
            doc.err("%s.%s" % (field, ks), "%r is not a string (quote it)" % (v,))
        elif len(v) > 63 or not LABEL_VALUE.match(v):
            doc.err("%s.%s" % (field, ks), "%r is not a label value" % v)


OBJECT_META = {"name", "generateName", "namespace", "labels", "annotations", "ownerReferences",
               "finalizers", "uid", "resourceVersion", "generation", "creationTimestamp",
               "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"}


def check_meta(doc, meta, name_kind):
    if not isinstance(meta, dict):
        return doc.err("metadata", "missing, or not a mapping")
    for k in meta:
        if k not in OBJECT_META:
            doc.err("metadata.%s" % k, "unknown field")
    if "name" in meta:
        check_dns(doc, "metadata.name", meta["name"], name_kind)
    elif "generateName" not in meta:
        doc.err("metadata.name", "required")
    if "namespace" in meta:
        check_dns(doc, "metadata.namespace", meta["namespace"], "label")
    if "labels" in meta:
        check_label_map(doc, "metadata.labels", meta["labels"])
    ann = meta.get("annotations", {})
    if not isinstance(ann, dict) or any(not isinstance(v, str) for v in ann.values()):
        doc.err("metadata.annotations", "wanted a map of strings")


# ------------------------------------------------------------------ CRD schemas


def k8s_schema(s):
    """A Kubernetes structural schema as a Draft 4 JSON schema (see the top)."""
    if isinstance(s, list):
        return [k8s_schema(x) for x in s]
    if not isinstance(s, dict):
        return s
    out = {}
    for k, v in s.items():
        if k in ("description", "default", "x-kubernetes-validations"):
            continue
        if k in ("properties",):
            out[k] = {pk: k8s_schema(pv) for pk, pv in v.items()}
        elif k in ("items", "additionalProperties", "not") and isinstance(v, dict):
            out[k] = k8s_schema(v)
        elif k in ("anyOf", "allOf", "oneOf"):
            out[k] = k8s_schema(v)
        else:
            out[k] = v
    if ("properties" in s and "additionalProperties" not in s
            and not s.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    if s.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if "items" in s and isinstance(s["items"], dict):
        out["x-eldr-item-defaults"] = {k: v["default"] for k, v in
                                       s["items"].get("properties", {}).items()
                                       if "default" in v}
    return out


def _list_type(validator, value, instance, schema):
    if not isinstance(instance, list):
        return
    if value == "set":
        seen = []
        for i, x in enumerate(instance):
            if x in seen:
                yield jsonschema.ValidationError(
                    "item [%d] repeats an earlier one (x-kubernetes-list-type: set)" % i)
            seen.append(x)
    elif value == "map":
        keys = schema.get("x-kubernetes-list-map-keys", [])
        dflt = schema.get("x-eldr-item-defaults", {})
        seen = {}
        for i, x in enumerate(instance):
            if not isinstance(x, dict):
                continue
            k = tuple(x.get(n, dflt.get(n)) for n in keys)
            if k in seen:
                yield jsonschema.ValidationError(
                    "item [%d] has the same %s as item [%d] (x-kubernetes-list-type: map)" %
                    (i, "/".join(keys) + " " + "/".join(map(str, k)), seen[k]))
            seen[k] = i


FORMATS = jsonschema.FormatChecker(formats=())


@FORMATS.checks("int32")
def _int32(v):
    return not isinstance(v, int) or -2**31 <= v < 2**31


@FORMATS.checks("int64")
def _int64(v):
    return not isinstance(v, int) or -2**63 <= v < 2**63


K8sValidator = jsonschema.validators.extend(
    jsonschema.Draft4Validator, {"x-kubernetes-list-type": _list_type})


def schema_errors(doc, schema):
    v = K8sValidator(k8s_schema(schema), format_checker=FORMATS)
    for e in sorted(v.iter_errors(doc.obj), key=lambda e: list(map(str, e.absolute_path))):
        where = list(e.absolute_path)
        if e.validator == "additionalProperties" and isinstance(e.instance, dict):
            known = set(e.schema.get("properties", {}))
            for extra in sorted(set(e.instance) - known):
                doc.err(fpath(where + [extra]), "unknown field (the schema has: %s)" %
                        ", ".join(sorted(known)))
        elif e.validator == "required" and isinstance(e.instance, dict):
            for r in e.validator_value:
                if r not in e.instance:
                    doc.err(fpath(where + [r]), "required field missing")
        else:
            doc.err(fpath(where), e.message[:300])


def apply_defaults(inst, schema):
    """The CRD's defaults, filled in as the API server does before CEL."""
    if isinstance(inst, dict) and isinstance(schema, dict):
        for k, ps in schema.get("properties", {}).items():
            if k not in inst and "default" in ps:
                inst[k] = copy.deepcopy(ps["default"])
            if k in inst:
                apply_defaults(inst[k], ps)
    elif isinstance(inst, list) and isinstance(schema, dict) and isinstance(schema.get("items"), dict):
        for x in inst:
            apply_defaults(x, schema["items"])


# ------------------------------------------------------------------ CEL rules, by hand

def _has(o, k):
    return isinstance(o, dict) and k in o


def _path_rule(test):
    return lambda s: (s.get("type") not in ("Exact", "PathPrefix")) or test(str(s.get("value", "")))


def _parent_key(p):
    ns = p.get("namespace", "")
    return (p.get("group"), p.get("kind"), p.get("name"), ns or "")


def _section(p):
    return p.get("sectionName", "") or ""


def _one_prefix_match(rule):
    m = rule.get("matches", [])
    return len(m) == 1 and _has(m[0], "path") and m[0]["path"].get("type") == "PathPrefix"


def _replace_prefix(filters, which):
    return sum(1 for f in filters or [] if _has(f, which) and _has(f[which], "path")
               and f[which]["path"].get("type") == "ReplacePrefixMatch"
               and _has(f[which]["path"], "replacePrefixMatch")) == 1


def _prefix_rule(which, in_backends):
    """The four replacePrefixMatch rules of a rule: when exactly one filter (of
    the rule, or of its backendRefs) rewrites `which` with ReplacePrefixMatch,
    the rule has exactly one match, a PathPrefix."""
    def fn(s):
        if in_backends:
            n = sum(1 for b in s.get("backendRefs", []) if _replace_prefix(b.get("filters"), which))
            return n != 1 or _one_prefix_match(s)
        return not _replace_prefix(s.get("filters"), which) or _one_prefix_match(s)
    return fn


PATH_CHARS = re.compile(r"^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$")

# rule text (whitespace-normalised) -> a function of `self` that is True when the
# rule holds; each is the CEL expression above it, read literally.
CEL_RULES = {
    # InferencePool
    "self.all(p1, self.exists_one(p2, p1.number==p2.number))":
        lambda s: all(sum(1 for q in s if q.get("number") == p.get("number")) == 1 for p in s),
    "self.kind != 'Service' || has(self.port)":
        lambda s: s.get("kind") != "Service" or _has(s, "port"),
    # HTTPRoute spec.parentRefs
    "self.all(p1, self.all(p2, p1.group == p2.group && p1.kind == p2.kind && p1.name == p2.name "
    "&& (((!has(p1.__namespace__) || p1.__namespace__ == '') && (!has(p2.__namespace__) || "
    "p2.__namespace__ == '')) || (has(p1.__namespace__) && has(p2.__namespace__) && "
    "p1.__namespace__ == p2.__namespace__ )) ? ((!has(p1.sectionName) || p1.sectionName == '') "
    "== (!has(p2.sectionName) || p2.sectionName == '')) : true))":
        lambda s: all((_section(a) == "") == (_section(b) == "") for a in s for b in s
                      if _parent_key(a) == _parent_key(b)),
    "self.all(p1, self.exists_one(p2, p1.group == p2.group && p1.kind == p2.kind && p1.name == "
    "p2.name && (((!has(p1.__namespace__) || p1.__namespace__ == '') && (!has(p2.__namespace__) "
    "|| p2.__namespace__ == '')) || (has(p1.__namespace__) && has(p2.__namespace__) && "
    "p1.__namespace__ == p2.__namespace__ )) && (((!has(p1.sectionName) || p1.sectionName == '') "
    "&& (!has(p2.sectionName) || p2.sectionName == '')) || (has(p1.sectionName) && "
    "has(p2.sectionName) && p1.sectionName == p2.sectionName))))":
        lambda s: all(sum(1 for b in s if _parent_key(a) == _parent_key(b)
                          and _section(a) == _section(b)) == 1 for a in s),
    # HTTPRoute spec.rules[]
    "(has(self.backendRefs) && size(self.backendRefs) > 0) ? (!has(self.filters) || "
    "self.filters.all(f, !has(f.requestRedirect))): true":
        lambda s: not s.get("backendRefs") or all(not _has(f, "requestRedirect")
                                                  for f in s.get("filters", [])),
    "(has(self.filters) && self.filters.exists_one(f, has(f.requestRedirect) && "
    "has(f.requestRedirect.path) && f.requestRedirect.path.type == 'ReplacePrefixMatch' && "
    "has(f.requestRedirect.path.replacePrefixMatch))) ? ((size(self.matches) != 1 || "
    "!has(self.matches[0].path) || self.matches[0].path.type != 'PathPrefix') ? false : true) "
    ": true":
        _prefix_rule("requestRedirect", False),
    "(has(self.filters) && self.filters.exists_one(f, has(f.urlRewrite) && has(f.urlRewrite.path) "
    "&& f.urlRewrite.path.type == 'ReplacePrefixMatch' && "
    "has(f.urlRewrite.path.replacePrefixMatch))) ? ((size(self.matches) != 1 || "
    "!has(self.matches[0].path) || self.matches[0].path.type != 'PathPrefix') ? false : true) "
    ": true":
        _prefix_rule("urlRewrite", False),
    "(has(self.backendRefs) && self.backendRefs.exists_one(b, (has(b.filters) && "
    "b.filters.exists_one(f, has(f.requestRedirect) && has(f.requestRedirect.path) && "
    "f.requestRedirect.path.type == 'ReplacePrefixMatch' && "
    "has(f.requestRedirect.path.replacePrefixMatch))) )) ? ((size(self.matches) != 1 || "
    "!has(self.matches[0].path) || self.matches[0].path.type != 'PathPrefix') ? false : true) "
    ": true":
        _prefix_rule("requestRedirect", True),
    "(has(self.backendRefs) && self.backendRefs.exists_one(b, (has(b.filters) && "
    "b.filters.exists_one(f, has(f.urlRewrite) && has(f.urlRewrite.path) && "
    "f.urlRewrite.path.type == 'ReplacePrefixMatch' && "
    "has(f.urlRewrite.path.replacePrefixMatch))) )) ? ((size(self.matches) != 1 || "
    "!has(self.matches[0].path) || self.matches[0].path.type != 'PathPrefix') ? false : true) "
    ": true":
        _prefix_rule("urlRewrite", True),
    # HTTPRoute spec.rules[].backendRefs[]
    "(size(self.group) == 0 && self.kind == 'Service') ? has(self.port) : true":
        lambda s: not (s.get("group", "") == "" and s.get("kind") == "Service") or _has(s, "port"),
    # HTTPRoute spec.rules[].matches[].path
    "(self.type in ['Exact','PathPrefix']) ? self.value.startsWith('/') : true":
        _path_rule(lambda v: v.startswith("/")),
    "self.type in ['Exact','PathPrefix'] || self.type == 'RegularExpression'":
        lambda s: s.get("type") in ("Exact", "PathPrefix", "RegularExpression"),
    "(self.type in ['Exact','PathPrefix']) ? self.value.matches(r\"\"\"^(?:[-A-Za-z0-9/._~!$&'()*+,;"
    "=:@]|[%][0-9a-fA-F]{2})+$\"\"\") : true":
        _path_rule(lambda v: bool(PATH_CHARS.match(v))),
}
# the eight path rules of one shape: "...contains('X')" and "...endsWith('X')"
for _x in ("//", "/./", "/../", "%2f", "%2F", "#"):
    CEL_RULES["(self.type in ['Exact','PathPrefix']) ? !self.value.contains('%s') : true" % _x] = \
        _path_rule(lambda v, x=_x: x not in v)
for _x in ("/..", "/."):
    CEL_RULES["(self.type in ['Exact','PathPrefix']) ? !self.value.endsWith('%s') : true" % _x] = \
        _path_rule(lambda v, x=_x: not v.endswith(x))
CEL_RULES = {" ".join(k.split()): f for k, f in CEL_RULES.items()}


def _total_matches(s):
    return sum(len(r.get("matches", [])) for r in s[:16]) <= 128


def cel_fn(rule):
    r = " ".join(rule.split())
    if r in CEL_RULES:
        return CEL_RULES[r]
    # spec.rules: the sum of self[i].matches.size() for i < 16, at most 128
    if re.fullmatch(r"(\(self\.size\(\) > \d+ \? self\[\d+\]\.matches\.size\(\) : 0\)( \+ )?)+ <= 128",
                    r):
        return _total_matches
    return None


def cel_check(doc, inst, schema, where):
    if isinstance(schema, dict):
        for rule in schema.get("x-kubernetes-validations", []) or []:
            fn = cel_fn(rule["rule"])
            if fn is None:
                doc.err(fpath(where), "the CRD's rule \"%s\" applies here, and this validator "
                        "does not implement it (tests/manifests/validate.py, CEL_RULES)" %
                        rule.get("message", rule["rule"])[:200])
                continue
            try:
                ok = fn(inst)
            except (AttributeError, TypeError, KeyError):
                ok = False
            if not ok:
                doc.err(fpath(where), "%s (the CRD's CEL rule)" % rule.get("message", rule["rule"]))
    if isinstance(inst, dict):
        for k, v in inst.items():
            ps = schema.get("properties", {}).get(k) if isinstance(schema, dict) else None
            if ps is not None:
                cel_check(doc, v, ps, where + [k])
    elif isinstance(inst, list) and isinstance(schema, dict) and isinstance(schema.get("items"), dict):
        for i, x in enumerate(inst):
            cel_check(doc, x, schema["items"], where + [i])


def load_crds(paths):
    crds = {}
    for p in paths:
        with open(p, encoding="utf-8") as f:
            for c in yaml.load_all(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
                if not c or c.get("kind") != "CustomResourceDefinition":
                    continue
                g, kind = c["spec"]["group"], c["spec"]["names"]["kind"]
                for v in c["spec"]["versions"]:
                    if v.get("served"):
                        crds[(g + "/" + v["name"], kind)] = v["schema"]["openAPIV3Schema"]
    return crds


def list_rules(crds):
    """--rules: each CEL rule of the CRDs, checked here or not; an entry of
    CEL_RULES that no CRD has any more is an error (the CRD moved on)."""
    seen, bad = set(), 0

    def walk(s, where, kind):
        if not isinstance(s, dict):
            return
        for r in s.get("x-kubernetes-validations", []) or []:
            text = " ".join(r["rule"].split())
            seen.add(text)
            print("%s %s %s: %s" % ("checked    " if cel_fn(r["rule"]) else "not checked",
                                    kind, where or ".", r.get("message", "")))
        for k, v in (s.get("properties") or {}).items():
            walk(v, where + "." + k, kind)
        if isinstance(s.get("items"), dict):
            walk(s["items"], where + "[]", kind)

    for (av, kind), schema in sorted(crds.items()):
        walk(schema, "", "%s %s" % (av, kind))
    for text in CEL_RULES:
        if text not in seen:
            print("stale: CEL_RULES has a rule no CRD has: %s" % text[:120])
            bad += 1
    return 1 if bad else 0


def check_crd_kind(doc, schema):
    schema_errors(doc, schema)
    inst = copy.deepcopy(doc.obj)
    apply_defaults(inst, schema)
    cel_check(doc, inst, schema, [])
    check_meta(doc, doc.obj.get("metadata"), "subdomain")


# ------------------------------------------------------------------ core kinds, by hand
# field names: kubernetes/api core/v1/types.go and apps/v1/types.go @ 10b39a39

F = {
    "Deployment": ["apiVersion", "kind", "metadata", "spec", "status"],
    "DeploymentSpec": ["replicas", "selector", "template", "strategy", "minReadySeconds",
                       "revisionHistoryLimit", "paused", "progressDeadlineSeconds"],
    "DeploymentStrategy": ["type", "rollingUpdate"],
    "LabelSelector": ["matchLabels", "matchExpressions"],
    "PodTemplateSpec": ["metadata", "spec"],
    "PodSpec": ["volumes", "initContainers", "containers", "ephemeralContainers", "restartPolicy",
                "terminationGracePeriodSeconds", "activeDeadlineSeconds", "dnsPolicy",
                "nodeSelector", "serviceAccountName", "serviceAccount",
                "automountServiceAccountToken", "nodeName", "hostNetwork", "hostPID", "hostIPC",
                "shareProcessNamespace", "securityContext", "imagePullSecrets", "hostname",
                "subdomain", "affinity", "schedulerName", "tolerations", "hostAliases",
                "priorityClassName", "priority", "dnsConfig", "readinessGates",
                "runtimeClassName", "enableServiceLinks", "preemptionPolicy", "overhead",
                "topologySpreadConstraints", "setHostnameAsFQDN", "os", "hostUsers",
                "schedulingGates", "resourceClaims", "resources", "hostnameOverride",
                "schedulingGroup", "evictionResponders"],
    "Container": ["name", "image", "command", "args", "workingDir", "ports", "envFrom", "env",
                  "resources", "resizePolicy", "restartPolicy", "restartPolicyRules",
                  "volumeMounts", "volumeDevices", "livenessProbe", "readinessProbe",
                  "startupProbe", "lifecycle", "terminationMessagePath",
                  "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin",
                  "stdinOnce", "tty"],
    "ContainerPort": ["name", "hostPort", "containerPort", "protocol", "hostIP"],
    "Probe": ["exec", "httpGet", "tcpSocket", "grpc", "initialDelaySeconds", "timeoutSeconds",
              "periodSeconds", "successThreshold", "failureThreshold",
              "terminationGracePeriodSeconds"],
    "HTTPGetAction": ["path", "port", "host", "scheme", "httpHeaders", "protocol"],
    "GRPCAction": ["port", "service", "mode"],
    "TCPSocketAction": ["port", "host"],
    "EnvVar": ["name", "value", "valueFrom"],
    "EnvVarSource": ["fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef",
                     "fileKeyRef"],
    "VolumeMount": ["name", "readOnly", "recursiveReadOnly", "mountPath", "subPath",
                    "mountPropagation", "subPathExpr", "bindMountOptions"],
    "VolumeSource": ["hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore",
                     "gitRepo", "secret", "nfs", "iscsi", "glusterfs", "persistentVolumeClaim",
                     "rbd", "flexVolume", "cinder", "cephfs", "flocker", "downwardAPI", "fc",
                     "azureFile", "configMap", "vsphereVolume", "quobyte", "azureDisk",
                     "photonPersistentDisk", "projected", "portworxVolume", "scaleIO",
                     "storageos", "csi", "ephemeral", "image"],
    "ConfigMapVolumeSource": ["name", "items", "defaultMode", "optional", "defaultUser"],
    "EmptyDirVolumeSource": ["medium", "sizeLimit", "mode"],
    "ResourceRequirements": ["limits", "requests", "claims"],
    "SecurityContext": ["capabilities", "privileged", "seLinuxOptions", "windowsOptions",
                        "runAsUser", "runAsGroup", "runAsNonRoot", "readOnlyRootFilesystem",
                        "allowPrivilegeEscalation", "procMount", "seccompProfile",
                        "appArmorProfile"],
    "Service": ["apiVersion", "kind", "metadata", "spec", "status"],
    "ServiceSpec": ["ports", "selector", "clusterIP", "clusterIPs", "type", "externalIPs",
                    "sessionAffinity", "loadBalancerIP", "loadBalancerSourceRanges",
                    "externalName", "externalTrafficPolicy", "healthCheckNodePort",
                    "publishNotReadyAddresses", "sessionAffinityConfig", "ipFamilies",
                    "ipFamilyPolicy", "allocateLoadBalancerNodePorts", "loadBalancerClass",
                    "internalTrafficPolicy", "trafficDistribution"],
    "ServicePort": ["name", "protocol", "appProtocol", "port", "targetPort", "nodePort"],
    "ConfigMap": ["apiVersion", "kind", "metadata", "immutable", "data", "binaryData"],
}


def fields(doc, field, obj, typ, required=()):
    """obj is a mapping of type typ: no unknown field, the required ones there."""
    if not isinstance(obj, dict):
        doc.err(field, "wanted a mapping (%s)" % typ)
        return False
    for k in obj:
        if k not in F[typ]:
            doc.err("%s.%s" % (field, k) if field else k, "unknown field (%s has no %r)" % (typ, k))
    for r in required:
        if r not in obj:
            doc.err("%s.%s" % (field, r) if field else r, "required field missing")
    return True


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_port_num(doc, field, v):
    if not is_int(v) or not 1 <= v <= 65535:
        doc.err(field, "%r is not a port number (an integer 1..65535)" % (v,))


def check_port_name(doc, field, v):
    if not isinstance(v, str) or len(v) > 15 or not IANA_SVC.match(v) or "--" in v \
            or not re.search("[a-z]", v):
        doc.err(field, "%r is not an IANA service name (lower case, digits, '-', at most 15, "
                "a letter)" % (v,))


def selector_matches(sel, labels):
    if not isinstance(sel, dict) or not isinstance(labels, dict):
        return False
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or []:
        op, k, vals = e.get("operator"), e.get("key"), e.get("values") or []
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and labels.get(k) in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


def str_list(doc, field, v):
    if v is None:
        return
    if not isinstance(v, list):
        return doc.err(field, "wanted a list of strings")
    for i, x in enumerate(v):
        if not isinstance(x, str):
            doc.err("%s[%d]" % (field, i), "%r is not a string (Kubernetes takes strings only: "
                    "quote it)" % (x,))


def check_probe(doc, field, p, port_names):
    if not fields(doc, field, p, "Probe"):
        return
    hs = [h for h in ("exec", "httpGet", "tcpSocket", "grpc") if h in p]
    if len(hs) != 1:
        return doc.err(field, "wants exactly one of exec, httpGet, tcpSocket, grpc (has %d)" %
                       len(hs))
    h = hs[0]
    typ = {"httpGet": "HTTPGetAction", "grpc": "GRPCAction", "tcpSocket": "TCPSocketAction"}.get(h)
    if typ is None:
        return
    if not fields(doc, "%s.%s" % (field, h), p[h], typ, ("port",)):
        return
    port = p[h].get("port")
    if h == "grpc":
        check_port_num(doc, "%s.grpc.port" % field, port)
    elif isinstance(port, str):
        if port not in port_names:
            doc.err("%s.%s.port" % (field, h), "names no port of the container (%s)" %
                    ", ".join(sorted(port_names)) or "none")
    elif port is not None:
        check_port_num(doc, "%s.%s.port" % (field, h), port)
    if h == "httpGet" and "path" in p[h] and not str(p[h]["path"]).startswith("/"):
        doc.err("%s.httpGet.path" % field, "must start with '/'")
    for k in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold",
              "failureThreshold"):
        if k in p and (not is_int(p[k]) or p[k] < 0):
            doc.err("%s.%s" % (field, k), "wanted an integer >= 0")


def check_container(doc, field, c, volumes, pod_port_names):
    if not fields(doc, field, c, "Container", ("name", "image")):
        return
    check_dns(doc, field + ".name", c.get("name"), "label")
    if "image" in c and (not isinstance(c["image"], str) or not c["image"].strip()):
        doc.err(field + ".image", "wanted a non-empty string")
    str_list(doc, field + ".command", c.get("command"))
    str_list(doc, field + ".args", c.get("args"))
    names, seen = set(), set()
    for i, p in enumerate(c.get("ports") or []):
        pf = "%s.ports[%d]" % (field, i)
        if not fields(doc, pf, p, "ContainerPort", ("containerPort",)):
            continue
        check_port_num(doc, pf + ".containerPort", p.get("containerPort"))
        proto = p.get("protocol", "TCP")
        if proto not in ("TCP", "UDP", "SCTP"):
            doc.err(pf + ".protocol", "%r is not TCP, UDP or SCTP" % (proto,))
        if (p.get("containerPort"), proto) in seen:
            doc.err(pf, "port %s/%s given twice" % (p.get("containerPort"), proto))
        seen.add((p.get("containerPort"), proto))
        if "name" in p:
            check_port_name(doc, pf + ".name", p["name"])
            if p["name"] in pod_port_names:
                doc.err(pf + ".name", "%r names another port of the pod too" % p["name"])
            pod_port_names.add(p["name"])
            names.add(p["name"])
    for i, e in enumerate(c.get("env") or []):
        ef = "%s.env[%d]" % (field, i)
        if not fields(doc, ef, e, "EnvVar", ("name",)):
            continue
        if "value" in e and not isinstance(e["value"], str):
            doc.err(ef + ".value", "%r is not a string (quote it)" % (e["value"],))
        if "valueFrom" in e:
            fields(doc, ef + ".valueFrom", e["valueFrom"], "EnvVarSource")
    for k in ("livenessProbe", "readinessProbe", "startupProbe"):
        if k in c:
            check_probe(doc, "%s.%s" % (field, k), c[k], names)
    for i, m in enumerate(c.get("volumeMounts") or []):
        mf = "%s.volumeMounts[%d]" % (field, i)
        if not fields(doc, mf, m, "VolumeMount", ("name", "mountPath")):
            continue
        if m.get("name") not in volumes:
            doc.err(mf + ".name", "%r is no volume of the pod" % (m.get("name"),))
        if not str(m.get("mountPath", "")).startswith("/"):
            doc.err(mf + ".mountPath", "must be an absolute path")
    if "securityContext" in c:
        fields(doc, field + ".securityContext", c["securityContext"], "SecurityContext")
    res = c.get("resources")
    if res is not None and fields(doc, field + ".resources", res, "ResourceRequirements"):
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        for k, v in list(req.items()) + list(lim.items()):
            if not isinstance(v, (str, int)) or isinstance(v, bool):
                doc.err("%s.resources.%s" % (field, k), "%r is not a quantity" % (v,))
        for k in req:
            if "/" in k and not k.startswith("kubernetes.io/") and str(req[k]) != str(lim.get(k)):
                doc.err("%s.resources.requests.%s" % (field, k), "an extended resource must be "
                        "requested as limited (limits.%s)" % k)


def check_deployment(doc):
    o = doc.obj
    fields(doc, "", o, "Deployment", ("metadata", "spec"))
    check_meta(doc, o.get("metadata"), "subdomain")
    spec = o.get("spec")
    if not fields(doc, "spec", spec, "DeploymentSpec", ("selector", "template")):
        return
    if "replicas" in spec and (not is_int(spec["replicas"]) or spec["replicas"] < 0):
        doc.err("spec.replicas", "wanted an integer >= 0")
    if "strategy" in spec and fields(doc, "spec.strategy", spec["strategy"], "DeploymentStrategy"):
        if spec["strategy"].get("type", "RollingUpdate") not in ("RollingUpdate", "Recreate"):
            doc.err("spec.strategy.type", "neither RollingUpdate nor Recreate")
    sel, tpl = spec.get("selector"), spec.get("template")
    if not fields(doc, "spec.template", tpl, "PodTemplateSpec", ("metadata", "spec")):
        return
    labels = (tpl.get("metadata") or {}).get("labels") or {}
    if tpl.get("metadata") is not None:
        check_label_map(doc, "spec.template.metadata.labels", labels)
    if fields(doc, "spec.selector", sel, "LabelSelector"):
        if not sel.get("matchLabels") and not sel.get("matchExpressions"):
            doc.err("spec.selector", "empty: it would select every pod")
        elif not selector_matches(sel, labels):
            doc.err("spec.selector", "does not match spec.template.metadata.labels (the API "
                    "server refuses the Deployment)")
    pod = tpl.get("spec")
    if not fields(doc, "spec.template.spec", pod, "PodSpec", ("containers",)):
        return
    volumes = set()
    for i, v in enumerate(pod.get("volumes") or []):
        vf = "spec.template.spec.volumes[%d]" % i
        if not isinstance(v, dict) or "name" not in v:
            doc.err(vf + ".name", "required field missing")
            continue
        check_dns(doc, vf + ".name", v["name"], "label")
        if v["name"] in volumes:
            doc.err(vf + ".name", "%r given twice" % v["name"])
        volumes.add(v["name"])
        srcs = [k for k in v if k != "name"]
        for k in srcs:
            if k not in F["VolumeSource"]:
                doc.err("%s.%s" % (vf, k), "unknown field (a Volume has no %r)" % k)
        if len(srcs) != 1:
            doc.err(vf, "wants exactly one volume source (has %d)" % len(srcs))
        if "configMap" in v:
            fields(doc, vf + ".configMap", v["configMap"], "ConfigMapVolumeSource", ("name",))
        if "emptyDir" in v:
            fields(doc, vf + ".emptyDir", v["emptyDir"] or {}, "EmptyDirVolumeSource")
    cs = pod.get("containers")
    if not isinstance(cs, list) or not cs:
        return doc.err("spec.template.spec.containers", "wanted a non-empty list")
    port_names, cnames = set(), set()
    for key in ("initContainers", "containers"):
        for i, c in enumerate(pod.get(key) or []):
            check_container(doc, "spec.template.spec.%s[%d]" % (key, i), c, volumes, port_names)
            if isinstance(c, dict):
                if c.get("name") in cnames:
                    doc.err("spec.template.spec.%s[%d].name" % (key, i), "%r given twice" %
                            c.get("name"))
                cnames.add(c.get("name"))


def check_service(doc):
    o = doc.obj
    fields(doc, "", o, "Service", ("metadata", "spec"))
    check_meta(doc, o.get("metadata"), "1035")
    spec = o.get("spec")
    if not fields(doc, "spec", spec, "ServiceSpec"):
        return
    if spec.get("type", "ClusterIP") not in ("ClusterIP", "NodePort", "LoadBalancer",
                                             "ExternalName"):
        doc.err("spec.type", "%r is not a Service type" % (spec.get("type"),))
    if "selector" in spec:
        check_label_map(doc, "spec.selector", spec["selector"])
    ports = spec.get("ports")
    if spec.get("type") != "ExternalName" and (not isinstance(ports, list) or not ports):
        return doc.err("spec.ports", "wanted a non-empty list")
    names = set()
    for i, p in enumerate(ports or []):
        pf = "spec.ports[%d]" % i
        if not fields(doc, pf, p, "ServicePort", ("port",)):
            continue
        check_port_num(doc, pf + ".port", p.get("port"))
        tp = p.get("targetPort")
        if isinstance(tp, str):
            check_port_name(doc, pf + ".targetPort", tp)
        elif tp is not None:
            check_port_num(doc, pf + ".targetPort", tp)
        if p.get("protocol", "TCP") not in ("TCP", "UDP", "SCTP"):
            doc.err(pf + ".protocol", "%r is not TCP, UDP or SCTP" % (p.get("protocol"),))
        if len(ports) > 1 and "name" not in p:
            doc.err(pf + ".name", "required when a Service has more than one port")
        if "name" in p:
            check_port_name(doc, pf + ".name", p["name"])
            if p["name"] in names:
                doc.err(pf + ".name", "%r given twice" % p["name"])
            names.add(p["name"])


def check_configmap(doc):
    o = doc.obj
    fields(doc, "", o, "ConfigMap", ("metadata",))
    check_meta(doc, o.get("metadata"), "subdomain")
    size = 0
    for part in ("data", "binaryData"):
        m = o.get(part)
        if m is None:
            continue
        if not isinstance(m, dict):
            doc.err(part, "wanted a map")
            continue
        for k, v in m.items():
            if not isinstance(k, str) or len(k) > 253 or not CONFIG_KEY.match(k):
                doc.err("%s.%s" % (part, k), "not a ConfigMap key ([-._a-zA-Z0-9]+)")
            if not isinstance(v, str):
                doc.err("%s.%s" % (part, k), "%r is not a string (quote it)" % (v,))
            else:
                size += len(v.encode())
    if size > 1 << 20:
        doc.err("data", "%d bytes: a ConfigMap holds at most 1 MiB" % size)


CORE = {("apps/v1", "Deployment"): check_deployment, ("v1", "Service"): check_service,
        ("v1", "ConfigMap"): check_configmap}

# ------------------------------------------------------------------ eldr's rules


def eldrd_longopts(path):
    """eldrd's long option names, from the getopt_long table of opts.c."""
    with open(path, encoding="utf-8") as f:
        src = f.read()
    m = re.search(r"struct option longopts\[\] = \{(.*?)\n\s*\};", src, re.S)
    if not m:
        raise SystemExit("validate.py: %s: no 'struct option longopts[]' table" % path)
    names = re.findall(r'\{"([a-z0-9-]+)",\s*(no_argument|required_argument)', m.group(1))
    return {n: a == "required_argument" for n, a in names}


def containers(o):
    pod = (((o.get("spec") or {}).get("template") or {}).get("spec") or {})
    out = []
    for key in ("initContainers", "containers"):
        for i, c in enumerate(pod.get(key) or []):
            if isinstance(c, dict):
                out.append(("spec.template.spec.%s[%d]" % (key, i), c))
    return out


def argv(c):
    a = [x for x in (c.get("command") or []) + (c.get("args") or []) if isinstance(x, str)]
    return a


def parse_eldrd(doc, field, c, opts):
    """eldrd's arguments as a dict of --name -> value (True for a switch)."""
    args = argv(c)
    if not args or os.path.basename(args[0]) != "eldrd":
        return None
    got, i = {}, 1
    while i < len(args):
        a = args[i]
        if a in ("-m",):
            got["--model"] = args[i + 1] if i + 1 < len(args) else None
            i += 2
            continue
        if not a.startswith("--"):
            doc.err(field + ".args", "%r: eldrd takes no operand" % a)
            i += 1
            continue
        name, eq, val = a[2:].partition("=")
        if opts is not None and name not in opts:
            doc.err(field + ".args", "%r is not an option of eldrd (src/router/base/opts.c)" %
                    ("--" + name))
            i += 1
            continue
        if opts is not None:
            takes = opts[name]
        else:  # no table: a value is whatever follows that is not an option
            takes = i + 1 < len(args) and not args[i + 1].startswith("-")
        if takes and not eq:
            val = args[i + 1] if i + 1 < len(args) else None
            if val is None:
                doc.err(field + ".args", "--%s wants a value" % name)
            i += 1
        got["--" + name] = val if (eq or takes) else True
        i += 1
    for need in ("--ext-proc", "--endpoints"):
        if need not in got:
            doc.err(field + ".args", "eldrd as an endpoint picker needs %s" % need)
    if "--model" not in got and "--state-dir" not in got:
        doc.err(field + ".args", "eldrd needs -m MODEL (or --state-dir)")
    return got


def role_of(o):
    tpl = ((o.get("spec") or {}).get("template") or {}).get("metadata") or {}
    return (tpl.get("labels") or {}).get("llm-d.ai/role")


def check_vllm(doc, field, c, role):
    args = argv(c)
    if "vllm" not in [os.path.basename(a) for a in args[:1]] or "serve" not in args[:2]:
        return
    kv = None
    for i, a in enumerate(args):
        if a == "--kv-transfer-config" and i + 1 < len(args):
            kv = args[i + 1]
        elif a.startswith("--kv-transfer-config="):
            kv = a.partition("=")[2]
    if kv is None:
        doc.err(field + ".args", "vLLM without --kv-transfer-config: no P/D KV transfer")
    else:
        try:
            j = json.loads(kv)
        except ValueError as e:
            j = None
            doc.err(field + ".args", "--kv-transfer-config is not JSON (%s)" % e)
        if isinstance(j, dict):
            if j.get("kv_connector") != "NixlConnector":
                doc.err(field + ".args", "--kv-transfer-config kv_connector %r: the "
                        "coordinator's kv-nixl path needs NixlConnector, whose "
                        "kv_transfer_params reach the decode call" % (j.get("kv_connector"),))
            if j.get("kv_role") not in ("kv_both", "kv_producer", "kv_consumer"):
                doc.err(field + ".args", "--kv-transfer-config kv_role %r is not one of vLLM's "
                        "kv_both, kv_producer, kv_consumer" % (j.get("kv_role"),))
    if "--enable-return-routed-experts" in args and kv is not None:
        image = str(c.get("image", ""))
        tag = image.rpartition("/")[2].partition("@")[0].partition(":")[2]
        if "@" not in image and tag in ("", "latest"):
            doc.err(field + ".image", "%r: pin the vLLM version; 0.22 refuses "
                    "--enable-return-routed-experts beside a KV connector (docs/eldrd.md)" % image)
        elif re.match(r"v?0\.22(\.|$)", tag):
            doc.err(field + ".image", "%r: vLLM 0.22 refuses --enable-return-routed-experts "
                    "beside a KV connector (vllm/config/vllm.py, docs/eldrd.md)" % image)
    if role == "prefill" and "--enable-return-routed-experts" not in args:
        doc.err(field + ".args", "a prefill engine without --enable-return-routed-experts: "
                "its answers carry no routed experts, and eldrd picks decode by load alone")


def vllm_block_size(c):
    """A vLLM container's --block-size as a string ("16", vLLM's default on
    GPUs, docs/eldrd.md), or None for a container that is not vLLM."""
    args = argv(c)
    if not args or os.path.basename(args[0]) != "vllm" or "serve" not in args[:2]:
        return None
    for i, a in enumerate(args):
        if a == "--block-size" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--block-size="):
            return a.partition("=")[2]
    return "16"


def check_coordinator_cm(doc):
    for k, v in (doc.obj.get("data") or {}).items():
        if k != "coordinator.yaml" or not isinstance(v, str):
            continue
        try:
            cfg = yaml.safe_load(v)
        except yaml.YAMLError as e:
            doc.err("data.coordinator.yaml", "not YAML: %s" % e)
            continue
        kv = ((cfg or {}).get("pipeline") or {}).get("kv_connector", "kv-shared-storage")
        if kv != "kv-nixl":
            doc.err("data.coordinator.yaml.pipeline.kv_connector", "%r: the prefill's "
                    "kv_transfer_params reach the decode call only with kv-nixl "
                    "(llm-d-router pkg/coordinator/connectors/kv/nixl.go)" % kv)


def eldr_rules(doc, opts):
    o = doc.obj
    if o.get("kind") == "Deployment":
        for field, c in containers(o):
            parse_eldrd(doc, field, c, opts)
            check_vllm(doc, field, c, role_of(o))
    if o.get("kind") == "ConfigMap":
        check_coordinator_cm(doc)


# ------------------------------------------------------------------ the set


# llm-d's roles (llm-d/llm-d-router pkg/epp/framework/plugins/scheduling/filter/
# bylabel/roles.go @ ebab6879): the values each of its filters takes; its decode
# filter also takes an endpoint without the label.
ROLE_TAKES = {"decode": {"decode", "prefill-decode", "both", "encode-prefill-decode", None},
              "prefill": {"prefill", "encode-prefill", "prefill-decode", "both",
                          "encode-prefill-decode"}}
ROLES = {"encode"} | (ROLE_TAKES["decode"] | ROLE_TAKES["prefill"]) - {None}


def ep_role(e):
    """An endpoint's role label: llm-d's key llm-d.ai/role, else role."""
    labels = e.get("labels") or {}
    return labels.get("llm-d.ai/role", labels.get("role"))


def endpoints_file(doc, field, text):
    """llm-d's file-discovery format (docs/endpoints.md): the entries, or None."""
    try:
        j = yaml.load(text, Loader=DupKeyLoader)
    except yaml.YAMLError as e:
        doc.err(field, "not YAML: %s" % e)
        return None
    eps = (j or {}).get("endpoints") if isinstance(j, dict) else None
    if not isinstance(eps, list) or not eps:
        doc.err(field, "no endpoints (a list under 'endpoints')")
        return None
    for i, e in enumerate(eps):
        ef = "%s: endpoints[%d]" % (field, i)
        if not isinstance(e, dict):
            doc.err(ef, "wanted a mapping")
            continue
        if not isinstance(e.get("name"), str) or not e["name"]:
            doc.err(ef + ".name", "required (a string)")
        try:
            if not isinstance(e.get("address"), str):
                raise ValueError
            ipaddress.IPv4Address(e["address"])
        except ValueError:
            doc.err(ef + ".address", "%r is not an IPv4 address string" % (e.get("address"),))
        p = e.get("port")
        if not isinstance(p, str) or not p.strip().lstrip("+").isdigit() \
                or not 1 <= int(p) <= 65535:
            doc.err(ef + ".port", "%r is not a port string (llm-d reads strings only: "
                    "\"8000\")" % (p,))
        for k, v in (e.get("labels") or {}).items():
            if not isinstance(v, str):
                doc.err("%s.labels.%s" % (ef, k), "%r is not a string" % (v,))
        if ep_role(e) is not None and ep_role(e) not in ROLES:
            doc.err(ef + ".labels.role", "%r is not one of llm-d's roles (%s)" %
                    (ep_role(e), ", ".join(sorted(ROLES))))
    return eps


def check_set(docs):
    by = {}
    for d in docs:
        if isinstance(d.obj, dict):
            by.setdefault(d.obj.get("kind"), []).append(d)

    def name(d):
        return ((d.obj.get("metadata") or {}).get("name"))

    svcs = {name(d): d for d in by.get("Service", [])}
    pools = {name(d): d for d in by.get("InferencePool", [])}
    cms = {name(d): d for d in by.get("ConfigMap", [])}
    deps = by.get("Deployment", [])

    def pod_labels(d):
        return ((d.obj["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}

    def pod_ports(d):
        out = {}
        for _, c in containers(d.obj):
            for p in c.get("ports") or []:
                out[p.get("containerPort")] = p.get("name")
                if p.get("name"):
                    out[p["name"]] = p.get("containerPort")
        return out

    def selected(sel):
        return [d for d in deps if selector_matches(sel, pod_labels(d))]

    for d in by.get("Service", []):
        sel = (d.obj.get("spec") or {}).get("selector")
        if not sel:
            continue
        ds = selected({"matchLabels": sel})
        if not ds:
            d.err("spec.selector", "selects no Deployment of the set")
        for i, p in enumerate((d.obj.get("spec") or {}).get("ports") or []):
            tp = p.get("targetPort", p.get("port"))
            for dep in ds:
                if tp not in pod_ports(dep):
                    d.err("spec.ports[%d].targetPort" % i, "%r is no port of %s's pods" %
                          (tp, name(dep)))
    for d in pools.values():
        spec = d.obj.get("spec") or {}
        epp = spec.get("endpointPickerRef") or {}
        if epp and epp.get("kind", "Service") == "Service" and not epp.get("group"):
            s = svcs.get(epp.get("name"))
            num = (epp.get("port") or {}).get("number")
            if s is None:
                d.err("spec.endpointPickerRef.name", "%r is no Service of the set" %
                      (epp.get("name"),))
            elif num not in [p.get("port") for p in s.obj["spec"].get("ports") or []]:
                d.err("spec.endpointPickerRef.port.number", "%r is no port of Service %s" %
                      (num, epp.get("name")))
        ds = selected(spec.get("selector") or {})
        if not ds:
            d.err("spec.selector", "selects no Deployment's pods in the set")
        for dep in ds:
            for i, tp in enumerate(spec.get("targetPorts") or []):
                if tp.get("number") not in pod_ports(dep):
                    d.err("spec.targetPorts[%d].number" % i, "%r is no container port of %s" %
                          (tp.get("number"), name(dep)))
    for d in by.get("HTTPRoute", []):
        profile_of = {}
        for i, r in enumerate((d.obj.get("spec") or {}).get("rules") or []):
            for j, b in enumerate(r.get("backendRefs") or []):
                bf = "spec.rules[%d].backendRefs[%d]" % (i, j)
                if b.get("kind") == "InferencePool":
                    if b.get("name") not in pools:
                        d.err(bf + ".name", "%r is no InferencePool of the set" % (b.get("name"),))
                    profs = set()
                    for m in r.get("matches") or [{}]:
                        hv = [h.get("value") for h in m.get("headers") or []
                              if str(h.get("name", "")).lower() == "epp-profile"
                              and h.get("type", "Exact") == "Exact"]
                        profs.add(hv[0] if hv else None)
                    profile_of.setdefault(b.get("name"), set()).update(profs)
                elif b.get("kind", "Service") == "Service" and not b.get("group"):
                    s = svcs.get(b.get("name"))
                    if s is None:
                        d.err(bf + ".name", "%r is no Service of the set" % (b.get("name"),))
                    elif b.get("port") not in [p.get("port") for p in s.obj["spec"]["ports"]]:
                        d.err(bf + ".port", "%r is no port of Service %s" % (b.get("port"),
                                                                          b.get("name")))
        if len(profile_of) > 1:
            owner = {}
            for pool, profs in sorted(profile_of.items()):
                if None in profs:
                    d.err("spec.rules", "several pools, and a rule to %s matches no EPP-Profile "
                          "header: the coordinator's phases cannot be told apart" % pool)
                for p in profs - {None}:
                    if p in owner:
                        d.err("spec.rules", "EPP-Profile %r goes to %s and to %s" %
                              (p, owner[p], pool))
                    owner[p] = pool
    # volumes naming ConfigMaps; eldrd's endpoints file
    for d in deps:
        pod = d.obj["spec"]["template"]["spec"]
        vols = {v.get("name"): v for v in pod.get("volumes") or [] if isinstance(v, dict)}
        for v in vols.values():
            cm = (v.get("configMap") or {}).get("name")
            if cm and cm not in cms:
                d.notes.append("external ConfigMap %s (create it yourself)" % cm)
        for field, c in containers(d.obj):
            a = parse_eldrd(Doc(d.path, d.line, d.obj), field, c, None) or {}
            path = a.get("--endpoints")
            if not isinstance(path, str):
                continue
            xp = str(a.get("--ext-proc", "")).rpartition(":")[2]
            if not xp.isdigit() or int(xp) not in pod_ports(d):
                d.err(field + ".ports", "no containerPort for --ext-proc %s" % a.get("--ext-proc"))
            mount = [m for m in c.get("volumeMounts") or []
                     if path.startswith(str(m.get("mountPath", "")).rstrip("/") + "/")]
            cmname = ((vols.get(mount[0].get("name")) or {}).get("configMap") or {}).get("name") \
                if mount else None
            if cmname is None:
                d.err(field + ".args", "--endpoints %s is on no ConfigMap volume" % path)
                continue
            if cmname not in cms:
                continue
            key = path[len(str(mount[0]["mountPath"]).rstrip("/")) + 1:]
            cmd = cms[cmname]
            text = (cmd.obj.get("data") or {}).get(key)
            if text is None:
                cmd.err("data.%s" % key, "eldrd's --endpoints %s reads this key; it is missing" %
                        path)
                continue
            eps = endpoints_file(cmd, "data.%s" % key, text) or []
            pf = [x for x in str(a.get("--prefill-workers", "")).split(",") if x]
            for role in ("prefill", "decode"):
                mine = [e for e in eps if isinstance(e, dict) and ep_role(e) in ROLE_TAKES[role]]
                rp = [p for p in pools.values() if (((p.obj.get("spec") or {}).get("selector")
                                                     or {}).get("matchLabels") or {})
                      .get("llm-d.ai/role") == role]
                for p in rp:
                    for dep in selected(p.obj["spec"].get("selector") or {}):
                        n = dep.obj["spec"].get("replicas", 1)
                        if len(mine) != n:
                            cmd.err("data.%s" % key, "%d role: %s endpoints for the %d pods of "
                                    "%s" % (len(mine), role, n, name(dep)))
                    ports = {str(t.get("number")) for t in p.obj["spec"].get("targetPorts") or []}
                    for e in mine:
                        if str(e.get("port")).lstrip("+0") not in ports:
                            cmd.err("data.%s" % key, "endpoint %s: port %s is not a target port "
                                    "of pool %s" % (e.get("name"), e.get("port"), name(p)))
                if role == "prefill":
                    bs = str(a.get("--block-size", "16"))
                    for p in rp:
                        for dep in selected(p.obj["spec"].get("selector") or {}):
                            for cf, vc in containers(dep.obj):
                                vb = vllm_block_size(vc)
                                if vb is not None and vb != bs:
                                    d.err(field + ".args", "--block-size %s, and %s's vLLM "
                                          "--block-size %s: the signature cache would key "
                                          "other blocks than the engine's" % (bs, name(dep), vb))
                if role == "prefill" and sorted(e.get("name") for e in mine) != sorted(pf):
                    cmd.err("data.%s" % key, "role: prefill endpoints %s, eldrd's "
                            "--prefill-workers %s" % (",".join(sorted(str(e.get("name"))
                                                                      for e in mine)),
                                                      ",".join(pf) or "(none)"))


# ------------------------------------------------------------------ main


def main(argv_):
    crd_paths, files, opts_path, as_set = [], [], None, False
    i = 0
    while i < len(argv_):
        a = argv_[i]
        if a in ("--crd", "--eldrd-opts") and i + 1 < len(argv_):
            if a == "--crd":
                crd_paths.append(argv_[i + 1])
            else:
                opts_path = argv_[i + 1]
            i += 2
            continue
        if a == "--set":
            as_set = True
        elif a == "--rules":
            files.append(None)
        elif a.startswith("-"):
            print("validate.py: unknown option %r (see the file's header)" % a, file=sys.stderr)
            return 2
        else:
            files.append(a)
        i += 1
    if not crd_paths or not files:
        print("usage: validate.py --crd FILE [--crd FILE ...] [--eldrd-opts opts.c] [--set] "
              "FILE ...", file=sys.stderr)
        return 2
    if None in files:
        try:
            return list_rules(load_crds(crd_paths))
        except (OSError, yaml.YAMLError) as e:
            print("validate.py: %s" % e, file=sys.stderr)
            return 2
    try:
        crds = load_crds(crd_paths)
        opts = eldrd_longopts(opts_path) if opts_path else None
        docs = [d for f in files for d in load_file(f)]
    except (OSError, yaml.YAMLError) as e:
        print("validate.py: %s" % e, file=sys.stderr)
        return 2
    crd_kinds = {k for _, k in crds}
    for d in docs:
        o = d.obj
        if d.errors:
            continue
        if not isinstance(o, dict):
            d.err("", "not a mapping")
            continue
        av, kind = o.get("apiVersion"), o.get("kind")
        if (av, kind) in crds:
            check_crd_kind(d, crds[(av, kind)])
        elif (av, kind) in CORE:
            CORE[(av, kind)](d)
        elif kind in crd_kinds:
            d.err("apiVersion", "%r: the CRD serves %s only" %
                  (av, ", ".join(sorted(v for v, k in crds if k == kind))))
        else:
            d.err("kind", "%s %s: no schema here (this validator knows %s)" %
                  (av, kind, ", ".join(sorted(crd_kinds | {k for _, k in CORE}))))
        if isinstance(o, dict):
            try:
                eldr_rules(d, opts)
            except (AttributeError, TypeError):
                pass  # a shape the checks above have already refused
    if as_set and not any(d.errors for d in docs):
        check_set(docs)
    bad = 0
    for d in docs:
        where = "%s:%d: %s" % (d.path, d.line, d.label())
        for e in d.errors:
            print("%s: %s" % (where, e))
        if d.errors:
            bad += 1
        else:
            print("%s: ok%s" % (where, "".join("; " + n for n in d.notes)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
