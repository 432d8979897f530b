// ontology-query routes beyond the instance search: schema probe, logic properties,
// subgraph, actions, executions and their paging limits. The simulator runs in
// this process (createSimulator) on 127.0.0.1 and is closed at the end.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createSimulator } from './sim.mjs';
import { parse } from './lib/json.mjs';

let sim;
let base;

before(async () => {
  sim = createSimulator();
  await new Promise((resolve) => sim.server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${sim.server.address().port}`;
});

after(async () => {
  await sim.close();
});

const OQ = '/api/ontology-query/in/v1/knowledge-networks';
const USER = { 'x-account-id': 'u_demo', 'x-account-type': 'user' };
const SEARCH = { ...USER, 'content-type': 'application/json', 'x-http-method-override': 'GET' };

async function call(method, path, { body, headers = {} } = {}) {
  const res = await fetch(base + path, {
    method,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    headers,
    signal: AbortSignal.timeout(10000),
  });
  const text = await res.text();
  let value;
  try {
    value = parse(text);
  } catch {
    value = undefined;
  }
  return { status: res.status, text, json: value };
}
const post = (path, body, headers = SEARCH) => call('POST', OQ + path, { body, headers });
const get = (path, headers = USER) => call('GET', OQ + path, { headers });

function assertError(r, status, code, detailsPattern) {
  assert.equal(r.status, status, r.text);
  assert.deepEqual(Object.keys(r.json), ['error_code', 'description', 'solution', 'error_link', 'error_details']);
  if (code) assert.equal(r.json.error_code, code);
  if (detailsPattern) assert.match(r.json.error_details, detailsPattern);
}

// ---------- permissions: schema probe and restricted type ----------

test('schema probe: visibility per account', async () => {
  let r = await get('/kn_medical/object-types/ot_patient/schema');
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.effective_permissions.phone, 'masked');
  assert.equal(r.json.effective_permissions.name, 'full');
  assert.ok(!('condition_operations' in r.json.schema_definition.find((p) => p.name === 'phone')));
  // u_other may view the definition but not query the data: probe 200, query 403.
  r = await get('/kn_medical/object-types/ot_patient/schema', { 'x-account-id': 'u_other', 'x-account-type': 'user' });
  assert.equal(r.status, 200);
  assert.equal(r.json.effective_permissions.phone, 'schema');
  r = await post('/kn_medical/object-types/ot_patient', {}, { ...SEARCH, 'x-account-id': 'u_other' });
  assertError(r, 403, 'Public.Forbidden', /object_type:kn_medical\/ot_patient/);
  r = await get('/kn_medical/object-types/ot_patient/schema', { 'x-account-id': 'demo-app', 'x-account-type': 'app' });
  assertError(r, 403, 'Public.Forbidden', /object_type:kn_medical\/ot_patient/);
  r = await get('/kn_medical/object-types/ot_drug/schema');
  assert.equal(r.status, 200);
  assert.ok(Object.values(r.json.effective_permissions).every((v) => v === 'full'));
  assertError(await get('/kn_medical/object-types/ot_nope/schema'), 404, 'OntologyQuery.ObjectType.NotFound');
  assertError(await call('POST', OQ + '/kn_medical/object-types/ot_drug/schema', { headers: SEARCH }), 405);
});

test('restricted type: effective_permissions limited to requested properties, row filter', async () => {
  const r = await post('/kn_medical/object-types/ot_patient', { properties: ['name', 'phone'], limit: 20 });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.effective_permissions, { name: 'full', phone: 'masked' });
  assert.equal(r.json.row_filter_applied, true);
  assert.equal(r.json.datas.length, 3);
  assert.ok(r.json.datas.every((d) => /^\d{3}\*{4}\d{4}$/.test(d.phone)));
});

// ---------- logic properties ----------

test('logic properties: metric and tool values, validation, 403', async () => {
  const ids = [{ company_id: 'company_000001' }, { company_id: 'company_000002' }];
  let r = await post('/kn_medical/object-types/ot_company/properties', {
    _instance_identities: ids,
    properties: ['approved_drug_count', 'risk_assessment'],
    dynamic_params: {
      approved_drug_count: { instant: false, start: 1735660800000, end: 1743436800000, step: 'month' },
      risk_assessment: { horizon: 'year' },
    },
  });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.datas.length, 2);
  const d = r.json.datas[0];
  assert.equal(d.company_id, 'company_000001');
  assert.ok(Array.isArray(d.approved_drug_count) && d.approved_drug_count.length === 4);
  assert.deepEqual(Object.keys(d.approved_drug_count[0]), ['time', 'value']);
  assert.equal(d.risk_assessment.company_name, '华东医药集团');
  assert.equal(d.risk_assessment.horizon, 'year');
  assert.deepEqual(d._instance_identity, { company_id: 'company_000001' });
  // Deterministic: the same call gives the same values.
  const again = await post('/kn_medical/object-types/ot_company/properties', {
    _instance_identities: ids,
    properties: ['approved_drug_count', 'risk_assessment'],
    dynamic_params: {
      approved_drug_count: { instant: false, start: 1735660800000, end: 1743436800000, step: 'month' },
      risk_assessment: { horizon: 'year' },
    },
  });
  assert.equal(again.text, r.text.replace(/"overall_ms":\d+/, again.text.match(/"overall_ms":\d+/)[0]));
  // Instant metric -> one number.
  r = await post('/kn_medical/object-types/ot_company/properties', {
    _instance_identities: [ids[0]], properties: ['business_health_score'],
    dynamic_params: { business_health_score: { instant: true, start: 1735660800000, end: 1743436800000 } },
  });
  assert.equal(typeof r.json.datas[0].business_health_score, 'number');
  // Missing params, unknown property, bad step.
  r = await post('/kn_medical/object-types/ot_company/properties', { _instance_identities: ids, properties: ['approved_drug_count'] });
  assertError(r, 400, 'OntologyQuery.ObjectType.InvalidParameter', /missing dynamic params for approved_drug_count: start, end/);
  r = await post('/kn_medical/object-types/ot_company/properties', { _instance_identities: ids, properties: ['name'] });
  assertError(r, 400, null, /logic properties not found: name/);
  r = await post('/kn_medical/object-types/ot_company/properties', {
    _instance_identities: ids, properties: ['approved_drug_count'],
    dynamic_params: { approved_drug_count: { start: 1, end: 2, step: 'hour' } },
  });
  assertError(r, 400, null, /step must be one of/);
  r = await post('/kn_medical/object-types/ot_company/properties', { _instance_identities: [], properties: ['approved_drug_count'] });
  assertError(r, 400);
  // Restricted type: 403 names the object type (permission_guidance depends on it).
  r = await post('/kn_medical/object-types/ot_patient/properties', {
    _instance_identities: [{ patient_id: 'p_0001' }], properties: ['visit_count'],
    dynamic_params: { visit_count: { start: 1, end: 2 } },
  }, { ...SEARCH, 'x-account-id': 'u_other' });
  assertError(r, 403, 'Public.Forbidden', /object_type:kn_medical\/ot_patient/);
  r = await post('/kn_medical/object-types/ot_patient/properties', {
    _instance_identities: [{ patient_id: 'p_0001' }, { patient_id: 'p_0002' }], properties: ['visit_count'],
    dynamic_params: { visit_count: { start: 1, end: 2 } },
  });
  assert.equal(r.status, 200);
  assert.deepEqual(r.json.datas.map((x) => x.patient_id), ['p_0001']); // p_0002 is outside the row filter
  assert.equal(r.json.row_filter_applied, true);
});

// ---------- subgraph ----------

const PATH = {
  object_types: [{ id: 'ot_adverse_event', limit: 10 }, { id: 'ot_drug', limit: 100 }, { id: 'ot_manufacturer', limit: 10 }],
  relation_types: [
    { relation_type_id: 'rt_reported_for', source_object_type_id: 'ot_adverse_event', target_object_type_id: 'ot_drug' },
    { relation_type_id: 'rt_produced_by', source_object_type_id: 'ot_drug', target_object_type_id: 'ot_manufacturer' },
  ],
};

test('subgraph: relation paths forward and backward, big ids exact', async () => {
  let r = await post('/kn_medical/subgraph?query_type=relation_path', { relation_type_paths: [PATH] });
  assert.equal(r.status, 200, r.text);
  const g = r.json.entries[0];
  assert.equal(g.current_path_number, 3);
  assert.equal(g.relation_paths.length, 3);
  assert.equal(g.relation_paths[0].length, 2);
  assert.ok(r.text.includes('"drug_id":9007199254740993'));
  const rel = g.relation_paths[0].relations[0];
  assert.equal(rel.relation_type_id, 'rt_reported_for');
  assert.ok(g.objects[rel.source_object_id] && g.objects[rel.target_object_id]);
  assert.equal(g.objects[rel.target_object_id].object_type_id, 'ot_drug');
  // Backward: manufacturer <- drug (edge given reversed), condition on the first node.
  r = await post('/kn_medical/subgraph?query_type=relation_path', {
    relation_type_paths: [{
      object_types: [{ id: 'ot_manufacturer', condition: { field: 'manufacturer_id', operation: '==', value: 'mfr_000002' }, limit: 5 }, { id: 'ot_drug', limit: 50 }],
      relation_types: [{ relation_type_id: 'rt_produced_by', source_object_type_id: 'ot_manufacturer', target_object_type_id: 'ot_drug' }],
      limit: 2,
    }],
  });
  assert.equal(r.status, 200, r.text);
  const b = r.json.entries[0];
  assert.equal(b.relation_paths.length, 2); // path limit
  const e = b.relation_paths[0].relations[0];
  assert.equal(b.objects[e.source_object_id].object_type_id, 'ot_drug'); // the relation's own direction
  assert.equal(b.objects[e.target_object_id].properties.manufacturer_id, 'mfr_000002');
});

test('subgraph: validation and permissions', async () => {
  const sg = (paths, q = '?query_type=relation_path', headers = SEARCH) => post('/kn_medical/subgraph' + q, { relation_type_paths: paths }, headers);
  assertError(await sg([PATH], '?query_type=bogus'), 400, null, /query_type/);
  // an empty query_type is the exploration, whose body has no relation_type_paths
  assertError(await sg([PATH], '?query_type='), 400, null, /unknown field "relation_type_paths"/);
  assertError(await sg([]), 400, null, /non-empty/);
  assertError(await sg([{ ...PATH, object_types: PATH.object_types.slice(0, 2) }]), 400, null, /one more entry/);
  assertError(await sg([{ ...PATH, relation_types: [{ relation_type_id: 'rt_reported_for' }, PATH.relation_types[1]] }]), 400, null, /needs relation_type_id/);
  assertError(await sg([{ ...PATH, relation_types: [{ ...PATH.relation_types[0], relation_type_id: 'rt_nope' }, PATH.relation_types[1]] }]), 404, 'OntologyQuery.RelationType.NotFound');
  assertError(await sg([{ ...PATH, object_types: [{ id: 'ot_drug' }, PATH.object_types[1], PATH.object_types[2]] }]), 400, null, /must be ot_adverse_event/);
  assertError(await sg([{ ...PATH, object_types: [{ id: 'ot_adverse_event', limit: 10001 }, PATH.object_types[1], PATH.object_types[2]] }]), 400, null, /out of range/);
  const patientPath = {
    object_types: [{ id: 'ot_patient', limit: 10 }, { id: 'ot_disease', limit: 10 }],
    relation_types: [{ relation_type_id: 'rt_patient_has_disease', source_object_type_id: 'ot_patient', target_object_type_id: 'ot_disease' }],
  };
  assertError(await sg([patientPath], undefined, { ...SEARCH, 'x-account-id': 'u_other' }), 403, 'Public.Forbidden', /object_type:kn_medical\/ot_patient/);
  const r = await sg([patientPath]);
  assert.equal(r.json.entries[0].relation_paths.length, 3); // the row filter: 3 patients in 华东
});

// ---------- actions ----------

test('action info: class level, instantiated, sources, errors', async () => {
  let r = await post('/kn_medical/action-types/at_generate_treatment_plan', { _instance_identities: [] });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.action_source, { type: 'tool', box_id: 'box_medical_tools', tool_id: 'tool_treatment_plan' });
  assert.equal(r.json.actions.length, 1);
  assert.deepEqual(r.json.actions[0].parameters, { guideline: 'CN-2024' });
  assert.ok(!('_instance_identity' in r.json.actions[0]));
  assert.deepEqual(Object.keys(r.json.actions[0].dynamic_params), ['patient_age', 'severity']);
  assert.ok(!('condition' in r.json.action_type) && !('result' in r.json.action_type));
  r = await post('/kn_medical/action-types/at_generate_treatment_plan', { _instance_identities: [{ disease_id: 'disease_000002' }, { disease_id: 'nope' }] });
  assert.equal(r.json.actions.length, 1);
  assert.equal(r.json.total_count, 1);
  assert.deepEqual(r.json.actions[0]._instance_identity, { disease_id: 'disease_000002' });
  assert.deepEqual(r.json.actions[0].parameters, { disease_id: 'disease_000002', disease_name: '2型糖尿病', guideline: 'CN-2024' });
  r = await post('/kn_ops/action-types/at_restart_pod', {});
  assert.deepEqual(r.json.action_source, { type: 'mcp', mcp_id: 'mcp_k8s_ops', tool_name: 'restart_pod' });
  assertError(await post('/kn_ops/action-types/at_nope', {}), 404, 'OntologyQuery.ActionType.NotFound');
  assertError(await post('/kn_ops/action-types/at_restart_pod', { x: 1 }), 400);
  assertError(await post('/kn_ops/action-types/at_restart_pod', {}, { ...USER, 'content-type': 'application/json' }), 400, 'OntologyQuery.InvalidRequestHeader.MethodOverride');
});

test('execute: async, progresses on reads, scan by condition, validation', async () => {
  const exec = (at, body, kn = 'kn_ops') => post(`/${kn}/action-types/${at}/execute`, body, { ...USER, 'content-type': 'application/json' });
  let r = await exec('at_restart_pod', { _instance_identities: [{ pod_ip: '192.168.1.3', id: 3 }], dynamic_params: { grace_period_seconds: 30 } });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(Object.keys(r.json), ['execution_id', 'status', 'message', 'created_at']);
  assert.equal(r.json.status, 'pending');
  assert.match(r.json.execution_id, /^[0-9a-v]{20}$/);
  const id = r.json.execution_id;
  const seen = [];
  for (let i = 0; i < 3; i++) seen.push((await get(`/kn_ops/action-executions/${id}`)).json);
  assert.deepEqual(seen.map((e) => e.status), ['pending', 'running', 'completed']);
  const done = seen[2];
  assert.equal(done.success_count, 1);
  assert.deepEqual(done.results[0].result, { restarted: true, pod_name: 'order-service-a0e3', namespace: 'prod' });
  assert.deepEqual(done.dynamic_params, { grace_period_seconds: 30 });
  assert.deepEqual(done.executor, { id: 'u_demo', type: 'user', name: 'Demo User' });
  for (const k of ['action_type_snapshot', 'action_source', 'executor_id', 'results_total', 'end_time']) assert.ok(k in done, k);
  // Empty identities: scan by the action's condition (Failed or Unknown pods); Unknown fails.
  r = await exec('at_restart_pod', { _instance_identities: [], dynamic_params: { grace_period_seconds: 10 } });
  const scan = (await get(`/kn_ops/action-logs/${r.json.execution_id}?results_offset=0`)).json;
  assert.equal(scan.target_count, 2);
  r = await get(`/kn_ops/action-logs/${r.json.execution_id}?results_offset=0`);
  r = await get(`/kn_ops/action-logs/${scan.id}?results_offset=0`);
  assert.equal(r.json.status, 'completed');
  assert.equal(r.json.failed_count, 1);
  assert.ok(r.json.results.find((x) => x.status === 'failed').error_message);
  // Validation happens downstream: missing and mistyped params, unknown instance.
  assertError(await exec('at_restart_pod', {}), 400, 'OntologyQuery.ActionType.InvalidParameter', /missing dynamic params: grace_period_seconds/);
  assertError(await exec('at_restart_pod', { dynamic_params: { grace_period_seconds: '30' } }), 400, null, /must be of type integer/);
  assertError(await exec('at_restart_pod', { _instance_identities: [{ pod_ip: '1.1.1.1', id: 9 }], dynamic_params: { grace_period_seconds: 1 } }), 400, null, /no ot_pod instance/);
  assertError(await exec('at_nope', {}), 404, 'OntologyQuery.ActionType.NotFound');
  assertError(await post('/kn_ops/action-types/at_restart_pod/execute', {}, { ...USER, 'content-type': 'text/plain' }), 406);
  // Live executions show up in the history and are cleared by reset.
  const list = (await get('/kn_ops/action-logs?action_type_id=at_restart_pod&limit=1000&need_total=true')).json;
  assert.ok(list.entries.some((e) => e.id === id));
  await call('POST', '/_sim/reset');
  assertError(await get(`/kn_ops/action-executions/${id}`), 404, 'OntologyQuery.ActionExecution.NotFound');
});

test('execution: legacy path returns at most 1000 results; seeded kn_ops execution', async () => {
  let r = await get('/kn_ops/action-executions/cqq2g8h4d2fg00fvm8dg');
  assert.equal(r.status, 200);
  assert.equal(r.json.status, 'completed');
  assert.equal(r.json.trigger_type, 'manual');
  assert.equal(r.json.execution_mode, 'per_instance');
  assert.equal(r.json.success_count, 1);
  assert.equal(r.json.failed_count, 1);
  r = await get('/kn_ops/action-executions/cqq4bulk4d2fg00fvm8f0');
  assert.equal(r.json.results.length, 1000);
  assert.equal(r.json.total_count, 12000);
  assert.equal(r.json.failed_count, 120);
  r = await get('/kn_medical/action-executions/d0h7medtp0000000001a');
  assert.equal(r.json.action_type_id, 'at_generate_treatment_plan');
  assert.equal(r.json.results[0].result.plan_id, 'plan_disease_000001');
});

test('execution paging: limits, window of 10000, status filter', async () => {
  const page = (q) => get(`/kn_ops/action-logs/cqq4bulk4d2fg00fvm8f0${q}`);
  let r = await page('?results_offset=0');
  assert.equal(r.json.results.length, 100); // offset alone switches to paging, default 100
  assert.equal(r.json.results_total, 12000);
  assert.equal(r.json.results_offset, 0);
  assert.equal(r.json.results_limit, 100);
  r = await page('?results_limit=0');
  assert.equal(r.json.results.length, 100);
  r = await page('?results_limit=1000');
  assert.equal(r.json.results.length, 1000);
  r = await page('?results_limit=1001');
  assert.equal(r.json.results.length, 1000);
  assert.equal(r.json.results_limit, 1000);
  r = await page('?results_offset=9950&results_limit=100');
  assert.equal(r.json.results.length, 50); // offset + page <= 10000
  assert.equal(r.json.results[0]._instance_identity.id, 100000 + 9950);
  r = await page('?results_offset=10000');
  assertError(r, 400, 'OntologyQuery.ActionExecution.InvalidParameter', /cannot page past 10000/);
  r = await page('?results_offset=-5&results_limit=2');
  assert.equal(r.json.results_offset, 0);
  r = await page('?results_status=failed&results_limit=1000');
  assert.equal(r.json.results_total, 120);
  assert.ok(r.json.results.every((x) => x.status === 'failed'));
  assertError(await page('?results_limit=abc'), 400);
  // An empty page carries no results_total (omitempty).
  r = await get('/kn_ops/action-logs/cqq3c9x4d2fg00fvm8e3?results_status=failed');
  assert.equal(r.json.results.length, 0);
  assert.ok(!('results_total' in r.json));
  assertError(await get('/kn_ops/action-logs/nope?results_offset=0'), 404);
});

test('execution history: filters, limits, offset, search_after', async () => {
  const list = (q) => get(`/kn_ops/action-logs${q}`);
  let r = await list('?need_total=true');
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.total_count, 6);
  assert.equal(r.json.entries.length, 6);
  const times = r.json.entries.map((e) => e.start_time);
  assert.deepEqual(times, [...times].sort((a, b) => b - a)); // newest first
  r = await list('?status=failed&start_time_from=1704067200000&limit=50&need_total=true');
  assert.deepEqual(r.json.entries.map((e) => e.id), ['cqq3b2m4d2fg00fvm8e2', 'cqq2k1p4d2fg00fvm8e0']);
  assert.equal(r.json.total_count, 2);
  r = await list('?trigger_type=scheduled');
  assert.equal(r.json.entries.length, 2);
  assert.ok(!('total_count' in r.json)); // only with need_total
  r = await list('?start_time_from=1730419200000&start_time_to=1735689600000');
  assert.equal(r.json.entries.length, 3);
  // limit <= 0 -> 20, > 1000 -> 1000: both return everything here without error.
  assert.equal((await list('?limit=0')).json.entries.length, 6);
  assert.equal((await list('?limit=5000')).json.entries.length, 6);
  // search_after round trip (comma-joined strings), and offset ignored with it.
  const first = (await list('?limit=2')).json;
  assert.equal(first.entries.length, 2);
  const cursor = first.search_after.join(',');
  const second = (await list(`?limit=2&search_after=${encodeURIComponent(cursor)}`)).json;
  const withOffset = (await list(`?limit=2&offset=3&search_after=${encodeURIComponent(cursor)}`)).json;
  assert.deepEqual(withOffset.entries.map((e) => e.id), second.entries.map((e) => e.id));
  const all = (await list('?limit=6')).json.entries.map((e) => e.id);
  assert.deepEqual(second.entries.map((e) => e.id), all.slice(2, 4));
  assert.deepEqual((await list('?limit=2&offset=2')).json.entries.map((e) => e.id), all.slice(2, 4));
  assertError(await list('?status=done'), 400, null, /status must be one of/);
  assertError(await list('?search_after=1,2,3'), 400, null, /search_after/);
  assertError(await list('?offset=-1'), 400);
});
