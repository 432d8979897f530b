// bkn-backend concept routes (batches, lists, metrics, typed searches, capabilities)
// and mf-model-api (reranker, chat). In-process simulator on 127.0.0.1, closed at the end.
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

const BK = '/api/bkn-backend/in/v1/knowledge-networks';
const USER = { 'x-account-id': 'u_demo', 'x-account-type': 'user' };
const SEARCH = { ...USER, 'content-type': 'application/json', 'x-http-method-override': 'GET' };

async function call(method, path, { body, headers = USER } = {}) {
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
const search = (kn, kind, body, headers = SEARCH) => call('POST', `${BK}/${kn}/${kind}`, { body, headers });

function assertError(r, status, code) {
  assert.equal(r.status, status, r.text);
  assert.deepEqual(Object.keys(r.json), ['error_code', 'description', 'solution', 'error_link', 'error_details']);
  if (code) assert.equal(r.json.error_code, code);
}

const KNN = (q) => ({
  operation: 'or',
  sub_conditions: [
    { field: '*', operation: 'knn', value: q, value_from: 'const', limit_key: 'k', limit_value: 2000 },
    { field: '*', operation: 'match', value: q, value_from: 'const' },
  ],
});

test('KN export: action types without simulator keys, metrics not inlined', async () => {
  const r = await call('GET', `${BK}/kn_ops?include_detail=true&mode=export`);
  assert.equal(r.status, 200);
  const at = r.json.action_types.find((a) => a.id === 'at_restart_pod');
  assert.deepEqual(at.action_source, { type: 'mcp', mcp_id: 'mcp_k8s_ops', tool_name: 'restart_pod' });
  assert.ok(!('condition' in at) && !('result' in at));
  assert.ok(!r.text.includes('"access"'));
  const med = await call('GET', `${BK}/kn_medical?include_detail=true&mode=export`);
  assert.ok(!med.text.includes('"access"'));
  assert.ok(med.json.relation_types.some((x) => x.id === 'rt_patient_has_disease'));
});

test('concept batches: detail and brief object types, relation/action types, 404 for the batch', async () => {
  let r = await call('GET', `${BK}/kn_medical/object-types/ot_company?include_detail=false`);
  assert.equal(r.status, 200);
  assert.equal(r.json.entries[0].name, '药企');
  assert.ok(!('data_properties' in r.json.entries[0]));
  r = await call('GET', `${BK}/kn_medical/object-types/ot_company?include_detail=true`, { headers: SEARCH });
  assert.equal(r.json.entries[0].logic_properties.find((l) => l.name === 'risk_assessment').type, 'tool');
  assert.ok(r.json.entries[0].data_properties[0].condition_operations.length > 0);
  r = await call('GET', `${BK}/kn_medical/relation-types/rt_produced_by,rt_reported_for`);
  assert.deepEqual(r.json.entries.map((x) => x.id), ['rt_produced_by', 'rt_reported_for']);
  assertError(await call('GET', `${BK}/kn_medical/relation-types/rt_produced_by,rt_nope`), 404, 'BknBackend.RelationType.NotFound');
  r = await call('GET', `${BK}/kn_ops/action-types/at_restart_pod`);
  assert.equal(r.json.entries[0].object_type_id, 'ot_pod');
  assertError(await call('GET', `${BK}/kn_ops/action-types/nope`), 404, 'BknBackend.ActionType.NotFound');
  assertError(await call('DELETE', `${BK}/kn_ops/action-types/at_restart_pod`), 405);
});

test('metrics: scope filter and paging', async () => {
  let r = await call('GET', `${BK}/kn_medical/metrics?scope_type=object_type&scope_ref=ot_company,ot_drug&limit=1000&offset=0`);
  assert.equal(r.status, 200);
  assert.equal(r.json.total_count, 4);
  assert.ok(r.json.entries.every((m) => ['ot_company', 'ot_drug'].includes(m.scope_ref)));
  const m = r.json.entries[0];
  for (const k of ['id', 'name', 'comment', 'unit', 'unit_type', 'metric_type', 'scope_type', 'scope_ref', 'time_dimension', 'analysis_dimensions']) assert.ok(k in m, k);
  r = await call('GET', `${BK}/kn_medical/metrics?limit=2&offset=2`);
  assert.equal(r.json.entries.length, 2);
  assert.equal(r.json.total_count, 5);
  r = await call('GET', `${BK}/kn_supplychain/metrics/metric_product_total`);
  assert.equal(r.json.entries[0].analysis_dimensions[0].name, 'region');
  assertError(await call('GET', `${BK}/kn_medical/metrics?limit=5000`), 400);
});

test('typed searches: knn/match relevance, sort by _score, groups, limit', async () => {
  let r = await search('kn_medical', 'object-types', { condition: KNN('药品不良反应'), sort: [{ field: '_score', direction: 'desc' }], limit: 2000 });
  assert.equal(r.status, 200, r.text);
  const ids = r.json.entries.map((e) => e.id);
  assert.ok(ids.length >= 2);
  assert.ok(['ot_adverse_event', 'ot_drug'].includes(ids[0]), ids.join());
  const scores = r.json.entries.map((e) => e._score);
  assert.deepEqual(scores, [...scores].sort((a, b) => b - a));
  assert.ok(scores.every((s) => s > 0));
  assert.ok(r.json.entries[0].data_properties[0].condition_operations); // detail view
  r = await search('kn_medical', 'object-types', { condition: KNN('patient phone'), limit: 1 });
  assert.deepEqual(r.json.entries.map((e) => e.id), ['ot_patient']);
  r = await search('kn_medical', 'relation-types', { condition: KNN('生产企业'), limit: 10, need_total: true });
  assert.equal(r.json.entries[0].id, 'rt_produced_by');
  assert.equal(r.json.total_count, r.json.entries.length);
  r = await search('kn_ops', 'action-types', { condition: KNN('restart pod'), limit: 10 });
  assert.equal(r.json.entries[0].id, 'at_restart_pod');
  r = await search('kn_medical', 'metrics', {
    condition: { operation: 'and', sub_conditions: [KNN('不良反应'), { field: 'scope_type', operation: '==', value: 'object_type' }, { field: 'scope_ref', operation: 'in', value: ['ot_drug'] }] },
    sort: [{ field: '_score', direction: 'desc' }],
    limit: 10,
  });
  assert.deepEqual(r.json.entries.map((e) => e.id), ['metric_adverse_event_count']);
  r = await search('kn_medical', 'object-types', { concept_groups: ['cg_drug_safety'], condition: KNN('药品'), limit: 10 });
  assert.ok(r.json.entries.every((e) => ['ot_drug', 'ot_adverse_event'].includes(e.id)));
  assertError(await search('kn_medical', 'object-types', { concept_groups: ['cg_nope'], limit: 10 }), 500);
  r = await search('kn_medical', 'object-types', { condition: KNN('zzzz qqqq'), limit: 10 });
  assert.deepEqual(r.json.entries, []);
  assertError(await search('kn_medical', 'object-types', { bogus: 1 }), 400);
  assertError(await search('kn_medical', 'object-types', {}, { ...USER, 'content-type': 'application/json' }), 405);
  assertError(await search('kn_medical', 'object-types', {}, { ...USER, 'x-http-method-override': 'GET', 'content-type': 'text/plain' }), 406);
});

test('capabilities: default page of 10, limit=-1, type filter', async () => {
  let r = await call('GET', `${BK}/kn_ops/capabilities?limit=-1`);
  assert.equal(r.status, 200);
  assert.equal(r.json.total_count, 5);
  assert.equal(r.json.entries.length, 5);
  assert.deepEqual(r.json.entries[0], { capability_type: 'mcp_tool', box_id: 'mcp_k8s_ops', capability_id: 'restart_pod' });
  r = await call('GET', `${BK}/kn_ops/capabilities?limit=2&offset=1`);
  assert.deepEqual(r.json.entries.map((e) => e.capability_id), ['get_pod_logs', 'tool_scale_deployment']);
  r = await call('GET', `${BK}/kn_supplychain/capabilities?limit=-1&type=skill`);
  assert.deepEqual(r.json.entries.map((e) => e.capability_id), ['skill_fx_report']);
  assertError(await call('GET', `${BK}/kn_ops/capabilities?type=bogus`), 400);
  assertError(await call('GET', `${BK}/kn_nope/capabilities`), 404, 'BknBackend.KnowledgeNetwork.NotFound');
  assertError(await call('GET', `${BK}/kn_ops/capabilities`, { headers: {} }), 401);
});

const MF = '/api/private/mf-model-api/v1';

test('mf-model-api reranker: deterministic token-overlap scores, best first', async () => {
  const body = { query: '药品 不良反应', documents: ['生产企业', '不良反应上报', '药品不良反应上报', 'unrelated'], model: '' };
  const r = await call('POST', `${MF}/small-model/reranker`, { body, headers: { 'content-type': 'application/json' } });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.results.map((x) => x.index), [2, 1, 0, 3]);
  assert.equal(r.json.results[0].relevance_score, 1);
  assert.equal(r.json.results[3].relevance_score, 0);
  const again = await call('POST', `${MF}/small-model/reranker`, { body, headers: { 'content-type': 'application/json' } });
  assert.equal(again.text, r.text);
  assertError(await call('POST', `${MF}/small-model/reranker`, { body: { query: 1 } }), 400);
  assertError(await call('GET', `${MF}/small-model/reranker`), 405);
});

