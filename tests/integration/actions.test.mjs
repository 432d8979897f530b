// The action loop over HTTP: get_action_info
// (class level vs instantiated, _dynamic_tools, the bound tool the caller may not
// read), execute_action (asynchronous, empty _instance_identities passed on,
// dynamic_params forwarded, conversation_required without context),
// get_action_execution's pagination edge cases and list_action_executions' cursor.
// Capture is enabled: REST reads run ad hoc, execute_action needs bkn_context.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, PREFIX } from './lib/stack.mjs';

const TOKEN = 'demo-user-token';
const BULK = 'cqq4bulk4d2fg00fvm8f0'; // 12,000 results, every 100th failed
const OQ = '/api/ontology-query/in/v1/knowledge-networks';
let stack;

async function post(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKEN}`, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(10000),
  });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, headers: r.headers, text, json };
}

const rest = (tool, body, headers) => post(`${stack.server.base}${PREFIX}/kn/${tool}`, body, headers);
const simGet = async (p) => (await fetch(`${stack.sim.base}${p}`, { signal: AbortSignal.timeout(5000) })).json();
const lastSeq = async () => (await simGet('/_sim/requests')).last_seq;
const since = async (seq, service) => (await simGet(`/_sim/requests?since=${seq}&service=${service}`)).requests;
async function fault(spec) {
  const r = await fetch(`${stack.sim.base}/_sim/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(spec) });
  assert.equal(r.status, 200, await r.text());
}

// One managed interaction, started over MCP, for the execution route.
async function startInteraction() {
  const url = stack.server.mcpUrl;
  const init = await post(url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'actions-test', version: '1' } } });
  const h = { 'mcp-session-id': init.headers.get('mcp-session-id') };
  await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  const r = await post(url, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'bkn_start_interaction', arguments: { question: 'Restart the failed pods', agent_name: 'actions-agent', conversation_mode: 'new' } } }, h);
  const s = r.json.result.structuredContent;
  assert.ok(s && s.interaction_id, r.text);
  return { conversation_id: s.conversation_id, interaction_id: s.interaction_id };
}

before(async () => { stack = await startStack({ capture: 'enabled' }); });
after(async () => { if (stack) assert.equal(await stack.stop(), 0); });

// ---- get_action_execution pagination ----------------------------------------

async function execution(args, headers) {
  const seq = await lastSeq();
  const r = await rest('get_action_execution', { kn_id: 'kn_ops', execution_id: BULK, ...args }, headers);
  const calls = (await since(seq, 'ontology_query')).filter((c) => c.path.includes(BULK));
  return { r, calls };
}

test('no paging field: the legacy path, at most 1000 results', async () => {
  const { r, calls } = await execution({});
  assert.equal(r.status, 200, r.text);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].path, `${OQ}/kn_ops/action-executions/${BULK}`);
  assert.deepEqual(calls[0].query, {});
  assert.equal(r.json.results.length, 1000);
  assert.equal(r.json.results_total, 12000);
  assert.equal(r.json.status, 'completed');
});

test('results_offset 0 alone switches to paging (default page 100)', async () => {
  const { r, calls } = await execution({ results_offset: 0 });
  assert.equal(r.status, 200, r.text);
  assert.equal(calls[0].path, `${OQ}/kn_ops/action-logs/${BULK}`);
  assert.equal(calls[0].query.results_offset, '0');
  assert.equal(r.json.results.length, 100);
  assert.equal(r.json.results_offset, 0);
  assert.equal(r.json.results_limit, 100);
  assert.equal(r.json.results_total, 12000);
});

test('results_limit 0 -> 100, 1000 -> 1000, 1001 -> 1000', async () => {
  for (const [limit, want] of [[0, 100], [1000, 1000], [1001, 1000]]) {
    const { r, calls } = await execution({ results_limit: limit });
    assert.equal(r.status, 200, `${limit}: ${r.text}`);
    assert.equal(calls[0].path, `${OQ}/kn_ops/action-logs/${BULK}`, String(limit));
    assert.equal(r.json.results.length, want, String(limit));
    assert.equal(r.json.results_limit, want, String(limit));
    assert.equal(r.json.results[0]._instance_identity.id, 100000);
  }
});

test('offset 9950 with limit 100 -> the last 50 results before 10000', async () => {
  const { r } = await execution({ results_offset: 9950, results_limit: 100 });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.results.length, 50);
  assert.equal(r.json.results_offset, 9950);
  assert.equal(r.json.results[0]._instance_identity.id, 100000 + 9950);
  assert.equal(r.json.results[49]._instance_identity.id, 100000 + 9999);
});

