// The interaction lease cache (trace_core.lease_cache_ttl_s): managed calls
// of one turn look their interaction up in Trace Core once and reuse the lease; a
// refused operations:ensure with a reused lease drops it and the call decides on a
// fresh lookup, so a finished interaction is refused exactly as without the cache.
// Against the simulator's request log (GET /_sim/requests).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, startServer } from './lib/stack.mjs';
import { session as mcpSession } from './lib/mcp-session.mjs';

const ARGS = { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 2 };
let stack;
let noCache; // a second server on the same simulator with the cache off

// tools/call on a fresh session of server: resolves to the JSON-RPC response
async function session(server) {
  const s = await mcpSession(server.mcpUrl);
  return (name, args) => s.call(name, args);
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
  const s = r.result.structuredContent;
  assert.ok(s && s.interaction_id, JSON.stringify(r));
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
    assert.equal(r.result.isError, false, JSON.stringify(r));
    const rc = r.result.structuredContent.bkn_receipt;
    assert.ok(rc && rc.receipt_id, JSON.stringify(r));
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
    assert.equal(r.result.isError, false, JSON.stringify(r));
  }
  assert.equal(await lookups(seq, ctx.interaction_id), 3);
});

test('a finished interaction is refused as without the cache: the reused lease is dropped', async () => {
  const call = await session(stack.server);
  const ctx = await start(call);
  const first = await call('query_object_instance', { ...ARGS, bkn_context: ctx, response_format: 'json' });
  assert.equal(first.result.isError, false, JSON.stringify(first));
  const fin = await call('bkn_finish_interaction', { interaction_id: ctx.interaction_id, outcome: 'completed', answer: 'done' });
  assert.equal(fin.result.isError, false, JSON.stringify(fin));
  // the same refusal from both servers (one had the lease cached, one never caches)
  const refusals = [];
  for (const server of [stack.server, noCache]) {
    const c = server === stack.server ? call : await session(noCache);
    const seq = await lastSeq();
    const r = await c('query_object_instance', { ...ARGS, limit: 7, bkn_context: ctx, response_format: 'json' });
    assert.equal(r.result?.isError, true, JSON.stringify(r));
    assert.match(r.result.content[0].text, /"code":"interaction_terminal"/, JSON.stringify(r));
    refusals.push(r.result);
    // the cached path: a refused ensure, then the lookup that decides the answer
    assert.equal(await lookups(seq, ctx.interaction_id), 1);
  }
  assert.deepEqual(refusals[0], refusals[1]);
  // and the entry is gone: the next call looks the interaction up again at once
  const seq = await lastSeq();
  await call('query_object_instance', { ...ARGS, limit: 8, bkn_context: ctx, response_format: 'json' });
  assert.equal(await lookups(seq, ctx.interaction_id), 1);
});
