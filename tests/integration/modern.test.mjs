// The stateless MCP era (protocol 2026-07-28) on the same endpoints as the session
// era: each validation rule of the edge over raw HTTP (status, code, the request id
// echoed), server/discover, the result tail (resultType, serverInfo, caching hints),
// no session minted or needed, the session era unchanged beside it; managed turns
// through the v2 SDK client on /mcp, /mcp-compact (direct and through execute_tool)
// and /mcp/ptc; a retry moving from a session to a stateless request replays;
// subscriptions/listen (acknowledgement, tools/list_changed after a reload that
// changes the list and only then, opted-in types only, bound per principal,
// cancellation by closing); trace context taken from _meta.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startSimulator, startServer, ROOT, PREFIX } from './lib/stack.mjs';

const SDK2 = path.join(ROOT, 'build/ext/node_modules/@modelcontextprotocol/client/dist/index.mjs');
const NO_SDK2 = fs.existsSync(SDK2) ? false : `the v2 MCP SDK client is not installed (${SDK2}): run the test command's setup`;
const TOKEN = 'demo-user-token';
const V = '2026-07-28';
const META = {
  'io.modelcontextprotocol/protocolVersion': V,
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'modern-test', version: '1.0.0' },
};
const INV = 'openbkn.ai/client-invocation-id';

let sim, server, ptc, toolsDir;
let counter = 0;
const uniq = (p) => `${p}-${process.pid}-${++counter}`;

before(async () => {
  sim = await startSimulator({ capture: 'enabled' });
  // a private copy of tools/, so that a test can add a tool and reload
  toolsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-modern-tools-'));
  fs.cpSync(path.join(ROOT, 'tools'), toolsDir, { recursive: true });
  server = await startServer(sim.base, { env: { CL_TOOLS_DIR: toolsDir, CL_MCP_KEEPALIVE_S: '1' } });
  ptc = await startServer(sim.base, { env: { EXECUTE_SKILL_ENABLED: 'true' } });
});

after(async () => {
  const codes = [];
  for (const s of [server, ptc]) if (s) codes.push(await s.stop());
  if (sim) await sim.stop();
  if (toolsDir) fs.rmSync(toolsDir, { recursive: true, force: true });
  for (const c of codes) assert.equal(c, 0);
});

const url = (surface = 'mcp', s = server) => `${s.base}${PREFIX}/${surface}`;

