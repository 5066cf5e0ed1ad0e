#!/usr/bin/env node
'use strict';
// Stand-in for Envoy's ext_proc HTTP filter in FULL_DUPLEX_STREAMED mode, as
// the Gateway API Inference Extension's Envoy config runs it, for testing an
// endpoint picker (eldrd --ext-proc). Test-only; see docs/gateway-standin.md.
//
// `coordinate` plays llm-d's P/D coordinator in front of this Envoy: for each
// client request it makes the coordinator's two calls through the gateway,
// as llm-d/llm-d-router makes them at commit
// ebab687927f5331c1b39defcb579a07951bce56c:
//   - prefill (pkg/coordinator/steps/prefill.go, buildPrefillBody, the
//     completions format): {request_id, model, prompt, kv_transfer_params},
//     capped by steps/utils.go capSingleTokenOutput (max_tokens 1, min_tokens
//     and stream_options removed, stream false), with the NIXL connector's
//     prefill params (connectors/kv/nixl.go PreparePrefillKVParams:
//     do_remote_decode true, do_remote_prefill false, remote_engine_id,
//     remote_block_ids, remote_host, remote_port null); headers x-request-id
//     and EPP-Profile: prefill (gateway/paths.go); it reads only the answer's
//     kv_transfer_params;
//   - decode (steps/decode.go prepareDecodeBody, steps/decode_proxy.go
//     newDecodeProxyRequest): the client's body with kv_transfer_params =
//     every key of the prefill answer's, then do_remote_decode false and
//     do_remote_prefill true (nixl.go PrepareDecodeKVParams); headers
//     x-request-id (the same) and EPP-Profile: decode.
// Bodies are written with sorted keys, as Go's encoding/json marshals a map.
// Envoy's part of each call is the `pick` exchange below, with the upstream
// answer fetched over HTTP from the endpoint the picker chose.
//
// Exit status: 0 the exchange completed as a well-behaved Envoy would accept
// it; 1 a protocol expectation failed (why on stderr and in the JSON line);
// 2 usage error.
const fs = require('fs');
const crypto = require('crypto');
const grpc = require('@grpc/grpc-js');
const P = require('./protos.js');

const USAGE = `usage: node envoy.js COMMAND [options]
commands:
  pick    --target H:P (--body-file F | --body-lines F | --no-body) [--header k=v ...]
          [--chunk N] [--subset ip:port,... | --subset-json JSON] [--no-metadata]
          [--response-status S] [--response-body-bytes N] [--response-content-type T]
          [--response-chunk N] [--served ip:port|none] [--no-response]
          [--repeat N] [--concurrency C] [--connections K] [--request-id ID]
          [--max-chunk N] [--expect-endpoint ip:port] [--quiet] [--timeout S]
  cancel  --target H:P --body-file F --after-bytes N [--chunk N] [--wait-ms M]
          [--header k=v ...] [--subset ...] [--timeout S]
  raw     --target H:P (--hex HEX | --bytes-file F) [--half-close]
          [--expect error|ok|any|CODE] [--timeout S]
  health  --target H:P [--service NAME] [--expect SERVING|NOT_SERVING|CODE] [--timeout S]
  coordinate --target H:P --body-lines F [--concurrency C] [--request-id ID]
          [--decode-request-id same|other] [--timeout S]
          (each line a client /v1/completions body; one JSON line a request)
`;

const STATUS_NAME = Object.fromEntries(Object.entries(grpc.status).map(([k, v]) => [v, k]));
const SERVING_NAME = ['UNKNOWN', 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN'];
const DEST_KEY = 'x-gateway-destination-endpoint';
const SUBSET_NS = 'envoy.lb.subset_hint';
const SUBSET_KEY = 'x-gateway-destination-endpoint-subset';
const LB_NS = 'envoy.lb';
const SERVED_KEY = 'x-gateway-destination-endpoint-served';

class Usage extends Error {}

function parseArgs(argv) {
  const cmd = argv[0];
  if (!cmd || cmd === '-h' || cmd === '--help') throw new Usage('');
  const o = { cmd, header: [] };
  const flags = new Set(['no-body', 'no-response', 'quiet', 'half-close', 'no-metadata']);
  const ints = new Set(['chunk', 'repeat', 'concurrency', 'connections', 'response-body-bytes', 'response-chunk',
    'after-bytes', 'wait-ms', 'max-chunk', 'response-status']);
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new Usage('unexpected argument ' + a);
    let key = a.slice(2);
    let val;
    const eq = key.indexOf('=');
    if (eq >= 0) { val = key.slice(eq + 1); key = key.slice(0, eq); }
    if (flags.has(key)) { o[key] = true; continue; }
    if (val === undefined) {
      if (i + 1 >= argv.length) throw new Usage('--' + key + ' needs a value');
      val = argv[++i];
    }
    if (key === 'header') { o.header.push(val); continue; }
    if (ints.has(key)) {
      if (!/^\d+$/.test(val)) throw new Usage('--' + key + ' needs a non-negative integer');
      o[key] = Number(val);
    } else if (key === 'timeout') {
      const t = Number(val);
      if (!(t > 0)) throw new Usage('--timeout needs seconds > 0');
      o.timeout = t;
    } else if (['target', 'body-file', 'body-lines', 'subset', 'subset-json', 'request-id', 'hex', 'bytes-file',
      'expect', 'service', 'served', 'response-content-type', 'expect-endpoint',
      'decode-request-id'].includes(key)) {
      o[key] = val;
    } else {
      throw new Usage('unknown option --' + key);
    }
  }
  if (!o.target) throw new Usage('--target H:P is required');
  if (!/^[^\s]+:\d+$/.test(o.target)) throw new Usage('--target must be HOST:PORT');
  o.timeout = o.timeout || 10;
  return o;
}

