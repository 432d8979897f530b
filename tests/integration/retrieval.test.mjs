// The retrieval tools search_instance, explore_subgraph, query_metric and find_skills:
// REST at /kn/<tool> and, on /mcp and /mcp-compact, only through search_capabilities
// -> execute_tool (no tools/list shows them). Each answers the demo data's case and
// refuses bad input naming the field; search_instance fuses the keyword and vector
// channels, keeps the fused order when the reranker fails, never shows an excluded
// object type or one the caller may not read.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, PREFIX } from './lib/stack.mjs';
import { session } from './lib/mcp-session.mjs';

const TOOLS = ['search_instance', 'explore_subgraph', 'query_metric', 'find_skills'];

// The demo case of each tool and what its answer must show.
const CASES = {
  search_instance: [{ kn_id: 'kn_medical', query: '布洛芬' }, (r) => {
    const first = r.nodes[0];
    assert.equal(first.object_type_id, 'ot_drug');
    assert.equal(first.object_type_name, '药品');
    assert.equal(first.properties.drug_id, 1001);
    assert.equal(first.properties.name, '布洛芬缓释胶囊');
    assert.deepEqual(first.properties._instance_identity, { drug_id: 1001 });
    assert.equal(first.rank, 1);
    assert.equal(first.score, 2); // first in both channels
    assert.ok(first.bm25_score > 1 && first.knn_score > 0 && first.knn_score <= 1, JSON.stringify(first));
    assert.equal(first.reranker_score, undefined);
    assert.equal(r.object_types[0].concept_id, 'ot_drug');
  }],
  explore_subgraph: [{ kn_id: 'kn_medical', source_object_type_id: 'ot_drug', direction: 'forward', path_length: 1,
    condition: { field: 'drug_id', operation: '==', value: 1001 } }, (r) => {
    assert.equal(r.total_count, 1);
    const rels = r.relation_paths.map((p) => p.relations[0]);
    assert.deepEqual(rels.map((x) => x.relation_type_id).sort(), ['rt_drug_skill', 'rt_drug_skill', 'rt_produced_by']);
    assert.ok(rels.every((x) => x.source_object_id === 'kn_medical-ot_drug-1001'));
    assert.ok(r.objects['kn_medical-ot_manufacturer-mfr_000001']);
    assert.ok(r.objects['kn_medical-skills-skill_drug_label_review']);
    assert.equal(r.overall_ms, undefined);
  }],
  query_metric: [{ kn_id: 'kn_medical', metric_id: 'metric_adverse_event_count', analysis_dimensions: ['severity'],
    time: { start: 1735660800, end: 1743436800, step: 'month' }, fill_null: true }, (r) => {
    assert.equal(r.kn_id, 'kn_medical');
    assert.equal(r.metric_id, 'metric_adverse_event_count');
    assert.deepEqual(r.datas.map((d) => d.labels.severity).sort(), ['一般', '严重']);
    for (const d of r.datas) {
      assert.deepEqual(d.time_strs, ['2025-01', '2025-02', '2025-03', '2025-04']);
      assert.equal(d.values.length, 4);
      assert.ok(d.values.every((v) => typeof v === 'number'), 'fill_null: no missing point');
      assert.equal(d.growth_rates.length, 4);
    }
  }],
  find_skills: [{ kn_id: 'kn_medical', object_type_id: 'ot_drug', instance_identities: [{ drug_id: 1005 }] }, (r) => {
    // 氨氯地平片 is withdrawn: the recall assessment is the one skill bound to it
    assert.deepEqual(r.entries, [{ skill_id: 'skill_recall_assessment', name: '药品召回评估',
      description: '评估已撤市药品的召回范围、批次与库存影响' }]);
    assert.equal(r.message, undefined);
  }],
};

