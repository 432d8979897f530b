// ontology-query's relevance channels (match: BM25 over tokens; knn: similarity, top k),
// the exploration subgraph (empty query_type) and metric data; bkn-safe's resource
// filter as search_instance calls it. In-process simulator on 127.0.0.1.
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

const OQ = '/api/ontology-query/in/v1/knowledge-networks/kn_medical';
const USER = { 'x-account-id': 'u_demo', 'x-account-type': 'user', 'content-type': 'application/json' };
const SEARCH = { ...USER, 'x-http-method-override': 'GET' };

async function post(path, body, headers = SEARCH) {
  const res = await fetch(base + path, { method: 'POST', body: JSON.stringify(body), headers, signal: AbortSignal.timeout(10000) });
  const text = await res.text();
  return { status: res.status, text, json: parse(text) };
}

const leaf = (op, value, field = 'name') => ({ operation: 'or', sub_conditions: [{ field, operation: op, value, value_from: 'const', ...(op === 'knn' ? { limit_key: 'k', limit_value: 3 } : {}) }] });

test('match scores 1 + BM25 over the query tokens; knn the similarity of the top k', async () => {
  let r = await post(`${OQ}/object-types/ot_drug`, { condition: leaf('match', '阿司匹林 布洛芬 胶囊'), limit: 20 });
  assert.equal(r.status, 200, r.text);
  const names = r.json.datas.map((d) => d.name);
  assert.deepEqual(names.slice(0, 2), ['阿司匹林肠溶片', '布洛芬缓释胶囊']);
  const scores = r.json.datas.map((d) => d._score);
  assert.ok(scores.every((s, i) => s > 1 && (i === 0 || s <= scores[i - 1])), scores.join());
  // knn: at most k rows, similarity in (0, 1], best first
  r = await post(`${OQ}/object-types/ot_drug`, { condition: leaf('knn', '阿司匹林 布洛芬 胶囊'), limit: 20 });
  assert.equal(r.json.datas.length, 3);
  assert.ok(r.json.datas.every((d) => d._score > 0 && d._score <= 1));
  r = await post(`${OQ}/object-types/ot_drug`, { condition: leaf('knn', '布洛芬'), limit: 20 });
  assert.deepEqual(r.json.datas.map((d) => [d.name, d._score]), [['布洛芬缓释胶囊', 0.5]]);
  // nothing in common: no row
  r = await post(`${OQ}/object-types/ot_drug`, { condition: leaf('knn', 'zzz'), limit: 20 });
  assert.deepEqual(r.json.datas, []);
});

test('exploration: paths from a page of source instances, isolated ones, total and cursor', async () => {
  const body = { source_object_type_id: 'ot_drug', direction: 'forward', path_length: 1, limit: 2, need_total: true,
    condition: { field: 'drug_id', operation: 'in', value: [1001, 1005] } };
  let r = await post(`${OQ}/subgraph?query_type=`, body);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.total_count, 2);
  const rels = r.json.relation_paths.map((p) => `${p.relations[0].relation_type_id}:${p.relations[0].target_object_id}`);
  assert.ok(rels.includes('rt_produced_by:kn_medical-ot_manufacturer-mfr_000001'), rels.join());
  assert.ok(rels.includes('rt_drug_skill:kn_medical-skills-skill_recall_assessment'), rels.join());
  assert.deepEqual(r.json.search_after, [1005]);
  // backward, 2 steps: manufacturer <- drug <- adverse event report (mfr_000001's drugs have reports)
  const mfr = (id, extra = {}) => ({ source_object_type_id: 'ot_manufacturer', direction: 'backward', path_length: 2,
    condition: { field: 'manufacturer_id', operation: '==', value: id }, ...extra });
  r = await post(`${OQ}/subgraph?query_type=`, mfr('mfr_000001'));
  assert.equal(r.json.relation_paths.length, 3);
  assert.ok(r.json.relation_paths.every((p) => p.length === 2 && p.relations[1].relation_type_id === 'rt_reported_for'));
  assert.equal(r.json.isolated_objects, undefined);
  // mfr_000002's drugs have none: no complete path, an isolated source, unless incomplete paths are asked for
  r = await post(`${OQ}/subgraph?query_type=`, mfr('mfr_000002'));
  assert.equal(r.json.relation_paths.length, 0);
  assert.ok(r.json.isolated_objects['kn_medical-ot_manufacturer-mfr_000002']);
  r = await post(`${OQ}/subgraph?query_type=`, mfr('mfr_000002', { include_incomplete_path: true }));
  assert.equal(r.json.relation_paths.length, 4);
  assert.ok(r.json.relation_paths.every((p) => p.length === 1));
  // refusals
  for (const [bad, re] of [[{ ...body, path_length: 4 }, /path_length/], [{ ...body, direction: 'up' }, /direction/],
    [{ ...body, source_object_type_id: undefined }, /source_object_type_id/], [{ ...body, extra: 1 }, /unknown field/]]) {
    r = await post(`${OQ}/subgraph?query_type=`, bad);
    assert.equal(r.status, 400, r.text);
    assert.match(r.json.error_details, re);
  }
  r = await post(`${OQ}/subgraph?query_type=`, { ...body, source_object_type_id: 'ot_patient' }, { ...SEARCH, 'x-account-id': 'u_other' });
  assert.equal(r.status, 403);
});