test('offset 10000 -> a clear error saying the interface cannot page past 10000', async () => {
  for (const lang of ['zh-CN', 'en-US']) {
    const { r } = await execution({ results_offset: 10000 }, { 'accept-language': lang });
    assert.equal(r.status, 400, r.text);
    assert.match(r.text, /10000/);
    assert.ok(r.json.description.length > 0 && r.json.solution.length > 0, r.text);
  }
});

test('execution trimming: no snapshot, executor or action_source; counts and paging fields kept', async () => {
  const raw = await (await fetch(`${stack.sim.base}${OQ}/kn_ops/action-logs/${BULK}?results_limit=2`, { headers: { 'x-account-id': 'u_demo' } })).json();
  assert.ok(raw.action_type_snapshot && raw.executor && raw.action_source, 'the simulator sends the heavy fields');
  for (const args of [{}, { results_limit: 5 }]) {
    const { r } = await execution(args);
    for (const k of ['action_type_snapshot', 'executor', 'action_source', 'instance_identity_hash']) assert.equal(r.json[k], undefined, k);
    for (const k of ['status', 'success_count', 'failed_count', 'total_count', 'results', 'results_total', 'results_offset', 'results_limit']) assert.notEqual(r.json[k], undefined, k);
    for (const res of r.json.results) {
      assert.ok(res.status === 'success' || res.status === 'failed');
      assert.ok(res._instance_identity);
    }
  }
  // completed != all succeeded: the description says so, and failures are counted.
  const { r } = await execution({ results_offset: 0, results_limit: 200 });
  assert.equal(r.json.status, 'completed');
  assert.equal(r.json.failed_count, 120);
  assert.ok(r.json.results.some((x) => x.status === 'failed'));
});

// ---- list_action_executions --------------------------------------------------

test('list_action_executions: search_after round trip; with search_after, offset is ignored', async () => {
  const all = await rest('list_action_executions', { kn_id: 'kn_ops', limit: 6 });
  assert.equal(all.status, 200, all.text);
  const ids = all.json.entries.map((e) => e.id);
  assert.equal(ids.length, 6);
  for (const e of all.json.entries) for (const k of ['action_type_snapshot', 'executor', 'action_source']) assert.equal(e[k], undefined, k);

  const p1 = await rest('list_action_executions', { kn_id: 'kn_ops', limit: 2 });
  assert.deepEqual(p1.json.entries.map((e) => e.id), ids.slice(0, 2));
  assert.ok(Array.isArray(p1.json.search_after), p1.text);
  const p2 = await rest('list_action_executions', { kn_id: 'kn_ops', limit: 2, search_after: p1.json.search_after });
  assert.equal(p2.status, 200, p2.text);
  assert.deepEqual(p2.json.entries.map((e) => e.id), ids.slice(2, 4));
  const p3 = await rest('list_action_executions', { kn_id: 'kn_ops', limit: 2, search_after: p2.json.search_after });
  assert.deepEqual(p3.json.entries.map((e) => e.id), ids.slice(4, 6));

  const seq = await lastSeq();
  const withOffset = await rest('list_action_executions', { kn_id: 'kn_ops', limit: 2, offset: 3, search_after: p1.json.search_after });
  assert.equal(withOffset.status, 200, withOffset.text);
  assert.deepEqual(withOffset.json.entries.map((e) => e.id), ids.slice(2, 4));
  const [call] = await since(seq, 'ontology_query');
  assert.ok(call.query.search_after, JSON.stringify(call.query));

  const off = await rest('list_action_executions', { kn_id: 'kn_ops', limit: 2, offset: 3 });
  assert.deepEqual(off.json.entries.map((e) => e.id), ids.slice(3, 5));
});

