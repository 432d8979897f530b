// /mcp-compact: exactly the 14 tools in display order, each the same tool
// as on /mcp in a terser form (held at most 0.50 of the tokens of the /mcp list, in both
// languages; a view only: the surface refuses and accepts what /mcp does), the other MCP
// tools absent from its list and its tools/call but reachable through
// search_capabilities -> execute_tool with the same results as a direct /mcp call,
// REST-only tools never reachable, and the same lifecycle semantics as /mcp.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startStack, PREFIX, ROOT } from './lib/stack.mjs';
import { session, flatten, get } from './lib/mcp-session.mjs';

const COMPACT = [
  'bkn_start_interaction', 'bkn_finish_interaction', 'list_knowledge_networks', 'search_schema',
  'get_kn_detail', 'get_object_types', 'query_object_instance', 'query_instance_subgraph',
  'get_logic_properties_values', 'get_action_info', 'execute_action', 'get_action_execution',
  'search_capabilities', 'execute_tool',
];
// The MCP tools only the gateway reaches on /mcp-compact, with arguments that work on
// the demo data (execute_skill: the gate is on in this deployment).
const GATEWAY = [
  ['get_relation_types', { kn_id: 'kn_medical', ids: ['rt_produced_by'] }],
  ['list_action_executions', { kn_id: 'kn_ops', limit: 2 }],
  ['list_skills', {}],
  ['get_skill_content', { skill_id: 'skill_contract_review' }],
  ['read_skill_file', { skill_id: 'skill_contract_review', rel_path: 'refs/checklist.md' }],
  ['execute_skill', { skill_id: 'skill_contract_review', entry_shell: 'python main.py --input contract.txt' }],
];
const REST_ONLY = ['run_sql', 'list_resources', 'describe_resource'];
// Listed on no MCP surface; reached through search_capabilities and execute_tool.
const GATEWAY_ONLY = ['search_instance', 'explore_subgraph', 'query_metric', 'find_skills'];

let stack;
let mcpUrl;
let compactUrl;

before(async () => {
  stack = await startStack({ capture: 'enabled', env: { EXECUTE_SKILL_ENABLED: 'true' } });
  mcpUrl = `${stack.server.base}${PREFIX}/mcp`;
  compactUrl = `${stack.server.base}${PREFIX}/mcp-compact`;
});

after(async () => {
  if (stack) assert.equal(await stack.stop(), 0);
});

const simGet = async (p) => (await fetch(`${stack.sim.base}${p}`, { signal: AbortSignal.timeout(5000) })).json();

function ok(res) {
  assert.ok(res.result, JSON.stringify(res));
  assert.equal(res.result.isError, false, JSON.stringify(res.result));
  return res.result.structuredContent;
}

// The error object of an isError result (its text block's JSON; no structuredContent),
// without the receipt of the failed call (its ids differ from call to call).
function toolError(res) {
  assert.ok(res.result, JSON.stringify(res));
  assert.equal(res.result.isError, true, JSON.stringify(res.result));
  assert.equal('structuredContent' in res.result, false, JSON.stringify(res.result));
  const e = JSON.parse(res.result.content[0].text);
  if (e.bkn_receipt) assert.equal(e.bkn_receipt.receipt_status, 'failed', JSON.stringify(e));
  delete e.bkn_receipt;
  return e;
}

// A result without its receipt (each call is its own Operation). The simulator's
// answers are deterministic, so everything else must match.
function comparable(v) {
  const c = structuredClone(v);
  delete c.bkn_receipt;
  return c;
}

async function turn(s, question) {
  const st = ok(await s.call('bkn_start_interaction', { question, agent_name: 'compact-test', conversation_mode: 'new' }));
  return { conversation_id: st.conversation_id, interaction_id: st.interaction_id };
}

// An entry without its prose: every string-valued "description" removed (a property
// named description is a schema, and stays).
const withoutProse = (v) => JSON.parse(JSON.stringify(v, (k, x) => (k === 'description' && typeof x === 'string' ? undefined : x)));

