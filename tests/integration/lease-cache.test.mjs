// The interaction lease cache (issue 17, trace_core.lease_cache_ttl_s): managed calls
// of one turn look their interaction up in Trace Core once and reuse the lease; a
// refused operations:ensure with a reused lease drops it and the call decides on a
// fresh lookup, so a finished interaction is refused exactly as without the cache.
// Against the simulator's request log (GET /_sim/requests).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, startServer } from './lib/stack.mjs';

const TOKEN = 'demo-user-token';
const ARGS = { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 2 };
let stack;
let noCache; // a second server on the same simulator with the cache off

async function post(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKEN}`, ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10000),
  });
  const text = await r.text();
  return { status: r.status, headers: r.headers, text, json: text ? JSON.parse(text) : undefined };
}

async function session(server) {
  const url = server.mcpUrl;
  const init = await post(url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'lease-test', version: '1' } } });
  const h = { 'mcp-session-id': init.headers.get('mcp-session-id') };
  await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  let id = 10;
  return (name, args) => post(url, { jsonrpc: '2.0', id: id++, method: 'tools/call', params: { name, arguments: args } }, h);
}

const simGet = async (p) => (await fetch(`${stack.sim.base}${p}`, { signal: AbortSignal.timeout(5000) })).json();
const lastSeq = async () => (await simGet('/_sim/requests')).last_seq;
// GET /interactions/{id} lookups Trace Core saw since seq
async function lookups(seq, iid) {
  const list = (await simGet(`/_sim/requests?since=${seq}&service=trace_core`)).requests;
  return list.filter((c) => c.method === 'GET' && c.path.endsWith(`/interactions/${iid}`)).length;
}

async function start(call) {
  const r = await call('bkn_start_interaction', { question: 'lease cache', agent_name: 'lease-test', conversation_mode: 'new' });
  const s = r.json.result.structuredContent;
  assert.ok(s && s.interaction_id, r.text);
  return { conversation_id: s.conversation_id, interaction_id: s.interaction_id };
}

before(async () => {
  stack = await startStack({ capture: 'enabled' });
  noCache = await startServer(stack.sim.base, { env: { CL_TRACE_CORE_LEASE_CACHE_TTL_S: '0' } });
});
after(async () => {
  if (noCache) assert.equal(await noCache.stop(), 0);
  if (stack) assert.equal(await stack.stop(), 0);
});

test('calls of one turn look the interaction up once; each still records its operation', async () => {
  const call = await session(stack.server);
  const ctx = await start(call);
  const seq = await lastSeq();
  const receipts = new Set();
  for (let i = 0; i < 3; i++) {
    const r = await call('query_object_instance', { ...ARGS, bkn_context: ctx, response_format: 'json' });
    assert.equal(r.json.result.isError, false, r.text);
    const rc = r.json.result.structuredContent.bkn_receipt;
    assert.ok(rc && rc.receipt_id, r.text);
    receipts.add(rc.receipt_id);
    // a different limit per call: three operations, not one replayed
    ARGS.limit += 1;
  }
  assert.equal(receipts.size, 3);
  assert.equal(await lookups(seq, ctx.interaction_id), 1);
});

test('with trace_core.lease_cache_ttl_s = 0 every call looks the interaction up', async () => {
  const call = await session(noCache);
  const ctx = await start(call);
  const seq = await lastSeq();
  for (let i = 0; i < 3; i++) {
    const r = await call('query_object_instance', { ...ARGS, limit: 1 + i, bkn_context: ctx, response_format: 'json' });
    assert.equal(r.json.result.isError, false, r.text);
  }
  assert.equal(await lookups(seq, ctx.interaction_id), 3);
});

test('a finished interaction is refused as without the cache: the reused lease is dropped', async () => {
  const call = await session(stack.server);
  const ctx = await start(call);
  const first = await call('query_object_instance', { ...ARGS, bkn_context: ctx, response_format: 'json' });
  assert.equal(first.json.result.isError, false, first.text);
  const fin = await call('bkn_finish_interaction', { interaction_id: ctx.interaction_id, outcome: 'completed', answer: 'done' });
  assert.equal(fin.json.result.isError, false, fin.text);
  // the same refusal from both servers (one had the lease cached, one never caches)
  const refusals = [];
  for (const server of [stack.server, noCache]) {
    const c = server === stack.server ? call : await session(noCache);
    const seq = await lastSeq();
    const r = await c('query_object_instance', { ...ARGS, limit: 7, bkn_context: ctx, response_format: 'json' });
    assert.equal(r.json.result?.isError, true, r.text);
    assert.match(r.json.result.content[0].text, /"code":"interaction_terminal"/, r.text);
    refusals.push(r.json.result);
    // the cached path: a refused ensure, then the lookup that decides the answer
    assert.equal(await lookups(seq, ctx.interaction_id), 1);
  }
  assert.deepEqual(refusals[0], refusals[1]);
  // and the entry is gone: the next call looks the interaction up again at once
  const seq = await lastSeq();
  await call('query_object_instance', { ...ARGS, limit: 8, bkn_context: ctx, response_format: 'json' });
  assert.equal(await lookups(seq, ctx.interaction_id), 1);
});
