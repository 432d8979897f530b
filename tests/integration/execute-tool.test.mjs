// execute_tool's contract: a retry may take another route to the same tool
// (idempotency records and the Operation are keyed by the tool that actually runs, so
// execute_skill on /mcp and execute_tool {"name":"execute_skill"} (or {"skill_id"}) on
// /mcp-compact with the same invocation id run once, and the name and tool_id forms
// are one call); it declares an outputSchema; a managed call of a toolbox function
// names its Operation to the toolbox (bkn-parent-operation-id).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startStack, ROOT, PREFIX } from './lib/stack.mjs';
import { session } from './lib/mcp-session.mjs';

let stack;
let full;
let compact;
let T;
let n = 0;
const uniq = (p) => `${p}-${process.pid}-${++n}`;
const INV = 'openbkn.ai/client-invocation-id';
const SKILL = { skill_id: 'skill_drug_label_review', entry_shell: 'python review.py --label label.txt' };

before(async () => {
  stack = await startStack({ capture: 'enabled', env: { EXECUTE_SKILL_ENABLED: 'true' } });
  full = await session(stack.server.mcpUrl);
  compact = await session(`${stack.server.base}${PREFIX}/mcp-compact`);
  const s = await full.call('bkn_start_interaction', { question: 'q', agent_name: 'retry-route', conversation_mode: 'new' });
  assert.equal(s.result.isError, false, JSON.stringify(s));
  T = { conversation_id: s.result.structuredContent.conversation_id, interaction_id: s.result.structuredContent.interaction_id };
});

after(async () => {
  if (stack) assert.equal(await stack.stop(), 0);
});

const simGet = async (p) => (await fetch(`${stack.sim.base}${p}`, { signal: AbortSignal.timeout(5000) })).json();
const lastSeq = async () => (await simGet('/_sim/requests')).last_seq;
const since = async (seq, re) => (await simGet(`/_sim/requests?since=${seq}`)).requests.filter((r) => re.test(r.path) && r.service !== 'trace_core');

function ok(r) {
  assert.equal(r.result?.isError, false, JSON.stringify(r));
  return r.result.structuredContent;
}

test('execute_skill on /mcp, then the same invocation through execute_tool on /mcp-compact: one run', async () => {
  for (const via of [{ name: 'execute_skill', arguments: SKILL }, { tool_id: 'execute_skill', arguments: SKILL }, { skill_id: SKILL.skill_id, arguments: { entry_shell: SKILL.entry_shell } }]) {
    const id = uniq('skill');
    const seq = await lastSeq();
    const a = ok(await full.call('execute_skill', { ...SKILL, response_format: 'json', bkn_context: T }, { [INV]: id }));
    const b = ok(await compact.call('execute_tool', { ...via, response_format: 'json', bkn_context: T }, { [INV]: id }));
    assert.equal(a.exit_code, 0, JSON.stringify(a));
    assert.deepEqual(b, a, `${JSON.stringify(via)}: the retry replays the first result, receipt included`);
    assert.equal((await since(seq, /\/execute$/)).length, 1, `${JSON.stringify(via)}: the skill ran once`);
  }
});

test('the other way round: execute_tool first, then the direct call with the same invocation id', async () => {
  const id = uniq('skill-back');
  const seq = await lastSeq();
  const a = ok(await compact.call('execute_tool', { name: 'execute_skill', arguments: SKILL, response_format: 'json', bkn_context: T }, { [INV]: id }));
  const b = ok(await full.call('execute_skill', { ...SKILL, response_format: 'json', bkn_context: T }, { [INV]: id }));
  assert.deepEqual(b, a);
  assert.equal((await since(seq, /\/execute$/)).length, 1);
});

