// When the original result is gone but Trace Core still holds the Operation - the
// memory state store was emptied by a restart, or the record was evicted by
// idempotency.max_records - a retry with the same invocation id does not run the
// tool again and never gets a success-shaped stub: it gets the localized error
// operation_already_executed (REST 409, MCP isError), not retryable, naming the
// receipt and the next step (execute_action: get_action_execution with the run's
// execution_id, recorded on the receipt). idempotency_ttl_s shorter than
// trace_core.operation_key_retention_s is refused at start.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { startSimulator, startServer, serverEnv, ROOT, PREFIX } from './lib/stack.mjs';
import { post } from './lib/mcp-session.mjs';

const INV = 'X-OpenBKN-Client-Invocation-Id';
const META_INV = 'openbkn.ai/client-invocation-id';
let sim;
let counter = 0;
const uniq = (p) => `${p}-${process.pid}-${++counter}`;

before(async () => {
  sim = await startSimulator({ capture: 'enabled' });
});

after(async () => {
  if (sim) await sim.stop();
});

// An MCP client of one server: tools/call on /mcp or /mcp-compact.
function client(server) {
  const sessions = {};
  return async (name, args, { surface = '/mcp', meta, headers = {} } = {}) => {
    const url = `${server.base}${PREFIX}${surface}`;
    if (!sessions[url]) {
      const r = await post(url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'gone', version: '1' } } });
      assert.equal(r.status, 200, r.text);
      sessions[url] = r.headers.get('mcp-session-id');
    }
    const params = { name, arguments: args };
    if (meta) params._meta = meta;
    const r = await post(url, { jsonrpc: '2.0', id: 7, method: 'tools/call', params }, { 'mcp-session-id': sessions[url], ...headers });
    assert.equal(r.status, 200, r.text);
    assert.ok(r.json.result, r.text);
    return r;
  };
}

const rest = (server, tool, body, headers = {}) => post(`${server.base}${PREFIX}/kn/${tool}`, body, headers);

async function startTurn(mcp) {
  const r = await mcp('bkn_start_interaction', { question: 'q', agent_name: 'gone-agent', conversation_mode: 'new' });
  assert.equal(r.json.result.isError, false, r.text);
  const s = r.json.result.structuredContent;
  return { conversation_id: s.conversation_id, interaction_id: s.interaction_id };
}

const simRequests = async (since) => (await (await fetch(`${sim.base}/_sim/requests?since=${since}&service=ontology_query`)).json()).requests;
const lastSeq = async () => (await (await fetch(`${sim.base}/_sim/requests`)).json()).last_seq;
const executions = async (since) => (await simRequests(since)).filter((r) => r.method === 'POST' && r.path.endsWith('/execute'));
const queries = async (since) => (await simRequests(since)).filter((r) => r.method === 'POST' && /\/object-types\/[^/?]+(\?|$)/.test(r.path));

const action = (ctx) => ({ kn_id: 'kn_ops', at_id: 'at_restart_pod', _instance_identities: [], dynamic_params: { grace_period_seconds: 1 }, bkn_context: ctx });
const query = (ctx) => ({ kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 2, bkn_context: ctx });

const mcpError = (r) => {
  assert.equal(r.json.result.isError, true, r.text);
  return JSON.parse(r.json.result.content[0].text);
};

