// The complete catalogue against the simulator (docs/errors.md): every
// tool over MCP and over REST (one success, one downstream error each), REST-only
// tools absent from MCP in every form, execute_skill gated on and off, the MCP proxy
// route, read_skill_file path traversal and run_sql's read-only guard.
// Capture is disabled: these tests are about the tools, not the lifecycle.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startSimulator, startServer, PREFIX } from './lib/stack.mjs';

const TOKEN = 'demo-user-token';
let sim;
let on; // EXECUTE_SKILL_ENABLED=true
let off; // the default: execute_skill off

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

async function mcpSession(server) {
  const url = `${server.base}${PREFIX}/mcp`;
  const init = await post(url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'catalogue-test', version: '1' } } });
  assert.equal(init.status, 200, init.text);
  const sid = init.headers.get('mcp-session-id');
  assert.ok(sid);
  const h = { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
  assert.equal((await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h)).status, 202);
  return (method, params, id = 1) => post(url, { jsonrpc: '2.0', id, method, params }, h);
}

const sessions = new Map();
async function rpc(server, method, params, id) {
  if (!sessions.has(server)) sessions.set(server, await mcpSession(server));
  return sessions.get(server)(method, params, id);
}
const callTool = (server, name, args, id) => rpc(server, 'tools/call', { name, arguments: args }, id);
const rest = (server, tool, body, headers) => post(`${server.base}${PREFIX}/kn/${tool}`, body, headers);