async function post(u, body, headers = {}) {
  const r = await fetch(u, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKEN}`, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(30000),
  });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, headers: r.headers, text, json };
}

// A stateless request with the headers a modern client derives from its body.
function modern(u, id, method, params = {}, { meta = META, headers = {} } = {}) {
  const body = { jsonrpc: '2.0', id, method, params: meta ? { ...params, _meta: { ...meta, ...(params._meta || {}) } } : params };
  const h = { 'mcp-protocol-version': V, 'mcp-method': method };
  if (method === 'tools/call' || method === 'prompts/get') h['mcp-name'] = params.name;
  if (method === 'resources/read') h['mcp-name'] = params.uri;
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined) delete h[k];
    else h[k] = v;
  }
  return post(u, body, h);
}

function assertError(r, status, code, id) {
  assert.equal(r.status, status, r.text);
  assert.ok(r.json?.error, r.text);
  assert.equal(r.json.error.code, code, r.text);
  if (id === undefined) assert.ok(!('id' in r.json), `no id was readable, none is sent: ${r.text}`);
  else assert.equal(r.json.id, id, r.text);
  assert.equal(r.headers.get('mcp-session-id'), null, 'a stateless answer mints no session');
}

function assertTail(result, { cacheable = false } = {}) {
  assert.equal(result.resultType, 'complete');
  assert.deepEqual(Object.keys(result._meta['io.modelcontextprotocol/serverInfo']).sort(), ['name', 'version']);
  assert.equal(result._meta['io.modelcontextprotocol/serverInfo'].name, 'context-loader');
  if (cacheable) {
    assert.ok(Number.isInteger(result.ttlMs) && result.ttlMs >= 0, JSON.stringify(result));
    assert.equal(result.cacheScope, 'private');
  } else {
    assert.equal(result.ttlMs, undefined);
  }
}

// ---- the edge: each validation rule ----

test('server/discover: the stateless version, the capabilities, the tail; no session minted', async () => {
  for (const surface of ['mcp', 'mcp-compact']) {
    const r = await modern(url(surface), 'd1', 'server/discover');
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.id, 'd1');
    assert.deepEqual(r.json.result.supportedVersions, [V]);
    assert.deepEqual(r.json.result.capabilities, { tools: { listChanged: true }, prompts: {}, resources: {} });
    assertTail(r.json.result, { cacheable: true });
    assert.equal(r.headers.get('mcp-session-id'), null);
  }
  const p = await modern(url('mcp/ptc', ptc), 7, 'server/discover');
  assert.equal(p.status, 200, p.text);
  assert.equal(p.json.id, 7);
});

test('_meta missing, or without protocolVersion or clientCapabilities, or with a malformed field: 400 -32602, id echoed', async () => {
  assertError(await modern(url(), 101, 'server/discover', {}, { meta: null }), 400, -32602, 101);
  const { 'io.modelcontextprotocol/protocolVersion': _pv, ...noVersion } = META;
  assertError(await modern(url(), 'a', 'server/discover', {}, { meta: noVersion }), 400, -32602, 'a');
  const { 'io.modelcontextprotocol/clientCapabilities': _cc, ...noCaps } = META;
  const r = await modern(url(), 104, 'tools/list', {}, { meta: noCaps });
  assertError(r, 400, -32602, 104);
  assert.match(r.json.error.message, /clientCapabilities/);
  assertError(await modern(url(), 105, 'tools/list', {}, { meta: { ...META, 'io.modelcontextprotocol/clientInfo': 'x' } }), 400, -32602, 105);
  assertError(await modern(url(), 106, 'tools/list', {}, { meta: { ...META, 'io.modelcontextprotocol/logLevel': 'loud' } }), 400, -32602, 106);
  // clientInfo is optional
  const { 'io.modelcontextprotocol/clientInfo': _ci, ...noInfo } = META;
  assert.equal((await modern(url(), 107, 'server/discover', {}, { meta: noInfo })).status, 200);
  // a stateless MCP-Protocol-Version without the envelope: not taken for the session era
  assertError(await modern(url(), 108, 'tools/list', {}, { meta: null }), 400, -32602, 108);
});

test('MCP-Protocol-Version against _meta, Mcp-Method against the body (exact case): 400 -32020', async () => {
  assertError(await modern(url(), 302, 'server/discover', {}, { meta: { ...META, 'io.modelcontextprotocol/protocolVersion': 'v999.0.0' } }), 400, -32020, 302);
  assertError(await modern(url(), 303, 'tools/list', {}, { headers: { 'mcp-method': 'prompts/list' } }), 400, -32020, 303);
  assertError(await modern(url(), 304, 'tools/list', {}, { headers: { 'mcp-method': 'TOOLS/LIST' } }), 400, -32020, 304);
  // header names are case-insensitive, values are compared without their optional whitespace
  assert.equal((await modern(url(), 305, 'tools/list', {}, { headers: { 'mcp-method': undefined, 'MCP-METHOD': ' tools/list\t' } })).status, 200);
});

test('MCP-Protocol-Version, Mcp-Method or Mcp-Name missing, Mcp-Name wrong or not base64: 400 -32020', async () => {
  assertError(await modern(url(), 401, 'tools/list', {}, { headers: { 'mcp-protocol-version': undefined } }), 400, -32020, 401);
  assertError(await modern(url(), 402, 'tools/list', {}, { headers: { 'mcp-method': undefined } }), 400, -32020, 402);
  const call = { name: 'list_knowledge_networks', arguments: {} };
  assertError(await modern(url(), 403, 'tools/call', call, { headers: { 'mcp-name': undefined } }), 400, -32020, 403);
  assertError(await modern(url(), 404, 'tools/call', call, { headers: { 'mcp-name': 'wrong_tool_name' } }), 400, -32020, 404);
  assertError(await modern(url(), 405, 'tools/call', call, { headers: { 'mcp-name': '=?base64?%%%?=' } }), 400, -32020, 405);
  assertError(await modern(url(), 406, 'resources/read', { uri: 'x://a' }, { headers: { 'mcp-name': 'x://b' } }), 400, -32020, 406);
  // the base64 form and surrounding whitespace are accepted
  const b64 = `=?base64?${Buffer.from('list_knowledge_networks').toString('base64')}?=`;
  for (const name of [b64, '  list_knowledge_networks  ']) {
    const r = await modern(url(), 407, 'tools/call', call, { headers: { 'mcp-name': name } });
    assert.equal(r.status, 200, r.text);
    assert.ok(r.json.result, r.text);
  }
});

test('an unsupported protocol version: 400 -32022 with data {supported, requested}', async () => {
  const r = await modern(url(), 301, 'server/discover', {}, {
    meta: { ...META, 'io.modelcontextprotocol/protocolVersion': 'v999.0.0' }, headers: { 'mcp-protocol-version': 'v999.0.0' },
  });
  assertError(r, 400, -32022, 301);
  assert.deepEqual(r.json.error.data, { supported: [V], requested: 'v999.0.0' });
  // an older date claimed in _meta is a stateless request too, with the same answer
  const old = await modern(url(), 'o', 'tools/list', {}, {
    meta: { ...META, 'io.modelcontextprotocol/protocolVersion': '2025-11-25' }, headers: { 'mcp-protocol-version': '2025-11-25' },
  });
  assertError(old, 400, -32022, 'o');
  assert.deepEqual(old.json.error.data, { supported: [V], requested: '2025-11-25' });
});

test('removed and unknown methods: 404 -32601; notifications 202; initialize with the stateless header 400 -32020', async () => {
  for (const m of ['initialize', 'ping', 'logging/setLevel', 'resources/subscribe', 'resources/unsubscribe', 'completion/complete', 'unknown/method']) {
    assertError(await modern(url(), 500, m), 404, -32601, 500);
  }
  const n = await post(url(), { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'listen:0', _meta: META } }, { 'mcp-protocol-version': V });
  assert.equal(n.status, 202);
  assert.equal(n.text, '');
  const init = await post(url(), { jsonrpc: '2.0', id: 9, method: 'initialize', params: { protocolVersion: V, capabilities: {}, clientInfo: { name: 'x', version: '1' } } }, { 'mcp-protocol-version': V });
  assertError(init, 400, -32020, 9);
  // a body that does not parse, under the stateless header: no id to echo, none sent (never null)
  assertError(await post(url(), '{"jsonrpc":', { 'mcp-protocol-version': V }), 400, -32700);
});

test('prompts and resources: empty cacheable lists; a get or read of anything is -32602 (with the uri)', async () => {
  for (const [method, member] of [['prompts/list', 'prompts'], ['resources/list', 'resources'], ['resources/templates/list', 'resourceTemplates']]) {
    const r = await modern(url(), 1, method);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.result[member], []);
    assertTail(r.json.result, { cacheable: true });
  }
  const read = await modern(url(), 2, 'resources/read', { uri: 'test://nothing' });
  assertError(read, 200, -32602, 2);
  assert.deepEqual(read.json.error.data, { uri: 'test://nothing' });
  assertError(await modern(url(), 3, 'prompts/get', { name: 'p' }), 200, -32602, 3);
});

test('tools/list: the same tools in the same order as the session era, with the tail; a session id sent is ignored', async () => {
  const legacy = await session(url());
  const l = await legacy.rpc('tools/list');
  for (const surface of ['mcp', 'mcp-compact']) {
    const a = await modern(url(surface), 1, 'tools/list', {}, { headers: { 'mcp-session-id': 'not-a-session' } });
    const b = await modern(url(surface), 2, 'tools/list');
    assert.equal(a.status, 200, a.text);
    assertTail(a.json.result, { cacheable: true });
    assert.deepEqual(a.json.result.tools, b.json.result.tools, 'deterministic');
    for (const t of a.json.result.tools) {
      assert.ok(t.description, t.name);
      assert.equal(t.inputSchema.type, 'object', t.name);
    }
    if (surface === 'mcp') assert.deepEqual(a.json.result.tools, l.json.result.tools);
  }
});

test('the session era beside it is unchanged: initialize mints a session, its requests need it, an unknown version is 400 -32600', async () => {
  const s = await session(url());
  assert.match(s.sid, /\./);
  const noSid = await post(url(), { jsonrpc: '2.0', id: 2, method: 'tools/list' });
  assert.equal(noSid.status, 400);
  assert.equal(noSid.json.error.code, -32600);
  assert.equal(noSid.json.id, 2);
  const bad = await post(url(), { jsonrpc: '2.0', id: 3, method: 'ping' }, { 'mcp-session-id': s.sid, 'mcp-protocol-version': '1999-01-01' });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error.code, -32600);
  const unknown = await s.rpc('prompts/list');
  assert.equal(unknown.status, 200);
  assert.equal(unknown.json.error.code, -32601);
  const ping = await s.rpc('ping');
  assert.deepEqual(ping.json.result, {});
  assert.equal(ping.json.result.resultType, undefined);
});

// ---- a session of the session era, over raw HTTP ----

async function session(u) {
  const init = await post(u, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'modern-test', version: '1' } } });
  assert.equal(init.status, 200, init.text);
  const sid = init.headers.get('mcp-session-id');
  let id = 1;
  const rpc = (method, params) => post(u, { jsonrpc: '2.0', id: ++id, method, params }, { 'mcp-session-id': sid });
  return { sid, rpc };
}

// ---- the v2 SDK client ----

let sdk;
async function client(u, era = 'modern') {
  sdk ??= await import(pathToFileURL(SDK2).href);
  const seen = [];
  const fetchSpy = async (input, init = {}) => {
    const r = await fetch(input, init);
    seen.push({ method: init.method, session: r.headers.get('mcp-session-id'), status: r.status });
    return r;
  };
  const transport = new sdk.StreamableHTTPClientTransport(new URL(u), { requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } }, fetch: fetchSpy });
  const c = new sdk.Client({ name: 'modern-test', version: '1.0.0' }, { versionNegotiation: { mode: era === 'modern' ? { pin: V } : era } });
  await c.connect(transport);
  return { c, seen };
}

function ok(result) {
  assert.equal(result.isError, false, JSON.stringify(result));
  return result.structuredContent;
}

const traceOps = async (interaction) =>
  (await (await fetch(`${sim.base}/_sim/trace/state`)).json()).operations.filter((o) => o.interaction_id === interaction);

async function turn(c, agent, body) {
  const s = ok(await c.callTool({ name: 'bkn_start_interaction', arguments: { question: 'modern turn', agent_name: agent, conversation_mode: 'new' } }));
  assert.equal(s.execution_status, 'active');
  const ctx = { conversation_id: s.conversation_id, interaction_id: s.interaction_id };
  await body(ctx);
  const f = ok(await c.callTool({ name: 'bkn_finish_interaction', arguments: { interaction_id: ctx.interaction_id, outcome: 'completed', answer: 'done' } }));
  assert.ok(f);
  return ctx;
}

const QUERY = { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 2, response_format: 'json' };

test('v2 SDK, modern: a managed turn on /mcp (start, query_object_instance with bkn_context, finish), no session', { skip: NO_SDK2 }, async () => {
  const { c, seen } = await client(url());
  assert.equal(c.getProtocolEra(), 'modern');
  assert.equal(c.getNegotiatedProtocolVersion(), V);
  const names = (await c.listTools()).tools.map((t) => t.name);
  assert.deepEqual(names.slice(0, 2), ['bkn_start_interaction', 'bkn_finish_interaction']);
  const ctx = await turn(c, 'modern-mcp', async (ctx) => {
    const r = await c.callTool({ name: 'query_object_instance', arguments: { ...QUERY, bkn_context: ctx } });
    const q = ok(r);
    assert.equal(q.datas.length, 2);
    assert.match(q.bkn_receipt.receipt_id, /^rcpt_/);
  });
  const ops = await traceOps(ctx.interaction_id);
  assert.deepEqual(ops.map((o) => o.tool_name), ['query_object_instance']);
  assert.ok(seen.length >= 5);
  assert.ok(seen.every((x) => x.session === null && x.method === 'POST'), JSON.stringify(seen));
  await c.close();
});

test('v2 SDK, modern: a managed turn on /mcp-compact, a direct tool and one through execute_tool', { skip: NO_SDK2 }, async () => {
  const { c } = await client(url('mcp-compact'));
  assert.equal(c.getProtocolEra(), 'modern');
  const ctx = await turn(c, 'modern-compact', async (ctx) => {
    const direct = ok(await c.callTool({ name: 'query_object_instance', arguments: { ...QUERY, bkn_context: ctx } }));
    const via = ok(await c.callTool({ name: 'execute_tool', arguments: { tool_id: 'query_object_instance', arguments: { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 2 }, response_format: 'json', bkn_context: ctx } }));
    assert.equal(direct.datas.length, 2);
    assert.equal(via.bkn_receipt.tool_name, 'query_object_instance'); // recorded as the tool that ran
  });
  const names = (await traceOps(ctx.interaction_id)).map((o) => o.tool_name);
  assert.equal(names.filter((n) => n === 'query_object_instance').length, 2, names.join());
  await c.close();
});

test('v2 SDK, modern: a managed turn on /mcp/ptc with the gate on (run_code calls query_object_instance)', { skip: NO_SDK2 }, async () => {
  const { c } = await client(url('mcp/ptc', ptc));
  assert.equal(c.getProtocolEra(), 'modern');
  assert.deepEqual((await c.listTools()).tools.map((t) => t.name).sort(), ['bkn_finish_interaction', 'bkn_start_interaction', 'run_code', 'run_shell']);
  const ctx = await turn(c, 'modern-ptc', async (ctx) => {
    const code = 'rows = query_object_instance(kn_id="kn_medical", ot_id="ot_drug", limit=2)\nprint("rows:", len(rows["datas"]))';
    const out = ok(await c.callTool({ name: 'run_code', arguments: { code, bkn_context: ctx, timeout: 60 } }));
    assert.equal(out.exit_code, 0, out.stderr);
    assert.equal(out.stdout, 'rows: 2\n');
  });
  const names = (await traceOps(ctx.interaction_id)).map((o) => o.tool_name).sort();
  assert.deepEqual(names, ['query_object_instance', 'run_code']);
  await c.close();
});

test('v2 SDK, auto: negotiates the stateless era', { skip: NO_SDK2 }, async () => {
  const { c, seen } = await client(url(), 'auto');
  assert.equal(c.getProtocolEra(), 'modern');
  assert.equal(c.getNegotiatedProtocolVersion(), V);
  assert.ok((await c.listTools()).tools.length > 2);
  assert.ok(seen.every((x) => x.session === null));
  await c.close();
});

// ---- idempotency across eras ----

test('a retry that moves from a session to a stateless request replays the original result, one execution', async () => {
  const s = await session(url());
  const start = await s.rpc('tools/call', { name: 'bkn_start_interaction', arguments: { question: 'q', agent_name: 'modern-idem', conversation_mode: 'new' } });
  const t = start.json.result.structuredContent;
  const ctx = { conversation_id: t.conversation_id, interaction_id: t.interaction_id };
  const inv = uniq('inv');
  const before = (await (await fetch(`${sim.base}/_sim/requests`)).json()).last_seq;
  const params = { name: 'query_object_instance', arguments: { ...QUERY, bkn_context: ctx }, _meta: { [INV]: inv } };
  const a = await s.rpc('tools/call', params);
  assert.equal(a.status, 200, a.text);
  assert.equal(a.json.result.isError, false, a.text);
  const b = await modern(url('mcp-compact'), 'retry', 'tools/call', params);
  assert.equal(b.status, 200, b.text);
  assert.deepEqual(b.json.result.structuredContent, a.json.result.structuredContent);
  assert.deepEqual(b.json.result.content, a.json.result.content);
  assertTail(b.json.result);
  const reqs = (await (await fetch(`${sim.base}/_sim/requests?since=${before}&service=ontology_query`)).json()).requests;
  assert.equal(reqs.filter((r) => r.method === 'POST' && /\/object-types\/ot_drug/.test(r.path)).length, 1, 'one execution');
});

// ---- trace context from _meta ----

test('traceparent, tracestate and baggage from _meta reach the upstream call and Trace Core', async () => {
  const s = await session(url());
  const start = await s.rpc('tools/call', { name: 'bkn_start_interaction', arguments: { question: 'q', agent_name: 'modern-trace', conversation_mode: 'new' } });
  const t = start.json.result.structuredContent;
  const trace = '4bf92f3577b34da6a3ce929d0e0e4736';
  const meta = { traceparent: `00-${trace}-00f067aa0ba902b7-01`, tracestate: 'vendor=abc', baggage: 'tenant=t1' };
  const before = (await (await fetch(`${sim.base}/_sim/requests`)).json()).last_seq;
  const r = await modern(url(), 'tc', 'tools/call', { name: 'query_object_instance', arguments: { ...QUERY, bkn_context: { conversation_id: t.conversation_id, interaction_id: t.interaction_id } }, _meta: meta });
  assert.equal(r.json.result.isError, false, r.text);
  const reqs = (await (await fetch(`${sim.base}/_sim/requests?since=${before}`)).json()).requests;
  const up = reqs.filter((q) => q.service === 'ontology_query');
  assert.ok(up.length >= 1);
  for (const q of up) {
    assert.match(q.headers.traceparent, new RegExp(`^00-${trace}-[0-9a-f]{16}-01$`));
    assert.equal(q.headers.tracestate, 'vendor=abc');
    assert.equal(q.headers.baggage, 'tenant=t1');
  }
  // and so do the call's Trace Core requests (the Operation and its attempt), with the
  // request id that names the request in Core's error envelopes
  const core = reqs.filter((q) => q.service === 'trace_core' && /\/operations/.test(q.path));
  assert.ok(core.length >= 2, JSON.stringify(reqs.map((q) => [q.service, q.path])));
  for (const q of core) {
    assert.match(q.headers.traceparent ?? '', new RegExp(`^00-${trace}-[0-9a-f]{16}-01$`), q.path);
    assert.equal(q.headers.tracestate, 'vendor=abc', q.path);
    assert.equal(q.headers.baggage, 'tenant=t1', q.path);
    assert.match(q.headers['bkn-request-id'] ?? '', /^req_/, q.path);
  }
  // Trace Core records the call's attempt under the caller's trace id
  const receiptId = r.json.result.structuredContent.bkn_receipt.receipt_id;
  const st = await (await fetch(`${sim.base}/_sim/trace/state`)).json();
  assert.equal(st.receipts.find((x) => x.receipt_id === receiptId).trace_id, trace);
});

// ---- subscriptions/listen ----

// Opens a listen stream; frames are the parsed data lines, comments counted.
async function listen(u, id, notifications, token = TOKEN) {
  const ac = new AbortController();
  const r = await fetch(u, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}`, 'mcp-protocol-version': V, 'mcp-method': 'subscriptions/listen' },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'subscriptions/listen', params: { notifications, _meta: META } }),
    signal: ac.signal,
  });
  const st = { status: r.status, type: r.headers.get('content-type'), frames: [], comments: 0, waiters: [], close: () => ac.abort() };
  if (r.status !== 200 || !st.type?.startsWith('text/event-stream')) {
    st.body = await r.text();
    return st;
  }
  (async () => {
    const dec = new TextDecoder();
    let buf = '';
    try {
      for await (const chunk of r.body) {
        buf += dec.decode(chunk, { stream: true });
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (line.startsWith('data: ')) st.frames.push({ at: Date.now(), msg: JSON.parse(line.slice(6)) });
          else if (line.startsWith(':')) st.comments++;
          for (const w of st.waiters.splice(0)) w();
        }
      }
    } catch { /* aborted */ }
  })();
  st.next = async (n, ms) => {
    const end = Date.now() + ms;
    while (st.frames.length < n && Date.now() < end) await new Promise((res) => { st.waiters.push(res); setTimeout(res, 50); });
    return st.frames.length >= n;
  };
  return st;
}

