#!/usr/bin/env node
'use strict';
// FAKE endpoint picker, for the self-test of envoy.js only (selftest.sh).
// It is not eldrd and decides nothing of interest: it answers the ext_proc
// protocol the way GIE's / llm-d's EPP does (pkg/epp/handlers/server.go):
// at the request body's end, one request_headers response with
// header_mutation x-gateway-destination-endpoint + clear_route_cache and
// dynamic_metadata envoy.lb, then the body echoed as streamed_response
// chunks of at most 62,000 bytes (end_of_stream on the last); an empty
// subset hint gets immediate_response 503. --mode makes it misbehave in one
// way so that the self-test can check that envoy.js notices.
//
// usage: node fake_epp.js [--port N] [--endpoints a:p,b:p] [--mode MODE] [--not-serving]
// A request header x-fake-mode: MODE overrides --mode for that stream.
// prints "listening PORT" on stdout once bound (127.0.0.1 only).
const grpc = require('@grpc/grpc-js');
const P = require('./protos.js');

const MODES = ['good', 'chunk70k', 'flip-byte', 'body-first', 'two-headers', 'plain-body', 'no-eos',
  'no-header-mutation', 'resp-no-echo', 'close-early', 'error-status'];

const args = process.argv.slice(2);
const opt = { port: 0, endpoints: ['10.0.0.1:8000', '10.0.0.2:8000'], mode: 'good', serving: true };
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--port') opt.port = Number(args[++i]);
  else if (a === '--endpoints') opt.endpoints = args[++i].split(',');
  else if (a === '--mode') opt.mode = args[++i];
  else if (a === '--not-serving') opt.serving = false;
  else { process.stderr.write('fake_epp.js: unknown argument ' + a + '\n'); process.exit(2); }
}
if (!MODES.includes(opt.mode)) { process.stderr.write('fake_epp.js: modes: ' + MODES.join(' ') + '\n'); process.exit(2); }

const LIMIT = 62000;
let rr = 0;

function chunks(buf, size, setEos, wrap) {
  const out = [];
  if (buf.length === 0) return [wrap({ body: buf, end_of_stream: setEos })];
  for (let off = 0; off < buf.length; off += size) {
    const end = Math.min(off + size, buf.length);
    out.push(wrap({ body: buf.subarray(off, end), end_of_stream: setEos && end >= buf.length }));
  }
  return out;
}
const reqBody = (sr) => ({ request_body: { response: { body_mutation: { streamed_response: sr } } } });
const respBody = (sr) => ({ response_body: { response: { body_mutation: { streamed_response: sr } } } });

function pick(subset) {
  if (subset === undefined) return opt.endpoints[rr++ % opt.endpoints.length];
  const list = Array.isArray(subset) ? subset : String(subset).split(',').filter((s) => s);
  const ok = list.filter((e) => opt.endpoints.includes(e));
  return ok.length ? ok[0] : null;
}

function process_(call) {
  let mode = opt.mode;
  let body = [];
  let subset;
  let noBody = false;
  call.on('error', () => {});
  function headerResponse(ep) {
    const cr = { clear_route_cache: true };
    if (mode !== 'no-header-mutation') {
      cr.header_mutation = { set_headers: [{ header: { key: 'x-gateway-destination-endpoint', raw_value: Buffer.from(ep) } }] };
    }
    return { request_headers: { response: cr },
      dynamic_metadata: P.toStruct({ 'envoy.lb': { 'x-gateway-destination-endpoint': ep } }) };
  }
  function decide() {
    const ep = pick(subset);
    if (ep === null) {
      call.write({ immediate_response: { status: { code: 503 }, body: Buffer.from('no eligible endpoint in subset') } });
      return false;
    }
    const all = Buffer.concat(body);
    if (mode === 'flip-byte' && all.length) all[all.length >> 1] ^= 1;
    const size = mode === 'chunk70k' ? 70000 : LIMIT;
    const bodyMsgs = mode === 'plain-body'
      ? [{ request_body: { response: { body_mutation: { body: all } } } }]
      : chunks(all, size, mode !== 'no-eos', reqBody);
    if (mode === 'close-early') { call.end(); return false; }
    if (mode === 'body-first' && !noBody) bodyMsgs.forEach((m) => call.write(m));
    call.write(headerResponse(ep));
    if (mode === 'two-headers') call.write(headerResponse(ep));
    if (mode !== 'body-first' && !noBody) bodyMsgs.forEach((m) => call.write(m));
    return true;
  }
  call.on('data', (req) => {
    if (req.metadata_context && req.metadata_context.filter_metadata) {
      const fm = req.metadata_context.filter_metadata['envoy.lb.subset_hint'];
      if (fm) subset = P.fromStruct(fm)['x-gateway-destination-endpoint-subset'];
    }
    switch (req.request) {
      case 'request_headers':
        for (const h of (req.request_headers.headers && req.request_headers.headers.headers) || []) {
          if (h.key === 'x-fake-mode' && MODES.includes(P.headerValue(h))) mode = P.headerValue(h);
        }
        if (req.request_headers.end_of_stream) { noBody = true; decide(); }
        break;
      case 'request_body':
        body.push(Buffer.from(req.request_body.body || []));
        if (req.request_body.end_of_stream) decide();
        break;
      case 'response_headers':
        call.write({ response_headers: { response: {} } });
        break;
      case 'response_body':
        if (mode === 'resp-no-echo') break;
        // streaming passthrough, chunk by chunk (the EPP's SSE path)
        chunks(Buffer.from(req.response_body.body || []), LIMIT, !!req.response_body.end_of_stream, respBody)
          .forEach((m) => call.write(m));
        break;
      default:
        break;
    }
  });
  call.on('end', () => {
    if (mode === 'error-status') call.emit('error', { code: grpc.status.INTERNAL, details: 'fake failure' });
    else call.end();
  });
}

const x = P.load();
const server = new grpc.Server();
server.addService(x.extProc.ExternalProcessor.service, { Process: process_ });
server.addService(x.health.Health.service, {
  Check: (call, cb) => cb(null, { status: opt.serving ? 1 : 2 }),
  Watch: (call) => call.end(),
});
server.bindAsync(`127.0.0.1:${opt.port}`, grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) { process.stderr.write('fake_epp.js: ' + err.message + '\n'); process.exit(1); }
  process.stdout.write(`listening ${port}\n`);
});
process.on('SIGTERM', () => server.forceShutdown() || process.exit(0));
