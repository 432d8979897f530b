// Capture policy and Trace Core outages:
// - capture disabled: start still issues real ids, business calls run with or
//   without them and record nothing, finish still ends the interaction;
// - Trace Core down (verified by the bounded probe): start/finish fail with the
//   retryable trace_core_unavailable and no ids; business calls are admitted
//   unrecorded and say so (REST header, MCP _meta);
// - Trace Core failing but alive: the business call fails retryably and reaches
//   no downstream service.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startStack, ROOT, PREFIX } from './lib/stack.mjs';

const PROBE_TRIES = 2;
const PROBE_BUDGET_MS = 600;
const tmpDirs = [];

after(() => {
  for (const d of tmpDirs) fs.rmSync(d, { recursive: true, force: true });
});

// tools/ plus the execute fixture (a REST execution route).
function toolsWithExecute() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-outage-'));
  tmpDirs.push(dir);
  fs.cpSync(path.join(ROOT, 'tools'), dir, { recursive: true });
  fs.copyFileSync(path.join(ROOT, 'tests/fixtures/tools_execute/execute_probe.lua'), path.join(dir, 'execute_probe.lua'));
  return dir;
}

// A small client bound to one stack.
function client(stack) {
  const sessions = {};
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
  async function mcp(name, args, { meta, token = 'demo-user-token' } = {}) {
    if (!sessions[token]) {
      const r = await post(stack.server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'outage', version: '1' } } }, {}, token);
      assert.equal(r.status, 200, r.text);
      sessions[token] = r.headers.get('mcp-session-id');
    }
    const params = { name, arguments: args };
    if (meta) params._meta = meta;
    const r = await post(stack.server.mcpUrl, { jsonrpc: '2.0', id: 2, method: 'tools/call', params }, { 'mcp-session-id': sessions[token] }, token);
    assert.equal(r.status, 200, r.text);
    assert.ok(r.json.result, r.text);
    return { ...r.json.result, raw: r.text };
  }
  const rest = (tool, body, headers = {}) => post(`${stack.server.base}${PREFIX}/kn/${tool}`, body, headers);
  const sim = async (method, p, body) => {
    const r = await fetch(`${stack.sim.base}${p}`, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(5000) });
    assert.ok(r.ok, `${method} ${p}: ${r.status}`);
    return r.json();
  };
  const lastSeq = async () => (await sim('GET', '/_sim/requests')).last_seq;
  const since = async (seq, service) => (await sim('GET', `/_sim/requests?since=${seq}${service ? `&service=${service}` : ''}`)).requests;
  const downstream = async (seq) => (await since(seq)).filter((r) => r.service === 'ontology_query' || r.service === 'bkn_backend');
  const state = () => sim('GET', '/_sim/trace/state');
  async function start(agent = 'outage-agent') {
    const r = await mcp('bkn_start_interaction', { question: 'q', agent_name: agent, conversation_mode: 'new' });
    assert.equal(r.isError, false, r.raw);
    return { conversation_id: r.structuredContent.conversation_id, interaction_id: r.structuredContent.interaction_id };
  }
  return { mcp, rest, sim, lastSeq, since, downstream, state, start };
}

function mcpError(result) {
  assert.equal(result.isError, true, result.raw);
  return JSON.parse(result.content[0].text);
}

const QUERY = { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 2 };