const simGet = async (p) => (await fetch(`${sim.base}${p}`, { signal: AbortSignal.timeout(5000) })).json();
const lastSeq = async () => (await simGet('/_sim/requests')).last_seq;
const since = async (seq, service) => (await simGet(`/_sim/requests?since=${seq}${service ? `&service=${service}` : ''}`)).requests;
async function fault(spec) {
  const r = await fetch(`${sim.base}/_sim/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(spec) });
  assert.equal(r.status, 200, await r.text());
}
const reset = () => fetch(`${sim.base}/_sim/reset`, { method: 'POST' });

before(async () => {
  sim = await startSimulator({ capture: 'disabled' });
  on = await startServer(sim.base, { env: { EXECUTE_SKILL_ENABLED: 'true' } });
  off = await startServer(sim.base, {});
});

after(async () => {
  if (on) assert.equal(await on.stop(), 0);
  if (off) assert.equal(await off.stop(), 0);
  if (sim) await sim.stop();
});

// Every tool: arguments for a success, the service of its (first) downstream call,
// and a check of the success body. `volatile` results (new ids) compare by keys.
const SUBGRAPH = [{
  object_types: [{ id: 'ot_drug' }, { id: 'ot_manufacturer' }],
  relation_types: [{ relation_type_id: 'rt_produced_by', source_object_type_id: 'ot_drug', target_object_type_id: 'ot_manufacturer' }],
}];
const TOOLS = [
  ['list_knowledge_networks', {}, 'bkn_backend', (j) => assert.equal(j.total_count, 3)],
  ['get_kn_detail', { kn_id: 'kn_medical' }, 'bkn_backend', (j) => assert.equal(j.id, 'kn_medical')],
  ['search_schema', { kn_id: 'kn_medical', query: 'drug manufacturer', schema_brief: true }, 'bkn_backend', (j) => assert.ok(j.object_types.some((o) => o.concept_id === 'ot_drug'))],
  // MCP trims condition_operations to the index-backed ones.
  ['get_object_types', { kn_id: 'kn_medical', ids: ['ot_drug'] }, 'bkn_backend', (j) => assert.equal(j.object_types[0].id, 'ot_drug'), 'volatile'],
  ['get_relation_types', { kn_id: 'kn_medical', ids: ['rt_produced_by'] }, 'bkn_backend', (j) => assert.equal(j.relation_types[0].id, 'rt_produced_by')],
  ['query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 2 }, 'ontology_query', (j) => { assert.equal(j.datas.length, 2); assert.equal(j.total_count, 22); }],
  ['query_instance_subgraph', { kn_id: 'kn_medical', relation_type_paths: SUBGRAPH }, 'ontology_query', (j) => assert.ok(j.entries.length > 0)],
  ['get_logic_properties_values', { kn_id: 'kn_medical', ot_id: 'ot_company', query: 'approved drug count', _instance_identities: [{ company_id: 'company_000001' }], properties: ['approved_drug_count'] }, 'ontology_query',
    (j) => { assert.equal(j.datas.length, 1); assert.ok(Array.isArray(j.datas[0].approved_drug_count)); }],
  ['get_action_info', { kn_id: 'kn_ops', at_id: 'at_restart_pod' }, 'ontology_query', (j) => assert.equal(j._dynamic_tools[0].name, 'restart_pod')],
  // before execute_action: the executions it starts move on by the simulator's clock
  // (one step each 400 ms), so a loaded machine could see one step apart on REST and
  // MCP; the recorded ones listed here do not move
  ['list_action_executions', { kn_id: 'kn_ops', limit: 2 }, 'ontology_query', (j) => assert.equal(j.entries.length, 2)],
  ['execute_action', { kn_id: 'kn_ops', at_id: 'at_restart_pod', _instance_identities: [{ pod_ip: '192.168.1.3', id: 3 }], dynamic_params: { grace_period_seconds: 5 } }, 'ontology_query',
    (j) => assert.match(j.execution_id, /\S/), 'volatile'],
  ['get_action_execution', { kn_id: 'kn_ops', execution_id: 'cqq2g8h4d2fg00fvm8dg' }, 'ontology_query', (j) => { assert.equal(j.status, 'completed'); assert.equal(j.results.length, 2); }],
  ['list_skills', {}, 'operator_integration', (j) => assert.ok(j.entries.some((s) => s.skill_id === 'skill_contract_review'))],
  ['get_skill_content', { skill_id: 'skill_contract_review' }, 'operator_integration', (j) => assert.match(j.content, /合同审查/)],
  ['read_skill_file', { skill_id: 'skill_contract_review', rel_path: 'refs/checklist.md' }, 'operator_integration', (j) => assert.match(j.content, /Checklist/)],
  ['execute_skill', { skill_id: 'skill_contract_review', entry_shell: 'python main.py --input contract.txt' }, 'operator_integration',
    (j) => { assert.equal(j.exit_code, 0); assert.match(j.stdout, /合同审查完成/); }, 'volatile'],
  ['search_capabilities', { kn_id: 'kn_supplychain', query: 'fx convert' }, 'bkn_backend', (j) => assert.ok(j.capabilities.some((c) => c.tool_id === 'tool_fx_convert'))],
  ['execute_tool', { kn_id: 'kn_supplychain', toolbox_id: 'box_finance', tool_id: 'tool_fx_convert', arguments: { amount: 2, from: 'USD', to: 'CNY' } }, 'operator_integration',
    (j) => assert.equal(j.converted, 14.36)],
];
const REST_ONLY = [
  ['run_sql', { sql: 'SELECT `id`, `status` FROM {{.res_orders}} ORDER BY `id` LIMIT 2' }, 'vega', (j) => assert.deepEqual(j.entries.map((e) => e.id), [1001, 1002])],
  ['list_resources', {}, 'vega', (j) => assert.ok(j.entries.some((e) => e.resource_id === 'res_orders'))],
  ['describe_resource', { resource_id: 'res_orders' }, 'vega', (j) => assert.ok(j.columns.some((c) => c.name === 'amount'))],
];

const MARKER = { error_code: 'Sim.Marker.Failure', description: 'marker failure', solution: 'none', error_link: '', error_details: 'marker-details-4711' };

test('every MCP tool: the same success over MCP (json) and REST', async () => {
  let id = 100;
  for (const [name, args, , check, volatile] of TOOLS) {
    const r = await rest(on, name, args);
    assert.equal(r.status, 200, `${name} REST: ${r.text}`);
    check(r.json);
    const m = await callTool(on, name, { ...args, response_format: 'json' }, id++);
    assert.equal(m.status, 200, m.text);
    const res = m.json.result;
    assert.equal(res.isError, false, `${name} MCP: ${m.text}`);
    check(res.structuredContent);
    assert.deepEqual(JSON.parse(res.content[0].text), res.structuredContent, name);
    if (volatile) assert.deepEqual(Object.keys(res.structuredContent).sort(), Object.keys(r.json).sort(), name);
    else assert.deepEqual(res.structuredContent, r.json, name);
  }
});

test('MCP results default to TOON text; structuredContent stays the JSON object', async () => {
  const m = await callTool(on, 'list_knowledge_networks', {}, 7);
  const res = m.json.result;
  assert.equal(res.isError, false, m.text);
  assert.equal(res.structuredContent.total_count, 3);
  assert.throws(() => JSON.parse(res.content[0].text));
  assert.match(res.content[0].text, /total_count: 3/);
});

test('every REST-only tool answers on REST', async () => {
  for (const [name, args, , check] of REST_ONLY) {
    const r = await rest(on, name, args);
    assert.equal(r.status, 200, `${name}: ${r.text}`);
    check(r.json);
  }
});

test('downstream errors reach the caller untouched, with a clear summary (MCP and REST)', async () => {
  let id = 300;
  for (const [name, args, service] of [...TOOLS, ...REST_ONLY]) {
    for (const status of [404, 500]) {
      await reset();
      await fault({ service, status, body: JSON.stringify(MARKER) });
      const r = await rest(on, name, args);
      assert.ok(r.status === status || r.status === 502, `${name} ${status}: REST ${r.status} ${r.text}`);
      if (status === 404) assert.equal(r.status, 404, `${name}: a 4xx keeps its status: ${r.text}`);
      assert.equal(typeof r.json.code, 'string', `${name}: ${r.text}`);
      assert.ok(r.json.description.length > 0, `${name}: no summary: ${r.text}`);
      assert.ok(r.text.includes('marker-details-4711'), `${name} ${status}: the downstream body is lost: ${r.text}`);
      assert.ok(!/stack traceback|\.lua:\d/.test(r.text), r.text);
      if (REST_ONLY.some(([n]) => n === name)) continue;
      await reset();
      await fault({ service, status, body: JSON.stringify(MARKER) });
      const m = await callTool(on, name, { ...args, response_format: 'json' }, id++);
      const res = m.json.result;
      assert.equal(res.isError, true, `${name}: ${m.text}`);
      const body = JSON.parse(res.content[0].text);
      assert.equal(body.code, r.json.code, name);
      assert.ok(res.content[0].text.includes('marker-details-4711'), `${name} MCP: ${res.content[0].text}`);
    }
  }
  await reset();
});

test('REST-only tools are absent from MCP: tools/list, tools/call, search_capabilities, execute_tool', async () => {
  const hidden = ['run_sql', 'list_resources', 'describe_resource', 'mcp_proxy_call'];
  for (const server of [on, off]) {
    const list = await rpc(server, 'tools/list', {}, 1);
    const names = list.json.result.tools.map((t) => t.name);
    for (const n of hidden) assert.ok(!names.includes(n), `${n} listed`);
    for (const n of TOOLS.map(([t]) => t).filter((t) => t !== 'execute_skill')) assert.ok(names.includes(n), `${n} missing`);
  }
  // tools/call: byte-identical to an unknown tool (same id, the name spelled the same length way).
  const unknown = await callTool(on, 'no_such_tool', {}, 42);
  assert.equal(unknown.json.error.code, -32602, unknown.text);
  for (const n of hidden) {
    const r = await callTool(on, n, { sql: 'SELECT 1' }, 42);
    assert.equal(r.status, unknown.status);
    assert.equal(r.text.replaceAll(n, 'no_such_tool'), unknown.text, n);
  }
  // The on-demand gateway neither finds nor runs them.
  for (const q of ['sql', 'resource', 'run_sql', 'describe_resource list_resources']) {
    const s = await rest(on, 'search_capabilities', { kn_id: 'kn_supplychain', query: q });
    assert.equal(s.status, 200, s.text);
    for (const n of hidden) assert.ok(!s.text.includes(`"${n}"`), `search_capabilities(${q}) shows ${n}: ${s.text}`);
  }
  const ghost = await rest(on, 'execute_tool', { tool_id: 'no_such_tool', arguments: {} });
  assert.ok(ghost.status >= 400, ghost.text);
  const seq = await lastSeq();
  for (const n of hidden) {
    const e = await rest(on, 'execute_tool', { tool_id: n, arguments: { sql: 'SELECT 1' } });
    assert.equal(e.status, ghost.status, e.text);
    assert.equal(e.text.replaceAll(n, 'no_such_tool'), ghost.text, n);
  }
  assert.deepEqual(await since(seq, 'vega'), []);
});

test('execute_skill: gated on and off', async () => {
  const listOn = (await rpc(on, 'tools/list', {}, 2)).json.result.tools.map((t) => t.name);
  assert.ok(listOn.includes('execute_skill'));
  const listOff = (await rpc(off, 'tools/list', {}, 2)).json.result.tools.map((t) => t.name);
  assert.ok(!listOff.includes('execute_skill'));
  const args = { skill_id: 'skill_contract_review', entry_shell: 'python main.py --input contract.txt' };
  // Off: tools/call byte-identical to an unknown tool, the REST route 404 like any unknown path.
  const unknown = await callTool(off, 'no_such_tooll', args, 9);
  const gated = await callTool(off, 'execute_skill', args, 9);
  assert.equal(gated.text.replaceAll('execute_skill', 'no_such_tooll'), unknown.text);
  const r404 = await rest(off, 'no_such_tooll', args);
  const g404 = await rest(off, 'execute_skill', args);
  assert.equal(g404.status, 404);
  assert.equal(g404.text, r404.text);
  // Through the gateway it is unknown as well.
  const viaGateway = await rest(off, 'execute_tool', { tool_id: 'execute_skill', arguments: args });
  const ghost = await rest(off, 'execute_tool', { tool_id: 'no_such_tooll', arguments: args });
  assert.equal(viaGateway.status, ghost.status);
  assert.equal(viaGateway.text.replaceAll('execute_skill', 'no_such_tooll'), ghost.text);
  // On: it runs (MCP and REST); a failing entry is still a result with its exit code.
  const ok = await rest(on, 'execute_skill', { skill_id: 'skill_contract_review', entry_shell: 'python main.py --strict' });
  assert.equal(ok.status, 200, ok.text);
  assert.notEqual(ok.json.exit_code, 0);
  const bad = await rest(on, 'execute_skill', { skill_id: 'skill_contract_review', entry_shell: 'rm -rf /' });
  assert.equal(bad.status, 400, bad.text);
  assert.ok(bad.text.includes('InvalidEntry'), bad.text);
});

test('the MCP proxy route: success, tool error result, downstream failure', async () => {
  const url = (mcp, tool) => `${on.base}${PREFIX}/mcp/proxy/${mcp}/tools/${tool}/call`;
  const ok = await post(url('mcp_k8s_ops', 'get_pod_logs'), { pod_name: 'order-service-a0e3', namespace: 'prod' });
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.json.isError, false, ok.text);
  assert.ok(Array.isArray(ok.json.content) && ok.json.content[0].type === 'text');
  const seq = await lastSeq();
  const toolErr = await post(url('mcp_k8s_ops', 'get_pod_logs'), { tail_lines: 5 });
  assert.equal(toolErr.status, 200, toolErr.text);
  assert.equal(toolErr.json.isError, true);
  const calls = await since(seq, 'operator_integration');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].path, '/api/agent-operator-integration/internal-v1/mcp/proxy/mcp_k8s_ops/tool/call');
  assert.deepEqual(JSON.parse(calls[0].body), { tool_name: 'get_pod_logs', parameters: { tail_lines: 5 } });
  // a downstream 4xx keeps its meaning: a missing tool is a 404, not a gateway fault
  const unknown = await post(url('mcp_k8s_ops', 'no_such_tool'), {});
  assert.equal(unknown.status, 404, unknown.text);
  assert.ok(unknown.json.description.length > 0);
  assert.equal(unknown.json.code, 'OperatorIntegration.MCP.ToolNotFound', unknown.text);
  assert.equal(unknown.json.details.error_code, 'OperatorIntegration.MCP.ToolNotFound', unknown.text);
  assert.equal(unknown.json.retryable, false);
  assert.match(unknown.json.solution, /mcp_k8s_ops/);
  const unpublished = await post(url('mcp_legacy', 'ping'), {});
  assert.equal(unpublished.status, 400, unpublished.text);
  assert.ok(unpublished.text.includes('NotPublished'), unpublished.text);
});

test('read_skill_file rejects path traversal', async () => {
  for (const rel of ['../../etc/passwd', '/etc/passwd', 'refs/../../SKILL.md', 'refs\\..\\..\\x', '..', 'refs/%2e%2e/x/../../y']) {
    const seq = await lastSeq();
    const r = await rest(on, 'read_skill_file', { skill_id: 'skill_contract_review', rel_path: rel });
    assert.equal(r.status, 400, `${rel}: ${r.status} ${r.text}`);
    assert.ok(!r.text.includes('root:'), r.text);
    const m = await callTool(on, 'read_skill_file', { skill_id: 'skill_contract_review', rel_path: rel, response_format: 'json' }, 5);
    assert.equal(m.json.result.isError, true, `${rel}: ${m.text}`);
    // Nothing outside the skill was fetched.
    for (const c of await since(seq, 'operator_integration')) assert.ok(!c.path.includes('/oss/'), `${rel}: fetched ${c.path}`);
  }
  const ok = await rest(on, 'read_skill_file', { skill_id: 'skill_contract_review', rel_path: './refs//checklist.md' });
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.json.rel_path, 'refs/checklist.md');
});

test('run_sql refuses anything but one read-only SELECT, before calling vega', async () => {
  const refused = [
    'DELETE FROM {{.res_orders}}',
    'UPDATE {{.res_orders}} SET status = \'x\'',
    'DROP TABLE {{.res_orders}}',
    'INSERT INTO {{.res_orders}} (id) VALUES (1)',
    'SELECT * FROM {{.res_orders}}; SELECT * FROM {{.res_customers}}',
    'SELECT * FROM {{.res_orders}}; DELETE FROM {{.res_orders}}',
    'SELECT * FROM {{.res_orders}} -- comment',
    'SELECT * FROM {{.res_orders}} /* c */',
    'SELECT * INTO OUTFILE \'/tmp/x\' FROM {{.res_orders}}',
    'SELECT * FROM {{.res_orders}} FOR UPDATE',
    'SELECT * FROM {{.res_orders}} LOCK IN SHARE MODE',
    'CALL p()',
    'SHOW TABLES',
  ];
  const seq = await lastSeq();
  for (const sql of refused) {
    const r = await rest(on, 'run_sql', { sql });
    assert.equal(r.status, 400, `${sql}: ${r.status} ${r.text}`);
    assert.ok(r.json.description.length > 0, r.text);
  }
  assert.deepEqual(await since(seq, 'vega'), [], 'a refused statement reached vega');
  // A SELECT is passed on; a 403 from vega (no query_data) keeps its status.
  const ok = await rest(on, 'run_sql', { sql: 'SELECT COUNT(*) FROM {{.res_orders}}' });
  assert.equal(ok.status, 200, ok.text);
  const denied = await rest(on, 'run_sql', { sql: 'SELECT * FROM {{.res_payroll}}' });
  assert.equal(denied.status, 403, denied.text);
  // Integers above 2^53 survive exactly.
  const big = await rest(on, 'run_sql', { sql: 'SELECT `id` FROM {{.res_orders}} WHERE `id` = 9007199254740993' });
  assert.equal(big.status, 200, big.text);
  assert.match(big.text, /"entries":\[\{"id":9007199254740993\}\]/);
});

test('kn_id falls back to the X-Kn-ID header; REST takes arguments from the query string', async () => {
  const r = await rest(on, 'get_object_types', { ids: ['ot_drug'] }, { 'x-kn-id': 'kn_medical' });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.object_types[0].id, 'ot_drug');
  const q = await post(`${on.base}${PREFIX}/kn/query_object_instance?kn_id=kn_medical&ot_id=ot_drug&limit=1`, {});
  assert.equal(q.status, 200, q.text);
  assert.equal(q.json.datas.length, 1);
});

test('run_sql refuses side-effecting functions and raw tables with a 400 naming them, before vega', async () => {
  const refused = [
    ["SELECT LOAD_FILE('/etc/passwd') FROM {{.res_orders}}", 'function "LOAD_FILE"'],
    ['SELECT SLEEP(5) FROM {{.res_orders}}', 'function "SLEEP"'],
    ["SELECT BENCHMARK(100000000, MD5('x')) FROM {{.res_orders}}", 'function "BENCHMARK"'],
    ["SELECT GET_LOCK('l', 10) FROM {{.res_orders}}", 'function "GET_LOCK"'],
    ["SELECT nextval('s') FROM {{.res_orders}}", 'function "nextval"'],
    ["SELECT set_config('a', 'b', false) FROM {{.res_orders}}", 'function "set_config"'],
    ['SELECT * FROM {{.res_orders}} o JOIN mysql.user u ON 1 = 1', 'table reference "mysql.user"'],
    ['SELECT * FROM {{.res_orders}}, information_schema.tables', 'table reference "information_schema.tables"'],
  ];
  const seq = await lastSeq();
  for (const [sql, named] of refused) {
    const r = await rest(on, 'run_sql', { sql });
    assert.equal(r.status, 400, `${sql}: ${r.status} ${r.text}`);
    assert.ok(String(r.json.details).includes(named), `${sql}: ${r.text}`);
  }
  assert.deepEqual(await since(seq, 'vega'), [], 'a refused statement reached vega');
});

// A POST whose path is sent as written (fetch would resolve "." and ".." segments).
function rawPost(server, rawPath, body) {
  const u = new URL(server.base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method: 'POST', path: rawPath,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` } }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => {
        let json;
        try { json = JSON.parse(text); } catch { json = undefined; }
        resolve({ status: res.statusCode, text, json });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('proxy ids that decode to another id, and dot-segment ids, get a 400 naming the field', async () => {
  const seq = await lastSeq();
  for (const [id, tool, field] of [
    ['a%2fb', 'get_pod_logs', 'mcp_id'], ['a%2Fb', 'get_pod_logs', 'mcp_id'], ['a%00b', 'get_pod_logs', 'mcp_id'],
    ['http:%2f%2fevil', 'get_pod_logs', 'mcp_id'], ['..', 'get_pod_logs', 'mcp_id'], ['%2e%2e', 'get_pod_logs', 'mcp_id'],
    ['.', 'get_pod_logs', 'mcp_id'], ['mcp_k8s_ops', 'x%2fy', 'tool_name'], ['mcp_k8s_ops', '..', 'tool_name'],
  ]) {
    const r = await rawPost(on, `${PREFIX}/mcp/proxy/${id}/tools/${tool}/call`, '{}');
    assert.equal(r.status, 400, `${id}/${tool}: ${r.status} ${r.text}`);
    assert.ok(String(r.json.details).startsWith(`${field} `), `${id}/${tool}: ${r.text}`);
  }
  assert.deepEqual(await since(seq, 'operator_integration'), [], 'a refused proxy call went out');
  for (const [tool, args, field] of [
    ['get_skill_content', { skill_id: '..' }, 'skill_id'],
    ['read_skill_file', { skill_id: '.', rel_path: 'SKILL.md' }, 'skill_id'],
    ['describe_resource', { resource_id: '..' }, 'resource_id'],
  ]) {
    const r = await rest(on, tool, args);
    assert.equal(r.status, 400, `${tool}: ${r.status} ${r.text}`);
    assert.ok(String(r.json.details).includes(`${field} must be an id`), `${tool}: ${r.text}`);
  }
});

// execute_tool takes the name search_capabilities shows for a function capability
// (as `name`, or in tool_id), with or without toolbox_id, over MCP and REST.
test('execute_tool runs a function capability by the name search_capabilities returned', async () => {
  const found = await rest(off, 'search_capabilities', { kn_id: 'kn_supplychain', query: 'fx convert' });
  const cap = found.json.capabilities.find((c) => c.tool_id === 'tool_fx_convert');
  assert.equal(cap.kind, 'function');
  assert.equal(cap.name, 'fx_convert');
  const amount = { amount: 2, from: 'USD', to: 'CNY' };
  for (const args of [
    { kn_id: 'kn_supplychain', name: cap.name, arguments: amount },
    { kn_id: 'kn_supplychain', tool_id: cap.name, arguments: amount },
    { kn_id: 'kn_supplychain', toolbox_id: cap.toolbox_id, name: cap.name, arguments: amount },
  ]) {
    const r = await rest(off, 'execute_tool', args);
    assert.equal(r.status, 200, `${JSON.stringify(args)}: ${r.text}`);
    assert.equal(r.json.converted, 14.36);
    const m = await callTool(off, 'execute_tool', { ...args, response_format: 'json' }, 77);
    assert.equal(m.json.result.isError, false, m.text);
    assert.equal(m.json.result.structuredContent.converted, 14.36);
  }
  // a name nothing has is refused like any unknown tool
  const ghost = await rest(off, 'execute_tool', { tool_id: 'no_such_tool', arguments: {} });
  const byName = await rest(off, 'execute_tool', { kn_id: 'kn_supplychain', name: 'no_such_tool', arguments: {} });
  assert.equal(byName.status, ghost.status, byName.text);
  assert.equal(byName.text, ghost.text);
});