// Bad input of each tool and the field its refusal names.
const BAD = {
  search_instance: [[{ kn_id: 'kn_medical' }, /query/], [{ kn_id: 'kn_medical', query: 'x', max_instances_per_type: 0 }, /max_instances_per_type/],
    [{ query: '布洛芬' }, /kn_id/], [{ kn_id: 'kn_medical', query: 'x', concept_groups: ['cg_nope'] }, /cg_nope/]],
  explore_subgraph: [[{ kn_id: 'kn_medical', source_object_type_id: 'ot_drug', direction: 'forward', path_length: 4 }, /path_length/],
    [{ kn_id: 'kn_medical', source_object_type_id: 'ot_drug', path_length: 1 }, /direction/],
    [{ kn_id: 'kn_medical', source_object_type_id: 'ot_drug', direction: 'forward', path_length: 1, offset: 1, search_after: [1] }, /search_after/]],
  query_metric: [[{ kn_id: 'kn_medical' }, /metric_id/], [{ kn_id: 'kn_medical', metric_id: 'metric_drug_sales', time: { start: 1735660800 } }, /time\.end/],
    [{ kn_id: 'kn_medical', metric_id: 'metric_drug_sales', time: { instant: true }, analysis_dimensions: ['color'] }, /color/]],
  find_skills: [[{ kn_id: 'kn_medical' }, /object_type_id/], [{ kn_id: 'kn_medical', object_type_id: 'ot_drug', top_k: 50 }, /top_k/],
    [{ kn_id: 'kn_medical', object_type_id: 'ot_nope' }, /ot_nope/]],
};

let stack;
let mcpUrl;
let compactUrl;

before(async () => {
  stack = await startStack({ capture: 'disabled' });
  mcpUrl = `${stack.server.base}${PREFIX}/mcp`;
  compactUrl = `${stack.server.base}${PREFIX}/mcp-compact`;
});

after(async () => {
  if (stack) assert.equal(await stack.stop(), 0);
});

