'use strict';
// Loads Envoy's own ext_proc protos from the tree that @grpc/grpc-js-xds
// ships (deps/envoy-api, deps/xds, deps/protoc-gen-validate, deps/googleapis)
// and grpc.health.v1 from ./health.proto.
//
// The copy of Envoy's API in @grpc/grpc-js-xds 1.14.1 predates Envoy's
// FULL_DUPLEX_STREAMED mode. Two files of that tree are therefore copied,
// at load time, into a temporary include directory placed before the
// package's tree, and the missing declarations are added there exactly as
// Envoy's current files have them (same names, same field numbers):
//
//   envoy/service/ext_proc/v3/external_processor.proto, from envoyproxy/envoy
//     commit 0015fbd525e874e8afcb9193c6fca2e06f0038e3:
//       message ProtocolConfiguration { request_body_mode = 1;
//         response_body_mode = 2; send_body_without_waiting_for_header_response = 3; }
//       ProcessingRequest.protocol_config = 11
//       message StreamedBodyResponse { bytes body = 1; bool end_of_stream = 2; }
//       BodyMutation.streamed_response = 3 (in oneof mutation)
//   envoy/extensions/filters/http/ext_proc/v3/processing_mode.proto, from
//     envoyproxy/envoy commit 0628e04994ad44a84eed54fe7e06a1a904c3e0ae:
//       ProcessingMode.BodySendMode.FULL_DUPLEX_STREAMED = 4
//
// Each addition is skipped if the package's copy already has it, and the
// load fails loudly if an anchor the patch relies on is missing. Nothing
// else is written by us; every other file comes from the package.
const fs = require('fs');
const os = require('os');
const path = require('path');
const protoLoader = require('@grpc/proto-loader');
const grpc = require('@grpc/grpc-js');

const ENVOY_COMMIT_EXT_PROC = '0015fbd525e874e8afcb9193c6fca2e06f0038e3';
const ENVOY_COMMIT_PROCESSING_MODE = '0628e04994ad44a84eed54fe7e06a1a904c3e0ae';

const XDS_DEPS = path.join(path.dirname(require.resolve('@grpc/grpc-js-xds/package.json')), 'deps');
const INCLUDE = ['envoy-api', 'xds', 'protoc-gen-validate', 'googleapis'].map((d) => path.join(XDS_DEPS, d));

const EXT_PROC = 'envoy/service/ext_proc/v3/external_processor.proto';
const PMODE = 'envoy/extensions/filters/http/ext_proc/v3/processing_mode.proto';

function insertAfter(text, anchor, addition, what) {
  const i = text.indexOf(anchor);
  if (i < 0) throw new Error(`protos.js: cannot patch ${what}: anchor not found: ${JSON.stringify(anchor)}`);
  return text.slice(0, i + anchor.length) + addition + text.slice(i + anchor.length);
}

function patchExtProc(src) {
  let t = src;
  const added = [];
  if (!/protocol_config\s*=\s*11\s*;/.test(t)) {
    t = insertAfter(t, 'bool observability_mode = 10;',
      '\n\n  // Added by eldr tests/gateway/protos.js from envoyproxy/envoy ' + ENVOY_COMMIT_EXT_PROC + '.\n' +
      '  // Specify the filter protocol configurations to be sent to the server.\n' +
      '  // ``protocol_config`` is only encoded in the first ``ProcessingRequest`` message from the client to the server.\n' +
      '  ProtocolConfiguration protocol_config = 11;', 'ProcessingRequest.protocol_config');
    t += '\n// Added by eldr tests/gateway/protos.js from envoyproxy/envoy ' + ENVOY_COMMIT_EXT_PROC + '.\n' +
      'message ProtocolConfiguration {\n' +
      '  envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode request_body_mode = 1\n' +
      '      [(validate.rules).enum = {defined_only: true}];\n' +
      '  envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode response_body_mode = 2\n' +
      '      [(validate.rules).enum = {defined_only: true}];\n' +
      '  bool send_body_without_waiting_for_header_response = 3;\n' +
      '}\n';
    added.push('ProtocolConfiguration', 'ProcessingRequest.protocol_config=11');
  }
  if (!/streamed_response\s*=\s*3/.test(t)) {
    if (!/import "xds\/annotations\/v3\/status.proto";/.test(t)) {
      t = insertAfter(t, 'import "google/protobuf/struct.proto";', '\n\nimport "xds/annotations/v3/status.proto";',
        'xds annotations import');
    }
    t = insertAfter(t, 'bool clear_body = 2;',
      '\n\n    // Added by eldr tests/gateway/protos.js from envoyproxy/envoy ' + ENVOY_COMMIT_EXT_PROC + '.\n' +
      '    // Must be used when the corresponding ``BodySendMode`` is set to ``FULL_DUPLEX_STREAMED`` or ``GRPC``.\n' +
      '    StreamedBodyResponse streamed_response = 3\n' +
      '        [(xds.annotations.v3.field_status).work_in_progress = true];', 'BodyMutation.streamed_response');
    t += '\n// Added by eldr tests/gateway/protos.js from envoyproxy/envoy ' + ENVOY_COMMIT_EXT_PROC + '.\n' +
      '// The body response message corresponding to ``FULL_DUPLEX_STREAMED`` or ``GRPC`` body modes.\n' +
      'message StreamedBodyResponse {\n' +
      '  bytes body = 1;\n' +
      '  bool end_of_stream = 2;\n' +
      '}\n';
    added.push('StreamedBodyResponse', 'BodyMutation.streamed_response=3');
  }
  return { text: t, added };
}