test('metric data: series per dimension value by calendar step, fill_null, instant, refusals', async () => {
  const q = { time: { start: 1735660800, end: 1743436800, step: 'month' }, analysis_dimensions: ['severity'] };
  let r = await post(`${OQ}/metrics/metric_adverse_event_count/data?fill_null=false`, q, USER);
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.datas.map((d) => d.labels), [{ severity: '一般' }, { severity: '严重' }]);
  assert.deepEqual(r.json.datas[0].time_strs, ['2025-01', '2025-02', '2025-03', '2025-04']);
  assert.ok(r.json.datas.some((d) => d.values.includes(null)), 'a missing point without fill_null');
  r = await post(`${OQ}/metrics/metric_adverse_event_count/data?fill_null=true`, q, USER);
  assert.ok(r.json.datas.every((d) => d.values.every((v) => typeof v === 'number')));
  r = await post(`${OQ}/metrics/metric_business_health/data?fill_null=false`, { time: { instant: true, end: 1743436800 } }, USER);
  assert.equal(r.json.datas.length, 1);
  assert.deepEqual(r.json.datas[0].labels, {});
  assert.equal(r.json.datas[0].values.length, 1);
  for (const [id, bad, status, re] of [['metric_nope', q, 404, /metric_nope/], ['metric_adverse_event_count', { ...q, analysis_dimensions: ['color'] }, 400, /color/],
    ['metric_adverse_event_count', { time: { start: 1 } }, 400, /time.start and time.end/], ['metric_adverse_event_count', { ...q, time: { ...q.time, step: 'hour' } }, 400, /step/]]) {
    r = await post(`${OQ}/metrics/${id}/data`, bad, USER);
    assert.equal(r.status, status, r.text);
    assert.match(r.json.error_details, re);
  }
  r = await post(`${OQ}/metrics/metric_patient_visits/data`, q, { ...USER, 'x-account-id': 'u_other' });
  assert.equal(r.status, 403, 'a metric of an object type the caller may not query');
});

test('faults apply to the model API and bkn-safe as to the other services', async () => {
  await post('/_sim/faults', { service: 'mf_model_api', path_prefix: '/api/private/mf-model-api/v1/small-model/', status: 503, count: 1 }, {});
  let r = await post('/api/private/mf-model-api/v1/small-model/reranker', { query: 'q', documents: ['q'] }, { 'content-type': 'application/json' });
  assert.equal(r.status, 503);
  r = await post('/api/private/mf-model-api/v1/small-model/reranker', { query: 'q', documents: ['q'] }, { 'content-type': 'application/json' });
  assert.equal(r.status, 200);
  await post('/_sim/faults', { service: 'bkn_safe', path_prefix: '/api/safe/v1/authz/', status: 500, count: 1 }, {});
  const filter = { accessor_id: 'u_other', resources: [{ type: 'object_type', id: 'kn_medical/ot_patient' }, { type: 'object_type', id: 'kn_medical/skills' }],
    visibility_operations: ['query_data'], candidate_operations: ['query_data'] };
  r = await post('/api/safe/v1/authz/resource-filter', filter, { 'content-type': 'application/json' });
  assert.equal(r.status, 500);
  r = await post('/api/safe/v1/authz/resource-filter', filter, { 'content-type': 'application/json' });
  assert.deepEqual(r.json.resources.map((x) => x.resource_id), ['kn_medical/skills']);
  await post('/_sim/reset', {}, {});
});
