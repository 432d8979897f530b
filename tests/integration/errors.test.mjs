// Hostile and wrong input, authentication failures, unknown routes and upstream
// faults (docs/errors.md): each gets a precise error, and the server keeps
// serving afterwards (every test ends by checking that it still answers).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import fs from 'node:fs';
import path from 'node:path';
import { startStack, ROOT, PREFIX } from './lib/stack.mjs';

// Every tool file of the served directory is loaded (gated and REST-only ones too).
const TOOL_FILES = fs.readdirSync(path.join(ROOT, 'tools')).filter((f) => f.endsWith('.lua'));

let stack; // defaults
// CL_LIMITS_MAX_BODY_BYTES=2048, CL_LIMITS_MAX_HEADER_BYTES=4096,
// CL_UPSTREAM_ONTOLOGY_QUERY_TIMEOUT_MS=500, bkn-backend on a closed port.
let small;
const sids = new Map();

async function post(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: 'Bearer demo-user-token',
      ...headers,
    },
    body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(10000),
  });
  const text = await r.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: r.status, headers: r.headers, text, json };
}

async function sessionFor(s) {
  if (!sids.has(s)) {
    const r = await post(s.server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'errors', version: '1' } } });
    assert.equal(r.status, 200, r.text);
    sids.set(s, r.headers.get('mcp-session-id'));
  }
  return sids.get(s);
}

async function mcp(body, s = stack, headers = {}) {
  return post(s.server.mcpUrl, body, { 'mcp-session-id': await sessionFor(s), ...headers });
}

const rest = (tool, body, s = stack, headers = {}) => post(`${s.server.base}${PREFIX}/kn/${tool}`, body, headers);
const call = (name, args, s = stack) => mcp({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name, arguments: args } }, s);

// The server still answers a ping and a REST read.
async function stillServing(s = stack) {
  const p = await mcp({ jsonrpc: '2.0', id: 'alive', method: 'ping' }, s);
  assert.equal(p.status, 200, `ping after the bad input: ${p.text}`);
  assert.deepEqual(p.json.result, {});
  const r = await rest('query_object_instance', '{"kn_id":"kn_medical","ot_id":"ot_drug","limit":1}', s);
  assert.equal(r.status, 200, `REST after the bad input: ${r.text}`);
}

// A loopback port with nothing listening (bound once, then released).
async function closedPort() {
  const srv = net.createServer();
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address();
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

function rpcError(r, httpStatus, code) {
  assert.equal(r.status, httpStatus, r.text);
  assert.equal(r.json?.jsonrpc, '2.0', r.text);
  assert.equal(r.json.error?.code, code, r.text);
  assert.equal(typeof r.json.error.message, 'string');
  return r.json.error;
}

// An MCP tool error: isError with one text block holding the JSON error.
function toolError(r) {
  assert.equal(r.status, 200, r.text);
  const res = r.json.result;
  assert.equal(res?.isError, true, r.text);
  assert.equal(res.content[0].type, 'text');
  return JSON.parse(res.content[0].text);
}

async function simPost(path, body) {
  const r = await fetch(`${stack.sim.base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(5000) });
  assert.ok(r.ok, `${path}: ${r.status}`);
  return r.json();
}

function rawPost(url, body, headers) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = http.request({ host: '127.0.0.1', port: u.port, path: u.pathname, method: 'POST', agent: false, timeout: 10000, headers: { 'content-length': body.length, ...headers } }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    // The server may answer 413 and close before the whole body is sent.
    req.on('error', (e) => (e.code === 'EPIPE' || e.code === 'ECONNRESET' ? undefined : reject(e)));
    req.end(body);
  });
}

before(async () => {
  stack = await startStack({ capture: 'disabled' });
  small = await startStack({ capture: 'disabled',
    env: {
      CL_LIMITS_MAX_BODY_BYTES: '2048',
      CL_LIMITS_MAX_HEADER_BYTES: '4096',
      CL_UPSTREAM_ONTOLOGY_QUERY_TIMEOUT_MS: '500',
      CL_UPSTREAM_BKN_BACKEND_URL: `http://127.0.0.1:${await closedPort()}/api/bkn-backend`,
    },
  });
});

after(async () => {
  const codes = [];
  if (stack) codes.push(await stack.stop());
  if (small) codes.push(await small.stop());
  assert.deepEqual(codes, codes.map(() => 0));
});

