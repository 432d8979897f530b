// Regressions the fault campaign (scripts/chaos, docs/faults.md) found, one test
// each, on one instance with the memory store (the faults do not need a second one).
//  1. An error stored as a call's outcome was replayed to every retry of the same
//     invocation id still saying retryable: true, so a client that follows the
//     retry rules retried forever. A replayed error is no longer retryable under
//     that id and names the next step.
//  2. When Trace Core failed while the attempt was finalized, the business result was
//     acknowledged without its receipt and without any mark. The answer now says
//     receipt_pending (and names the receipt), and the gateway finalizes the attempt
//     in the background once Trace Core answers again.
//  3. A client that hung up mid-call cancelled a call that held its invocation id's
//     claim: the claim was dropped while the platform had the request. A retry then
//     ran the call again when it was not recorded, and, when it was, met its
//     Operation pending forever (receipt_pending, "retry", for good). A call that
//     holds a claim now runs to its end without its client; the retry gets its
//     result.
//  4. An Operation left pending by an instance that died mid-call (its claim expired
//     or its memory store went with it) answered every retry receipt_pending,
//     retryable, forever. Once the Operation is older than a claim lives
//     (idempotency.claim_ttl_ms), the retry gets operation_outcome_unknown: not
//     retryable, the operation named, read_outcome.
//  5. A call whose client hung up before the tool started (Trace Core slow to ensure
//     its Operation) went on detached, but still read the request's tracestate and
//     baggage from the freed request when the tool started (a use after free; the
//     sanitizer build stops on it). The detached call now keeps its own copies.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, startServer, stop, PREFIX } from './lib/stack.mjs';
import { post } from './lib/mcp-session.mjs';
import { until, hreq, sleep } from './lib/faultkit.mjs';

const INV = 'X-OpenBKN-Client-Invocation-Id';
let stack;
let sid;
let ctx;
let counter = 0;
const uniq = (p) => `${p}-${process.pid}-${++counter}`;

const simCall = async (method, p, body) => {
  const r = await fetch(`${stack.sim.base}${p}`, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(5000) });
  assert.ok(r.ok, `${method} ${p}: ${r.status}`);
  return r.json();
};
const mcpUrl = () => `${stack.server.base}${PREFIX}/mcp`;
async function mcp(name, args, inv) {
  const params = { name, arguments: args, ...(inv ? { _meta: { 'openbkn.ai/client-invocation-id': inv } } : {}) };
  const r = await post(mcpUrl(), { jsonrpc: '2.0', id: 3, method: 'tools/call', params }, { 'mcp-session-id': sid });
  assert.equal(r.status, 200, r.text);
  return r.json.result;
}
const errorOf = (res) => { const e = JSON.parse(res.content[0].text); return e.error || e; };
const rest = (tool, body, headers = {}) => post(`${stack.server.base}${PREFIX}/kn/${tool}`, body, headers);
const action = (extra = {}) => ({ kn_id: 'kn_ops', at_id: 'at_restart_pod', _instance_identities: [], dynamic_params: { grace_period_seconds: 5 }, bkn_context: ctx, ...extra });
const runs = async (since) => (await simCall('GET', `/_sim/executions?since=${since}`)).executions.filter((e) => e.path.endsWith('/execute') && e.status === 200).length;

before(async () => {
  stack = await startStack({ capture: 'enabled' });
  const init = await post(mcpUrl(), { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'campaign', version: '1' } } });
  sid = init.headers.get('mcp-session-id');
  const s = await mcp('bkn_start_interaction', { question: 'q', agent_name: 'campaign', conversation_mode: 'new' });
  assert.equal(s.isError, false);
  ctx = { conversation_id: s.structuredContent.conversation_id, interaction_id: s.structuredContent.interaction_id };
});

after(async () => {
  if (stack) assert.equal(await stack.stop(), 0);
});