test('capture disabled: real ids, nothing recorded, calls without context admitted, finish ends the turn', async () => {
  const stack = await startStack({ capture: 'disabled', env: { CL_TOOLS_DIR: toolsWithExecute() } });
  try {
    const c = client(stack);
    const t = await c.start();
    assert.match(t.conversation_id, /^conv_[0-9a-f]{32}$/);
    let st = await c.state();
    assert.equal(st.capture.capture, 'disabled');
    assert.ok(st.conversations.some((x) => x.conversation_id === t.conversation_id), 'start did not create the conversation at Trace Core');
    assert.ok(st.interactions.some((x) => x.interaction_id === t.interaction_id && x.execution_status === 'active'));

    const seq = await c.lastSeq();
    const withCtx = await c.mcp('query_object_instance', { ...QUERY, bkn_context: t });
    assert.equal(withCtx.isError, false, withCtx.raw);
    assert.equal(withCtx.structuredContent.datas.length, 2);
    assert.equal(withCtx.structuredContent.bkn_receipt, undefined);
    assert.equal(withCtx._meta?.['openbkn.ai/trace-status'], undefined); // disabled is not an outage
    const without = await c.mcp('list_knowledge_networks', {});
    assert.equal(without.isError, false, without.raw);
    assert.equal(without.structuredContent.total_count, 3);
    for (const body of [{ ...QUERY }, { ...QUERY, bkn_context: t }]) {
      const r = await c.rest('query_object_instance', body);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers.get('bkn-receipt-id'), null);
      assert.equal(r.headers.get('bkn-operation-id'), null);
      assert.equal(r.headers.get('bkn-trace-status'), null);
    }
    // REST execution routes too: no context needed while capture is disabled
    const ex = await c.rest('execute_probe', { kn_id: 'kn_medical' });
    assert.equal(ex.status, 200, ex.text);
    assert.equal(ex.headers.get('bkn-receipt-id'), null);
    const ex2 = await c.rest('execute_probe', { kn_id: 'kn_medical', bkn_context: t });
    assert.equal(ex2.status, 200, ex2.text);
    assert.equal((await c.downstream(seq)).length, 6);

    st = await c.state();
    assert.deepEqual(st.operations, []);
    assert.deepEqual(st.receipts, []);
    assert.deepEqual(st.interactions.find((x) => x.interaction_id === t.interaction_id).operation_ids, []);

    // Refusals of a malformed context still apply (never downgraded).
    const bad = mcpError(await c.mcp('query_object_instance', { ...QUERY, bkn_context: { conversation_id: t.conversation_id } }));
    assert.equal(bad.code, 'interaction_required');

    const fin = await c.mcp('bkn_finish_interaction', { interaction_id: t.interaction_id, outcome: 'completed', answer: 'two drugs' });
    assert.equal(fin.isError, false, fin.raw);
    assert.equal(fin.structuredContent.execution_status, 'completed');
    st = await c.state();
    assert.equal(st.interactions.find((x) => x.interaction_id === t.interaction_id).execution_status, 'completed');
    // The conversation is reusable.
    const r2 = await c.mcp('bkn_start_interaction', { question: 'q2', agent_name: 'outage-agent', conversation_mode: 'continue', conversation_id: t.conversation_id });
    assert.equal(r2.isError, false, r2.raw);
    assert.equal(r2.structuredContent.conversation_id, t.conversation_id);
  } finally {
    assert.equal(await stack.stop(), 0);
  }
});

test('capture switched off at runtime (POST /_sim/trace) is honoured after the policy TTL', async () => {
  const stack = await startStack({ capture: 'enabled', env: { CL_TRACE_CORE_CAPTURE_POLICY_TTL_S: '1' } });
  try {
    const c = client(stack);
    const t = await c.start();
    const managed = await c.mcp('list_knowledge_networks', { bkn_context: t });
    assert.ok(managed.structuredContent.bkn_receipt, managed.raw);
    assert.equal(mcpError(await c.mcp('list_knowledge_networks', {})).code, 'conversation_required');
    await c.sim('POST', '/_sim/trace', { capture: 'disabled', ttl_s: 1 });
    await new Promise((r) => setTimeout(r, 1200));
    const opsBefore = (await c.state()).operations.length;
    const adhoc = await c.mcp('list_knowledge_networks', {});
    assert.equal(adhoc.isError, false, adhoc.raw);
    const unmanaged = await c.mcp('list_knowledge_networks', { bkn_context: t });
    assert.equal(unmanaged.isError, false, unmanaged.raw);
    assert.equal(unmanaged.structuredContent.bkn_receipt, undefined);
    assert.equal((await c.state()).operations.length, opsBefore);
  } finally {
    assert.equal(await stack.stop(), 0);
  }
});

function downEnv(extra = {}) {
  return { CL_TRACE_CORE_PROBE_TRIES: String(PROBE_TRIES), CL_TRACE_CORE_PROBE_BUDGET_MS: String(PROBE_BUDGET_MS), CL_TOOLS_DIR: toolsWithExecute(), ...extra };
}

// Every result of a lifecycle tool during the outage: retryable, and no id anywhere.
function assertUnavailableNoIds(result) {
  const e = mcpError(result);
  assert.equal(e.code, 'trace_core_unavailable', result.raw);
  assert.equal(e.retryable, true);
  // the error object is the text block's JSON; an error result has no structuredContent
  assert.equal('structuredContent' in result, false, result.raw);
  assert.doesNotMatch(result.raw, /conv_[0-9a-f]|int_[0-9a-f]/);
}