function headerList(o, extra) {
  // Envoy's headersToProto: every header, lower-case key, value in raw_value.
  const h = new Map();
  for (const [k, v] of extra) h.set(k, v);
  for (const kv of o.header) {
    const i = kv.indexOf('=');
    if (i <= 0) throw new Usage('--header needs k=v');
    h.set(kv.slice(0, i).toLowerCase(), kv.slice(i + 1));
  }
  return { headers: [...h].map(([key, v]) => ({ key, raw_value: Buffer.from(String(v), 'latin1') })) };
}

function subsetMetadata(o) {
  let v;
  if (o['subset-json'] !== undefined) {
    try { v = JSON.parse(o['subset-json']); } catch (e) { throw new Usage('--subset-json: ' + e.message); }
  } else if (o.subset !== undefined) {
    v = o.subset === '' ? [] : o.subset.split(',');
  } else {
    return null;
  }
  return { [SUBSET_NS]: { [SUBSET_KEY]: v } };
}

function metadataContext(fm) {
  // Envoy sets metadata_context on every message (possibly empty).
  const filter_metadata = {};
  if (fm) for (const [ns, obj] of Object.entries(fm)) filter_metadata[ns] = P.toStruct(obj);
  return { filter_metadata };
}

function sha256(b) { return crypto.createHash('sha256').update(b).digest('hex'); }