test('a retryable error replayed to a retry of the same invocation id is no longer retryable and names the next step', async () => {
  const since = (await simCall('GET', '/_sim/executions')).last_seq;
  // REST read: the upstream drops the connection once
  await simCall('POST', '/_sim/faults', { service: 'ontology_query', mode: 'close', count: 1 });
  const id = uniq('read');
  const body = { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 2, bkn_context: ctx };
  const first = await rest('query_object_instance', body, { [INV]: id });
  assert.equal(first.status, 502, first.text);
  assert.equal(first.json.retryable, true);
  const again = await rest('query_object_instance', body, { [INV]: id });
  assert.equal(again.status, 502, again.text);
  assert.equal(again.json.code, first.json.code);
  assert.equal(again.json.retryable, false, again.text);
  assert.equal(again.json.required_action, 'use_new_idempotency_key');
  assert.equal(again.json.retry_after_ms, undefined);
  assert.match(again.json.solution, /new invocation id|新的 invocation id/);
  // MCP action: the upstream hangs past nothing, it closes; the retry says read_outcome
  await simCall('POST', '/_sim/faults', { service: 'ontology_query', mode: 'close', count: 1 });
  const aid = uniq('act');
  const a1 = await mcp('execute_action', { ...action(), response_format: 'json' }, aid);
  assert.equal(a1.isError, true);
  assert.equal(errorOf(a1).retryable, true);
  const a2 = await mcp('execute_action', { ...action(), response_format: 'json' }, aid);
  assert.equal(a2.isError, true);
  const e2 = errorOf(a2);
  assert.equal(e2.code, errorOf(a1).code);
  assert.equal(e2.retryable, false);
  assert.equal(e2.required_action, 'read_outcome');
  // nothing ran twice (nothing ran at all: the connection was dropped before the platform saw it)
  assert.equal(await runs(since), 0);
  // a new invocation id runs the call
  const a3 = await mcp('execute_action', { ...action(), response_format: 'json' }, uniq('act'));
  assert.equal(a3.isError, false);
  assert.equal(await runs(since), 1);
});

test('a success whose receipt could not be finalized says receipt_pending, and the receipt is finalized once Trace Core answers', async () => {
  const receiptOf = async (rid) => (await simCall('GET', '/_sim/trace/state')).receipts.find((r) => r.receipt_id === rid);
  // every try of the finalization fails (the gateway tries 3 times), then Trace Core recovers
  await simCall('POST', '/_sim/faults', { service: 'trace_core', path_prefix: '/api/agent-observability/v1/operations', status: 503, count: 3 });
  const r = await mcp('execute_action', { ...action({ dynamic_params: { grace_period_seconds: 6 } }), response_format: 'json' }, uniq('fin'));
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.equal(r._meta?.['openbkn.ai/trace-status'], 'receipt_pending', JSON.stringify(r));
  const rid = r._meta['openbkn.ai/receipt-id'];
  assert.match(rid || '', /^rcpt_/);
  assert.equal(r.structuredContent.bkn_receipt, undefined);
  assert.ok(await until(async () => (await receiptOf(rid))?.receipt_status === 'completed', 10000), 'finalized in the background');
  // REST: the same, as a header
  await simCall('POST', '/_sim/faults', { service: 'trace_core', path_prefix: '/api/agent-observability/v1/operations', status: 503, count: 3 });
  const q = await rest('execute_action', action({ dynamic_params: { grace_period_seconds: 7 } }), { [INV]: uniq('fin') });
  assert.equal(q.status, 200, q.text);
  assert.equal(q.headers.get('bkn-trace-status'), 'receipt_pending');
  const qid = q.headers.get('bkn-receipt-id');
  assert.match(qid || '', /^rcpt_/);
  assert.ok(await until(async () => (await receiptOf(qid))?.receipt_status === 'completed', 10000), 'finalized in the background');
});

test('a client that hangs up mid-call does not cancel a call holding its invocation id: the retry gets its result, one execution', async () => {
  const since = (await simCall('GET', '/_sim/executions')).last_seq;
  const hangUp = (url, body, headers) => hreq(url, { body, headers: { authorization: 'Bearer demo-user-token', accept: 'application/json, text/event-stream', ...headers }, onRequest: (req) => setTimeout(() => req.destroy(), 200) })
    .then(() => assert.fail('answered'), () => {});
  // recorded (MCP, managed): the platform executes at once and answers late
  await simCall('POST', '/_sim/faults', { service: 'ontology_query', answer_latency_ms: 800, count: 1 });
  const id = uniq('hangup');
  const args = { ...action({ dynamic_params: { grace_period_seconds: 8 } }), response_format: 'json' };
  await hangUp(mcpUrl(), { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'execute_action', arguments: args, _meta: { 'openbkn.ai/client-invocation-id': id } } }, { 'mcp-session-id': sid });
  await sleep(1200);
  const r = await mcp('execute_action', args, id);
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.match(r.structuredContent.bkn_receipt?.receipt_id || '', /^rcpt_/);
  assert.deepEqual(await mcp('execute_action', args, id), r);
  const acts = (await simCall('GET', `/_sim/executions?since=${since}`)).executions.filter((e) => e.path.endsWith('/execute'));
  assert.equal(acts.length, 1);
  // not recorded (a REST read without a context): the same, one execution
  await simCall('POST', '/_sim/faults', { service: 'ontology_query', answer_latency_ms: 800, count: 1 });
  const rid = uniq('hangup-read');
  const tp = `00-${'c'.repeat(31)}1-${'d'.repeat(16)}-01`;
  const body = { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 3 };
  await hangUp(`${stack.server.base}${PREFIX}/kn/query_object_instance`, body, { [INV]: rid, traceparent: tp });
  await sleep(1200);
  const q = await rest('query_object_instance', body, { [INV]: rid, traceparent: tp });
  assert.equal(q.status, 200, q.text);
  const reads = (await simCall('GET', `/_sim/executions?since=${since}&trace_id=${'c'.repeat(31)}1`)).executions;
  assert.equal(reads.length, 1, 'the read ran once');
});

