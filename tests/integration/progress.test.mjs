// Progress notifications for long calls (SPEC §5, §20): when the client sent
// _meta.progressToken and the call outlasts mcp.progress_interval_ms, the POST
// answer becomes an SSE stream of notifications/progress ending with the result;
// without a token (or for quick calls) it stays one JSON response.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from './lib/stack.mjs';

let stack;
const H = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: 'Bearer demo-user-token' };

before(async () => {
  stack = await startStack({ capture: 'disabled', env: { CL_MCP_PROGRESS_INTERVAL_MS: '300' } });
  const r = await fetch(stack.server.mcpUrl, { method: 'POST', headers: H, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }), signal: AbortSignal.timeout(5000) });
  H['mcp-session-id'] = r.headers.get('mcp-session-id');
});
after(async () => { assert.equal(await stack.stop(), 0); });

async function slowUpstream(ms) {
  const r = await fetch(`${stack.sim.base}/_sim/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ service: 'ontology_query', latency_ms: ms, count: 1 }), signal: AbortSignal.timeout(5000) });
  assert.equal(r.status, 200);
}

const callBody = (meta) => JSON.stringify({ jsonrpc: '2.0', id: 'p1', method: 'tools/call', params: { name: 'query_object_instance', arguments: { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1, response_format: 'json' }, ...(meta ? { _meta: meta } : {}) } });

function sseEvents(text) {
  return text.split('\n\n').map((block) => block.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n')).filter(Boolean).map((d) => JSON.parse(d));
}

test('a slow call with a progressToken streams progress, then the result', async () => {
  await slowUpstream(1200);
  const r = await fetch(stack.server.mcpUrl, { method: 'POST', headers: H, body: callBody({ progressToken: 'tok-7' }), signal: AbortSignal.timeout(10000) });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/event-stream/);
  const events = sseEvents(await r.text());
  const progress = events.filter((e) => e.method === 'notifications/progress');
  assert.ok(progress.length >= 2, `expected at least 2 progress events, got ${progress.length}`);
  progress.forEach((e, i) => {
    assert.equal(e.params.progressToken, 'tok-7');
    assert.equal(e.params.progress, i + 1); // increases
  });
  const last = events[events.length - 1];
  assert.equal(last.id, 'p1');
  assert.equal(last.result.isError, false);
  assert.ok(last.result.structuredContent.datas.length === 1);
});

// One language per response: the progress messages follow the deployment language
// (zh-CN here) or the request's Accept-Language, like the result they precede.
test('progress messages are in the language of the response', async () => {
  const cjk = /[\u4e00-\u9fff]/;
  for (const [lang, want] of [[null, true], ['en-US', false]]) {
    await slowUpstream(800);
    const headers = lang ? { ...H, 'accept-language': lang } : H;
    const r = await fetch(stack.server.mcpUrl, { method: 'POST', headers, body: callBody({ progressToken: 'tok-lang' }), signal: AbortSignal.timeout(10000) });
    const progress = sseEvents(await r.text()).filter((e) => e.method === 'notifications/progress');
    assert.ok(progress.length >= 1, `no progress events (${lang})`);
    for (const e of progress) {
      assert.ok(e.params.message.includes('query_object_instance'), e.params.message);
      assert.equal(cjk.test(e.params.message), want, `${lang}: ${e.params.message}`);
    }
  }
});

test('without a progressToken a slow call is one JSON response', async () => {
  await slowUpstream(800);
  const r = await fetch(stack.server.mcpUrl, { method: 'POST', headers: H, body: callBody(null), signal: AbortSignal.timeout(10000) });
  assert.match(r.headers.get('content-type'), /^application\/json/);
  const j = await r.json();
  assert.equal(j.id, 'p1');
  assert.equal(j.result.isError, false);
});

test('a quick call with a progressToken is one JSON response', async () => {
  const r = await fetch(stack.server.mcpUrl, { method: 'POST', headers: H, body: callBody({ progressToken: 5 }), signal: AbortSignal.timeout(10000) });
  assert.match(r.headers.get('content-type'), /^application\/json/);
  assert.equal((await r.json()).result.isError, false);
});

test('the access log splits durations into Lua, upstream and Trace Core', async () => {
  const line = stack.server.logs.join('').split('\n').filter((l) => l.includes('"tool":"query_object_instance"')).pop();
  const j = JSON.parse(line);
  for (const k of ['duration_ms', 'lua_ms', 'upstream_ms', 'trace_core_ms']) assert.equal(typeof j[k], 'number', k);
  assert.ok(!line.includes('demo-user-token'));
});