test('list_action_executions: filters and limit bounds', async () => {
  const failed = await rest('list_action_executions', { kn_id: 'kn_ops', status: 'failed' });
  assert.equal(failed.status, 200, failed.text);
  assert.ok(failed.json.entries.length >= 1);
  for (const e of failed.json.entries) assert.equal(e.status, 'failed');
  const sched = await rest('list_action_executions', { kn_id: 'kn_ops', trigger_type: 'scheduled' });
  for (const e of sched.json.entries) assert.equal(e.trigger_type, 'scheduled');
  const byType = await rest('list_action_executions', { kn_id: 'kn_ops', action_type_id: 'at_scale_deployment' });
  for (const e of byType.json.entries) assert.equal(e.action_type_id, 'at_scale_deployment');
  const all = await rest('list_action_executions', { kn_id: 'kn_ops', limit: 6 });
  const times = all.json.entries.map((e) => e.start_time).sort((a, b) => a - b);
  const ranged = await rest('list_action_executions', { kn_id: 'kn_ops', start_time_from: times[1], start_time_to: times[4] });
  assert.equal(ranged.status, 200, ranged.text);
  for (const e of ranged.json.entries) assert.ok(e.start_time >= times[1] && e.start_time <= times[4], JSON.stringify(e));
  assert.ok(ranged.json.entries.length >= 1 && ranged.json.entries.length < 6);
  const seq = await lastSeq();
  const dflt = await rest('list_action_executions', { kn_id: 'kn_ops' });
  assert.equal(dflt.status, 200);
  const [call] = await since(seq, 'ontology_query');
  assert.equal(call.query.limit, '20');
  const over = await rest('list_action_executions', { kn_id: 'kn_ops', limit: 1001 });
  assert.ok(over.status === 400 || over.status === 200, over.text);
  if (over.status === 200) assert.ok(over.json.entries.length <= 1000);
});

// ---- get_action_info ------------------------------------------------------------

test('get_action_info: class level without identities, instantiated with them', async () => {
  const cls = await rest('get_action_info', { kn_id: 'kn_ops', at_id: 'at_restart_pod' });
  assert.equal(cls.status, 200, cls.text);
  const t = cls.json._dynamic_tools[0];
  assert.equal(t.name, 'restart_pod');
  assert.equal(t.parameters.type, 'object');
  assert.deepEqual(t.parameters.properties.dynamic_params.required, ['grace_period_seconds']);
  assert.deepEqual(t.fixed_params._instance_identities, []);
  const id = { pod_ip: '192.168.1.3', id: 3 };
  const inst = await rest('get_action_info', { kn_id: 'kn_ops', at_id: 'at_restart_pod', _instance_identities: [id] });
  assert.equal(inst.status, 200, inst.text);
  const ti = inst.json._dynamic_tools[0];
  assert.deepEqual(ti.fixed_params._instance_identities, [id]);
  assert.equal(ti.fixed_params.dynamic_params.pod_name, 'order-service-a0e3');
  assert.notDeepEqual(ti.fixed_params, t.fixed_params);
});

// No headers key (docs/security.md): the gateway's own downstream headers carry
// identity values, and the correlation ids left without them are of no use to a model.
test('get_action_info: no headers, no identity or credential values in the definition', async () => {
  const r = await rest('get_action_info', { kn_id: 'kn_ops', at_id: 'at_restart_pod' });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(Object.keys(r.json), ['_dynamic_tools']);
  assert.ok(!/x-account|authorization|cookie|bearer|x-business-domain|baggage|demo-user-token/i.test(r.text), r.text);
});

test('get_action_info: output_schema when the bound tool declares one', async () => {
  const r = await rest('get_action_info', { kn_id: 'kn_medical', at_id: 'at_generate_treatment_plan' });
  assert.equal(r.status, 200, r.text);
  const t = r.json._dynamic_tools[0];
  assert.equal(t.output_schema.type, 'object');
  assert.ok(t.output_schema.properties.plan_id);
  assert.ok(!r.text.includes('$ref'), 'the $ref output schema is resolved');
});

test('get_action_info: a bound tool the caller may not read comes from the managed proxy read, without addresses', async () => {
  const seq = await lastSeq();
  const r = await rest('get_action_info', { kn_id: 'kn_ops', at_id: 'at_scale_deployment' });
  assert.equal(r.status, 200, r.text);
  const t = r.json._dynamic_tools[0];
  assert.equal(t.name, 'scale_deployment');
  assert.ok(t.parameters.properties.dynamic_params.properties.replicas);
  assert.ok(t.output_schema);
  assert.ok(!/server_url|"path"|"method"|http:\/\/|svc\.cluster|"code"/.test(r.text), r.text);
  const calls = await since(seq, 'operator_integration');
  assert.ok(calls.some((c) => c.headers['x-account-id'] === 'kn-proxy-kn_ops'), JSON.stringify(calls.map((c) => [c.path, c.headers['x-account-id']])));
  // The proxy read never executes anything.
  assert.ok(calls.every((c) => c.method === 'GET'));
});