test('execute_tool by name and by tool_id with one invocation id: one call, no conflict', async () => {
  const args = { kn_id: 'kn_medical', ids: ['rt_produced_by'] };
  const id = uniq('forms');
  const a = ok(await compact.call('execute_tool', { tool_id: 'get_relation_types', arguments: args, response_format: 'json', bkn_context: T }, { [INV]: id }));
  const seq = await lastSeq();
  const b = ok(await compact.call('execute_tool', { name: 'get_relation_types', arguments: args, response_format: 'json', bkn_context: T }, { [INV]: id }));
  const c = ok(await full.call('get_relation_types', { ...args, response_format: 'json', bkn_context: T }, { [INV]: id }));
  assert.deepEqual(b, a);
  assert.deepEqual(c, a);
  assert.deepEqual(await since(seq, /./), [], 'the retries reach no upstream: the read ran once');
  // other arguments under the same id are still a conflict
  const d = await compact.call('execute_tool', { name: 'get_relation_types', arguments: { kn_id: 'kn_medical', ids: ['rt_other'] }, bkn_context: T }, { [INV]: id });
  assert.equal(d.result.isError, true, JSON.stringify(d));
  const e = JSON.parse(d.result.content[0].text);
  assert.equal(e.code, 'idempotency_conflict');
});

test('execute_tool declares an outputSchema on /mcp and /mcp-compact, and its results match it', async () => {
  for (const s of [full, compact]) {
    const t = (await s.listAll()).find((x) => x.name === 'execute_tool');
    assert.equal(t.outputSchema?.type, 'object', JSON.stringify(t));
  }
  const r = ok(await compact.call('execute_tool', { tool_id: 'get_relation_types', arguments: { kn_id: 'kn_medical', ids: ['rt_produced_by'] }, bkn_context: T }));
  assert.equal(typeof r, 'object');
});

test('a managed execute_tool of a toolbox function sends bkn-parent-operation-id: its Operation', async () => {
  const seq = await lastSeq();
  const r = ok(await compact.call('execute_tool', { kn_id: 'kn_supplychain', toolbox_id: 'box_finance', tool_id: 'tool_fx_convert', arguments: { amount: 2, from: 'USD', to: 'CNY' }, response_format: 'json', bkn_context: T }));
  assert.ok(r.bkn_receipt?.operation_id, JSON.stringify(r));
  const calls = (await simGet(`/_sim/requests?since=${seq}`)).requests.filter((q) => /\/tool-box\/box_finance\/proxy\/tool_fx_convert$/.test(q.path));
  assert.equal(calls.length, 1);
  assert.equal(calls[0].headers['bkn-parent-operation-id'], r.bkn_receipt.operation_id);
});

// The token rule where the text is made: through execute_tool a Context Loader tool's
// text is laid out by that tool's own view, the same text as the direct call; and no
// MCP text costs more o200k tokens than the compact JSON of its result.
const TOK = path.join(ROOT, 'build/ext/node_modules/gpt-tokenizer/esm/encoding/o200k_base.js');
test('execute_tool: the inner tool\'s view, the same text as the direct call, never more tokens than the JSON', async () => {
  const tk = fs.existsSync(TOK) ? await import(pathToFileURL(TOK).href) : null;
  const tokens = (s) => (tk ? tk.encode(s).length : 0);
  // a finished run of the demo data (a running one changes between two reads)
  const runs = ok(await full.call('list_action_executions', { kn_id: 'kn_ops', limit: 10, response_format: 'json', bkn_context: T }));
  const done = (runs.entries ?? runs.datas ?? []).find((e) => e.status === 'completed' || e.status === 'success') ?? (runs.entries ?? runs.datas)[0];
  const a = { execution_id: done.id ?? done.execution_id };
  const cases = [
    ['query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 10 }],
    ['get_action_execution', { kn_id: 'kn_ops', execution_id: a.execution_id }],
    ['list_action_executions', { kn_id: 'kn_ops', limit: 10 }],
    ['search_schema', { kn_id: 'kn_medical', query: 'drug manufacturer' }],
  ];
  for (const [name, args] of cases) {
    const direct = (await full.call(name, { ...args, bkn_context: T })).result;
    const via = (await compact.call('execute_tool', { tool_id: name, arguments: args, bkn_context: T })).result;
    const json = (await full.call(name, { ...args, response_format: 'json', bkn_context: T })).result;
    assert.equal(direct.isError, false, JSON.stringify(direct));
    assert.equal(via.content[0].text, direct.content[0].text, `${name}: execute_tool lays the result out as the tool does`);
    if (tk) {
      const t = tokens(direct.content[0].text);
      const j = tokens(json.content[0].text);
      assert.ok(t <= j, `${name}: MCP text ${t} tokens > compact JSON ${j}`);
      if (name === 'query_object_instance') assert.ok(t <= 0.7 * j, `${name}: ${t} > 0.70 x ${j}`);
    }
  }
});