// The /mcp-compact view of a business tool's /mcp entry, as docs/writing-tools.md
// states it (prose aside): the tool's own input schema without the size and closedness
// guards; bkn_context its required properties with their types; response_format as is;
// outputSchema its type, required and top-level properties with their types.
const GUARDS = ['minLength', 'maxLength', 'minItems', 'maxItems', 'uniqueItems'];
function guardless(s) {
  if (!s || typeof s !== 'object' || Array.isArray(s)) return s;
  const o = {};
  for (const [k, v] of Object.entries(s)) {
    if (GUARDS.includes(k) || (k === 'additionalProperties' && v === false)) continue;
    if (k === 'properties' || k === '$defs') o[k] = Object.fromEntries(Object.entries(v).map(([n, x]) => [n, guardless(x)]));
    else if (k === 'items' || k === 'additionalProperties') o[k] = guardless(v);
    else if (k === 'anyOf' || k === 'oneOf') o[k] = v.map(guardless);
    else o[k] = v;
  }
  return o;
}
function shallow(s, requiredOnly) {
  const o = { type: s.type };
  if (s.required) o.required = s.required;
  if (s.properties) {
    const names = Object.keys(s.properties).filter((n) => !requiredOnly || s.required.includes(n));
    o.properties = Object.fromEntries(names.map((n) => [n, s.properties[n].type === undefined ? {} : { type: s.properties[n].type }]));
  }
  return o;
}
function compactView(entry) {
  const e = structuredClone(entry);
  const { bkn_context: bkn, response_format: format } = e.inputSchema.properties;
  e.inputSchema = guardless(e.inputSchema);
  e.inputSchema.properties.bkn_context = shallow(bkn, true);
  e.inputSchema.properties.response_format = format;
  if (e.outputSchema) e.outputSchema = shallow(e.outputSchema);
  return e;
}
const LIFECYCLE = ['bkn_start_interaction', 'bkn_finish_interaction'];

// o200k tokens with gpt-tokenizer when scripts/test installed it in build/ext, else
// UTF-8 bytes: on these lists the two ratios agree within 0.01 (tests/bench/tokens.sh).
const TOKENIZER = path.join(ROOT, 'build/ext/node_modules/gpt-tokenizer/esm/encoding/o200k_base.js');
async function counter() {
  if (fs.existsSync(TOKENIZER)) {
    const t = await import(pathToFileURL(TOKENIZER).href);
    return { unit: 'tokens', count: (s) => t.countTokens(s) };
  }
  return { unit: 'bytes', count: (s) => Buffer.byteLength(s) };
}

test('/mcp-compact lists exactly the 14 tools, in display order, with the /mcp entries', async () => {
  const compact = await (await session(compactUrl)).listAll();
  const full = await (await session(mcpUrl)).listAll();
  const names = compact.map((t) => t.name);
  assert.deepEqual([...names].sort(), [...COMPACT].sort());
  assert.equal(names.length, 14);
  const orders = compact.map((t) => t._meta['openbkn.ai/order']);
  assert.deepEqual(orders, [...orders].sort((a, b) => a - b), 'display order');
  assert.deepEqual(names.slice(0, 2), ['bkn_start_interaction', 'bkn_finish_interaction']);
  // Same tool as on /mcp: names, titles, _meta and annotations are identical; the
  // schemas are the documented view of the /mcp ones (compactView); prose is terser,
  // except the tool's own parameter descriptions, which stay. The two lifecycle tools
  // are listed as on /mcp.
  for (const lang of ['zh-CN', 'en-US']) {
    const c = await (await session(compactUrl, { 'accept-language': lang })).listAll();
    const f = await (await session(mcpUrl, { 'accept-language': lang })).listAll();
    for (const t of c) {
      const g = f.find((x) => x.name === t.name);
      assert.ok(JSON.stringify(t).length <= JSON.stringify(g).length, `${lang} ${t.name}: no longer than on /mcp`);
      if (LIFECYCLE.includes(t.name)) {
        assert.deepEqual(t, g, `${lang} ${t.name}`);
        continue;
      }
      assert.deepEqual(withoutProse(t), withoutProse(compactView(g)), `${lang} ${t.name}`);
      const own = (e) => { const p = { ...e.inputSchema.properties }; delete p.bkn_context; delete p.response_format; return { ...e.inputSchema, properties: p }; };
      assert.deepEqual(own(t), guardless(own(g)), `${lang} ${t.name}: the parameters keep their descriptions`);
      assert.match(t.inputSchema.properties.bkn_context.description, /bkn_start_interaction/, `${lang} ${t.name}`);
      assert.deepEqual(t.inputSchema.properties.bkn_context.required, ['conversation_id', 'interaction_id']);
      assert.ok(t.outputSchema || !g.outputSchema, `${lang} ${t.name}: outputSchema`);
    }
  }
  for (const [n] of GATEWAY) {
    assert.ok(full.some((t) => t.name === n), `${n} is on /mcp`);
    assert.ok(!names.includes(n), `${n} is not on /mcp-compact`);
  }
  // And its info says the same.
  const info = await get(`${compactUrl}/info`);
  assert.deepEqual(info.json.tools, compact.map(flatten));
});