test('malformed JSON: MCP 400/-32700 and REST 400, both naming the byte', async () => {
  const m = await mcp('{"jsonrpc":"2.0","id":1,"method":"ping",');
  const e = rpcError(m, 400, -32700);
  assert.match(e.message, /at byte \d+/);
  assert.equal(m.json.id, null);
  const r = await rest('list_knowledge_networks', '{"limit":1,,}');
  assert.equal(r.status, 400, r.text);
  assert.equal(r.json.code, 'Public.BadRequest');
  assert.match(r.json.details, /at byte 11/);
  await stillServing();
});

test('JSON-RPC framing errors: -32600 and -32602', async () => {
  rpcError(await mcp('[{"jsonrpc":"2.0","id":1,"method":"ping"}]'), 400, -32600);
  rpcError(await mcp({ jsonrpc: '1.0', id: 1, method: 'ping' }), 400, -32600);
  rpcError(await mcp({ id: 1, method: 'ping' }), 400, -32600);
  rpcError(await mcp({ jsonrpc: '2.0', id: 1, method: 42 }), 400, -32600);
  rpcError(await mcp({ jsonrpc: '2.0', id: { a: 1 }, method: 'ping' }), 400, -32600);
  rpcError(await mcp('"just a string"'), 400, -32600);
  const p = rpcError(await mcp({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: [1] }), 200, -32602);
  assert.match(p.message, /params/);
  rpcError(await mcp({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { arguments: {} } }), 200, -32602);
  rpcError(await mcp({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 7 } }), 200, -32602);
  const a = rpcError(await mcp({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'list_knowledge_networks', arguments: 'limit=1' } }), 200, -32602);
  assert.match(a.message, /arguments/);
  rpcError(await mcp({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'list_knowledge_networks', arguments: [1] } }), 200, -32602);
  rpcError(await mcp({ jsonrpc: '2.0', id: 6, method: 'no/such/method' }), 200, -32601);
  await stillServing();
});

test('unknown tool: -32602 "Unknown tool: <name>", the same bytes for any name', async () => {
  const a1 = await mcp({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'no_such_tool', arguments: {} } });
  const a2 = await mcp({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'no_such_tool', arguments: {} } });
  const b = await mcp({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'other_missing', arguments: {} } });
  const e = rpcError(a1, 200, -32602);
  assert.equal(e.message, 'Unknown tool: no_such_tool');
  assert.deepEqual(a2.json.error, a1.json.error);
  assert.equal(a2.text, a1.text);
  assert.equal(b.text.replace('other_missing', 'X'), a1.text.replace('no_such_tool', 'X'));
  await stillServing();
});

test('wrong argument types: MCP isError Public.BadRequest naming the path, REST 400', async () => {
  const cases = [
    [{ kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 'ten' }, '/limit'],
    [{ kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 20000 }, '/limit'],
    [{ kn_id: 'kn_medical', ot_id: 'ot_drug', limit: -1 }, '/limit'],
    [{ kn_id: 'kn_medical', ot_id: 'ot_drug', bogus: 1 }, '/bogus'],
    [{ kn_id: 'kn_medical' }, '/ot_id'],
    [{ kn_id: 5, ot_id: 'ot_drug' }, '/kn_id'],
  ];
  for (const [args, path] of cases) {
    const err = toolError(await call('query_object_instance', args));
    assert.equal(err.code, 'Public.BadRequest', JSON.stringify(err));
    assert.ok(JSON.stringify(err.details).includes(path), `${JSON.stringify(args)}: ${JSON.stringify(err.details)}`);
    const r = await rest('query_object_instance', args);
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.code, 'Public.BadRequest');
    assert.ok(JSON.stringify(r.json.details).includes(path), r.text);
  }
  const l = toolError(await call('list_knowledge_networks', { direction: 'sideways' }));
  assert.ok(JSON.stringify(l.details).includes('/direction'), JSON.stringify(l));
  await stillServing();
});