function firstDiff(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

function makeClients(o, n) {
  const x = P.load();
  const clients = [];
  for (let i = 0; i < n; i++) {
    clients.push(new x.extProc.ExternalProcessor(o.target, grpc.credentials.createInsecure(), {
      'grpc.max_receive_message_length': -1,
      'grpc.max_send_message_length': -1,
      'grpc.use_local_subchannel_pool': 1,
      'grpc.enable_retries': 0,
    }));
  }
  return clients;
}

// A deterministic response body, as an upstream engine would answer.
function responseBody(n, seed) {
  const out = Buffer.alloc(n);
  const pat = Buffer.from(`{"id":"${seed}","object":"chat.completion","choices":[{"text":"eldr standin "}]}\n`);
  for (let i = 0; i < n; i++) out[i] = pat[i % pat.length];
  return out;
}

// One HTTP request through the filter: one Process stream.
function oneRequest(client, o, body, id, live, deadline) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const maxChunk = o['max-chunk'] !== undefined ? o['max-chunk'] : 62000;
    const chunk = o.chunk || 16384;
    const noBody = !!o['no-body'];
    const fm = subsetMetadata(o);
    const md = o['no-metadata'] ? undefined : metadataContext(fm);
    const r = {
      id, ok: false, error: null, phase: 'request_headers',
      endpoint: null, metadata_endpoint: null, clear_route_cache: null, header_status: null,
      set_headers: {}, remove_headers: [], dynamic_metadata: null,
      header_responses: 0, headers_response_after_body: null,
      immediate_status: null, immediate_body: null, immediate_details: null,
      sent_bytes: noBody ? 0 : body.length, sent_chunks: 0, echo_bytes: 0, echo_chunks: 0, echo_max_chunk: 0,
      sent_sha256: noBody ? null : sha256(body), echo_sha256: null, echo_ok: null,
      resp_status: null, resp_headers_answered: null, resp_sent_bytes: null, resp_echo_bytes: null,
      resp_echo_chunks: null, resp_echo_max_chunk: null, resp_echo_ok: null,
      grpc_code: null, grpc_status: null, grpc_message: null, ms: 0,
    };
    let done = false;
    let bodySent = noBody; // all request-body messages handed to the stream
    let reqEcho = [];
    let reqEchoEos = false;
    let respBody = null;
    let respEcho = [];
    let respEchoEos = false;
    let respHeadersAnswered = false;
    let halfClosed = false;
    let ended = false;
    let timer = null;

    live.open++;
    if (live.open > live.max) live.max = live.open;

    const call = client.Process();

    function finish(err) {
      if (done) return;
      done = true;
      clearTimeout(timer);
      live.open--;
      r.ms = Date.now() - t0;
      if (err) { r.error = err; r.ok = false; } else { r.ok = true; }
      if (!ended) { try { call.cancel(); } catch (e) { /* already gone */ } }
      resolve(r);
    }
    function fail(msg) { finish(`${msg} (phase ${r.phase})`); }

    const left = deadline - Date.now();
    timer = setTimeout(() => fail('timeout: no complete exchange within --timeout'), Math.max(1, left));

    call.on('error', () => { /* the status event reports it */ });
    call.on('status', (st) => {
      ended = true;
      r.grpc_code = st.code; r.grpc_status = STATUS_NAME[st.code] || String(st.code); r.grpc_message = st.details || '';
      if (done) return;
      if (r.phase !== 'closing') {
        fail(`server ended the stream with ${r.grpc_status} "${r.grpc_message}" before the exchange was complete`);
      } else if (st.code !== grpc.status.OK) {
        fail(`server ended the stream with ${r.grpc_status} "${r.grpc_message}" after half-close (want OK)`);
      } else {
        finish(null);
      }
    });

    function write(msg) {
      if (done || halfClosed) return Promise.resolve();
      return new Promise((res) => { if (call.write(msg)) res(); else call.once('drain', res); });
    }

    function closeStream() {
      // Envoy half-closes when the HTTP stream is done and waits for the
      // server to end the gRPC stream.
      r.phase = 'closing';
      halfClosed = true;
      call.end();
    }

    async function sendRequest() {
      const extra = [[':authority', 'standin.eldr.test'], [':path', o.path || '/v1/completions'], [':method', 'POST'],
        [':scheme', 'http'], ['content-type', 'application/json']];
      if (!noBody) extra.push(['content-length', String(body.length)]);
      extra.push(['x-forwarded-proto', 'http'], ['x-request-id', id]);
      for (const kv of o.extra_headers || []) extra.push(kv);
      const first = {
        request_headers: { headers: headerList(o, extra), end_of_stream: noBody },
        protocol_config: {
          request_body_mode: P.FULL_DUPLEX_STREAMED, response_body_mode: P.FULL_DUPLEX_STREAMED,
          send_body_without_waiting_for_header_response: false,
        },
      };
      if (md) first.metadata_context = md;
      await write(first);
      if (noBody) return;
      // FULL_DUPLEX_STREAMED: body chunks go out as they arrive, without
      // waiting for the header response; end_of_stream on the last one.
      let off = 0;
      do {
        const n = Math.min(chunk, body.length - off);
        const m = { request_body: { body: body.subarray(off, off + n), end_of_stream: off + n >= body.length } };
        if (md) m.metadata_context = md;
        off += n;
        r.sent_chunks++;
        await write(m);
      } while (off < body.length && !done);
      bodySent = true;
    }

    async function sendResponse() {
      r.phase = 'response_headers';
      let status = o['response-status'] !== undefined ? o['response-status'] : 200;
      let n = o['response-body-bytes'] !== undefined ? o['response-body-bytes'] : 256;
      if (o.upstream) {
        // Envoy forwards the body the picker streamed back to the endpoint
        // it picked, and the answer goes through the response phases
        const up = await o.upstream(r.endpoint, Buffer.concat(reqEcho), id);
        status = up.status; respBody = up.body; n = respBody.length;
      } else {
        respBody = responseBody(n, id);
      }
      r.resp_status = status; r.resp_sent_bytes = n;
      const served = o.served !== undefined ? o.served : (r.endpoint || r.metadata_endpoint || '').split(',')[0];
      const rmd = o['no-metadata'] ? undefined
        : metadataContext(served && served !== 'none' ? { [LB_NS]: { [SERVED_KEY]: served } } : null);
      const hdrs = headerList({ header: [] }, [[':status', String(status)],
        ['content-type', o['response-content-type'] || 'application/json'], ['content-length', String(n)],
        ['x-request-id', id]]);
      const m = { response_headers: { headers: hdrs, end_of_stream: n === 0 } };
      if (rmd) m.metadata_context = rmd;
      await write(m);
      if (n === 0) return;
      r.phase = 'response_body';
      const rc = o['response-chunk'] || chunk;
      let off = 0;
      while (off < n && !done) {
        const k = Math.min(rc, n - off);
        const b = { response_body: { body: respBody.subarray(off, off + k), end_of_stream: off + k >= n } };
        if (rmd) b.metadata_context = rmd;
        off += k;
        await write(b);
      }
    }

    function requestPhaseDone() {
      // GIE endpoint picker protocol (004): the pick goes in the header and in
      // dynamic_metadata envoy.lb, with the same value; GIE's EPP clears the
      // route cache so that Envoy routes on the new header.
      if (r.endpoint === null) return fail(`request_headers response sets no ${DEST_KEY} header`);
      if (r.metadata_endpoint === null) return fail(`request_headers response has no dynamic_metadata ${LB_NS}.${DEST_KEY}`);
      if (r.endpoint !== r.metadata_endpoint) return fail(`header ${DEST_KEY}=${r.endpoint} differs from dynamic_metadata ${r.metadata_endpoint}`);
      if (!r.clear_route_cache) return fail('request_headers response without clear_route_cache');
      if (!noBody) {
        const echo = Buffer.concat(reqEcho);
        r.echo_sha256 = sha256(echo);
        r.echo_ok = echo.equals(body);
        if (!r.echo_ok) {
          const at = firstDiff(echo, body);
          return fail(`request body echo differs from the body sent: ${echo.length} vs ${body.length} bytes, first difference at byte ${at}`);
        }
      }
      if (o['expect-endpoint'] !== undefined && r.endpoint !== o['expect-endpoint']) {
        return fail(`picked ${r.endpoint}, expected ${o['expect-endpoint']}`);
      }
      if (o['no-response']) return closeStream();
      sendResponse().catch((e) => fail('write failed: ' + e.message));
    }

    function checkResponsePhaseDone() {
      if (!respHeadersAnswered) return;
      if (respBody.length > 0 && !respEchoEos) return;
      const echo = Buffer.concat(respEcho);
      r.resp_echo_ok = echo.equals(respBody);
      Object.defineProperty(r, 'resp_echo', { value: echo, enumerable: false });
      if (!r.resp_echo_ok) {
        return fail(`response body echo differs: ${echo.length} vs ${respBody.length} bytes, first difference at byte ${firstDiff(echo, respBody)}`);
      }
      closeStream();
    }

    function streamedChunk(cr, what) {
      const bm = cr && cr.body_mutation;
      if (!bm || !bm.streamed_response) {
        fail(`${what} response without body_mutation.streamed_response (Envoy in FULL_DUPLEX_STREAMED: "spurious message: Normal body mutation response")`);
        return null;
      }
      const sr = bm.streamed_response;
      const b = sr.body ? Buffer.from(sr.body) : Buffer.alloc(0);
      if (b.length > maxChunk) {
        fail(`${what} streamed_response chunk of ${b.length} bytes exceeds ${maxChunk}`);
        return null;
      }
      return { b, eos: !!sr.end_of_stream };
    }

    call.on('data', (msg) => {
      if (done) return;
      const kind = msg.response;
      if (msg.dynamic_metadata && kind !== 'request_headers') {
        r.dynamic_metadata_other = P.fromStruct(msg.dynamic_metadata);
      }
      if (msg.override_message_timeout) return; // Envoy only restarts its timer
      switch (kind) {
        case 'immediate_response': {
          const ir = msg.immediate_response;
          r.immediate_status = ir.status && ir.status.code !== undefined ? Number(ir.status.code) : 0;
          r.immediate_body = ir.body ? Buffer.from(ir.body).toString('utf8') : '';
          r.immediate_details = ir.details || '';
          if (r.immediate_status === 0) return fail('immediate_response without status (Envoy: required)');
          // Envoy sends the local reply and ends processing of this stream.
          closeStream();
          return;
        }
        case 'request_headers': {
          if (r.phase !== 'request_headers') return fail('request_headers response after the request headers were answered (Envoy: spurious message)');
          r.header_responses++;
          r.headers_response_after_body = bodySent;
          const cr = (msg.request_headers && msg.request_headers.response) || {};
          if (cr.status === 1) return fail('request_headers response with CONTINUE_AND_REPLACE (the body echo would be dropped)');
          r.header_status = cr.status || 0;
          r.clear_route_cache = !!cr.clear_route_cache;
          const hm = cr.header_mutation || {};
          for (const hv of hm.set_headers || []) {
            if (!hv.header) continue;
            r.set_headers[hv.header.key.toLowerCase()] = P.headerValue(hv.header);
          }
          r.remove_headers = hm.remove_headers || [];
          r.endpoint = r.set_headers[DEST_KEY] !== undefined ? r.set_headers[DEST_KEY] : null;
          r.dynamic_metadata = msg.dynamic_metadata ? P.fromStruct(msg.dynamic_metadata) : null;
          const lb = r.dynamic_metadata && r.dynamic_metadata[LB_NS];
          r.metadata_endpoint = lb && lb[DEST_KEY] !== undefined ? lb[DEST_KEY] : null;
          if (noBody) return requestPhaseDone();
          r.phase = 'request_body';
          return;
        }
        case 'request_body': {
          if (r.phase === 'request_headers') return fail('request_body response before the request_headers response (Envoy: spurious message)');
          if (r.phase !== 'request_body') return fail('request_body response after the request body was complete (Envoy: spurious message)');
          const c = streamedChunk(msg.request_body.response, 'request_body');
          if (!c) return;
          reqEcho.push(c.b);
          r.echo_chunks++; r.echo_bytes += c.b.length;
          if (c.b.length > r.echo_max_chunk) r.echo_max_chunk = c.b.length;
          if (c.eos) { reqEchoEos = true; requestPhaseDone(); }
          return;
        }
        case 'response_headers': {
          if (r.phase !== 'response_headers' && r.phase !== 'response_body') return fail('response_headers response before Envoy sent response_headers (Envoy: spurious message)');
          if (respHeadersAnswered) return fail('second response_headers response (Envoy: spurious message)');
          respHeadersAnswered = true;
          r.resp_headers_answered = true;
          r.resp_echo_bytes = 0; r.resp_echo_chunks = 0; r.resp_echo_max_chunk = 0;
          return checkResponsePhaseDone();
        }
        case 'response_body': {
          if (!respHeadersAnswered) return fail('response_body response before the response_headers response (Envoy: spurious message)');
          if (respEchoEos) return fail('response_body response after end_of_stream (Envoy: spurious message)');
          const c = streamedChunk(msg.response_body.response, 'response_body');
          if (!c) return;
          respEcho.push(c.b);
          r.resp_echo_chunks++; r.resp_echo_bytes += c.b.length;
          if (c.b.length > r.resp_echo_max_chunk) r.resp_echo_max_chunk = c.b.length;
          if (c.eos) { respEchoEos = true; checkResponsePhaseDone(); }
          return;
        }
        case 'request_trailers': case 'response_trailers':
          return fail(`${kind} response, but the stand-in sent no trailers (Envoy: spurious message)`);
        default:
          return fail('ProcessingResponse with no response set (Envoy: validate.required)');
      }
    });

    sendRequest().catch((e) => fail('write failed: ' + e.message));
  });
}