test('after a restart of a memory-store server: the localized operation_already_executed error, MCP and REST, nothing runs again', async () => {
  let server = await startServer(sim.base);
  try {
    let mcp = client(server);
    const T = await startTurn(mcp);
    const idMcp = uniq('act-mcp');
    const idRest = uniq('act-rest');
    const idRead = uniq('read');
    const a = await mcp('execute_action', action(T), { meta: { [META_INV]: idMcp } });
    assert.equal(a.json.result.isError, false, a.text);
    const run = a.json.result.structuredContent.execution_id;
    const receipt = a.json.result.structuredContent.bkn_receipt;
    // the receipt names the run it started
    assert.deepEqual(receipt.business_refs.map((r) => r.ref_id), [`action_instance:kn_ops:at_restart_pod:${run}`]);
    const r = await rest(server, 'execute_action', action(T), { [INV]: idRest });
    assert.equal(r.status, 200, r.text);
    const q = await mcp('query_object_instance', query(T), { meta: { [META_INV]: idRead } });
    assert.equal(q.json.result.isError, false, q.text);

    await server.stop();
    server = await startServer(sim.base);
    mcp = client(server);
    const seq = await lastSeq();

    // MCP, deployment language (zh-CN), and on the other MCP surface too
    for (const surface of ['/mcp', '/mcp-compact']) {
      const e = mcpError(await mcp('execute_action', action(T), { surface, meta: { [META_INV]: idMcp } }));
      assert.equal(e.code, 'operation_already_executed');
      assert.equal(e.retryable, false);
      assert.equal(e.required_action, 'read_outcome');
      assert.match(e.description, /已经执行过/);
      assert.match(e.description, /get_action_execution/);
      assert.ok(e.description.includes(run), e.description);
      assert.equal(e.details.execution_id, run);
      assert.equal(e.details.kn_id, 'kn_ops');
      assert.equal(e.details.receipt_id, receipt.receipt_id);
      assert.equal(e.details.operation_id, receipt.operation_id);
      assert.equal(e.details.receipt_status, 'completed');
      assert.deepEqual(e.details.next_call, { name: 'get_action_execution', arguments: { kn_id: 'kn_ops', execution_id: run } });
    }
    // Accept-Language: en-US
    const en = await mcp('execute_action', action(T), { meta: { [META_INV]: idMcp }, headers: { 'accept-language': 'en-US' } });
    const ee = mcpError(en);
    assert.match(ee.description, /already ran/);
    assert.doesNotMatch(ee.description, /[\u4e00-\u9fff]/);
    assert.equal(JSON.parse(en.json.result.content[0].text).bkn_receipt.receipt_id, receipt.receipt_id); // in the text block
    assert.doesNotMatch(en.text, /durable receipt reused/);

    // REST: 409, both languages, the receipt headers
    const r2 = await rest(server, 'execute_action', action(T), { [INV]: idRest });
    assert.equal(r2.status, 409, r2.text);
    assert.equal(r2.json.code, 'operation_already_executed');
    assert.equal(r2.json.retryable, false);
    assert.equal(r2.json.required_action, 'read_outcome');
    assert.equal(r2.json.details.execution_id, r.json.execution_id);
    assert.match(r2.json.description, /已经执行过/);
    assert.equal(r2.headers.get('bkn-receipt-id'), r.headers.get('bkn-receipt-id'));
    const r3 = await rest(server, 'execute_action', action(T), { [INV]: idRest, 'accept-language': 'en-US' });
    assert.equal(r3.status, 409, r3.text);
    assert.match(r3.json.description, /already ran/);
    assert.doesNotMatch(r3.json.description, /[\u4e00-\u9fff]/);

    // a read: the next step is a new invocation id
    const e = mcpError(await mcp('query_object_instance', query(T), { meta: { [META_INV]: idRead }, headers: { 'accept-language': 'en-US' } }));
    assert.equal(e.code, 'operation_already_executed');
    assert.equal(e.required_action, 'use_new_idempotency_key');
    assert.match(e.description, /new invocation id/);
    assert.equal(e.details.next_call, undefined);

    assert.equal((await executions(seq)).length, 0);
    assert.equal((await queries(seq)).length, 0);
  } finally {
    await server.stop();
  }
});

test('a record evicted by idempotency.max_records gives the same error, never a stub', async () => {
  const server = await startServer(sim.base, { env: { CL_IDEMPOTENCY_MAX_RECORDS: '2' } });
  try {
    const mcp = client(server);
    const T = await startTurn(mcp);
    const id = uniq('evicted');
    const a = await mcp('execute_action', action(T), { meta: { [META_INV]: id } });
    assert.equal(a.json.result.isError, false, a.text);
    for (let i = 0; i < 3; i++) {
      const q = await mcp('query_object_instance', query(T), { meta: { [META_INV]: uniq('filler') } });
      assert.equal(q.json.result.isError, false, q.text);
    }
    const seq = await lastSeq();
    const e = mcpError(await mcp('execute_action', action(T), { meta: { [META_INV]: id } }));
    assert.equal(e.code, 'operation_already_executed');
    assert.equal(e.details.execution_id, a.json.result.structuredContent.execution_id);
    assert.equal((await executions(seq)).length, 0);
  } finally {
    await server.stop();
  }
});

test('idempotency_ttl_s shorter than trace_core.operation_key_retention_s is refused at start', () => {
  const r = spawnSync(process.env.CL_BIN || path.join(ROOT, 'build/context-loader'), ['--config', path.join(ROOT, 'etc/context-loader.conf')], {
    env: { ...process.env, ...serverEnv(sim.base, { CL_IDEMPOTENCY_TTL_S: '3600' }) },
    encoding: 'utf8',
    timeout: 10000,
  });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /idempotency_ttl_s/);
  assert.match(r.stderr, /trace_core\.operation_key_retention_s/);
});
