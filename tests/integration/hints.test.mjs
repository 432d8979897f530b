// Host hints smuggled into tool arguments are ignored: they neither fail
// the tool's schema nor act as an idempotency hint.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, PREFIX } from './lib/stack.mjs';

let stack;
const H = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: 'Bearer demo-user-token' };

before(async () => { stack = await startStack({ capture: 'disabled' }); });
after(async () => { assert.equal(await stack.stop(), 0); });

async function post(url, body, headers = {}) {
  const r = await fetch(url, { method: 'POST', headers: { ...H, ...headers }, body: JSON.stringify(body), signal: AbortSignal.timeout(10000) });
  return { status: r.status, json: await r.json() };
}

async function downstreamCount() {
  const r = await fetch(`${stack.sim.base}/_sim/requests?service=ontology_query`, { signal: AbortSignal.timeout(5000) });
  return (await r.json()).requests.length;
}

test('hint names in tool arguments are dropped, not validated and not used for idempotency', async () => {
  const init = await fetch(stack.server.mcpUrl, { method: 'POST', headers: H, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }), signal: AbortSignal.timeout(10000) });
  const sid = init.headers.get('mcp-session-id');
  assert.ok(sid);
  const args = { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1, 'openbkn.ai/client-invocation-id': 'smuggled-1', 'X-OpenBKN-Host-Conversation-Key': 'h' };
  const before = await downstreamCount();
  for (let i = 0; i < 2; i++) {
    const r = await post(stack.server.mcpUrl, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'query_object_instance', arguments: args } }, { 'mcp-session-id': sid });
    assert.equal(r.status, 200);
    assert.equal(r.json.result.isError, false, JSON.stringify(r.json));
  }
  // not a hint: both calls reached the upstream
  assert.equal(await downstreamCount(), before + 2);
  const rest = await post(`${stack.server.base}${PREFIX}/kn/query_object_instance`, args);
  assert.equal(rest.status, 200, JSON.stringify(rest.json));
});
