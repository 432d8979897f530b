// vega-backend routes of the simulator over HTTP (in-process simulator on 127.0.0.1:0).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createSimulator } from './sim.mjs';
import { parse } from './lib/json.mjs';

let sim;
let base;
const V = '/api/vega-backend/in/v1';
const USER = { 'x-account-id': 'u_demo', 'x-account-type': 'user' };

before(async () => {
  sim = createSimulator();
  await new Promise((r) => sim.server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${sim.server.address().port}`;
});
after(() => sim.close());

async function call(method, path, { body, headers = USER } = {}) {
  const init = { method, headers: { ...headers }, signal: AbortSignal.timeout(10000) };
  if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    init.headers['content-type'] = 'application/json';
  }
  const res = await fetch(base + path, init);
  const text = await res.text();
  let value;
  try {
    value = parse(text);
  } catch {
    value = undefined;
  }
  return { status: res.status, text, json: value };
}

function envelope(r, status, code) {
  assert.equal(r.status, status, r.text);
  assert.deepEqual(Object.keys(r.json), ['error_code', 'description', 'solution', 'error_link', 'error_details']);
  if (code) assert.equal(r.json.error_code, code);
}

const sql = (query, extra = {}, headers = USER) => call('POST', `${V}/resources/query`, {
  headers,
  body: { query, query_format: 'sql', input_dialect: 'mysql', paging: { mode: 'single', limit: 10000 }, ...extra },
});

test('resources: list with filters and paging, visibility, account required', async () => {
  const all = await call('GET', `${V}/resources`);
  assert.equal(all.status, 200);
  assert.deepEqual(Object.keys(all.json), ['entries', 'total_count']);
  assert.equal(all.json.entries.length, Math.min(20, all.json.total_count), 'default limit 20');
  assert.equal((await call('GET', `${V}/resources?limit=2`)).json.entries.length, 2);
  const ids = (await call('GET', `${V}/resources?limit=1000`)).json.entries.map((r) => r.id);
  assert.ok(ids.includes('res_orders') && ids.includes('res_drugs') && ids.includes('res_patients'));
  assert.ok(!ids.includes('res_payroll'), 'filtered by view_detail');
  const r0 = all.json.entries.find((r) => r.id === 'res_orders');
  assert.deepEqual(Object.keys(r0), ['id', 'catalog_id', 'name', 'category', 'status', 'description', 'schema_definition']);
  const cat = await call('GET', `${V}/resources?catalog_id=cat_prod_mysql&category=table`);
  assert.deepEqual(cat.json.entries.map((r) => r.id), ['res_orders', 'res_customers']);
  const page = await call('GET', `${V}/resources?catalog_id=cat_prod_mysql&offset=1&limit=1`);
  assert.deepEqual(page.json.entries.map((r) => r.id), ['res_customers']);
  assert.equal(page.json.total_count, 3);
  envelope(await call('GET', `${V}/resources?category=bogus`), 400);
  envelope(await call('GET', `${V}/resources?limit=1001`), 400);
  envelope(await call('GET', `${V}/resources`, { headers: {} }), 401);
  const other = await call('GET', `${V}/resources?limit=1000`, { headers: { 'x-account-id': 'u_other' } });
  assert.ok(other.json.entries.some((r) => r.id === 'res_payroll'));
});

test('resource and catalog by id: {"entries":[…]} envelopes, 403, 404', async () => {
  const r = await call('GET', `${V}/resources/res_orders`);
  assert.equal(r.status, 200);
  assert.equal(r.json.entries.length, 1);
  assert.equal(r.json.entries[0].catalog_id, 'cat_prod_mysql');
  assert.ok(!('rows' in r.json.entries[0]) && !('access' in r.json.entries[0]));
  const drugs = await call('GET', `${V}/resources/res_drugs`);
  assert.equal(drugs.json.entries[0].catalog_id, 'cat_bkn_postgres');
  assert.ok(drugs.json.entries[0].schema_definition.some((c) => c.name === 'drug_id' && c.type === 'bigint'));
  envelope(await call('GET', `${V}/resources/res_payroll`), 403, 'VegaBackend.Resource.Forbidden');
  envelope(await call('GET', `${V}/resources/res_nope`), 404, 'VegaBackend.Resource.NotFound');
  const c = await call('GET', `${V}/catalogs/cat_prod_mysql`);
  assert.equal(c.json.entries[0].connector_type, 'mysql');
  envelope(await call('GET', `${V}/catalogs/cat_nope`), 404, 'VegaBackend.Catalog.NotFound');
  envelope(await call('POST', `${V}/catalogs/cat_prod_mysql`), 405);
});

test('query: SELECT, WHERE, ORDER BY, LIMIT, COUNT, big integers and decimals exact', async () => {
  const r = await sql('SELECT * FROM {{res_orders}}');
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(Object.keys(r.json), ['columns', 'entries', 'total_count', 'paging']);
  assert.deepEqual(r.json.columns.map((c) => c.name), ['id', 'customer_id', 'status', 'amount', 'created_at']);
  assert.equal(r.json.entries.length, 5);
  assert.deepEqual(r.json.paging, { next_cursor: null, expires_at_sec: null });
  assert.ok(r.text.includes('"id":9007199254740993') && r.text.includes('"amount":120.50'), 'exact numbers');

  const w = await sql("SELECT id, `status` AS st FROM {{.res_orders}} WHERE status = 'paid' AND customer_id >= 2 ORDER BY id DESC LIMIT 5;");
  assert.equal(w.status, 200, w.text);
  assert.deepEqual(w.json.columns, [{ name: 'id', type: 'bigint' }, { name: 'st', type: 'varchar' }]);
  assert.ok(w.text.includes('"entries":[{"id":9007199254740993,"st":"paid"},{"id":1004,"st":"paid"}]'), w.text);
  const big = await sql('SELECT id FROM {{res_orders}} WHERE id = 9007199254740992');
  assert.equal(big.json.entries.length, 0, 'no rounding through doubles');
  const like = await sql("SELECT name FROM {{res_customers}} WHERE name LIKE '%Pharma%'");
  assert.deepEqual(like.json.entries, [{ name: 'Acme Pharma' }]);
  const lim = await sql('SELECT id FROM {{res_orders}} ORDER BY id LIMIT 2 OFFSET 1');
  assert.deepEqual(lim.json.entries.map((e) => e.id), [1002, 1003]);
  const cnt = await sql('select count(*) as n from {{res_orders}} where status != "cancelled"');
  assert.deepEqual(cnt.json.entries, [{ n: 4 }]);
  const kn = await sql("SELECT name FROM {{res_patients}} WHERE region = '华东'");
  assert.equal(kn.status, 200, 'SQL answers by resource grants, not object-type masking');
  assert.ok(kn.json.entries.length > 0);
});

test('query: read-only policy, unsupported SQL, grants, connectors, body validation', async () => {
  for (const q of ['WITH t AS (SELECT 1) SELECT * FROM t', 'SELECT id FROM {{res_orders}} UNION SELECT id FROM {{res_customers}}',
    'SELECT id FROM {{res_orders}} WHERE id IN (SELECT id FROM {{res_customers}})', 'DELETE FROM {{res_orders}}']) {
    const r = await sql(q);
    envelope(r, 400, 'VegaBackend.Query.InvalidParameter');
    assert.match(r.json.error_details, /read-only policy/, q);
  }
  envelope(await sql('SELECT id FROM {{res_orders}}; SELECT 1'), 400);
  envelope(await sql('SELECT id FROM orders'), 400);
  envelope(await sql('SELECT o.id FROM {{res_orders}} o JOIN {{res_customers}} c ON o.customer_id = c.id'), 400);
  envelope(await sql('SELECT nope FROM {{res_orders}}'), 400);
  envelope(await sql("SELECT id FROM {{res_orders}} WHERE status = 'x"), 400);
  envelope(await sql('SELECT * FROM {{res_payroll}}'), 403, 'VegaBackend.Resource.Forbidden');
  envelope(await sql('SELECT * FROM {{res_customer_view}}'), 403);
  envelope(await sql('SELECT * FROM {{res_missing}}'), 404);
  envelope(await sql('SELECT message FROM {{res_app_logs}}'), 400);
  envelope(await sql('SELECT * FROM {{res_orders}}', { query_format: 'dsl' }), 400);
  envelope(await sql('SELECT * FROM {{res_orders}}', { paging: { mode: 'single', limit: 10001 } }), 400);
  envelope(await sql(''), 400);
  envelope(await call('POST', `${V}/resources/query`, { body: '[1]' }), 400);
  envelope(await call('GET', `${V}/resources/query`), 405);
});

test('query paging: limit 0 -> 20, cursor mode continues with the cursor only', async () => {
  const many = await sql('SELECT drug_id FROM {{res_drugs}}', { paging: { mode: 'single', limit: 0 } });
  assert.equal(many.json.entries.length, 20);
  assert.ok(many.json.total_count > 20);
  assert.equal(many.json.paging.next_cursor, null);
  const first = await sql('SELECT drug_id FROM {{res_drugs}}', { paging: { mode: 'cursor', limit: 10 } });
  assert.equal(first.json.entries.length, 10);
  assert.match(first.json.paging.next_cursor, /^cur_/);
  assert.ok(Number.isInteger(first.json.paging.expires_at_sec));
  let cursor = first.json.paging.next_cursor;
  const seen = first.json.entries.length;
  let total = seen;
  while (cursor) {
    const next = await call('POST', `${V}/resources/query`, { body: { paging: { cursor } } });
    assert.equal(next.status, 200, next.text);
    total += next.json.entries.length;
    cursor = next.json.paging.next_cursor;
  }
  assert.equal(total, first.json.total_count);
  envelope(await call('POST', `${V}/resources/query`, { body: { paging: { cursor: 'cur_bogus' } } }), 400);
});

test('faults apply to vega', async () => {
  await call('POST', '/_sim/faults', { body: { service: 'vega', status: 502, count: 1 } });
  envelope(await call('GET', `${V}/resources`), 502, 'Sim.InjectedFault');
  assert.equal((await call('GET', `${V}/resources`)).status, 200);
  await call('POST', '/_sim/reset');
});
