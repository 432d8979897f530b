// search_schema reranking over the wire (mf-model-api's reranker): the
// tool sends one mf-model-api reranker request carrying the question,
// enable_rerank:false sends none, and a failing reranker still gets an answer from
// the simple ranking. REST twin, ad hoc (no bkn_context), capture disabled.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, PREFIX } from './lib/stack.mjs';

let stack;
const H = { 'content-type': 'application/json', authorization: 'Bearer demo-user-token' };
// the simulator's reranker ranks 不良反应上报 above 药企 for this question; the simple
// ranking does the opposite (tests/spec/tools/search_schema_spec.lua, recorded)
const Q = '药品由哪家企业生产';

before(async () => { stack = await startStack({ capture: 'disabled' }); });
after(async () => { assert.equal(await stack.stop(), 0); });

async function sim(method, path, body) {
  const r = await fetch(`${stack.sim.base}${path}`, {
    method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(5000),
  });
  assert.equal(r.status, 200, `${method} ${path}`);
  return r.json();
}

async function search(args) {
  const r = await fetch(`${stack.server.base}${PREFIX}/kn/search_schema`, {
    method: 'POST', headers: H, body: JSON.stringify({ kn_id: 'kn_medical', query: Q, ...args }),
    signal: AbortSignal.timeout(20000),
  });
  const json = await r.json();
  assert.equal(r.status, 200, JSON.stringify(json));
  return json;
}

// Reranker requests the simulator received since `seq`.
async function rerankRequests(seq) {
  const { requests } = await sim('GET', `/_sim/requests?service=mf_model_api&since=${seq}`);
  return requests.filter((r) => r.path === '/api/private/mf-model-api/v1/small-model/reranker');
}

const ids = (list) => list.map((c) => c.concept_id);

test('enable_rerank (default) sends one reranker request with the question and uses its scores', async () => {
  const { last_seq: seq } = await sim('POST', '/_sim/reset');
  const res = await search({});
  const reqs = await rerankRequests(seq);
  assert.equal(reqs.length, 1);
  assert.equal(reqs[0].method, 'POST');
  const body = JSON.parse(reqs[0].body);
  assert.equal(body.query, Q);
  assert.equal(body.model, '');
  // every object candidate, then every relation, as name + comment (7 + 4 in kn_medical)
  assert.equal(body.documents.length, 11);
  assert.ok(body.documents.includes('生产于 (药品 -> 生产企业) 药品由生产企业生产'), JSON.stringify(body.documents));
  const ots = ids(res.object_types);
  assert.ok(ots.indexOf('ot_adverse_event') >= 0 && ots.indexOf('ot_adverse_event') < ots.indexOf('ot_company'), ots.join());
  assert.equal(res.relation_types[0].concept_id, 'rt_produced_by');
});

test('enable_rerank:false sends no reranker request; the simple ranking orders the result', async () => {
  const { last_seq: seq } = await sim('POST', '/_sim/reset');
  const res = await search({ enable_rerank: false });
  assert.deepEqual(await rerankRequests(seq), []);
  const ots = ids(res.object_types);
  assert.ok(ots.indexOf('ot_company') >= 0 && ots.indexOf('ot_company') < ots.indexOf('ot_adverse_event'), ots.join());
  assert.ok(res.object_types.length > 0 && res.relation_types.length > 0);
});

test('a reranker fault still answers, with the simple ranking', async () => {
  let { last_seq: seq } = await sim('POST', '/_sim/reset');
  const simple = await search({ enable_rerank: false });
  ({ last_seq: seq } = await sim('POST', '/_sim/reset'));
  await sim('POST', '/_sim/faults', { service: 'mf_model_api', status: 500, count: 1 });
  const res = await search({});
  assert.equal((await rerankRequests(seq)).length, 1); // tried once (faulted requests are recorded)
  assert.deepEqual(res, simple);
  const { faults } = await sim('GET', '/_sim/faults');
  assert.equal(faults[0].hits, 1);
  // a dropped connection (transport error) falls back the same way; libcurl may
  // retry once on a fresh connection when a reused one dies, hence count 2
  ({ last_seq: seq } = await sim('POST', '/_sim/reset'));
  await sim('POST', '/_sim/faults', { service: 'mf_model_api', mode: 'close', count: 2 });
  assert.deepEqual(await search({}), simple);
  assert.ok((await rerankRequests(seq)).length >= 1);
  await sim('POST', '/_sim/reset');
});

// Validation details follow the response's language (the deployment's zh-CN, or
// Accept-Language) on REST and MCP; the path stays the JSON pointer of the field.
test('schema validation details are in the language of the response (REST and MCP)', async () => {
  const bad = { kn_id: 'kn_medical', query: Q, max_concepts: 0 };
  for (const [lang, want] of [[null, '必须 >= 1'], ['en-US', 'must be >= 1']]) {
    const headers = lang ? { ...H, 'accept-language': lang } : H;
    const r = await fetch(`${stack.server.base}${PREFIX}/kn/search_schema`, { method: 'POST', headers, body: JSON.stringify(bad), signal: AbortSignal.timeout(10000) });
    const j = await r.json();
    assert.equal(r.status, 400, JSON.stringify(j));
    assert.deepEqual(j.details, [{ path: '/max_concepts', message: want }], JSON.stringify(j));

    const mh = { ...headers, accept: 'application/json, text/event-stream' };
    const init = await fetch(stack.server.mcpUrl, { method: 'POST', headers: mh, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }), signal: AbortSignal.timeout(5000) });
    mh['mcp-session-id'] = init.headers.get('mcp-session-id');
    const m = await fetch(stack.server.mcpUrl, { method: 'POST', headers: mh, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'search_schema', arguments: { ...bad, response_format: 'json' } } }), signal: AbortSignal.timeout(10000) });
    const res = (await m.json()).result;
    assert.equal(res.isError, true, JSON.stringify(res));
    assert.ok(res.content[0].text.includes(want), res.content[0].text);
    assert.ok(res.content[0].text.includes('/max_concepts'), res.content[0].text);
  }
});