test('limit 0 means the default page (10 rows)', async () => {
  const r = await rest('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 0 });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.datas.length, 10);
  assert.equal(r.json.total_count, 22);
});

test('oversize body: 413, and the server keeps serving', async () => {
  const big = `{"name_pattern":"${'x'.repeat(10 * 1024)}"}`;
  const r = await rawPost(`${small.server.base}${PREFIX}/kn/list_knowledge_networks`, big, { 'content-type': 'application/json', authorization: 'Bearer demo-user-token' });
  assert.equal(r.status, 413, r.text);
  const m = await rawPost(small.server.mcpUrl, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"${'y'.repeat(10 * 1024)}"}}`, { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: 'Bearer demo-user-token', 'mcp-session-id': await sessionFor(small) });
  assert.equal(m.status, 413, m.text);
  // Just under the limit still works.
  const ok = await rest('query_object_instance', `{"kn_id":"kn_medical","ot_id":"ot_drug","properties":["${'x'.repeat(1500)}"]}`, small);
  assert.equal(ok.status, 200, ok.text);
  await stillServing(small);
});

test('oversize body under libevent\'s cap: the 413 is the JSON error envelope with a request id', async () => {
  // 3 KB: over the 2 KB limit, under the 2x cap where libevent answers by itself.
  const body = `{"name_pattern":"${'x'.repeat(3 * 1024)}"}`;
  const r = await rawPost(`${small.server.base}${PREFIX}/kn/list_knowledge_networks`, body, { 'content-type': 'application/json', authorization: 'Bearer demo-user-token' });
  assert.equal(r.status, 413, r.text);
  assert.match(r.headers['bkn-request-id'] ?? '', /^req_/);
  const j = JSON.parse(r.text);
  assert.equal(j.code, 'Public.RequestEntityTooLarge');
  assert.match(j.details, /limits\.max_body_bytes/);
  await stillServing(small);
});

test('oversize header block: JSON 413 with a request id; far over the cap a bare 4xx; still serving', async () => {
  const r = await rawPost(small.server.mcpUrl, '{}', { 'content-type': 'application/json', authorization: 'Bearer demo-user-token', 'x-pad': 'p'.repeat(8192) });
  assert.equal(r.status, 413, r.text);
  assert.match(r.headers['bkn-request-id'] ?? '', /^req_/);
  assert.equal(JSON.parse(r.text).code, 'Public.RequestEntityTooLarge');
  // Past libevent's own cap (4x the limit) the connection is refused before routing.
  const huge = await rawPost(small.server.mcpUrl, '{}', { 'content-type': 'application/json', authorization: 'Bearer demo-user-token', 'x-pad': 'p'.repeat(20000) });
  assert.ok(huge.status === 400 || huge.status === 413, `status ${huge.status}`);
  await stillServing(small);
});

test('nesting deeper than limits.json_max_depth: 400/-32700', async () => {
  const deep = '['.repeat(200) + ']'.repeat(200);
  const m = await mcp(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_knowledge_networks","arguments":{"x":${deep}}}}`);
  rpcError(m, 400, -32700);
  const r = await rest('list_knowledge_networks', `{"x":${deep}}`);
  assert.equal(r.status, 400, r.text);
  assert.equal(r.json.code, 'Public.BadRequest');
  await stillServing();
});

test('invalid UTF-8 in the body: 400/-32700', async () => {
  const bad = Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}}')]);
  rpcError(await mcp(bad), 400, -32700);
  const badRest = Buffer.concat([Buffer.from('{"name_pattern":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')]);
  const r = await rest('list_knowledge_networks', badRest);
  assert.equal(r.status, 400, r.text);
  await stillServing();
});

test('authentication: missing 401 with WWW-Authenticate, invalid tokens and keys', async () => {
  const url = `${stack.server.base}${PREFIX}/kn/list_knowledge_networks`;
  const missing = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}', signal: AbortSignal.timeout(5000) });
  const mt = await missing.json();
  assert.equal(missing.status, 401);
  assert.match(missing.headers.get('www-authenticate') ?? '', /^Bearer\b/);
  assert.equal(mt.code, 'Public.Unauthorized');

  const inv = await rest('list_knowledge_networks', '{}', stack, { authorization: 'Bearer not-a-real-token' });
  assert.equal(inv.status, 401);
  assert.match(inv.headers.get('www-authenticate'), /^Bearer\b/);
  // no link member (there is none to give); the next step: a fresh token
  assert.deepEqual(Object.keys(inv.json), ['code', 'description', 'solution', 'details', 'retryable', 'required_action']);
  assert.equal(inv.json.retryable, false);
  assert.equal(inv.json.required_action, 'refresh_token');
  assert.equal(inv.json.code, 'Public.Unauthorized');
  assert.equal(inv.json.details, '访问令牌无效'); // the deployment's language, zh-CN
  assert.ok(!inv.text.includes('not-a-real-token'), 'the token is echoed');

  const bak = await rest('list_knowledge_networks', '{}', stack, { authorization: 'Bearer bak_not_a_key' });
  assert.equal(bak.status, 401);
  assert.equal(bak.json.code, 'Public.Unauthorized');
  assert.equal(bak.json.details, 'API Key 无效');

  const mcpNoAuth = await post(stack.server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'ping' }, { authorization: '' });
  assert.equal(mcpNoAuth.status, 401);
  assert.match(mcpNoAuth.headers.get('www-authenticate') ?? '', /^Bearer\b/);

  for (const token of ['bak_demo_appkey', 'demo-app-token']) {
    const ok = await rest('list_knowledge_networks', '{}', stack, { authorization: `Bearer ${token}` });
    assert.equal(ok.status, 200, `${token}: ${ok.text}`);
    assert.equal(ok.json.total_count, 3);
  }
  await stillServing();
});