function patchProcessingMode(src) {
  if (/FULL_DUPLEX_STREAMED\s*=\s*4\s*;/.test(src)) return { text: src, added: [] };
  const t = insertAfter(src, 'BUFFERED_PARTIAL = 3;',
    '\n\n    // Added by eldr tests/gateway/protos.js from envoyproxy/envoy ' + ENVOY_COMMIT_PROCESSING_MODE + '.\n' +
    '    FULL_DUPLEX_STREAMED = 4;', 'BodySendMode.FULL_DUPLEX_STREAMED');
  return { text: t, added: ['BodySendMode.FULL_DUPLEX_STREAMED=4'] };
}

let cached = null;

// Returns { extProc, health, patched, types } where extProc is the
// envoy.service.ext_proc.v3 package object of grpc.loadPackageDefinition.
function load() {
  if (cached) return cached;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'eldr-envoy-protos-'));
  let added = [];
  try {
    for (const [rel, patch] of [[EXT_PROC, patchExtProc], [PMODE, patchProcessingMode]]) {
      const src = fs.readFileSync(path.join(XDS_DEPS, 'envoy-api', rel), 'utf8');
      const out = patch(src);
      added = added.concat(out.added);
      fs.mkdirSync(path.join(tmp, path.dirname(rel)), { recursive: true });
      fs.writeFileSync(path.join(tmp, rel), out.text);
    }
    const opts = {
      keepCase: true, longs: String, enums: Number, defaults: false, oneofs: true,
      includeDirs: [tmp, ...INCLUDE],
    };
    const def = protoLoader.loadSync([EXT_PROC], opts);
    const hdef = protoLoader.loadSync([path.join(__dirname, 'health.proto')], { ...opts, includeDirs: [] });
    const pkg = grpc.loadPackageDefinition(def);
    const hpkg = grpc.loadPackageDefinition(hdef);
    const reqType = def['envoy.service.ext_proc.v3.ProcessingRequest'];
    const respType = def['envoy.service.ext_proc.v3.ProcessingResponse'];
    cached = {
      extProc: pkg.envoy.service.ext_proc.v3,
      health: hpkg.grpc.health.v1,
      processMethod: pkg.envoy.service.ext_proc.v3.ExternalProcessor.service.Process,
      patched: added,
      reqType, respType,
    };
    return cached;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

let healthCached = null;
// grpc.health.v1 alone (cheap; does not parse Envoy's tree).
function loadHealth() {
  if (healthCached) return healthCached;
  const hdef = protoLoader.loadSync([path.join(__dirname, 'health.proto')],
    { keepCase: true, longs: String, enums: Number, defaults: false, oneofs: true });
  healthCached = grpc.loadPackageDefinition(hdef).grpc.health.v1;
  return healthCached;
}

// google.protobuf.Struct / Value <-> plain JSON. protobufjs supplies
// google/protobuf/struct.proto from its built-in copy, whose field names are
// camelCase (nullValue, stringValue, listValue, ...) even with keepCase.
function toValue(v) {
  if (v === null || v === undefined) return { nullValue: 0 };
  if (typeof v === 'number') return { numberValue: v };
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(toValue) } };
  if (typeof v === 'object') return { structValue: toStruct(v) };
  throw new Error('cannot encode ' + typeof v + ' as google.protobuf.Value');
}
function toStruct(obj) {
  const fields = {};
  for (const [k, v] of Object.entries(obj)) fields[k] = toValue(v);
  return { fields };
}
function fromValue(v) {
  if (!v) return null;
  const kind = v.kind || Object.keys(v).find((k) => k !== 'kind' && v[k] !== undefined);
  switch (kind) {
    case 'nullValue': case 'null_value': return null;
    case 'numberValue': case 'number_value': return v[kind];
    case 'stringValue': case 'string_value': return v[kind];
    case 'boolValue': case 'bool_value': return v[kind];
    case 'structValue': case 'struct_value': return fromStruct(v[kind]);
    case 'listValue': case 'list_value': return ((v[kind] && v[kind].values) || []).map(fromValue);
    default: return null;
  }
}
function fromStruct(s) {
  const out = {};
  if (!s || !s.fields) return out;
  for (const [k, v] of Object.entries(s.fields)) out[k] = fromValue(v);
  return out;
}

// HeaderValue: Envoy sends raw_value; a server may answer with value or raw_value.
function headerValue(h) {
  if (!h) return undefined;
  if (h.raw_value && h.raw_value.length) return Buffer.from(h.raw_value).toString('latin1');
  if (typeof h.value === 'string' && h.value !== '') return h.value;
  if (h.raw_value) return Buffer.from(h.raw_value).toString('latin1');
  return h.value || '';
}

module.exports = {
  load, loadHealth, toStruct, fromStruct, toValue, fromValue, headerValue,
  ENVOY_COMMIT_EXT_PROC, ENVOY_COMMIT_PROCESSING_MODE, XDS_DEPS,
  FULL_DUPLEX_STREAMED: 4,
};