test('a call detached before its tool started passes on the request\'s own trace context', async () => {
  const hangUp = (url, body, headers) => hreq(url, { body, headers: { authorization: 'Bearer demo-user-token', accept: 'application/json, text/event-stream', ...headers }, onRequest: (req) => setTimeout(() => req.destroy(), 200) })
    .then(() => assert.fail('answered'), () => {});
  const before = (await simCall('GET', '/_sim/requests')).last_seq;
  // Trace Core answers operations:ensure late: the client is gone before the tool starts
  await simCall('POST', '/_sim/faults', { service: 'trace_core', path_prefix: '/api/agent-observability/v1/conversations/', answer_latency_ms: 800, count: 1 });
  const id = uniq('detached');
  const trace = { traceparent: `00-${'e'.repeat(31)}1-${'f'.repeat(16)}-01`, tracestate: 'vendor=detached-state', baggage: 'k=detached-baggage' };
  const args = { ...action({ dynamic_params: { grace_period_seconds: 11 } }), response_format: 'json' };
  await hangUp(mcpUrl(), { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'execute_action', arguments: args, _meta: { 'openbkn.ai/client-invocation-id': id } } }, { 'mcp-session-id': sid, ...trace });
  const executed = async () => (await simCall('GET', `/_sim/requests?since=${before}`)).requests.filter((q) => q.path.endsWith('/execute'));
  assert.ok(await until(async () => (await executed()).length === 1, 10000), 'the detached call ran its tool');
  const [q] = await executed();
  assert.match(q.headers.traceparent, new RegExp(`^00-${'e'.repeat(31)}1-[0-9a-f]{16}-01$`));
  assert.equal(q.headers.tracestate, trace.tracestate);
  assert.equal(q.headers.baggage, trace.baggage);
  // the retry gets the detached call's result, and the server is still there
  const r = await mcp('execute_action', args, id);
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.match(r.structuredContent.bkn_receipt?.receipt_id || '', /^rcpt_/);
});

test('an Operation left pending by an instance that died mid-call: the retry is told the outcome is unknown, not to retry', async () => {
  // an instance of its own (memory store): killed while the platform holds the call
  const own = await startServer(stack.sim.base, {});
  try {
    const url = `${own.base}${PREFIX}/mcp`;
    const session = async () => (await post(url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'campaign', version: '1' } } })).headers.get('mcp-session-id');
    const id = uniq('orphan');
    const args = { ...action({ dynamic_params: { grace_period_seconds: 9 } }), response_format: 'json' };
    const params = { name: 'execute_action', arguments: args, _meta: { 'openbkn.ai/client-invocation-id': id } };
    await simCall('POST', '/_sim/faults', { service: 'ontology_query', answer_latency_ms: 1500, count: 1 });
    const pending = post(url, { jsonrpc: '2.0', id: 2, method: 'tools/call', params }, { 'mcp-session-id': await session() }).catch(() => null);
    await until(async () => (await simCall('GET', '/_sim/faults')).faults.some((f) => f.answer_latency_ms === 1500 && f.hits === 1), 5000);
    await stop(own.proc, 'SIGKILL');
    await pending;
    // a claim lives 1 s here: an Operation pending longer than that has no owner left
    const again = await startServer(stack.sim.base, { env: { CL_IDEMPOTENCY_CLAIM_TTL_MS: '1000' } });
    await sleep(1200);
    try {
      const url2 = `${again.base}${PREFIX}/mcp`;
      const sid2 = (await post(url2, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'campaign', version: '1' } } })).headers.get('mcp-session-id');
      const r = await post(url2, { jsonrpc: '2.0', id: 3, method: 'tools/call', params }, { 'mcp-session-id': sid2 });
      const res = r.json.result;
      assert.equal(res.isError, true, r.text);
      const e = errorOf(res);
      assert.equal(e.code, 'operation_outcome_unknown', r.text);
      assert.equal(e.retryable, false);
      assert.equal(e.required_action, 'read_outcome');
      assert.match(e.details.operation_id, /^op_/);
      assert.equal(e.details.receipt_status, 'pending');
    } finally {
      assert.equal(await again.stop(), 0);
    }
  } finally {
    await stop(own.proc, 'SIGKILL');
  }
});