const reload = async () => {
  const r = await fetch(`${server.admin}/admin/reload`, { method: 'POST', signal: AbortSignal.timeout(10000) });
  assert.equal(r.status, 200, await r.text());
  return Date.now();
};

const metric = async (name) => {
  const text = await (await fetch(`${server.admin}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
};

test('subscriptions/listen: acknowledged first; a reload that adds a tool notifies at the swap, tagged; a no-op reload sends nothing; only opted-in streams', async (t) => {
  const a = await listen(url(), 'listen:0', { toolsListChanged: true, promptsListChanged: true });
  const b = await listen(url('mcp-compact'), 42, { promptsListChanged: true });
  try {
    assert.equal(a.status, 200);
    assert.match(a.type, /^text\/event-stream/);
    assert.ok(await a.next(1, 5000) && await b.next(1, 5000), 'acknowledgements');
    assert.deepEqual(a.frames[0].msg, { jsonrpc: '2.0', method: 'notifications/subscriptions/acknowledged', params: { _meta: { 'io.modelcontextprotocol/subscriptionId': 'listen:0' }, notifications: { toolsListChanged: true } } });
    assert.deepEqual(b.frames[0].msg.params, { _meta: { 'io.modelcontextprotocol/subscriptionId': 42 }, notifications: {} });

    await reload(); // nothing changed
    const noop = await a.next(2, 500);
    assert.equal(noop, false, 'a reload that changes nothing sends nothing');

    fs.writeFileSync(path.join(toolsDir, 'modern_probe.lua'), `return {
    name = "modern_probe", version = "1.0.0", kind = "read",
    title = { ["zh-CN"] = "探针", ["en-US"] = "Probe" },
    description = { ["zh-CN"] = "探针。", ["en-US"] = "Probe." },
    group = "query", order = 990, surfaces = { "mcp" },
    formats = { "json" }, upstream = "bkn_backend",
    input_schema = { type = "object", properties = {} },
    handle = function() return { ok = true } end,
}
`);
    const t0 = await reload();
    assert.ok(await a.next(2, 5000), 'tools/list_changed arrives');
    const delay = a.frames[1].at - t0;
    assert.deepEqual(a.frames[1].msg, { jsonrpc: '2.0', method: 'notifications/tools/list_changed', params: { _meta: { 'io.modelcontextprotocol/subscriptionId': 'listen:0' } } });
    // written by the reload itself when it swapped the generation in (no timer, no
    // poll: judged on what the server did, not on the time, which a loaded machine
    // stretches): its list_changed log line names the streams it wrote to
    const changed = server.logs.join('').split('\n').filter((l) => l.includes('"msg":"list_changed"')).map((l) => JSON.parse(l));
    assert.ok(changed.length >= 1 && changed[changed.length - 1].streams >= 1, JSON.stringify(changed));
    t.diagnostic(`tools/list_changed arrived ${delay} ms after the reload's answer`);
    assert.equal(await b.next(2, 300), false, 'a stream that did not ask for tool changes gets none');
    const list = await modern(url(), 1, 'tools/list');
    assert.ok(list.json.result.tools.some((t) => t.name === 'modern_probe'));
  } finally {
    a.close();
    b.close();
    fs.rmSync(path.join(toolsDir, 'modern_probe.lua'), { force: true });
    await reload();
  }
});

