// Black-box tests of the simulator: spawn it on port 0, talk HTTP, kill it by PID.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parse } from './lib/json.mjs';

const SIM = fileURLToPath(new URL('./sim.mjs', import.meta.url));
let child;
let base;

before(async () => {
  child = spawn(process.execPath, [SIM, '--port', '0', '--host', '127.0.0.1', '--ttl', '120'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error('simulator did not start within 5 s')), 5000);
    child.stdout.on('data', (c) => {
      buf += c;
      const nl = buf.indexOf('\n');
      if (nl >= 0) {
        clearTimeout(timer);
        resolve(buf.slice(0, nl));
      }
    });
    child.on('exit', (code) => reject(new Error(`simulator exited early (${code})`)));
  });
  const info = JSON.parse(line);
  assert.ok(Number.isInteger(info.port) && info.port > 0);
  assert.equal(info.base, `http://127.0.0.1:${info.port}`);
  assert.deepEqual(Object.keys(info), ['port', 'base']);
  base = info.base;
});

after(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    process.kill(child.pid, 'SIGTERM');
    await exited;
  }
});

async function call(method, path, { body, headers = {} } = {}) {
  const res = await fetch(base + path, { method, body, headers, signal: AbortSignal.timeout(10000) });
  const text = await res.text();
  let value;
  try {
    value = parse(text);
  } catch {
    value = undefined;
  }
  return { status: res.status, text, json: value, headers: res.headers };
}

const OQ_HEADERS = { 'content-type': 'application/json', 'x-http-method-override': 'GET', 'x-account-id': 'u_demo', 'x-account-type': 'user' };
const oq = (ot, body, { kn = 'kn_medical', headers = {}, query = '' } = {}) =>
  call('POST', `/api/ontology-query/in/v1/knowledge-networks/${kn}/object-types/${ot}${query}`, {
    body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { ...OQ_HEADERS, ...headers },
  });
const bigBody = (s) => s; // request bodies with big integers are written as text

function assertEnvelope(r, status, code) {
  assert.equal(r.status, status, r.text);
  assert.deepEqual(Object.keys(r.json), ['error_code', 'description', 'solution', 'error_link', 'error_details']);
  if (code) assert.equal(r.json.error_code, code);
}

test('health', async () => {
  const r = await call('GET', '/_sim/health');
  assert.equal(r.status, 200);
  assert.equal(r.json.status, 'ok');
  // Other services are appended as they are simulated; these must always be there.
  for (const name of ['oauth', 'bkn_safe', 'bkn_backend', 'ontology_query', 'trace_core', 'mf_model_api']) {
    assert.ok(r.json.services.includes(name), name);
  }
});

test('oauth introspection: demo tokens', async () => {
  const intro = (token, ct = 'application/x-www-form-urlencoded') =>
    call('POST', '/admin/oauth2/introspect', { body: `token=${token}`, headers: { 'content-type': ct } });
  const now = Math.floor(Date.now() / 1000);

  let r = await intro('demo-user-token');
  assert.equal(r.status, 200);
  assert.equal(r.json.active, true);
  assert.equal(r.json.sub, 'u_demo');
  assert.equal(r.json.client_id, 'demo-client');
  assert.equal(r.json.ext.visitor_type, 'realname');
  assert.equal(r.json.ext.visitor_name, 'Demo User');
  assert.ok(r.json.exp > now + 3600 && r.json.exp < now + 86400);

  r = await intro('demo-app-token');
  assert.equal(r.json.active, true);
  assert.equal(r.json.sub, 'demo-app');
  assert.equal(r.json.sub, r.json.client_id);

  r = await intro('demo-user2-token');
  assert.equal(r.json.sub, 'u_other');
  assert.equal(r.json.ext.visitor_type, 'realname');

  for (const t of ['nope', '', 'demo-user-token-x']) {
    r = await intro(t);
    assert.equal(r.status, 200);
    assert.equal(r.text, '{"active":false}');
  }
  r = await intro('demo-user-token', 'application/json');
  assert.equal(r.status, 400);
  r = await call('GET', '/admin/oauth2/introspect');
  assert.equal(r.status, 405);
});