test('managed_proxy is a per-upstream setting: with upstream.operator_integration.managed_proxy off, nothing goes out as the proxy account', async () => {
  const off = await startStack({ capture: 'enabled', env: { CL_UPSTREAM_OPERATOR_INTEGRATION_MANAGED_PROXY: 'false' } });
  try {
    const seq = (await (await fetch(`${off.sim.base}/_sim/requests`)).json()).last_seq;
    const r = await post(`${off.server.base}${PREFIX}/kn/get_action_info`, { kn_id: 'kn_ops', at_id: 'at_scale_deployment' });
    assert.notEqual(r.status, 200, r.text);
    const calls = (await (await fetch(`${off.sim.base}/_sim/requests?since=${seq}&service=operator_integration`)).json()).requests;
    assert.ok(!calls.some((c) => c.headers['x-account-id'] === 'kn-proxy-kn_ops'), JSON.stringify(calls.map((c) => c.headers['x-account-id'])));
    assert.ok(off.server.logs.join('').includes("managed_proxy is not allowed for upstream 'operator_integration'"));
  } finally {
    assert.equal(await off.stop(), 0);
  }
});

test('get_action_info: a refused read of the bound tool is a 403 with its reason, never 502/503', async () => {
  await fault({ service: 'operator_integration', path_prefix: '/api/agent-operator-integration/internal-v1/tool-box/box_k8s_tools', status: 403,
    body: JSON.stringify({ error_code: 'Public.Forbidden', description: '权限错误', solution: '请联系管理员', error_link: '', error_details: 'tool unpublished for proxy reads' }) });
  try {
    const r = await rest('get_action_info', { kn_id: 'kn_ops', at_id: 'at_scale_deployment' });
    assert.equal(r.status, 403, r.text);
    assert.ok(r.text.includes('tool unpublished for proxy reads'), r.text);
    const m = await rest('get_action_info', { kn_id: 'kn_ops', at_id: 'at_scale_deployment' }, { 'accept-language': 'en-US' });
    assert.equal(m.status, 403);
  } finally {
    await fetch(`${stack.sim.base}/_sim/reset`, { method: 'POST' });
  }
});

// ---- execute_action ------------------------------------------------------------

test('execute_action without context -> 400 conversation_required, nothing executed', async () => {
  const seq = await lastSeq();
  for (const extra of [{}, { bkn_context: {} }]) {
    const r = await rest('execute_action', { kn_id: 'kn_ops', at_id: 'at_restart_pod', _instance_identities: [], dynamic_params: { grace_period_seconds: 1 }, ...extra });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.code, 'conversation_required');
    assert.equal(r.json.required_action, 'create_conversation');
  }
  assert.deepEqual(await since(seq, 'ontology_query'), []);
});

test('execute_action: asynchronous; empty _instance_identities passed on; dynamic_params forwarded', async () => {
  const ctx = await startInteraction();
  const seq = await lastSeq();
  const dyn = { grace_period_seconds: 7, note: 'not validated locally', nested: { a: [1, 2] } };
  const r = await rest('execute_action', { kn_id: 'kn_ops', at_id: 'at_restart_pod', _instance_identities: [], dynamic_params: dyn, bkn_context: ctx });
  assert.equal(r.status, 200, r.text);
  assert.match(r.json.execution_id, /\S/);
  assert.match(r.headers.get('bkn-receipt-id') || '', /^rcpt_/);
  const calls = await since(seq, 'ontology_query');
  const exec = calls.filter((c) => c.path.endsWith('/action-types/at_restart_pod/execute'));
  assert.equal(exec.length, 1);
  const body = JSON.parse(exec[0].body);
  assert.deepEqual(body._instance_identities, []);
  assert.deepEqual(body.dynamic_params, dyn);
  // It returned at once: nobody read the execution on its behalf.
  assert.ok(!calls.some((c) => c.path.includes('/action-executions/') || c.path.includes('/action-logs/')), JSON.stringify(calls.map((c) => c.path)));
  // The downstream scanned by the action's own condition (status in Failed, Unknown).
  const ex = await rest('get_action_execution', { kn_id: 'kn_ops', execution_id: r.json.execution_id });
  assert.equal(ex.status, 200, ex.text);
  assert.equal(ex.json.target_count, 2);
});

test('execute_action: a downstream parameter error reaches the caller with its status', async () => {
  const ctx = await startInteraction();
  const r = await rest('execute_action', { kn_id: 'kn_ops', at_id: 'at_restart_pod', _instance_identities: [{ pod_ip: '192.168.1.3', id: 3 }], dynamic_params: {}, bkn_context: ctx });
  assert.equal(r.status, 400, r.text);
  assert.ok(r.text.includes('OntologyQuery.ActionType.InvalidParameter'), r.text);
  assert.ok(r.text.includes('grace_period_seconds'), r.text);
});