function readBodies(o) {
  if (o['body-lines']) {
    const lines = fs.readFileSync(o['body-lines'], 'utf8').split('\n').filter((l) => l.trim() !== '');
    return lines.map((l) => Buffer.from(l, 'utf8'));
  }
  if (o['no-body']) return [Buffer.alloc(0)];
  if (!o['body-file']) throw new Usage('pick needs --body-file F, --body-lines F or --no-body');
  return [fs.readFileSync(o['body-file'])];
}

async function cmdPick(o) {
  const bodies = readBodies(o);
  const n = o['body-lines'] ? bodies.length : (o.repeat || 1);
  const conc = Math.max(1, o.concurrency || 1);
  const clients = makeClients(o, Math.max(1, o.connections || 1));
  const deadline = Date.now() + o.timeout * 1000;
  const live = { open: 0, max: 0 };
  const baseId = o['request-id'] || `standin-${process.pid}-${Date.now().toString(36)}`;
  const results = new Array(n);
  let next = 0;
  const t0 = Date.now();
  async function worker() {
    while (next < n) {
      const i = next++;
      const id = n === 1 && o['request-id'] ? baseId : `${baseId}-${i}`;
      const res = await oneRequest(clients[i % clients.length], o, bodies[i % bodies.length], id, live, deadline);
      res.index = i;
      results[i] = res;
      if (!o.quiet) process.stdout.write(JSON.stringify(res) + '\n');
      if (!res.ok) process.stderr.write(`envoy.js: request ${id}: ${res.error}\n`);
    }
  }
  await Promise.all(Array.from({ length: Math.min(conc, n) }, worker));
  for (const c of clients) c.close();
  const bad = results.filter((r) => !r.ok).length;
  if (n > 1) {
    const picks = {}; const immediate = {}; const errors = {};
    for (const r of results) {
      if (r.immediate_status !== null) immediate[r.immediate_status] = (immediate[r.immediate_status] || 0) + 1;
      else if (r.endpoint !== null) picks[r.endpoint] = (picks[r.endpoint] || 0) + 1;
      if (r.error) { const k = r.error.replace(/\d+/g, 'N'); errors[k] = (errors[k] || 0) + 1; }
    }
    process.stdout.write(JSON.stringify({
      summary: true, requests: n, ok: n - bad, failed: bad, picks, immediate, errors,
      max_concurrency: live.max, concurrency: conc, connections: clients.length, elapsed_ms: Date.now() - t0,
    }) + '\n');
  }
  return bad ? 1 : 0;
}