test('Trace Core down from the start: start fails retryably without ids, business calls run unrecorded', async () => {
  const stack = await startStack({ capture: 'enabled', env: downEnv() });
  try {
    const c = client(stack);
    await c.sim('POST', '/_sim/faults', { service: 'trace_core', mode: 'close' });
    assertUnavailableNoIds(await c.mcp('bkn_start_interaction', { question: 'q', agent_name: 'down-agent', conversation_mode: 'new' }));
    assertUnavailableNoIds(await c.mcp('bkn_finish_interaction', { interaction_id: `int_${'1'.repeat(32)}`, outcome: 'completed', answer: 'a' }));

    // The first business call pays for the probe: bounded, at most PROBE_TRIES tries.
    const seq = await c.lastSeq();
    const t0 = Date.now();
    const first = await c.mcp('list_knowledge_networks', {});
    const took = Date.now() - t0;
    assert.equal(first.isError, false, first.raw);
    assert.deepEqual(first._meta, { 'openbkn.ai/trace-status': 'unrecorded' });
    assert.equal(first.structuredContent.bkn_receipt, undefined);
    // bounded by the number of tries (counted: a loaded machine is slow, it does not
    // add tries)
    const health = (await c.since(seq, 'trace_core')).filter((r) => r.method === 'GET' && r.path.endsWith('/health'));
    assert.ok(health.length >= 1 && health.length <= PROBE_TRIES, `${health.length} GET /health requests (${took} ms)`);

    const r = await c.rest('execute_probe', { kn_id: 'kn_medical' });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers.get('bkn-trace-status'), 'unrecorded');
    assert.equal(r.headers.get('bkn-receipt-id'), null);
    assert.equal((await c.downstream(seq)).length, 2);
    const st = await c.state();
    assert.deepEqual(st.conversations, []);
    assert.deepEqual(st.operations, []);
  } finally {
    assert.equal(await stack.stop(), 0);
  }
});

test('Trace Core goes down mid-turn: calls with or without context run unrecorded on MCP and REST; start and finish refuse', async () => {
  const stack = await startStack({ capture: 'enabled', env: downEnv() });
  try {
    const c = client(stack);
    const t = await c.start('mid-agent');
    const managed = await c.mcp('query_object_instance', { ...QUERY, bkn_context: t });
    assert.ok(managed.structuredContent.bkn_receipt, managed.raw); // the policy is now cached as enabled
    const opsBefore = (await c.state()).operations.length;
    await c.sim('POST', '/_sim/faults', { service: 'trace_core', mode: 'close' });

    const seq = await c.lastSeq();
    const t0 = Date.now();
    const withCtx = await c.mcp('query_object_instance', { ...QUERY, bkn_context: t });
    const took = Date.now() - t0;
    assert.equal(withCtx.isError, false, withCtx.raw);
    assert.deepEqual(withCtx._meta, { 'openbkn.ai/trace-status': 'unrecorded' });
    assert.equal(withCtx.structuredContent.bkn_receipt, undefined);
    assert.deepEqual(withCtx.structuredContent.datas, managed.structuredContent.datas.slice(0, 2));
    // bounded by the number of tries (counted: a loaded machine is slow, it does not
    // add tries)
    const health = (await c.since(seq, 'trace_core')).filter((r) => r.method === 'GET' && r.path.endsWith('/health'));
    assert.ok(health.length >= 1 && health.length <= PROBE_TRIES, `${health.length} GET /health requests (${took} ms)`);

    const without = await c.mcp('query_object_instance', QUERY);
    assert.equal(without.isError, false, without.raw);
    assert.deepEqual(without._meta, { 'openbkn.ai/trace-status': 'unrecorded' });

    // REST reads: managed ones are marked; ad hoc ones never involve Trace Core (they
    // are unrecorded by definition, outage or not) and carry no mark.
    for (const [body, mark] of [[{ ...QUERY, bkn_context: t }, 'unrecorded'], [QUERY, null]]) {
      const r = await c.rest('query_object_instance', body);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers.get('bkn-trace-status'), mark, JSON.stringify(body));
      assert.equal(r.headers.get('bkn-receipt-id'), null);
      assert.equal(r.json.datas.length, 2);
    }
    for (const body of [{ kn_id: 'kn_medical' }, { kn_id: 'kn_medical', bkn_context: t }]) {
      const r = await c.rest('execute_probe', body);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers.get('bkn-trace-status'), 'unrecorded');
    }
    assert.equal((await c.downstream(seq)).length, 6);

    assertUnavailableNoIds(await c.mcp('bkn_start_interaction', { question: 'q', agent_name: 'mid-agent', conversation_mode: 'new' }));
    assertUnavailableNoIds(await c.mcp('bkn_finish_interaction', { interaction_id: t.interaction_id, outcome: 'completed', answer: 'a' }));

    const st = await c.state();
    assert.equal(st.operations.length, opsBefore, 'an operation was recorded during the outage');
    assert.equal(st.interactions.find((x) => x.interaction_id === t.interaction_id).execution_status, 'active');
  } finally {
    assert.equal(await stack.stop(), 0);
  }
});

