// The next step an error names is a call the agent can make, and not the call it just
// made: a skill search_capabilities offers runs through execute_tool as execute_skill
// would (or the refusal names the call that reads it), and a not-found id names the
// tool that lists its kind (skill, skill file, data resource, execution, relation
// type); a rejected Origin asks for another Origin, not for a permission.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startSimulator, startServer, PREFIX } from './lib/stack.mjs';
import { session } from './lib/mcp-session.mjs';

let sim;
let on; // EXECUTE_SKILL_ENABLED=true
let off; // the default: skill execution off

before(async () => {
  sim = await startSimulator({ capture: 'disabled' });
  [on, off] = await Promise.all([
    startServer(sim.base, { env: { EXECUTE_SKILL_ENABLED: 'true' } }),
    startServer(sim.base),
  ]);
});

after(async () => {
  const codes = [];
  for (const s of [on, off]) if (s) codes.push(await s.stop());
  if (sim) await sim.stop();
  assert.deepEqual(codes, codes.map(() => 0));
});

const compact = (server) => session(`${server.base}${PREFIX}/mcp-compact`);
const full = (server) => session(server.mcpUrl);
const ENTRY = 'python review.py --label label.txt';

function ok(r) {
  assert.equal(r.result?.isError, false, JSON.stringify(r));
  return r.result.structuredContent;
}
function err(r) {
  assert.equal(r.result?.isError, true, JSON.stringify(r));
  return JSON.parse(r.result.content[0].text);
}
const NOT_BACK = /先用 search_capabilities 查找|Find available capabilities with search_capabilities/;

test('a skill search_capabilities offers runs through execute_tool as execute_skill runs it', async () => {
  const c = await compact(on);
  const found = ok(await c.call('search_capabilities', { kn_id: 'kn_medical', types: ['skill'], response_format: 'json' }));
  const skill = found.capabilities.find((e) => e.kind === 'skill');
  assert.ok(skill?.skill_id, JSON.stringify(found));
  const direct = ok(await (await full(on)).call('execute_skill', { skill_id: skill.skill_id, entry_shell: ENTRY, response_format: 'json' }));
  assert.equal(direct.exit_code, 0, JSON.stringify(direct));
  for (const how of [{ kn_id: 'kn_medical', name: skill.name }, { kn_id: 'kn_medical', tool_id: skill.skill_id }, { skill_id: skill.skill_id }]) {
    const r = ok(await c.call('execute_tool', { ...how, arguments: { entry_shell: ENTRY }, response_format: 'json' }));
    delete r.execution_time;
    const d = { ...direct };
    delete d.execution_time;
    assert.deepEqual(r, d, JSON.stringify(how));
  }
  // without an entry: the refusal names the call that reads the skill's entries
  const e = err(await c.call('execute_tool', { kn_id: 'kn_medical', name: skill.name, arguments: {} }));
  assert.equal(e.required_action, 'fix_arguments', JSON.stringify(e));
  assert.deepEqual(e.details.next_call, { name: 'get_skill_content', arguments: { skill_id: skill.skill_id } });
  assert.match(e.description, /entry_shell/);
});

test('with skill execution off, a skill through execute_tool names the call that reads it, never the search again', async () => {
  const c = await compact(off);
  const found = ok(await c.call('search_capabilities', { kn_id: 'kn_medical', types: ['skill'], response_format: 'json' }));
  const skill = found.capabilities.find((e) => e.kind === 'skill');
  for (const lang of ['zh-CN', 'en-US']) {
    const s = await session(`${off.base}${PREFIX}/mcp-compact`, { 'accept-language': lang });
    const e = err(await s.call('execute_tool', { kn_id: 'kn_medical', name: skill.name, arguments: { entry_shell: ENTRY } }));
    assert.equal(e.code, 'Public.BadRequest', JSON.stringify(e));
    assert.equal(e.required_action, 'use_next_call');
    assert.deepEqual(e.details.next_call, { name: 'get_skill_content', arguments: { skill_id: skill.skill_id } });
    assert.doesNotMatch(e.solution, NOT_BACK);
    assert.match(e.solution, /get_skill_content/);
  }
  // an unknown capability: the solution says which ids to pass, not "search again"
  const u = err(await c.call('execute_tool', { kn_id: 'kn_medical', name: 'nothing_here', arguments: {} }));
  assert.equal(u.code, 'Public.NotFound');
  assert.doesNotMatch(u.solution, NOT_BACK);
  assert.match(u.solution, /skill_id/);
});

// [title, tool, args, the tool the solution must name, a text it must not hold]
const WRONG_STEP = /list_knowledge_networks、search_schema 或 get_object_types|确认知识网络「kn_medical」是否存在/;
const CASES = [
  ['unknown skill', 'get_skill_content', { skill_id: 'skill_nope' }, /list_skills/],
  ['unknown skill file', 'read_skill_file', { skill_id: 'skill_drug_label_review', rel_path: 'nope.md' }, /get_skill_content.*files/],
  ['unknown execution', 'get_action_execution', { kn_id: 'kn_medical', execution_id: 'exec_nope' }, /list_action_executions/],
  ['unknown relation type', 'query_instance_subgraph', { kn_id: 'kn_medical', relation_type_paths: [{ object_types: [{ id: 'ot_drug' }, { id: 'ot_manufacturer' }], relation_types: [{ relation_type_id: 'rt_nope', source_object_type_id: 'ot_drug', target_object_type_id: 'ot_manufacturer' }] }] }, /get_relation_types/],
];

for (const [title, tool, args, names] of CASES) {
  test(`${title}: the next step names ${names.source}, directly and through execute_tool`, async () => {
    const f = await full(off);
    const c = await compact(off);
    for (const e of [err(await f.call(tool, args)), err(await c.call('execute_tool', { tool_id: tool, arguments: args }))]) {
      assert.equal(e.required_action, 'check_ids', JSON.stringify(e));
      assert.match(e.solution, names, JSON.stringify(e));
      assert.doesNotMatch(e.solution, WRONG_STEP, JSON.stringify(e));
    }
  });
}

test('unknown data resource (REST): the next step names list_resources', async () => {
  const r = await fetch(`${off.base}${PREFIX}/kn/describe_resource`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer demo-user-token' },
    body: JSON.stringify({ resource_id: 'res_nope' }), signal: AbortSignal.timeout(10000),
  });
  const e = await r.json();
  assert.equal(r.status, 404, JSON.stringify(e));
  assert.equal(e.required_action, 'check_ids');
  assert.match(e.solution, /list_resources/);
  assert.doesNotMatch(e.solution, WRONG_STEP);
});

test('a rejected Origin: send from an allowed Origin (fix_request), not "ask for a permission"', async () => {
  for (const lang of ['zh-CN', 'en-US']) {
    const r = await fetch(off.mcpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', origin: 'http://evil.example', authorization: 'Bearer demo-user-token', 'accept-language': lang },
      body: '{}', signal: AbortSignal.timeout(10000),
    });
    const e = await r.json();
    assert.equal(r.status, 403);
    assert.equal(e.code, 'Public.Forbidden.OriginRejected');
    assert.equal(e.required_action, 'fix_request');
    assert.match(e.solution, /Origin/);
    assert.doesNotMatch(e.solution, /管理员|administrator/);
  }
});