// JSON with sorted keys, as Go's encoding/json writes a map[string]any.
function goJSON(v) {
  if (Array.isArray(v)) return '[' + v.map(goJSON).join(',') + ']';
  if (v && typeof v === 'object') {
    return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + goJSON(v[k])).join(',') + '}';
  }
  return JSON.stringify(v === undefined ? null : v);
}

// POST body to http://endpoint/path with the call's headers: {status, body}.
function httpPost(endpoint, path, body, headers, deadline) {
  const http = require('http');
  const [host, port] = [endpoint.slice(0, endpoint.lastIndexOf(':')), Number(endpoint.slice(endpoint.lastIndexOf(':') + 1))];
  return new Promise((resolve) => {
    const req = http.request({ host, port, path, method: 'POST', timeout: Math.max(1, deadline - Date.now()),
      headers: Object.assign({ 'content-type': 'application/json', 'content-length': body.length }, headers) }, (res) => {
      const parts = [];
      res.on('data', (c) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(parts) }));
    });
    req.on('error', (e) => resolve({ status: 502, body: Buffer.from(JSON.stringify({ error: 'envoy stand-in: ' + e.message })) }));
    req.on('timeout', () => req.destroy(new Error('upstream timeout')));
    req.end(body);
  });
}

async function cmdCoordinate(o) {
  if (!o['body-lines']) throw new Usage('coordinate needs --body-lines F');
  const bodies = readBodies(o).map((b) => JSON.parse(b.toString('utf8')));
  const n = bodies.length;
  const conc = Math.max(1, o.concurrency || 1);
  const clients = makeClients(o, 1);
  const deadline = Date.now() + o.timeout * 1000;
  const live = { open: 0, max: 0 };
  const baseId = o['request-id'] || `coord-${process.pid}-${Date.now().toString(36)}`;
  const otherId = o['decode-request-id'] === 'other';
  const results = new Array(n);
  let next = 0;
  async function one(i) {
    const client = bodies[i];
    const rid = `${baseId}-${i}`;
    const out = { index: i, id: rid, ok: false, error: null };
    const upstream = (path) => (endpoint, body, id) => httpPost(endpoint, path, body, { 'x-request-id': id }, deadline);
    // the prefill call (prefill.go, nixl.go, utils.go)
    const pf = {
      request_id: rid, model: client.model, prompt: client.prompt,
      kv_transfer_params: { do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null,
        remote_block_ids: null, remote_host: null, remote_port: null },
      max_tokens: 1, stream: false,
    };
    const po = Object.assign({}, o, { header: [], extra_headers: [['epp-profile', 'prefill']],
      upstream: upstream('/v1/completions') });
    const p = await oneRequest(clients[0], po, Buffer.from(goJSON(pf)), rid, live, deadline);
    out.prefill_endpoint = p.endpoint; out.prefill_status = p.resp_status;
    out.prefill_immediate = p.immediate_status; out.prefill_answer_echo_ok = p.resp_echo_ok;
    if (!p.ok || p.immediate_status !== null || p.resp_status !== 200) {
      out.error = 'prefill: ' + (p.error || `status ${p.immediate_status || p.resp_status}`);
      return out;
    }
    // the coordinator reads the answer as the gateway hands it back
    let kv;
    try { kv = JSON.parse(p.resp_echo.toString('utf8')).kv_transfer_params; } catch (e) { kv = null; }
    if (!kv || typeof kv !== 'object') { out.error = 'prefill answer without kv_transfer_params'; return out; }
    // the decode call (decode.go, decode_proxy.go, nixl.go)
    const dkv = Object.assign({}, kv, { do_remote_decode: false, do_remote_prefill: true });
    const db = Object.assign({}, client, { kv_transfer_params: dkv });
    const did = otherId ? rid + '-decode' : rid;
    const dd = Object.assign({}, o, { header: [], extra_headers: [['epp-profile', 'decode']],
      upstream: upstream('/v1/completions') });
    const d = await oneRequest(clients[0], dd, Buffer.from(goJSON(db)), did, live, deadline);
    out.decode_id = did; out.decode_endpoint = d.endpoint; out.decode_status = d.resp_status;
    out.decode_immediate = d.immediate_status; out.remote_engine_id = kv.remote_engine_id;
    out.remote_request_id = kv.remote_request_id;
    if (!d.ok || d.immediate_status !== null) { out.error = 'decode: ' + (d.error || `status ${d.immediate_status}`); return out; }
    out.ok = true;
    return out;
  }
  async function worker() {
    while (next < n) {
      const i = next++;
      results[i] = await one(i);
      process.stdout.write(JSON.stringify(results[i]) + '\n');
      if (!results[i].ok) process.stderr.write(`envoy.js: coordinate ${results[i].id}: ${results[i].error}\n`);
    }
  }
  await Promise.all(Array.from({ length: Math.min(conc, n) }, worker));
  for (const c of clients) c.close();
  const bad = results.filter((r) => !r.ok).length;
  process.stdout.write(JSON.stringify({ summary: true, requests: n, ok: n - bad, failed: bad }) + '\n');
  return bad ? 1 : 0;
}