async function rest(tool, body, token = 'demo-user-token', { query = '', headers = {} } = {}) {
  const r = await fetch(`${stack.server.base}${PREFIX}/kn/${tool}${query}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(15000),
  });
  const text = await r.text();
  return { status: r.status, text, json: JSON.parse(text) };
}

async function sim(method, p, body) {
  const r = await fetch(`${stack.sim.base}${p}`, {
    method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(5000),
  });
  return r.json();
}

function ok(res) {
  assert.ok(res.result, JSON.stringify(res));
  assert.equal(res.result.isError, false, JSON.stringify(res.result));
  return res.result.structuredContent;
}

const searchedTypes = (requests) => requests
  .filter((r) => r.service === 'ontology_query')
  .map((r) => decodeURIComponent(r.path.split('/object-types/')[1] || ''))
  .filter(Boolean);

test('REST: each tool answers its demo case', async () => {
  for (const t of TOOLS) {
    const [args, check] = CASES[t];
    const r = await rest(t, args);
    assert.equal(r.status, 200, `${t}: ${r.text}`);
    check(r.json);
  }
});

test('REST: kn_id from X-Kn-ID or the query string, like the other REST reads', async () => {
  for (const t of TOOLS) {
    const [{ kn_id: kn, ...args }, check] = CASES[t];
    const viaHeader = await rest(t, args, 'demo-user-token', { headers: { 'x-kn-id': kn } });
    assert.equal(viaHeader.status, 200, `${t}: ${viaHeader.text}`);
    check(viaHeader.json);
    const viaQuery = await rest(t, args, 'demo-user-token', { query: `?kn_id=${kn}` });
    assert.equal(viaQuery.status, 200, `${t}: ${viaQuery.text}`);
    check(viaQuery.json);
  }
  // REST asks for TOON with ?response_format=toon: the view, decodable, smaller than the JSON
  const [args] = CASES.find_skills;
  const toon = await fetch(`${stack.server.base}${PREFIX}/kn/find_skills?response_format=toon`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer demo-user-token' },
    body: JSON.stringify({ ...args, instance_identities: undefined }), signal: AbortSignal.timeout(15000),
  });
  const text = await toon.text();
  assert.match(toon.headers.get('content-type'), /toon/);
  assert.match(text, /^entries\[4\]\{skill_id,name,description\}:/);
});

test('REST: bad input is refused with the field named', async () => {
  for (const t of TOOLS) {
    for (const [args, field] of BAD[t]) {
      const r = await rest(t, args);
      assert.ok(r.status === 400 || r.status === 404, `${t} ${JSON.stringify(args)}: ${r.text}`);
      assert.match(r.text, field, `${t} ${JSON.stringify(args)}`);
    }
  }
});

for (const [surface, url] of [['/mcp', () => mcpUrl], ['/mcp-compact', () => compactUrl]]) {
  test(`${surface}: not in tools/list; search_capabilities finds them and execute_tool runs them`, async () => {
    const s = await session(url());
    const listed = (await s.listAll()).map((t) => t.name);
    for (const t of TOOLS) assert.ok(!listed.includes(t), `${t} is not listed on ${surface}`);
    const found = ok(await s.call('search_capabilities', { kn_id: 'kn_medical', types: ['tool'], limit: 100, response_format: 'json' }));
    for (const t of TOOLS) {
      const c = found.capabilities.find((x) => x.tool_id === t);
      assert.ok(c, `${t} found on ${surface}`);
      assert.equal(c.kind, 'tool');
      assert.equal(c.input_schema.type, 'object');
    }
    for (const t of TOOLS) {
      const [args, check] = CASES[t];
      const r = ok(await s.call('execute_tool', { tool_id: t, arguments: args, response_format: 'json' }));
      check(r);
      // the direct REST answer and the gateway's agree
      const direct = (await rest(t, args)).json;
      if (t === 'query_metric') delete direct.overall_ms, delete r.overall_ms;
      if (t === 'search_instance') {
        // on MCP the object types list only the index-backed operations (REST: all)
        const ops = r.object_types.flatMap((o) => o.data_properties.flatMap((p) => p.condition_operations || []));
        assert.ok(ops.length > 0 && ops.every((op) => ['match', 'multi_match', 'knn'].includes(op)), ops.join());
        assert.ok(JSON.stringify(direct.object_types).includes('"range"'));
        delete r.object_types, delete direct.object_types;
      }
      assert.deepEqual(r, direct, t);
      // the default text is TOON or the compact JSON, whichever is smaller
      const res = await s.call('execute_tool', { tool_id: t, arguments: args });
      assert.equal(res.result.isError, false, JSON.stringify(res.result));
      for (const [bad, field] of BAD[t]) {
        const e = await s.call('execute_tool', { tool_id: t, arguments: bad, response_format: 'json' });
        assert.equal(e.result.isError, true, `${t} ${JSON.stringify(bad)}`);
        assert.match(e.result.content[0].text, field, `${t} ${JSON.stringify(bad)}`);
      }
    }
    // a direct tools/call is refused like an unknown tool
    const direct = await s.rpc('tools/call', { name: 'search_instance', arguments: { kn_id: 'kn_medical', query: '布洛芬' } });
    assert.equal(direct.json.error.code, -32602);
  });
}

test('search_instance: with the reranker failing it still answers, in fused order', async () => {
  const args = { kn_id: 'kn_medical', query: '阿司匹林 布洛芬 胶囊' };
  await sim('POST', '/_sim/reset');
  const fused = (await rest('search_instance', args)).json;
  assert.ok(fused.nodes.length >= 3);
  const reranked = (await rest('search_instance', { ...args, rerank: true })).json;
  assert.ok(reranked.nodes.every((n, i) => i >= 50 || typeof n.reranker_score === 'number'), 'reranked when the model answers');
  await sim('POST', '/_sim/faults', { service: 'mf_model_api', status: 500 });
  const r = await rest('search_instance', { ...args, rerank: true });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.nodes, fused.nodes, 'the fused order, no reranker_score');
  assert.match(r.json.message, /精排模型不可用/);
  const faults = await sim('GET', '/_sim/faults');
  assert.ok(faults.faults[0].hits >= 1, 'the reranker was asked');
  await sim('POST', '/_sim/faults', { service: 'mf_model_api', mode: 'close' });
  const closed = await rest('search_instance', { ...args, rerank: true });
  assert.equal(closed.status, 200, closed.text);
  assert.deepEqual(closed.json.nodes, fused.nodes);
  await sim('POST', '/_sim/reset');
});

test('search_instance: an excluded object type never appears, and is never searched', async () => {
  const args = { kn_id: 'kn_medical', query: '华东 张伟' };
  const all = (await rest('search_instance', args)).json;
  assert.ok(all.nodes.some((n) => n.object_type_id === 'ot_company'), 'found without the exclusion');
  const { last_seq: seq } = await sim('POST', '/_sim/reset');
  // exclusion wins over inclusion
  const r = await rest('search_instance', { ...args, object_types: ['ot_company', 'ot_patient'], exclude_object_types: ['ot_company'] });
  assert.equal(r.status, 200, r.text);
  assert.ok(r.json.nodes.length > 0);
  assert.ok(r.json.nodes.every((n) => n.object_type_id === 'ot_patient'), r.text);
  assert.ok(!r.text.includes('"ot_company"'), 'not in nodes, object_types or message');
  const { requests } = await sim('GET', `/_sim/requests?since=${seq}`);
  assert.deepEqual([...new Set(searchedTypes(requests))], ['ot_patient']);
});

test('search_instance: an object type the caller may not read never appears', async () => {
  const args = { kn_id: 'kn_medical', query: '华东 张伟' };
  const demo = (await rest('search_instance', args)).json;
  assert.ok(demo.nodes.some((n) => n.object_type_id === 'ot_patient'), 'u_demo may query patients');
  const { last_seq: seq } = await sim('POST', '/_sim/reset');
  const r = await rest('search_instance', args, 'demo-user2-token');
  assert.equal(r.status, 200, r.text);
  assert.ok(r.json.nodes.length > 0);
  assert.ok(!r.text.includes('ot_patient'), r.text);
  const { requests } = await sim('GET', `/_sim/requests?since=${seq}`);
  const filter = requests.find((q) => q.service === 'bkn_safe' && q.path === '/api/safe/v1/authz/resource-filter');
  assert.ok(filter, 'the resource filter was asked');
  assert.equal(JSON.parse(filter.body).accessor_id, 'u_other');
  assert.ok(!searchedTypes(requests).includes('ot_patient'), 'never searched');
  // asking for it by name does not help
  const pinned = await rest('search_instance', { ...args, object_types: ['ot_patient'] }, 'demo-user2-token');
  assert.equal(pinned.json.nodes.length, 0);
  assert.ok(!JSON.stringify(pinned.json.nodes).includes('ot_patient'));
});

test('search_instance: the resource filter down refuses (503), never an unfiltered answer', async () => {
  await sim('POST', '/_sim/reset');
  await sim('POST', '/_sim/faults', { service: 'bkn_safe', path_prefix: '/api/safe/v1/authz/', status: 500 });
  const r = await rest('search_instance', { kn_id: 'kn_medical', query: '布洛芬' });
  assert.equal(r.status, 503, r.text);
  assert.equal(r.json.code, 'Public.ServiceUnavailable');
  assert.equal(r.json.retryable, true);
  await sim('POST', '/_sim/reset');
  await sim('POST', '/_sim/faults', { service: 'ontology_query', status: 503 });
  const down = await rest('search_instance', { kn_id: 'kn_medical', query: '布洛芬' });
  assert.equal(down.status, 200, 'a failed channel leaves the type out');
  assert.deepEqual(down.json.nodes, []);
  await sim('POST', '/_sim/reset');
});

test('/mcp/info and /mcp-compact/info list them as REST and gateway tools, outside tools', async () => {
  for (const [surface, expectSchema] of [['mcp', true], ['mcp-compact', true], ['mcp/ptc', false]]) {
    const r = await fetch(`${stack.server.base}${PREFIX}/${surface}/info`, {
      headers: { authorization: 'Bearer demo-user-token', 'accept-language': 'en-US' }, signal: AbortSignal.timeout(15000),
    });
    assert.equal(r.status, 200);
    const doc = await r.json();
    for (const t of TOOLS) assert.ok(!doc.tools.some((x) => x.name === t), `${surface}: ${t} not in tools`);
    if (!expectSchema) {
      assert.equal(doc.gateway_tools, undefined, 'the PTC surface has no gateway');
      continue;
    }
    assert.deepEqual(doc.gateway_tools.map((t) => t.name), TOOLS);
    for (const t of doc.gateway_tools) {
      assert.equal(t.rest, `${PREFIX}/kn/${t.name}`);
      assert.equal(t.call_via, 'execute_tool');
      assert.equal(t.input_schema.type, 'object');
      assert.equal(typeof t.title, 'string');
      assert.ok(t.description.length > 0);
    }
  }
});