// Hosts that send every tool definition with every model call pay for the list each
// time: in both languages the compact list costs at most half of the /mcp list.
test('/mcp-compact tools/list costs at most 0.50 of /mcp\'s, in both languages', async () => {
  const { unit, count } = await counter();
  for (const lang of ['zh-CN', 'en-US']) {
    const list = async (url) => (await (await session(url, { 'accept-language': lang })).rpc('tools/list', {})).json.result;
    const c = count(JSON.stringify(await list(compactUrl)));
    const f = count(JSON.stringify(await list(mcpUrl)));
    assert.ok(c <= 0.50 * f, `${lang}: /mcp-compact ${c} ${unit}, /mcp ${f} (${(c / f).toFixed(3)})`);
  }
});

// The compact schemas leave guards out, the contract keeps them: a call that breaks a
// guard missing from the view is refused on /mcp-compact exactly as on /mcp, and the
// bkn_context fields the view leaves out are accepted there.
test('/mcp-compact refuses and accepts what /mcp does (the view is not the contract)', async () => {
  const c = await session(compactUrl);
  const f = await session(mcpUrl);
  const cctx = await turn(c, 'guards on compact');
  const fctx = await turn(f, 'guards on mcp');
  const refused = [
    ['list_knowledge_networks', { bogus: 1 }],
    ['search_capabilities', { kn_id: 'kn_medical', query: 'x'.repeat(513) }],
    ['get_object_types', { kn_id: 'kn_medical', ids: [] }],
    ['get_object_types', { kn_id: 'kn_medical', ids: [''] }],
    ['search_capabilities', { kn_id: 'kn_medical', types: ['tool', 'tool'] }],
    ['query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', sort: [{ field: 'name', direction: 'asc', nulls: 'last' }] }],
    ['query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 }, { operation_key: 'op_x' }],
    ['query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 }, { causation_event_ids: Array.from({ length: 65 }, (_, i) => `ev_${i}`) }],
    ['query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 }, { business_refs: [{ ref_type: 'planet', ref_id: 'planet:kn_medical:earth' }] }],
  ];
  for (const [name, args, extra] of refused) {
    const a = toolError(await c.call(name, { ...args, bkn_context: { ...cctx, ...extra } }));
    const b = toolError(await f.call(name, { ...args, bkn_context: { ...fctx, ...extra } }));
    assert.match(JSON.stringify(a), /"code":/, name);
    assert.deepEqual(a, b, `${name} ${JSON.stringify(args)} ${JSON.stringify(extra)}`);
  }
  const refs = [{ ref_type: 'knowledge_network', ref_id: 'kn:kn_medical' }];
  const r = ok(await c.call('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1, response_format: 'json', bkn_context: { ...cctx, business_refs: refs } }));
  assert.equal(r.datas.length, 1);
});

test('the other tools are unknown to tools/call on /mcp-compact, like a missing tool', async () => {
  const s = await session(compactUrl);
  const ctx = await turn(s, 'unknown tools');
  const unknown = await s.rpc('tools/call', { name: 'no_such_tool', arguments: { bkn_context: ctx } });
  assert.equal(unknown.json.error.code, -32602);
  for (const n of [...GATEWAY.map(([x]) => x), ...GATEWAY_ONLY, ...REST_ONLY]) {
    const r = await s.rpc('tools/call', { name: n, arguments: { bkn_context: ctx } });
    assert.equal(r.status, unknown.status, n);
    assert.equal(r.json.error.code, -32602, n);
    assert.equal(r.json.error.message.replace(n, 'no_such_tool'), unknown.json.error.message, n);
    assert.equal(r.json.result, undefined);
  }
});

test('search_capabilities on /mcp-compact finds exactly the unlisted MCP tools and the gateway tools', async () => {
  const s = await session(compactUrl);
  const ctx = await turn(s, 'what else is there');
  const found = ok(await s.call('search_capabilities', { kn_id: 'kn_medical', types: ['tool'], limit: 100, response_format: 'json', bkn_context: ctx }));
  const names = found.capabilities.map((c) => c.tool_id);
  assert.deepEqual([...names].sort(), [...GATEWAY.map(([n]) => n), ...GATEWAY_ONLY].sort());
  for (const c of found.capabilities) {
    assert.equal(c.kind, 'tool');
    assert.equal(typeof c.description, 'string');
    assert.equal(c.input_schema.type, 'object', c.tool_id);
  }
  // A query narrows it; REST-only tools are never among the results.
  const skills = ok(await s.call('search_capabilities', { kn_id: 'kn_medical', types: ['tool'], query: 'skill', response_format: 'json', bkn_context: ctx }));
  assert.ok(skills.capabilities.length >= 1 && skills.capabilities.every((c) => /skill/.test(c.tool_id)), JSON.stringify(skills));
  for (const q of ['sql', 'resource', 'run_sql']) {
    const r = await s.call('search_capabilities', { kn_id: 'kn_supplychain', query: q, response_format: 'json', bkn_context: ctx });
    for (const n of REST_ONLY) assert.ok(!JSON.stringify(r).includes(`"${n}"`), `${q}: ${n}`);
  }
});

test('execute_tool on /mcp-compact gives the same results as the direct /mcp call', async () => {
  const direct = await session(mcpUrl);
  const gw = await session(compactUrl);
  const dctx = await turn(direct, 'direct');
  const gctx = await turn(gw, 'through the gateway');
  for (const [name, args] of GATEWAY) {
    const a = ok(await direct.call(name, { ...args, response_format: 'json', bkn_context: dctx }));
    const b = ok(await gw.call('execute_tool', { tool_id: name, arguments: args, response_format: 'json', bkn_context: gctx }));
    assert.ok(Object.keys(comparable(a)).length > 0, name);
    assert.deepEqual(comparable(b), comparable(a), name);
    assert.equal(b.bkn_receipt.tool_name, name, 'the gateway call is recorded under the interaction, as the tool that ran');
    assert.equal(b.bkn_receipt.interaction_id, gctx.interaction_id);
  }
  // TOON works through the gateway as well (the MCP default).
  const toon = await gw.call('execute_tool', { tool_id: 'list_action_executions', arguments: { kn_id: 'kn_ops', limit: 2 }, bkn_context: gctx });
  assert.equal(toon.result.isError, false);
  assert.ok(!toon.result.content[0].text.trimStart().startsWith('{'), 'TOON text, not JSON');
});

test('REST-only tools are never reachable through execute_tool', async () => {
  const s = await session(compactUrl);
  const ctx = await turn(s, 'sql please');
  const ghost = toolError(await s.call('execute_tool', { tool_id: 'no_such_tool', arguments: {}, response_format: 'json', bkn_context: ctx }));
  const seq = (await simGet('/_sim/requests')).last_seq;
  for (const n of REST_ONLY) {
    const e = toolError(await s.call('execute_tool', { tool_id: n, arguments: { sql: 'SELECT 1' }, response_format: 'json', bkn_context: ctx }));
    assert.deepEqual(JSON.parse(JSON.stringify(e).replaceAll(n, 'no_such_tool')), ghost, n);
  }
  const calls = (await simGet(`/_sim/requests?since=${seq}`)).requests.filter((r) => r.service === 'vega');
  assert.deepEqual(calls, []);
});

test('lifecycle on /mcp-compact: bkn_context required with capture on; a full turn records receipts', async () => {
  const s = await session(compactUrl);
  for (const args of [{}, { bkn_context: {} }]) {
    const e = toolError(await s.call('list_knowledge_networks', args));
    assert.equal(e.required_action, 'bkn_start_interaction', JSON.stringify(e));
    const g = toolError(await s.call('execute_tool', { tool_id: 'get_relation_types', arguments: GATEWAY[0][1], ...args }));
    assert.equal(g.required_action, 'bkn_start_interaction', JSON.stringify(g));
  }
  const ctx = await turn(s, 'Which networks are there, and how are drugs related?');
  const l = ok(await s.call('list_knowledge_networks', { response_format: 'json', bkn_context: ctx }));
  assert.equal(l.total_count, 3);
  const x = ok(await s.call('execute_tool', { tool_id: 'get_relation_types', arguments: GATEWAY[0][1], response_format: 'json', bkn_context: ctx }));
  assert.equal(x.relation_types[0].id, 'rt_produced_by');
  const receipts = [l.bkn_receipt, x.bkn_receipt];
  for (const r of receipts) {
    assert.equal(r.receipt_status, 'completed');
    assert.equal(r.interaction_id, ctx.interaction_id);
    assert.equal(r.conversation_id, ctx.conversation_id);
  }
  const fin = ok(await s.call('bkn_finish_interaction', { interaction_id: ctx.interaction_id, outcome: 'completed', answer: 'Three networks.' }));
  assert.equal(fin.execution_status, 'completed');
  const st = await simGet('/_sim/trace/state');
  const inter = st.interactions.find((i) => i.interaction_id === ctx.interaction_id);
  assert.deepEqual([...inter.operation_ids].sort(), receipts.map((r) => r.operation_id).sort());
  assert.equal(inter.execution_status, 'completed');
  for (const r of receipts) assert.equal(st.receipts.find((y) => y.receipt_id === r.receipt_id).receipt_status, 'completed');
  // The finished interaction's context is terminal on this surface too.
  const late = toolError(await s.call('list_knowledge_networks', { bkn_context: ctx }));
  assert.equal(late.code, 'interaction_terminal');
});