function cmdCancel(o) {
  if (!o['body-file']) throw new Usage('cancel needs --body-file F');
  if (o['after-bytes'] === undefined) throw new Usage('cancel needs --after-bytes N');
  const body = fs.readFileSync(o['body-file']);
  const upto = Math.min(o['after-bytes'], body.length);
  const chunk = o.chunk || 16384;
  const [client] = makeClients(o, 1);
  const id = o['request-id'] || `standin-cancel-${process.pid}`;
  const md = o['no-metadata'] ? undefined : metadataContext(subsetMetadata(o));
  return new Promise((resolve) => {
    const r = { id, cancelled: false, sent_bytes: 0, sent_chunks: 0, responses_before_cancel: 0, error: null,
      grpc_code: null, grpc_status: null, grpc_message: null };
    const call = client.Process();
    let ended = false; let finished = false;
    const timer = setTimeout(() => done('timeout'), o.timeout * 1000);
    function done(err) {
      if (finished) return; finished = true;
      clearTimeout(timer);
      if (err) r.error = err;
      client.close();
      process.stdout.write(JSON.stringify(r) + '\n');
      if (err) process.stderr.write(`envoy.js: cancel: ${err}\n`);
      resolve(err ? 1 : 0);
    }
    call.on('error', () => {});
    call.on('data', () => { r.responses_before_cancel++; });
    call.on('status', (st) => {
      r.grpc_code = st.code; r.grpc_status = STATUS_NAME[st.code]; r.grpc_message = st.details || '';
      if (!r.cancelled) { ended = true; done(`server ended the stream with ${r.grpc_status} before the cancel`); }
      else done(null);
    });
    const w = (m) => new Promise((res) => { if (call.write(m)) res(); else call.once('drain', res); });
    (async () => {
      const extra = [[':authority', 'standin.eldr.test'], [':path', '/v1/completions'], [':method', 'POST'],
        [':scheme', 'http'], ['content-type', 'application/json'], ['content-length', String(body.length)],
        ['x-request-id', id]];
      const first = { request_headers: { headers: headerList(o, extra), end_of_stream: false },
        protocol_config: { request_body_mode: P.FULL_DUPLEX_STREAMED, response_body_mode: P.FULL_DUPLEX_STREAMED } };
      if (md) first.metadata_context = md;
      await w(first);
      let off = 0;
      while (off < upto) {
        const n = Math.min(chunk, upto - off);
        const m = { request_body: { body: body.subarray(off, off + n), end_of_stream: false } };
        if (md) m.metadata_context = md;
        await w(m);
        off += n; r.sent_chunks++;
      }
      r.sent_bytes = off;
      await new Promise((res) => setTimeout(res, o['wait-ms'] !== undefined ? o['wait-ms'] : 100));
      if (ended || finished) return;
      // What Envoy does when the downstream goes away mid-body: the filter is
      // destroyed and the side stream is reset (RST_STREAM CANCEL).
      r.cancelled = true;
      call.cancel();
    })().catch((e) => done('write failed: ' + e.message));
  });
}