test('Trace Core failing but alive: retryable trace_core_unavailable, no downstream call', async () => {
  const stack = await startStack({ capture: 'enabled', env: downEnv() });
  try {
    const c = client(stack);
    const t = await c.start('alive-agent');
    const ok = await c.mcp('list_knowledge_networks', { bkn_context: t });
    assert.ok(ok.structuredContent.bkn_receipt, ok.raw);
    // The interaction and operation routes fail; /health answers. (Both: within
    // trace_core.lease_cache_ttl_s a call reuses the interaction lookup of the call
    // before and goes straight to operations:ensure under /conversations.)
    await c.sim('POST', '/_sim/faults', { service: 'trace_core', path_prefix: '/api/agent-observability/v1/interactions', status: 503 });
    await c.sim('POST', '/_sim/faults', { service: 'trace_core', path_prefix: '/api/agent-observability/v1/conversations', status: 503 });
    const seq = await c.lastSeq();
    const e = mcpError(await c.mcp('query_object_instance', { ...QUERY, bkn_context: t }));
    assert.equal(e.code, 'trace_core_unavailable');
    assert.equal(e.retryable, true);
    const r = await c.rest('query_object_instance', { ...QUERY, bkn_context: t });
    assert.equal(r.status, 503, r.text);
    assert.equal(r.json.code, 'trace_core_unavailable');
    assert.equal(r.json.retryable, true);
    assert.equal(r.headers.get('bkn-trace-status'), null);
    const ex = await c.rest('execute_probe', { kn_id: 'kn_medical', bkn_context: t });
    assert.equal(ex.status, 503, ex.text);
    assert.deepEqual(await c.downstream(seq), []);
    const tc = await c.since(seq, 'trace_core');
    assert.ok(tc.some((x) => x.path.endsWith('/health')), 'no availability probe was made');
    // Trace Core is available (the probe says so): a context is still required on MCP
    for (let i = 0; i < 6; i++) { // enough failures to open the circuit breaker
      assert.equal(mcpError(await c.mcp('list_knowledge_networks', { bkn_context: t })).code, 'trace_core_unavailable');
    }
    const noCtx = mcpError(await c.mcp('list_knowledge_networks', {}));
    assert.equal(noCtx.code, 'conversation_required');
    assert.deepEqual(await c.downstream(seq), []);
    // ad hoc REST reads need no Trace Core at all
    const adhoc = await c.rest('query_object_instance', QUERY);
    assert.equal(adhoc.status, 200, adhoc.text);
    assert.equal(adhoc.headers.get('bkn-trace-status'), null);
  } finally {
    assert.equal(await stack.stop(), 0);
  }
});

test('Trace Core hanging: every wait is bounded (call timeout x tries, then the probe budget)', async () => {
  const TIMEOUT_MS = 300;
  const stack = await startStack({ capture: 'enabled', env: downEnv({ CL_TRACE_CORE_TIMEOUT_MS: String(TIMEOUT_MS) }) });
  try {
    const c = client(stack);
    await c.sim('POST', '/_sim/faults', { service: 'trace_core', mode: 'hang' });
    const seq = await c.lastSeq();
    const t0 = Date.now();
    // cold: the capture policy lookup hangs (idempotent: up to 3 tries), then the probe
    const r = await c.mcp('list_knowledge_networks', {});
    const took = Date.now() - t0;
    assert.equal(r.isError, false, r.raw);
    assert.deepEqual(r._meta, { 'openbkn.ai/trace-status': 'unrecorded' });
    assert.ok(took >= PROBE_BUDGET_MS * 0.8, `the probe did not wait its budget (${took} ms)`);
    // every wait is bounded by its tries (counted; no upper bound on the time: a loaded
    // machine fires timers late): the policy lookup at most 3, the probe PROBE_TRIES
    const calls = await c.since(seq, 'trace_core');
    const health = calls.filter((x) => x.method === 'GET' && x.path.endsWith('/health'));
    assert.ok(health.length >= 1 && health.length <= PROBE_TRIES, `${health.length} GET /health requests`);
    assert.ok(calls.length - health.length <= 3, `${calls.length - health.length} other Trace Core requests`);
    // start cannot invent ids: bounded too (at most 3 tries), and retryable
    const seq1 = await c.lastSeq();
    assertUnavailableNoIds(await c.mcp('bkn_start_interaction', { question: 'q', agent_name: 'hang-agent', conversation_mode: 'new' }));
    const starts = await c.since(seq1, 'trace_core');
    assert.ok(starts.length <= 3, `start made ${starts.length} Trace Core requests`);
    // the verdict is cached: the next call does not probe again
    const seq2 = await c.lastSeq();
    const again = await c.rest('execute_probe', { kn_id: 'kn_medical' });
    assert.equal(again.status, 200, again.text);
    assert.equal(again.headers.get('bkn-trace-status'), 'unrecorded');
    assert.equal((await c.since(seq2, 'trace_core')).filter((x) => x.path.endsWith('/health')).length, 0);
  } finally {
    assert.equal(await stack.stop(), 0);
  }
});
