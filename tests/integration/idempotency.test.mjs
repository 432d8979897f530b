// Idempotency and retries: the client invocation id (header or MCP
// _meta) and a reused caller bkn-request-id make a retry return the original
// result byte for byte, receipt included, with exactly one downstream call; other
// input under the same id is a conflict; records are scoped by principal, by
// protocol (the MCP surfaces /mcp, /mcp-compact and /mcp/ptc share one scope, REST
// has its own) and tool; concurrent duplicates run once. Input is compared in
// canonical form (key order never matters).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startStack, ROOT, PREFIX } from './lib/stack.mjs';

const SDK_DIR = path.join(ROOT, 'build/ext/node_modules/@modelcontextprotocol/sdk/dist/esm/client');
const HAVE_SDK = fs.existsSync(path.join(SDK_DIR, 'index.js')) && fs.existsSync(path.join(SDK_DIR, 'streamableHttp.js'));
const NO_SDK = HAVE_SDK ? false : `the official MCP SDK is not installed in ${SDK_DIR} (run the test command's setup)`;

let stack;
const sessions = {};
let T; // the active turn of demo-user
let U; // the active turn of demo-user2
let counter = 0;
const uniq = (p) => `${p}-${process.pid}-${++counter}`;

async function post(url, body, headers = {}, token = 'demo-user-token') {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}`, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(15000),
  });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, headers: r.headers, text, json };
}

async function session(token, url = stack.server.mcpUrl) {
  const k = `${url} ${token}`;
  if (!sessions[k]) {
    const r = await post(url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'idem', version: '1' } } }, {}, token);
    assert.equal(r.status, 200, r.text);
    sessions[k] = r.headers.get('mcp-session-id');
  }
  return sessions[k];
}

// Raw tools/call: returns the whole HTTP answer (text for byte comparisons). surface:
// 'mcp' (default), 'compact' or 'ptc'.
const surfacePath = { mcp: '/mcp', compact: '/mcp-compact', ptc: '/mcp/ptc' };
const surfaceUrl = (surface = 'mcp') => `${stack.server.base}${PREFIX}${surfacePath[surface]}`;
async function mcpRaw(name, args, { meta, headers = {}, token = 'demo-user-token', id = 5, surface } = {}) {
  const params = { name, arguments: args };
  if (meta) params._meta = meta;
  const url = surfaceUrl(surface);
  const r = await post(url, { jsonrpc: '2.0', id, method: 'tools/call', params }, { 'mcp-session-id': await session(token, url), ...headers }, token);
  assert.equal(r.status, 200, r.text);
  assert.ok(r.json.result, r.text);
  return r;
}

const rest = (tool, body, headers = {}, token = 'demo-user-token') => post(`${stack.server.base}${PREFIX}/kn/${tool}`, body, headers, token);

const simCall = async (method, p, body) => {
  const r = await fetch(`${stack.sim.base}${p}`, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(5000) });
  assert.ok(r.ok, `${method} ${p}: ${r.status}`);
  return r.json();
};
const lastSeq = async () => (await simCall('GET', '/_sim/requests')).last_seq;
const ontologyRequests = async (since) => (await simCall('GET', `/_sim/requests?since=${since}&service=ontology_query`)).requests;
// Executions of query_object_instance: the object-type query itself (POST-as-GET on
// …/object-types/{ot}). When a result carries permission_guidance the tool also
// sends the visibility probe GET …/object-types/{ot}/schema (cached per
// account and object type), which is not an execution of the call.
const isQuery = (r) => r.method === 'POST' && /\/object-types\/[^/?]+(\?|$)/.test(r.path);
const ontologyCalls = async (since) => (await ontologyRequests(since)).filter(isQuery);

async function start(token, agent) {
  const r = await mcpRaw('bkn_start_interaction', { question: 'q', agent_name: agent, conversation_mode: 'new' }, { token });
  assert.equal(r.json.result.isError, false, r.text);
  const s = r.json.result.structuredContent;
  return { conversation_id: s.conversation_id, interaction_id: s.interaction_id };
}

const INV = 'X-OpenBKN-Client-Invocation-Id';
const META_INV = 'openbkn.ai/client-invocation-id';
const query = (extra = {}) => ({ kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 3, ...extra });

before(async () => {
  stack = await startStack({ capture: 'enabled' });
  T = await start('demo-user-token', 'idem-agent');
  U = await start('demo-user2-token', 'idem-agent');
});

after(async () => {
  if (stack) assert.equal(await stack.stop(), 0);
});

test('REST: a retry with the same invocation id replays the original answer, receipt included, one downstream call', async () => {
  const id = uniq('inv');
  const seq = await lastSeq();
  const a = await rest('query_object_instance', query({ bkn_context: T }), { [INV]: id });
  assert.equal(a.status, 200, a.text);
  const rid = a.headers.get('bkn-receipt-id');
  assert.match(rid || '', /^rcpt_/);
  const b = await rest('query_object_instance', query({ bkn_context: T }), { [INV]: id });
  assert.equal(b.status, 200, b.text);
  assert.equal(b.text, a.text);
  assert.equal(b.headers.get('bkn-receipt-id'), rid);
  assert.equal(b.headers.get('bkn-operation-id'), a.headers.get('bkn-operation-id'));
  assert.equal((await ontologyCalls(seq)).length, 1);
  const st = await simCall('GET', '/_sim/trace/state');
  assert.equal(st.operations.filter((o) => o.operation_id === a.headers.get('bkn-operation-id')).length, 1);
  assert.equal(st.interactions.find((i) => i.interaction_id === T.interaction_id).operation_ids.filter((o) => o === a.headers.get('bkn-operation-id')).length, 1);

  // same id, other input -> 409, still nothing downstream
  const c = await rest('query_object_instance', query({ limit: 4, bkn_context: T }), { [INV]: id });
  assert.equal(c.status, 409, c.text);
  assert.equal(c.json.code, 'idempotency_conflict');
  assert.equal(c.json.retryable, false);
  // in the deployment language (zh-CN), and in English when asked for
  assert.match(c.json.description, /调用 ID 已用于不同的输入/);
  const cEn = await rest('query_object_instance', query({ limit: 4, bkn_context: T }), { [INV]: id, 'accept-language': 'en-US' });
  assert.equal(cEn.status, 409, cEn.text);
  assert.match(cEn.json.description, /already used with different input/);
  assert.equal((await ontologyCalls(seq)).length, 1);
  // and the original is still replayed after the conflict
  const d = await rest('query_object_instance', query({ bkn_context: T }), { [INV]: id });
  assert.equal(d.text, a.text);
  // a fresh id runs again
  const e = await rest('query_object_instance', query({ bkn_context: T }), { [INV]: uniq('inv') });
  assert.equal(e.status, 200);
  assert.notEqual(e.headers.get('bkn-receipt-id'), rid);
  assert.equal((await ontologyCalls(seq)).length, 2);
});

test('REST ad hoc reads deduplicate too (no receipt to replay, same bytes)', async () => {
  const id = uniq('adhoc');
  const seq = await lastSeq();
  const a = await rest('query_object_instance', query(), { [INV]: id });
  const b = await rest('query_object_instance', query(), { [INV]: id });
  assert.equal(a.status, 200, a.text);
  assert.equal(b.text, a.text);
  assert.equal(b.headers.get('bkn-receipt-id'), null);
  assert.equal((await ontologyCalls(seq)).length, 1);
});

test('MCP: _meta invocation id replays the CallToolResult byte for byte; other input conflicts', async () => {
  const id = uniq('mcp');
  const seq = await lastSeq();
  const args = query({ bkn_context: T });
  const a = await mcpRaw('query_object_instance', args, { meta: { [META_INV]: id } });
  assert.equal(a.json.result.isError, false, a.text);
  assert.equal(a.json.result.structuredContent.bkn_receipt.receipt_status, 'completed');
  const b = await mcpRaw('query_object_instance', args, { meta: { [META_INV]: id } });
  assert.equal(b.text, a.text);
  // the header form names the same record (header wins over _meta)
  const c = await mcpRaw('query_object_instance', args, { headers: { [INV]: id }, meta: { [META_INV]: uniq('ignored') } });
  assert.equal(c.text, a.text);
  assert.equal((await ontologyCalls(seq)).length, 1);
  const conflict = await mcpRaw('query_object_instance', query({ limit: 1, bkn_context: T }), { meta: { [META_INV]: id } });
  assert.equal(conflict.json.result.isError, true, conflict.text);
  assert.equal(JSON.parse(conflict.json.result.content[0].text).code, 'idempotency_conflict');
  assert.equal((await ontologyCalls(seq)).length, 1);
});

test('MCP through the official SDK: callTool _meta invocation id dedupes', { skip: NO_SDK }, async () => {
  const { Client } = await import(pathToFileURL(path.join(SDK_DIR, 'index.js')).href);
  const { StreamableHTTPClientTransport } = await import(pathToFileURL(path.join(SDK_DIR, 'streamableHttp.js')).href);
  const client = new Client({ name: 'idem-sdk', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(stack.server.mcpUrl), { requestInit: { headers: { Authorization: 'Bearer demo-user-token' } } }));
  try {
    const id = uniq('sdk');
    const seq = await lastSeq();
    const params = { name: 'list_knowledge_networks', arguments: { limit: 2, bkn_context: T }, _meta: { [META_INV]: id } };
    const a = await client.callTool(params);
    const b = await client.callTool(params);
    assert.equal(a.isError, false, JSON.stringify(a));
    assert.ok(a.structuredContent.bkn_receipt);
    assert.deepEqual(b, a);
    const calls = (await simCall('GET', `/_sim/requests?since=${seq}&service=bkn_backend`)).requests;
    assert.equal(calls.length, 1);
    const c = await client.callTool({ ...params, arguments: { limit: 1, bkn_context: T } });
    assert.equal(c.isError, true);
    assert.equal(JSON.parse(c.content[0].text).code, 'idempotency_conflict');
  } finally {
    await client.close();
  }
});

test('a reused caller bkn-request-id dedupes like an invocation id; key order does not matter', async () => {
  const rq = `req_${uniq('retry').replace(/[^A-Za-z0-9_-]/g, '_')}`;
  const seq = await lastSeq();
  const body1 = `{"kn_id":"kn_medical","ot_id":"ot_drug","limit":3,"condition":{"field":"name","operation":"like","value":"a"},"bkn_context":{"conversation_id":"${T.conversation_id}","interaction_id":"${T.interaction_id}"}}`;
  const body2 = `{"bkn_context":{"interaction_id":"${T.interaction_id}","conversation_id":"${T.conversation_id}"},"condition":{"value":"a","operation":"like","field":"name"},"limit":3,"ot_id":"ot_drug","kn_id":"kn_medical"}`;
  const a = await rest('query_object_instance', body1, { 'bkn-request-id': rq });
  assert.equal(a.status, 200, a.text);
  assert.equal(a.headers.get('bkn-request-id'), rq);
  const b = await rest('query_object_instance', body2, { 'bkn-request-id': rq });
  assert.equal(b.status, 200, b.text);
  assert.equal(b.text, a.text);
  assert.equal(b.headers.get('bkn-receipt-id'), a.headers.get('bkn-receipt-id'));
  assert.equal((await ontologyCalls(seq)).length, 1);
  const c = await rest('query_object_instance', body1.replace('"limit":3', '"limit":2'), { 'bkn-request-id': rq });
  assert.equal(c.status, 409, c.text);
  assert.equal(c.json.code, 'idempotency_conflict');
  // the invocation id wins over the request id: a new invocation id runs again
  const d = await rest('query_object_instance', body1, { 'bkn-request-id': rq, [INV]: uniq('inv') });
  assert.equal(d.status, 200, d.text);
  assert.notEqual(d.headers.get('bkn-receipt-id'), a.headers.get('bkn-receipt-id'));
  assert.equal((await ontologyCalls(seq)).length, 2);
  // an invalid caller request id is no hint: each call runs
  const e1 = await rest('query_object_instance', body1, { 'bkn-request-id': 'not a request id' });
  const e2 = await rest('query_object_instance', body1, { 'bkn-request-id': 'not a request id' });
  assert.equal(e1.status, 200, e1.text);
  assert.equal(e2.status, 200, e2.text);
  assert.equal((await ontologyCalls(seq)).length, 4);
});

test("a second principal reusing an invocation id runs its own call and never sees the first one's result", async () => {
  const id = uniq('shared');
  const seq = await lastSeq();
  // ot_patient: demo-user sees masked rows, demo-user2 is refused (403)
  const body = { kn_id: 'kn_medical', ot_id: 'ot_patient', limit: 5 };
  const a = await rest('query_object_instance', body, { [INV]: id });
  assert.equal(a.status, 200, a.text);
  assert.equal(a.json.row_filter_applied, true);
  const b = await rest('query_object_instance', body, { [INV]: id }, 'demo-user2-token');
  assert.equal(b.status, 403, b.text);
  assert.doesNotMatch(b.text, /138\*\*\*\*5678/);
  assert.equal((await ontologyCalls(seq)).length, 2);
  // both answers carry permission_guidance: one visibility probe per principal
  const probes = (await ontologyRequests(seq)).filter((r) => r.method === 'GET' && r.path.endsWith('/object-types/ot_patient/schema'));
  assert.deepEqual(probes.map((r) => r.headers['x-account-id']).sort(), ['u_demo', 'u_other']);
  const sent = (await ontologyRequests(seq)).length;
  // each principal now has its own record under the id: replays stay apart
  const a2 = await rest('query_object_instance', body, { [INV]: id });
  assert.equal(a2.text, a.text);
  const b2 = await rest('query_object_instance', body, { [INV]: id }, 'demo-user2-token');
  assert.equal(b2.status, 403);
  assert.equal(b2.text, b.text);
  // a replay sends nothing at all to ontology-query, not even a probe
  assert.equal((await ontologyRequests(seq)).length, sent);
  assert.equal((await ontologyCalls(seq)).length, 2);
  // managed, on MCP: each principal gets its own receipt under its own interaction
  const m1 = await mcpRaw('query_object_instance', query({ bkn_context: T }), { meta: { [META_INV]: id } });
  const m2 = await mcpRaw('query_object_instance', query({ bkn_context: U }), { meta: { [META_INV]: id }, token: 'demo-user2-token' });
  assert.equal(m1.json.result.isError, false, m1.text);
  assert.equal(m2.json.result.isError, false, m2.text);
  assert.equal(m2.json.result.structuredContent.bkn_receipt.interaction_id, U.interaction_id);
  assert.notEqual(m2.json.result.structuredContent.bkn_receipt.receipt_id, m1.json.result.structuredContent.bkn_receipt.receipt_id);
  assert.equal((await ontologyCalls(seq)).length, 4);
});

test('20 concurrent duplicates: one downstream execution, 20 identical answers', async () => {
  const id = uniq('burst');
  // slow the one real execution down so that every duplicate arrives while it runs
  await simCall('POST', '/_sim/faults', { service: 'ontology_query', latency_ms: 400, count: 1 });
  const seq = await lastSeq();
  const body = JSON.stringify(query({ bkn_context: T }));
  const all = await Promise.all(Array.from({ length: 20 }, () => rest('query_object_instance', body, { [INV]: id })));
  for (const r of all) {
    assert.equal(r.status, 200, r.text);
    assert.equal(r.text, all[0].text);
    assert.equal(r.headers.get('bkn-receipt-id'), all[0].headers.get('bkn-receipt-id'));
  }
  assert.match(all[0].headers.get('bkn-receipt-id') || '', /^rcpt_/);
  assert.equal((await ontologyCalls(seq)).length, 1);
  const ensures = (await simCall('GET', `/_sim/requests?since=${seq}&service=trace_core`)).requests.filter((r) => r.path.endsWith('operations:ensure'));
  assert.equal(ensures.length, 1);

  // the same over MCP
  const mid = uniq('burst-mcp');
  await simCall('POST', '/_sim/faults', { service: 'ontology_query', latency_ms: 400, count: 1 });
  const seq2 = await lastSeq();
  const res = await Promise.all(Array.from({ length: 20 }, () => mcpRaw('query_object_instance', query({ bkn_context: T }), { meta: { [META_INV]: mid } })));
  for (const r of res) assert.equal(r.text, res[0].text);
  assert.equal(res[0].json.result.isError, false, res[0].text);
  assert.equal((await ontologyCalls(seq2)).length, 1);
});

test('bkn_start_interaction: the same invocation id returns the same interaction', async () => {
  const id = uniq('start');
  const args = { question: 'same question', agent_name: 'idem-start-agent', conversation_mode: 'new' };
  const a = await mcpRaw('bkn_start_interaction', args, { meta: { [META_INV]: id } });
  const b = await mcpRaw('bkn_start_interaction', args, { meta: { [META_INV]: id } });
  assert.equal(a.json.result.isError, false, a.text);
  assert.deepEqual(b.json.result.structuredContent, a.json.result.structuredContent);
  const st = await simCall('GET', '/_sim/trace/state');
  assert.equal(st.interactions.filter((i) => i.conversation_id === a.json.result.structuredContent.conversation_id).length, 1);
});

// ---- one scope for the MCP surfaces, another for REST ----------------------------

const action = (ctx) => ({ kn_id: 'kn_ops', at_id: 'at_restart_pod', _instance_identities: [], dynamic_params: { grace_period_seconds: 1 }, bkn_context: ctx });
const executions = async (since) => (await ontologyRequests(since)).filter((r) => r.method === 'POST' && r.path.endsWith('/action-types/at_restart_pod/execute'));

for (const [from, to] of [['mcp', 'compact'], ['compact', 'mcp']]) {
  test(`a retry that moves from ${surfacePath[from]} to ${surfacePath[to]} returns the original result, byte for byte; the action runs once`, async () => {
    const id = uniq(`move-${from}`);
    const seq = await lastSeq();
    const a = await mcpRaw('execute_action', action(T), { meta: { [META_INV]: id }, surface: from });
    assert.equal(a.json.result.isError, false, a.text);
    assert.match(a.json.result.structuredContent.execution_id, /\S/);
    assert.equal(a.json.result.structuredContent.bkn_receipt.receipt_status, 'completed');
    const b = await mcpRaw('execute_action', action(T), { meta: { [META_INV]: id }, surface: to });
    assert.equal(b.text, a.text);
    // and back again
    const c = await mcpRaw('execute_action', action(T), { meta: { [META_INV]: id }, surface: from });
    assert.equal(c.text, a.text);
    assert.equal((await executions(seq)).length, 1);
    // other input under the same id is a conflict on every MCP surface
    const d = await mcpRaw('execute_action', { ...action(T), dynamic_params: { grace_period_seconds: 2 } }, { meta: { [META_INV]: id }, surface: to });
    assert.equal(d.json.result.isError, true, d.text);
    assert.equal(JSON.parse(d.json.result.content[0].text).code, 'idempotency_conflict');
    assert.equal((await executions(seq)).length, 1);
  });
}

test('a read retried on /mcp-compact replays the /mcp answer with one downstream call', async () => {
  const id = uniq('move-read');
  const seq = await lastSeq();
  const a = await mcpRaw('query_object_instance', query({ bkn_context: T }), { meta: { [META_INV]: id } });
  assert.equal(a.json.result.isError, false, a.text);
  const b = await mcpRaw('query_object_instance', query({ bkn_context: T }), { headers: { [INV]: id }, surface: 'compact' });
  assert.equal(b.text, a.text);
  assert.equal((await ontologyCalls(seq)).length, 1);
});

test('REST and MCP are separate scopes: the same invocation id runs once on each', async () => {
  const id = uniq('proto');
  const seq = await lastSeq();
  const r = await rest('execute_action', action(T), { [INV]: id });
  assert.equal(r.status, 200, r.text);
  const m = await mcpRaw('execute_action', action(T), { meta: { [META_INV]: id } });
  assert.equal(m.json.result.isError, false, m.text);
  assert.notEqual(m.json.result.structuredContent.execution_id, r.json.execution_id);
  assert.notEqual(m.json.result.structuredContent.bkn_receipt.receipt_id, r.headers.get('bkn-receipt-id'));
  assert.equal((await executions(seq)).length, 2);
  // each replays its own
  const r2 = await rest('execute_action', action(T), { [INV]: id });
  assert.equal(r2.text, r.text);
  const m2 = await mcpRaw('execute_action', action(T), { meta: { [META_INV]: id }, surface: 'compact' });
  assert.equal(m2.text, m.text);
  assert.equal((await executions(seq)).length, 2);
});

test("another principal can neither replay nor probe an invocation id on another MCP surface", async () => {
  const id = uniq('other');
  const seq = await lastSeq();
  const a = await mcpRaw('execute_action', action(T), { meta: { [META_INV]: id } });
  assert.equal(a.json.result.isError, false, a.text);
  // demo-user2 with demo-user's context and id: refused by Trace Core, nothing of the first call shown
  const b = await mcpRaw('execute_action', action(T), { meta: { [META_INV]: id }, surface: 'compact', token: 'demo-user2-token' });
  assert.equal(b.json.result.isError, true, b.text);
  assert.doesNotMatch(b.text, new RegExp(a.json.result.structuredContent.execution_id));
  assert.doesNotMatch(b.text, new RegExp(a.json.result.structuredContent.bkn_receipt.receipt_id));
  // with its own context the same id runs its own call
  const c = await mcpRaw('execute_action', action(U), { meta: { [META_INV]: id }, surface: 'compact', token: 'demo-user2-token' });
  assert.equal(c.json.result.isError, false, c.text);
  assert.notEqual(c.json.result.structuredContent.execution_id, a.json.result.structuredContent.execution_id);
  assert.equal(c.json.result.structuredContent.bkn_receipt.interaction_id, U.interaction_id);
  assert.equal((await executions(seq)).length, 2);
});