function cmdRaw(o) {
  let bytes;
  if (o.hex !== undefined) {
    if (!/^([0-9a-fA-F]{2})*$/.test(o.hex)) throw new Usage('--hex needs an even number of hex digits');
    bytes = Buffer.from(o.hex, 'hex');
  } else if (o['bytes-file']) {
    bytes = fs.readFileSync(o['bytes-file']);
  } else {
    throw new Usage('raw needs --hex HEX or --bytes-file F');
  }
  const expect = (o.expect || 'error').toLowerCase();
  const x = P.load();
  const client = new grpc.Client(o.target, grpc.credentials.createInsecure(),
    { 'grpc.max_send_message_length': -1, 'grpc.max_receive_message_length': -1 });
  return new Promise((resolve) => {
    const r = { sent_bytes: bytes.length, responses: 0, decoded: [], grpc_code: null, grpc_status: null,
      grpc_message: null, error: null };
    let finished = false;
    const call = client.makeBidiStreamRequest('/envoy.service.ext_proc.v3.ExternalProcessor/Process',
      (b) => b, (b) => b);
    const timer = setTimeout(() => { call.cancel(); done('timeout: no gRPC status within --timeout'); }, o.timeout * 1000);
    function done(err) {
      if (finished) return; finished = true;
      clearTimeout(timer);
      if (!err && r.grpc_code !== null) {
        const code = r.grpc_code;
        const ok = expect === 'any' || (expect === 'error' && code !== 0) || (expect === 'ok' && code === 0) ||
          String(code) === expect || (STATUS_NAME[code] || '').toLowerCase() === expect;
        if (!ok) err = `got ${r.grpc_status}, expected ${o.expect || 'error'}`;
      }
      r.error = err || null;
      client.close();
      process.stdout.write(JSON.stringify(r) + '\n');
      if (err) process.stderr.write(`envoy.js: raw: ${err}\n`);
      resolve(err ? 1 : 0);
    }
    call.on('error', () => {});
    call.on('data', (b) => {
      r.responses++;
      try { r.decoded.push(x.processMethod.responseDeserialize(b).response || null); } catch (e) { r.decoded.push('undecodable'); }
    });
    call.on('status', (st) => {
      r.grpc_code = st.code; r.grpc_status = STATUS_NAME[st.code] || String(st.code); r.grpc_message = st.details || '';
      done(null);
    });
    call.write(bytes);
    if (o['half-close']) call.end();
  });
}