test('unknown /kn/<name> and an unknown path give the same 404; GET on a tool route 405', async () => {
  const a = await rest('no_such_tool', '{}');
  const b = await post(`${stack.server.base}${PREFIX}/nothing/here`, '{}');
  const c = await post(`${stack.server.base}/elsewhere`, '{}');
  assert.equal(a.status, 404);
  assert.equal(b.status, 404);
  assert.equal(c.status, 404);
  assert.equal(a.text, b.text);
  assert.equal(a.text, c.text);
  const strip = (h) => Object.fromEntries([...h].filter(([k]) => !['bkn-request-id', 'date'].includes(k)));
  assert.deepEqual(strip(a.headers), strip(b.headers));
  assert.equal(a.json.code, 'Public.NotFound');
  // Without a token too: an unknown tool is not revealed by a 401.
  const anon = await fetch(`${stack.server.base}${PREFIX}/kn/no_such_tool`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(5000) });
  assert.equal(anon.status, 404);
  assert.equal(await anon.text(), a.text);

  const g = await fetch(`${stack.server.base}${PREFIX}/kn/list_knowledge_networks`, { headers: { authorization: 'Bearer demo-user-token' }, signal: AbortSignal.timeout(5000) });
  await g.text();
  assert.equal(g.status, 405);
  assert.equal(g.headers.get('allow'), 'POST');
  await stillServing();
});

test('upstream 500: REST 502 and an MCP tool error; reset restores service', async () => {
  await simPost('/_sim/faults', { service: 'ontology_query', status: 500 });
  try {
    const args = { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 };
    const r = await rest('query_object_instance', args);
    assert.equal(r.status, 502, r.text);
    assert.equal(r.json.code, 'agentRetrieval.BadGateway.CommonExternalServerError');
    const e = toolError(await call('query_object_instance', args));
    assert.equal(e.code, 'agentRetrieval.BadGateway.CommonExternalServerError');
  } finally {
    await simPost('/_sim/reset', {});
  }
  const ok = await rest('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 });
  assert.equal(ok.status, 200, ok.text);
  await stillServing();
});

test('upstream connection closed: 502 without internal URLs', async () => {
  await simPost('/_sim/faults', { service: 'ontology_query', mode: 'close' });
  try {
    const r = await rest('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug' });
    assert.equal(r.status, 502, r.text);
    assert.equal(r.json.code, 'agentRetrieval.BadGateway.CommonExternalServerError');
    assert.ok(!r.text.includes('127.0.0.1'), `internal address leaked: ${r.text}`);
    assert.match(r.json.details?.reason ?? '', /^upstream_(unreachable|error)$/, r.text);
    const e = toolError(await call('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug' }));
    assert.equal(e.code, 'agentRetrieval.BadGateway.CommonExternalServerError');
  } finally {
    await simPost('/_sim/reset', {});
  }
  const ok = await rest('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 });
  assert.equal(ok.status, 200, ok.text);
});

test('upstream refusing connections: 502 upstream_unreachable on both surfaces', async () => {
  const r = await rest('list_knowledge_networks', '{}', small);
  assert.equal(r.status, 502, r.text);
  assert.equal(r.json.code, 'agentRetrieval.BadGateway.CommonExternalServerError');
  assert.equal(r.json.details?.reason, 'upstream_unreachable', r.text);
  assert.ok(!r.text.includes('127.0.0.1'), `internal address leaked: ${r.text}`);
  const e = toolError(await call('list_knowledge_networks', {}, small));
  assert.equal(e.details?.reason, 'upstream_unreachable');
  await stillServing(small);
});