test('mf-model-api chat: logic-property parameters, missing-params answer', async () => {
  const ask = (user) => call('POST', `${MF}/chat/completions`, {
    body: { model: '', messages: [{ role: 'system', content: 'prompt' }, { role: 'user', content: JSON.stringify(user) }], stream: false, temperature: 0 },
    headers: { 'content-type': 'application/json' },
  });
  const firstObject = (content) => JSON.parse(content.slice(content.indexOf('{'), content.lastIndexOf('}') + 1));
  let r = await ask({
    logic_property: { name: 'approved_drug_count', type: 'metric', parameters: [{ name: 'start', value_from: 'input' }, { name: 'end', value_from: 'input' }] },
    query: '2024年每季度获批药品数', unique_identities: [{ company_id: 'company_000001' }], now_ms: 1750000000000, timezone: 'Asia/Shanghai',
  });
  assert.equal(r.status, 200, r.text);
  let p = firstObject(r.json.choices[0].message.content).approved_drug_count;
  assert.equal(p.instant, false);
  assert.equal(p.step, 'quarter');
  assert.ok(p.start < p.end && p.start >= 946684800000 && p.end <= 4102444800000);
  r = await ask({ logic_property: { name: 'business_health_score', type: 'metric', parameters: [] }, query: '当前经营健康度', now_ms: 1750000000000 });
  p = firstObject(r.json.choices[0].message.content).business_health_score;
  assert.equal(p.instant, true);
  assert.ok(!('step' in p));
  r = await ask({ logic_property: { name: 'risk_assessment', type: 'tool', parameters: [{ name: 'horizon', value_from: 'input', type: 'string' }] }, query: '未来一年的经营风险' });
  assert.deepEqual(firstObject(r.json.choices[0].message.content), { risk_assessment: { horizon: 'year' } });
  r = await ask({ logic_property: { name: 'approved_drug_count', type: 'metric', parameters: [{ name: 'start', value_from: 'input' }] }, query: '缺少参数' });
  assert.match(firstObject(r.json.choices[0].message.content)._error, /missing start/);
  assertError(await call('POST', `${MF}/chat/completions`, { body: { messages: [] } }), 400);
});