test('oauth: demo-short-token expires about 2 s after reset', async () => {
  await call('POST', '/_sim/reset');
  const intro = () =>
    call('POST', '/admin/oauth2/introspect', { body: 'token=demo-short-token', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  let r = await intro();
  assert.equal(r.json.active, true);
  const exp = r.json.exp;
  assert.ok(exp - Date.now() / 1000 <= 2.01);
  await new Promise((res) => setTimeout(res, Math.max(0, exp * 1000 - Date.now()) + 50));
  r = await intro();
  assert.equal(r.text, '{"active":false}');
  await call('POST', '/_sim/reset');
  r = await intro();
  assert.equal(r.json.active, true);
});

test('bkn-safe AppKey introspection', async () => {
  const intro = (body) => call('POST', '/api/safe/v1/api-keys/introspect', { body, headers: { 'content-type': 'application/json' } });
  let r = await intro('{"token":"bak_demo_appkey"}');
  assert.equal(r.status, 200);
  assert.equal(r.json.active, true);
  assert.equal(r.json.sub, 'u_demo');
  assert.equal(r.json.account_type, 'user');
  for (const k of ['subject_name', 'key_id', 'key_name']) assert.equal(typeof r.json[k], 'string');
  r = await intro('{"token":"bak_demo_app_appkey"}');
  assert.equal(r.json.account_type, 'app');
  for (const b of ['{"token":"bak_unknown"}', 'not json', '', '[]', '{"token":1}']) {
    r = await intro(b);
    assert.equal(r.status, 200);
    assert.equal(r.text, '{"active":false}');
  }
});

test('bkn-backend: list knowledge networks', async () => {
  const h = { headers: { 'x-account-id': 'u_demo' } };
  const list = (q) => call('GET', `/api/bkn-backend/in/v1/knowledge-networks${q}`, h);
  let r = await list('');
  assert.equal(r.status, 200);
  assert.equal(r.json.total_count, 3);
  assert.deepEqual(r.json.entries.map((e) => e.id), ['kn_supplychain', 'kn_ops', 'kn_medical']); // update_time desc
  const kn = r.json.entries[2];
  for (const k of ['id', 'name', 'comment', 'tags', 'business_domain', 'create_time', 'update_time', 'creator']) assert.ok(k in kn, k);
  assert.ok(!('description' in kn));

  r = await list(`?name_pattern=${encodeURIComponent('医药')}`);
  assert.deepEqual(r.json.entries.map((e) => e.id), ['kn_medical']);
  assert.equal(r.json.total_count, 1);

  r = await list('?sort=name&direction=asc&limit=2&offset=1');
  assert.equal(r.json.total_count, 3);
  assert.equal(r.json.entries.length, 2);
  r = await list('?limit=0&sort=create_time&direction=asc');
  assert.deepEqual(r.json.entries.map((e) => e.id), ['kn_medical', 'kn_ops', 'kn_supplychain']);

  assertEnvelope(await list('?sort=bogus'), 400);
  assertEnvelope(await list('?direction=up'), 400);
  assertEnvelope(await list('?limit=abc'), 400);
  assertEnvelope(await call('GET', '/api/bkn-backend/in/v1/knowledge-networks'), 401);
});

test('bkn-backend: detail, export view, object types, 404', async () => {
  const h = { headers: { 'x-account-id': 'u_demo' } };
  let r = await call('GET', '/api/bkn-backend/in/v1/knowledge-networks/kn_medical', h);
  assert.equal(r.status, 200);
  assert.equal(r.json.id, 'kn_medical');
  assert.equal(r.json.name, '医药知识网络');
  assert.ok(!('object_types' in r.json));

  r = await call('GET', '/api/bkn-backend/in/v1/knowledge-networks/kn_medical?include_detail=true&mode=export', h);
  const drug = r.json.object_types.find((o) => o.id === 'ot_drug');
  assert.deepEqual(drug.primary_keys, ['drug_id']);
  assert.ok(drug.data_properties.every((p) => !('condition_operations' in p)));
  assert.ok(r.json.object_types.every((o) => !('access' in o)));
  assert.ok(r.json.relation_types.some((t) => t.id === 'rt_produced_by'));

  r = await call('GET', '/api/bkn-backend/in/v1/knowledge-networks/kn_medical/object-types/ot_drug,ot_disease?include_detail=true', h);
  assert.deepEqual(r.json.entries.map((e) => e.id), ['ot_drug', 'ot_disease']);
  assert.ok(r.json.entries[0].data_properties[0].condition_operations.length > 0);
  assertEnvelope(await call('GET', '/api/bkn-backend/in/v1/knowledge-networks/kn_medical/object-types/ot_drug,ot_nope', h), 404, 'BknBackend.ObjectType.NotFound');

  r = await call('GET', '/api/bkn-backend/in/v1/knowledge-networks/kn_nope', h);
  assertEnvelope(r, 404, 'BknBackend.KnowledgeNetwork.NotFound');
  r = await call('GET', '/api/bkn-backend/in/v1/knowledge-networks/kn_nope', { headers: { ...h.headers, 'accept-language': 'en-US' } });
  assert.equal(r.json.description, 'Resource not found');
});

test('ontology-query: big numbers and empty containers are byte-exact', async () => {
  const r = await oq('ot_drug', bigBody('{"condition":{"operation":"==","field":"drug_id","value":9007199254740993,"value_from":"const"},"limit":5,"need_total":true}'));
  assert.equal(r.status, 200, r.text);
  assert.match(r.text, /^\{"datas":\[\{"drug_id":9007199254740993,"name":"阿司匹林肠溶片",/);
  assert.ok(r.text.includes('"batch_no":12345678901234567890123,"tags":[],"ext":{},'));
  assert.ok(r.text.includes('"_instance_identity":{"drug_id":9007199254740993}'));
  assert.equal(r.json.total_count, 1);
  assert.equal(r.json.datas[0]._display, '阿司匹林肠溶片');
  assert.equal(typeof r.json.datas[0]._instance_id, 'string');
  assert.equal(typeof r.json.overall_ms, 'number');
  assert.equal(r.json.search_from_index, true);

  // 2^53 must not match 2^53+1 (a double-based simulator would say it does).
  const r2 = await oq('ot_drug', '{"condition":{"operation":"==","field":"drug_id","value":9007199254740992},"need_total":true}');
  assert.equal(r2.json.datas.length, 0);
  assert.ok(!('total_count' in r2.json), 'total_count omitted when 0');
  assert.ok(!('search_after' in r2.json));

  const r3 = await oq('ot_drug', '{"condition":{"operation":"in","field":"batch_no","value":[12345678901234567890123]},"properties":["batch_no"]}');
  assert.equal(r3.json.datas.length, 1);
  assert.deepEqual(Object.keys(r3.json.datas[0]).filter((k) => !k.startsWith('_')), ['batch_no']);
  for (const k of ['_instance_id', '_instance_identity', '_display']) assert.ok(k in r3.json.datas[0]);

  // A decimal kept as written (12500.50, not 12500.5).
  const r4 = await oq('ot_purchase_order', '{"condition":{"operation":"==","field":"po_id","value":"PO-2025-0001"}}', { kn: 'kn_supplychain' });
  assert.ok(r4.text.includes('"amount":12500.50,'));
});

test('ontology-query: condition operators', async () => {
  const count = async (condition, ot = 'ot_drug') => {
    const r = await oq(ot, { condition, limit: 10000, need_total: true });
    assert.equal(r.status, 200, r.text);
    return r.json.datas.length;
  };
  const leaf = (field, operation, value) => ({ field, operation, value, value_from: 'const' });
  assert.equal(await count(null), 22);
  assert.equal(await count({ operation: 'and', sub_conditions: [] }), 22);
  assert.equal(await count({ operation: 'and', sub_conditions: [null, leaf('status', '==', 'on_market')] }), 14);
  assert.equal(await count(leaf('status', '!=', 'on_market')), 8);
  assert.equal(await count(leaf('drug_id', '>', 1010)), 12); // 1011..1021 + the big one
  assert.equal(await count(leaf('drug_id', '>=', 1010)), 13);
  assert.equal(await count(leaf('drug_id', '<', 1003)), 2);
  assert.equal(await count(leaf('drug_id', '<=', 1003)), 3);
  assert.equal(await count(leaf('drug_id', 'range', [1001, 1005])), 5);
  assert.equal(await count(leaf('drug_id', 'in', [1001, 1002, 5])), 2);
  assert.equal(await count(leaf('drug_id', 'not_in', [1001, 1002])), 20);
  assert.equal(await count(leaf('name', 'like', '胶囊')), 5);
  assert.equal(await count(leaf('name', 'not_like', '胶囊')), 17);
  assert.equal(await count(leaf('name', 'match', 'smith'), 'ot_patient'), 1); // case-insensitive
  assert.equal(await count(leaf('*', 'match', '阿司匹林')), 1);
  assert.equal(await count(leaf('*', 'knn', '阿司匹林')), 1);
  assert.equal(await count(leaf('name', 'regex', '^阿')), 3);
  assert.equal(await count(leaf('ext', 'exist')), 22);
  assert.equal(await count(leaf('tags', 'exist')), 14);
  assert.equal(await count(leaf('tags', 'not_exist')), 8);
  assert.equal(await count(leaf('tags', '==', 'OTC')), 7); // array field: any element
  assert.equal(await count(leaf('approval_date', '>=', '2020-01-01')), 4);
  assert.equal(
    await count({ operation: 'or', sub_conditions: [leaf('drug_id', '==', 1001), leaf('drug_id', '==', 1002)] }),
    2,
  );
  // search_after / sort by relevance
  const r = await oq('ot_drug', { condition: leaf('*', 'match', '片'), limit: 1 });
  assert.ok(r.json.datas[0]._score >= 1);

  for (const bad of [
    { operation: 'bogus', field: 'name', value: 1 },
    { operation: '==', value: 1 },
    { operation: 'in', field: 'drug_id', value: 1 },
    { operation: 'range', field: 'drug_id', value: [1] },
    { operation: 'regex', field: 'name', value: '(' },
    { operation: '==', field: 'name', value: 'x', value_from: 'field' },
    { operation: 'and', sub_conditions: {} },
    'x',
  ]) {
    assertEnvelope(await oq('ot_drug', { condition: bad }), 400, 'OntologyQuery.ObjectType.InvalidParameter');
  }
});

test('ontology-query: limit, sort and body validation', async () => {
  let r = await oq('ot_drug', { limit: 0 });
  assert.equal(r.json.datas.length, 10);
  r = await oq('ot_drug', {});
  assert.equal(r.json.datas.length, 10);
  r = await oq('ot_drug', '');
  assert.equal(r.json.datas.length, 10);
  for (const limit of [-1, 10001, 1.5, '5']) assertEnvelope(await oq('ot_drug', { limit }), 400, 'OntologyQuery.ObjectType.InvalidParameter');
  for (const sort of [[{ field: 'name' }], [{ field: 'name', direction: 'up' }], [{ direction: 'asc' }], [null], {}]) {
    assertEnvelope(await oq('ot_drug', { sort }), 400, 'OntologyQuery.ObjectType.InvalidParameter');
  }
  assertEnvelope(await oq('ot_drug', '{"limit":'), 400, 'OntologyQuery.ObjectType.InvalidParameter');
  assertEnvelope(await oq('ot_drug', { unknown: 1 }), 400);
  assertEnvelope(await oq('ot_drug', { offset: -1 }), 400);
  assertEnvelope(await oq('ot_drug', { properties: 'name' }), 400);

  r = await oq('ot_drug', { sort: [{ field: 'drug_id', direction: 'desc' }], limit: 2 });
  assert.ok(r.text.startsWith('{"datas":[{"drug_id":9007199254740993,'));
  assert.equal(r.json.datas[1].drug_id, 1021);
  assert.ok(!('total_count' in r.json), 'not computed without need_total');
});

test('ontology-query: search_after paging walks every row exactly once', async () => {
  const seen = [];
  let cursor = null;
  let pages = 0;
  for (;;) {
    const body = cursor
      ? `{"limit":5,"sort":[{"field":"approval_date","direction":"desc"}],"need_total":true,"search_after":${cursor}}`
      : '{"limit":5,"sort":[{"field":"approval_date","direction":"desc"}],"need_total":true}';
    const r = await oq('ot_drug', body);
    assert.equal(r.status, 200, r.text);
    if (pages === 0) assert.equal(r.json.total_count, 22);
    else assert.ok(!('total_count' in r.json), 'search_after disables the total');
    if (r.json.datas.length === 0) {
      assert.ok(!('search_after' in r.json));
      break;
    }
    seen.push(...r.json.datas.map((d) => String(d.drug_id)));
    // The cursor is passed back verbatim, so big numbers in it must be exact.
    cursor = r.text.match(/"search_after":(\[.*?\]),"overall_ms"/)[1];
    pages += 1;
    assert.ok(pages < 10);
  }
  assert.equal(seen.length, 22);
  assert.equal(new Set(seen).size, 22);
  assert.ok(seen.includes('9007199254740993'));

  // Offset paging (ignored when search_after is given).
  const a = await oq('ot_drug', { limit: 5, offset: 5 });
  const all = await oq('ot_drug', { limit: 10 });
  assert.deepEqual(a.json.datas.map((d) => d.drug_id), all.json.datas.slice(5).map((d) => d.drug_id));
  assertEnvelope(await oq('ot_drug', { search_after: [1001, 2] }), 400);
  const withCursor = await oq('ot_drug', { search_after: [1001], offset: 3, limit: 2 });
  assert.deepEqual(withCursor.json.datas.map((d) => d.drug_id), [1002, 1003]);
  const big = await oq('ot_drug', { search_after: [1021] });
  assert.equal(big.json.datas.length, 1); // missing limit with a cursor -> up to 10000
});

test('ontology-query: headers, 404 and include_type_info', async () => {
  assertEnvelope(await oq('ot_drug', {}, { headers: { 'content-type': 'text/plain' } }), 406, 'OntologyQuery.InvalidRequestHeader.ContentType');
  assert.equal((await oq('ot_drug', {}, { headers: { 'content-type': 'application/json; charset=utf-8' } })).status, 200);
  assertEnvelope(await oq('ot_drug', {}, { headers: { 'x-http-method-override': '' } }), 400);
  const noAccount = await call('POST', '/api/ontology-query/in/v1/knowledge-networks/kn_medical/object-types/ot_drug', {
    body: '{}', headers: { 'content-type': 'application/json', 'x-http-method-override': 'GET' },
  });
  assertEnvelope(noAccount, 401);
  assertEnvelope(await oq('ot_nope', {}), 404, 'OntologyQuery.ObjectType.NotFound');
  assertEnvelope(await oq('ot_drug', {}, { kn: 'kn_nope' }), 404, 'OntologyQuery.KnowledgeNetwork.NotFound');
  let r = await oq('ot_pod', { limit: 1 }, { kn: 'kn_ops', query: '?include_type_info=true&include_logic_params=false' });
  assert.equal(r.json.object_type.id, 'ot_pod');
  assert.deepEqual(Object.keys(r.json.datas[0]._instance_identity), ['pod_ip', 'id']);
  r = await oq('ot_supplier', {}, { kn: 'kn_supplychain' });
  assert.equal(r.json.datas.length, 3);
  assert.ok(!('object_type' in r.json));
});

test('ontology-query: restricted object type (masking, row filter, 403)', async () => {
  let r = await oq('ot_patient', { need_total: true });
  assert.equal(r.status, 200);
  assert.equal(r.json.total_count, 3);
  assert.ok(r.json.datas.every((d) => d.region === '华东'));
  assert.ok(r.json.datas.every((d) => /^\d{3}\*{4}\d{4}$/.test(d.phone)));
  assert.equal(r.json.effective_permissions.phone, 'masked');
  assert.equal(r.json.effective_permissions.name, 'full');
  assert.equal(r.json.row_filter_applied, true);
  r = await oq('ot_patient', { properties: ['name'] });
  assert.deepEqual(r.json.effective_permissions, { name: 'full' });

  for (const account of ['u_other', 'demo-app']) {
    r = await oq('ot_patient', {}, { headers: { 'x-account-id': account } });
    assertEnvelope(r, 403, 'Public.Forbidden');
    assert.ok(r.json.error_details.includes('object_type:kn_medical/ot_patient'));
  }
  // Unrestricted types carry no permission fields.
  r = await oq('ot_drug', { limit: 1 }, { headers: { 'x-account-id': 'u_other' } });
  assert.ok(!('effective_permissions' in r.json) && !('row_filter_applied' in r.json));
});

test('control: request recording, filters, reset', async () => {
  await call('POST', '/_sim/reset');
  const before = (await call('GET', '/_sim/requests')).json;
  assert.deepEqual(before.requests, []);
  const since = before.last_seq;
  await oq('ot_drug', '{"limit":1}', { query: '?include_type_info=false&x=1&x=2', headers: { 'X-Custom-Header': 'Yes' } });
  await call('POST', '/api/safe/v1/api-keys/introspect', { body: '{"token":"bak_x"}', headers: { 'content-type': 'application/json' } });
  let r = await call('GET', `/_sim/requests?since=${since}`);
  assert.equal(r.json.requests.length, 2);
  const rec = r.json.requests[0];
  assert.equal(rec.seq, since + 1);
  assert.equal(rec.service, 'ontology_query');
  assert.equal(rec.method, 'POST');
  assert.equal(rec.path, '/api/ontology-query/in/v1/knowledge-networks/kn_medical/object-types/ot_drug');
  assert.deepEqual(rec.query, { include_type_info: 'false', x: ['1', '2'] });
  assert.equal(rec.headers['x-custom-header'], 'Yes');
  assert.equal(rec.headers['x-account-id'], 'u_demo');
  assert.equal(rec.body, '{"limit":1}');
  r = await call('GET', `/_sim/requests?service=bkn_safe&since=${since}`);
  assert.equal(r.json.requests.length, 1);
  assert.equal(r.json.requests[0].body, '{"token":"bak_x"}');
  r = await call('GET', `/_sim/requests?since=${since + 2}`);
  assert.equal(r.json.requests.length, 0);
  await call('POST', '/_sim/reset');
  r = await call('GET', '/_sim/requests');
  assert.equal(r.json.requests.length, 0);
  assert.equal(r.json.last_seq, since + 2, 'sequence survives reset');
});

test('control: faults (status, body, count, latency, close, hang, prefix, wildcard)', async () => {
  await call('POST', '/_sim/reset');
  const fault = (spec) => call('POST', '/_sim/faults', { body: JSON.stringify(spec), headers: { 'content-type': 'application/json' } });
  const safe = () => call('POST', '/api/safe/v1/api-keys/introspect', { body: '{"token":"bak_demo_appkey"}' });

  let r = await fault({ service: 'bkn_safe', status: 503, count: 2 });
  assert.equal(r.status, 200);
  assert.equal(typeof r.json.id, 'number');
  assert.equal((await safe()).status, 503);
  assert.equal((await safe()).status, 503);
  assert.equal((await safe()).status, 200, 'count exhausted');

  await fault({ service: 'oauth', status: 500, body: 'boom', count: 1 });
  r = await call('POST', '/admin/oauth2/introspect', { body: 'token=demo-user-token', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  assert.equal(r.status, 500);
  assert.equal(r.text, 'boom');

  await fault({ service: 'ontology_query', path_prefix: '/api/ontology-query/in/v1/knowledge-networks/kn_ops/', status: 502 });
  assert.equal((await oq('ot_pod', {}, { kn: 'kn_ops' })).status, 502);
  assert.equal((await oq('ot_drug', {})).status, 200, 'prefix does not match');

  await fault({ service: 'bkn_backend', latency_ms: 300, count: 1 });
  const t0 = Date.now();
  r = await call('GET', '/api/bkn-backend/in/v1/knowledge-networks', { headers: { 'x-account-id': 'u_demo' } });
  assert.equal(r.status, 200);
  assert.ok(Date.now() - t0 >= 290, 'latency applied');

  await fault({ service: 'bkn_backend', mode: 'close', count: 1 });
  await assert.rejects(call('GET', '/api/bkn-backend/in/v1/knowledge-networks', { headers: { 'x-account-id': 'u_demo' } }));
  assert.equal((await call('GET', '/api/bkn-backend/in/v1/knowledge-networks', { headers: { 'x-account-id': 'u_demo' } })).status, 200);

  await fault({ service: 'bkn_backend', mode: 'hang', count: 1 });
  await assert.rejects(
    fetch(base + '/api/bkn-backend/in/v1/knowledge-networks', { headers: { 'x-account-id': 'u_demo' }, signal: AbortSignal.timeout(300) }),
    /abort|timeout/i,
  );

  r = await call('GET', '/_sim/faults');
  assert.equal(r.json.faults.length, 6);
  await call('POST', '/_sim/reset');
  r = await call('GET', '/_sim/faults');
  assert.deepEqual(r.json.faults, []);

  await fault({ service: '*', status: 418, count: 1 });
  assert.equal((await safe()).status, 418);
  assert.equal((await safe()).status, 200);
  // The faulted request is still recorded.
  r = await call('GET', '/_sim/requests?service=bkn_safe');
  assert.equal(r.json.requests.length, 2);

  for (const bad of [{ service: 'nope', status: 500 }, { service: 'oauth' }, { service: 'oauth', status: 99 }, { service: 'oauth', mode: 'explode' }, { service: 'oauth', status: 500, extra: 1 }]) {
    assert.equal((await fault(bad)).status, 400, JSON.stringify(bad));
  }
  assert.equal((await call('POST', '/_sim/faults', { body: 'nope' })).status, 400);
  await call('POST', '/_sim/reset');
});

test('control: the execution log (handled requests only, by trace id) and removing a fault', async () => {
  await call('POST', '/_sim/reset');
  const fault = (spec) => call('POST', '/_sim/faults', { body: JSON.stringify(spec), headers: { 'content-type': 'application/json' } });
  const tp = (t) => `00-${t}-${'1'.repeat(16)}-01`;
  const T1 = 'a'.repeat(32);
  const T2 = 'b'.repeat(32);
  const since = (await call('GET', '/_sim/executions')).json.last_seq;
  assert.equal((await oq('ot_drug', '{"limit":1}', { headers: { traceparent: tp(T1) } })).status, 200);
  const f = await fault({ service: 'ontology_query', mode: 'close' });
  await assert.rejects(oq('ot_drug', '{"limit":1}', { headers: { traceparent: tp(T2) } }));
  assert.equal((await call('DELETE', `/_sim/faults/${f.json.id}`)).status, 200);
  assert.equal((await call('DELETE', `/_sim/faults/${f.json.id}`)).status, 404);
  assert.equal((await oq('ot_drug', '{"limit":1}', { headers: { traceparent: tp(T2) } })).status, 200);
  assert.equal((await oq('nope', '{}', { headers: { traceparent: 'junk' } })).status, 404);
  let r = await call('GET', `/_sim/executions?since=${since}`);
  assert.deepEqual(r.json.executions.map((e) => [e.trace_id, e.status, e.account]), [[T1, 200, 'u_demo'], [T2, 200, 'u_demo'], ['', 404, 'u_demo']]);
  assert.equal(r.json.executions[0].path, '/api/ontology-query/in/v1/knowledge-networks/kn_medical/object-types/ot_drug');
  r = await call('GET', `/_sim/executions?trace_id=${T2}`);
  assert.equal(r.json.executions.length, 1, 'the request the fault dropped is not an execution');
  // a removed hang fault lets its held requests go
  const h = await fault({ service: 'bkn_backend', mode: 'hang' });
  const held = fetch(base + '/api/bkn-backend/in/v1/knowledge-networks', { headers: { 'x-account-id': 'u_demo' }, signal: AbortSignal.timeout(5000) });
  // handled from the start: the rejection may come before the DELETE's answer is read
  // (a loaded machine), and an unhandled rejection fails the test run
  held.catch(() => {});
  while ((await call('GET', '/_sim/faults')).json.faults[0].hits === 0) await new Promise((res) => setTimeout(res, 20));
  await call('DELETE', `/_sim/faults/${h.json.id}`);
  await assert.rejects(held, (e) => !/abort|timeout/i.test(String(e.cause?.name || e.name)));
  await call('POST', '/_sim/reset');
  assert.deepEqual((await call('GET', '/_sim/executions')).json.executions, []);
});

test('unknown routes', async () => {
  assert.equal((await call('GET', '/nowhere')).status, 404);
  assert.equal((await call('GET', '/_sim/nowhere')).status, 404);
  assert.equal((await call('GET', '/api/ontology-query/in/v1/other', { headers: { 'x-account-id': 'u' } })).status, 404);
  const r = await call('GET', '/_sim/requests?service=unknown');
  assert.ok(r.json.requests.some((q) => q.path === '/nowhere'));
});