test('upstream hang: the call fails within the configured timeout (504)', async () => {
  const r0 = await fetch(`${small.sim.base}/_sim/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ service: 'ontology_query', mode: 'hang' }), signal: AbortSignal.timeout(5000) });
  assert.ok(r0.ok);
  const t0 = Date.now();
  try {
    const r = await rest('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug' }, small);
    const took = Date.now() - t0;
    assert.equal(r.status, 504, r.text);
    assert.equal(JSON.parse(r.text).details?.reason, 'upstream_timeout', r.text);
    assert.equal(r.json.retryable, true);
    // the hang never answers: only the timeout ends the call (its reason says so), not
    // before it; no upper bound: a loaded machine fires timers late
    assert.ok(took >= 400, `took ${took} ms with a 500 ms timeout`);
    const e = toolError(await call('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug' }, small));
    assert.equal(e.code, 'agentRetrieval.GatewayTimeout.UpstreamTimeout');
  } finally {
    await fetch(`${small.sim.base}/_sim/reset`, { method: 'POST', signal: AbortSignal.timeout(5000) }).then((r) => r.text());
  }
  const ok = await rest('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 }, small);
  assert.equal(ok.status, 200, ok.text);
  await stillServing(small);
});

test('REST response_format other than the allowed values: 400 naming them', async () => {
  const r = await post(`${stack.server.base}${PREFIX}/kn/list_knowledge_networks?response_format=xml`, '{}');
  assert.equal(r.status, 400, r.text);
  assert.equal(r.json.code, 'Public.BadRequest');
  assert.match(r.json.details, /xml/);
  assert.match(r.json.details, /allowed: .*json/);
  const en = await post(`${stack.server.base}${PREFIX}/kn/list_knowledge_networks?response_format=xml`, '{}', { 'accept-language': 'en-US' });
  assert.equal(en.headers.get('content-language'), 'en-US');
  assert.equal(en.json.description, 'Invalid parameters');
  const ok = await post(`${stack.server.base}${PREFIX}/kn/list_knowledge_networks?response_format=json`, '{}');
  assert.equal(ok.status, 200, ok.text);
});

test('health endpoints need no auth and report ready', async () => {
  const alive = await fetch(`${stack.server.base}/health/alive`, { signal: AbortSignal.timeout(5000) });
  assert.equal(alive.status, 200);
  assert.equal((await alive.json()).status, 'alive');
  const ready = await fetch(`${stack.server.base}/health/ready`, { signal: AbortSignal.timeout(5000) });
  assert.equal(ready.status, 200);
  const j = await ready.json();
  assert.equal(j.status, 'ready');
  assert.ok(TOOL_FILES.length > 2, TOOL_FILES.join(' '));
  assert.equal(j.tools, TOOL_FILES.length);
  assert.equal(j.upstreams.ontology_query, true);
  assert.equal(j.upstreams.bkn_backend, true);
});

test('an upstream 5xx error page reaches the caller as its status and a short scrubbed excerpt', async () => {
  const page = ['<html><body><h1>Whitelabel Error Page</h1>',
    '<p>see http://10.0.3.7:13014/actuator/health and https://grafana.internal.corp/d/x</p><pre>',
    'java.lang.IllegalStateException: pool exhausted',
    '\tat com.corp.vega.Pool.take(Pool.java:88)',
    '\tat com.corp.vega.QueryService.run(QueryService.java:41)',
    '</pre>', '<p>padding</p>'.repeat(100), '</body></html>'].join('\n');
  await simPost('/_sim/faults', { service: 'ontology_query', status: 503, body: page });
  try {
    const r = await rest('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 });
    assert.equal(r.status, 503, r.text);
    assert.equal(r.json.upstream_status, 503, r.text);
    assert.equal(typeof r.json.details, 'string', r.text);
    assert.ok(r.json.details.length <= 203, r.text);
    assert.match(r.json.details, /Whitelabel Error Page/);
    for (const leak of ['http', '10.0.3.7', 'grafana', 'Pool.java', 'at com.']) {
      assert.ok(!r.json.details.includes(leak), `${leak} leaked: ${r.text}`);
    }
    const e = toolError(await call('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 }));
    assert.ok(!JSON.stringify(e).includes('10.0.3.7'), JSON.stringify(e));
  } finally {
    await simPost('/_sim/reset', {});
  }
});