function cmdHealth(o) {
  const client = new (P.loadHealth()).Health(o.target, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    const deadline = new Date(Date.now() + o.timeout * 1000);
    client.Check({ service: o.service || '' }, { deadline }, (err, resp) => {
      const r = { service: o.service || '', status: null, grpc_code: 0, grpc_status: 'OK', grpc_message: '', error: null };
      if (err) {
        r.grpc_code = err.code; r.grpc_status = STATUS_NAME[err.code] || String(err.code); r.grpc_message = err.details || '';
        r.status = r.grpc_status;
      } else {
        r.status = SERVING_NAME[resp.status || 0] || String(resp.status);
      }
      let bad = null;
      if (o.expect !== undefined) {
        if (r.status !== o.expect.toUpperCase()) bad = `got ${r.status}, expected ${o.expect}`;
      } else if (err) {
        bad = `gRPC error ${r.grpc_status}: ${r.grpc_message}`;
      }
      r.error = bad;
      client.close();
      process.stdout.write(JSON.stringify(r) + '\n');
      if (bad) process.stderr.write(`envoy.js: health: ${bad}\n`);
      resolve(bad ? 1 : 0);
    });
  });
}

async function main() {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (e) {
    if (e instanceof Usage) {
      if (e.message) process.stderr.write('envoy.js: ' + e.message + '\n');
      process.stderr.write(USAGE);
      return 2;
    }
    throw e;
  }
  // Hard bound whatever happens inside grpc-js.
  setTimeout(() => { process.stderr.write('envoy.js: hard timeout\n'); process.exit(1); },
    o.timeout * 1000 + 3000).unref();
  try {
    switch (o.cmd) {
      case 'pick': return await cmdPick(o);
      case 'cancel': return await cmdCancel(o);
      case 'raw': return await cmdRaw(o);
      case 'health': return await cmdHealth(o);
      case 'coordinate': return await cmdCoordinate(o);
      default: throw new Usage('unknown command ' + o.cmd);
    }
  } catch (e) {
    if (e instanceof Usage) {
      process.stderr.write('envoy.js: ' + e.message + '\n' + USAGE);
      return 2;
    }
    if (e.code === 'ENOENT') { process.stderr.write('envoy.js: ' + e.message + '\n'); return 2; }
    throw e;
  }
}

main().then((code) => { process.exitCode = code; setImmediate(() => process.exit(code)); },
  (e) => { process.stderr.write('envoy.js: ' + (e.stack || e) + '\n'); process.exit(1); });