test('subscriptions/listen: keep-alive comments (mcp.keepalive_s), and nothing else while nothing changes', async () => {
  const s = await listen(url(), 'ka', { toolsListChanged: true });
  try {
    assert.ok(await s.next(1, 5000));
    const end = Date.now() + 10000;
    while (s.comments < 2 && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
    assert.ok(s.comments >= 2, `keep-alive comments: ${s.comments}`);
    assert.equal(s.frames.length, 1, 'only the acknowledgement');
  } finally {
    s.close();
  }
});

test('subscriptions/listen: bounded per principal; closing a stream cancels it (the server frees it)', async () => {
  const open0 = await metric('cl_sse_streams_open');
  const streams = [];
  try {
    for (let i = 0; i < 8; i++) {
      const s = await listen(url(), `l${i}`, { toolsListChanged: true });
      assert.equal(s.status, 200);
      assert.ok(await s.next(1, 5000));
      streams.push(s);
    }
    const over = await listen(url(), 'l8', { toolsListChanged: true });
    assert.equal(over.status, 429, over.body);
    assert.equal(JSON.parse(over.body).id, 'l8');
    // another principal has its own bound
    const other = await listen(url(), 'o1', { toolsListChanged: true }, 'demo-user2-token');
    assert.equal(other.status, 200);
    streams.push(other);
    assert.equal(await metric('cl_sse_streams_open'), open0 + 9);
    streams.shift().close();
    const end = Date.now() + 5000;
    while ((await metric('cl_sse_streams_open')) !== open0 + 8 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    assert.equal(await metric('cl_sse_streams_open'), open0 + 8, 'the closed stream is freed');
    const again = await listen(url(), 'l9', { toolsListChanged: true });
    assert.equal(again.status, 200);
    streams.push(again);
  } finally {
    for (const s of streams) s.close();
  }
});

// ---- self-description ----

test('info and the catalogue page say which eras each endpoint serves, with a working client config for each', { skip: NO_SDK2 }, async () => {
  for (const [surface, s] of [['mcp', server], ['mcp-compact', server], ['mcp/ptc', ptc]]) {
    const r = await fetch(`${url(surface, s)}/info`, { headers: { authorization: `Bearer ${TOKEN}`, 'accept-language': 'en-US' } });
    assert.equal(r.status, 200);
    const d = await r.json();
    assert.deepEqual(d.eras.map((e) => [e.era, e.protocol_versions]), [['session', ['2025-11-25', '2025-06-18', '2025-03-26']], ['stateless', [V]]]);
    for (const e of d.eras) for (const k of e.client_config) assert.ok(d.client_config[k], `${surface}: ${e.era} names ${k}`);
    const cfg = d.client_config.stateless_sdk;
    assert.equal(cfg.url, d.endpoint);
    assert.deepEqual(cfg.versionNegotiation, { mode: { pin: V } });
    assert.equal(cfg.requestInit.headers.Authorization, 'Bearer <access-token>');
    // the config as given, with a real token, connects in the stateless era
    sdk ??= await import(pathToFileURL(SDK2).href);
    const headers = { ...cfg.requestInit.headers, Authorization: `Bearer ${TOKEN}` };
    const c = new sdk.Client({ name: 'info-config', version: '1' }, { versionNegotiation: cfg.versionNegotiation });
    await c.connect(new sdk.StreamableHTTPClientTransport(new URL(cfg.url), { requestInit: { headers } }));
    assert.equal(c.getProtocolEra(), 'modern');
    assert.equal((await c.listTools()).tools.length, d.tool_count);
    await c.close();
    const page = await (await fetch(`${url(surface, s)}/info`, { headers: { authorization: `Bearer ${TOKEN}`, accept: 'text/html', 'accept-language': 'en-US' } })).text();
    assert.match(page, /Protocol eras<\/dt><dd>session \(initialize, Mcp-Session-Id\): 2025-11-25, 2025-06-18, 2025-03-26<br>stateless \(_meta on every request\): 2026-07-28<\/dd>/);
    assert.match(page, /<pre id="cfg-stateless">[^<]*versionNegotiation/);
  }
});
