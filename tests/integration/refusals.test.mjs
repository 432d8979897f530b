// bkn_context refusals: every malformed or foreign context is
// refused with its own code, on MCP (isError tool result) and REST (status +
// lifecycle envelope), before any downstream call: each case asserts that
// ontology-query and bkn-backend saw no request. Also: where a context is required
// (MCP business tools, REST execution routes) and where ad hoc is allowed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startStack, ROOT, PREFIX } from './lib/stack.mjs';

let stack;
let toolsDir;
const sessions = {};

async function post(url, body, headers = {}, token = 'demo-user-token') {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}`, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(10000),
  });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, headers: r.headers, text, json };
}

async function session(token) {
  if (sessions[token]) return sessions[token];
  const r = await post(stack.server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'refusals', version: '1' } } }, {}, token);
  assert.equal(r.status, 200, r.text);
  sessions[token] = r.headers.get('mcp-session-id');
  return sessions[token];
}

// tools/call over MCP; returns the CallToolResult.
async function mcp(name, args, { meta, headers = {}, token = 'demo-user-token' } = {}) {
  const sid = await session(token);
  const params = { name, arguments: args };
  if (meta) params._meta = meta;
  const r = await post(stack.server.mcpUrl, { jsonrpc: '2.0', id: 7, method: 'tools/call', params }, { 'mcp-session-id': sid, ...headers }, token);
  assert.equal(r.status, 200, r.text);
  assert.ok(r.json.result, r.text);
  return r.json.result;
}

const rest = (tool, body, headers = {}, token = 'demo-user-token') => post(`${stack.server.base}${PREFIX}/kn/${tool}`, body, headers, token);

const simGet = async (p) => (await fetch(`${stack.sim.base}${p}`, { signal: AbortSignal.timeout(5000) })).json();
const lastSeq = async () => (await simGet('/_sim/requests')).last_seq;
async function downstreamSince(since) {
  const { requests } = await simGet(`/_sim/requests?since=${since}`);
  return requests.filter((r) => r.service === 'ontology_query' || r.service === 'bkn_backend').map((r) => `${r.method} ${r.path}`);
}

function mcpError(result) {
  assert.equal(result.isError, true, JSON.stringify(result));
  const env = JSON.parse(result.content[0].text);
  const e = env;
  assert.ok(e, result.content[0].text);
  assert.equal(typeof e.description, 'string');
  assert.equal(typeof e.retryable, 'boolean');
  // retry_after_ms only when retryable, and then a real wait
  if (e.retryable) assert.ok(e.retry_after_ms > 0, result.content[0].text);
  else assert.equal('retry_after_ms' in e, false, result.content[0].text);
  assert.equal('structuredContent' in result, false, 'an error result carries no structuredContent');
  assert.ok('required_action' in e, result.content[0].text);
  return e;
}

async function start(token = 'demo-user-token', agent = 'refusal-agent') {
  const r = await mcp('bkn_start_interaction', { question: 'q', agent_name: agent, conversation_mode: 'new' }, { token });
  assert.equal(r.isError, false, JSON.stringify(r));
  return { conversation_id: r.structuredContent.conversation_id, interaction_id: r.structuredContent.interaction_id };
}

let A; // an active turn of demo-user
let B; // another active turn of demo-user (another conversation)
let F; // a finished turn of demo-user

before(async () => {
  toolsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-refusals-'));
  fs.cpSync(path.join(ROOT, 'tools'), toolsDir, { recursive: true });
  fs.copyFileSync(path.join(ROOT, 'tests/fixtures/tools_execute/execute_probe.lua'), path.join(toolsDir, 'execute_probe.lua'));
  stack = await startStack({ capture: 'enabled', env: { CL_TOOLS_DIR: toolsDir } });
  A = await start();
  B = await start();
  F = await start();
  const fin = await mcp('bkn_finish_interaction', { interaction_id: F.interaction_id, outcome: 'completed', answer: 'done' });
  assert.equal(fin.isError, false, JSON.stringify(fin));
});

after(async () => {
  if (stack) assert.equal(await stack.stop(), 0);
  if (toolsDir) fs.rmSync(toolsDir, { recursive: true, force: true });
});

const QUERY = { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 };
const ref = (ref_type, ref_id) => ({ ref_type, ref_id });

// [title, bkn_context (function of the fixtures), code, REST status, MCP action, REST action]
const CASES = [
  ['misspelt field', () => ({ conversation_id: A.conversation_id, interaction_idd: A.interaction_id }), 'invalid_business_context', 400, 'correct_bkn_context', 'correct_bkn_context'],
  ['unknown extra field', () => ({ ...A, operation_key: 'op_x' }), 'invalid_business_context', 400, 'correct_bkn_context', 'correct_bkn_context'],
  ['a string', () => A.conversation_id, 'invalid_business_context', 400, 'correct_bkn_context', 'correct_bkn_context'],
  ['an array', () => [A.conversation_id, A.interaction_id], 'invalid_business_context', 400, 'correct_bkn_context', 'correct_bkn_context'],
  ['null', () => null, 'invalid_business_context', 400, 'correct_bkn_context', 'correct_bkn_context'],
  ['a non-string id', () => ({ conversation_id: 42, interaction_id: A.interaction_id }), 'invalid_business_context', 400, 'correct_bkn_context', 'correct_bkn_context'],
  ['only conversation_id', () => ({ conversation_id: A.conversation_id }), 'interaction_required', 400, 'bkn_start_interaction', 'start_interaction'],
  ['only interaction_id', () => ({ interaction_id: A.interaction_id }), 'conversation_required', 400, 'bkn_start_interaction', 'create_conversation'],
  ['business_refs: unknown ref_type', () => ({ ...A, business_refs: [ref('planet', 'planet:kn_medical:earth')] }), 'invalid_business_ref', 400, 'correct_business_refs', 'correct_business_refs'],
  ['business_refs: wrong prefix', () => ({ ...A, business_refs: [ref('object_type', 'objtype:kn_medical:ot_drug')] }), 'invalid_business_ref', 400, 'correct_business_refs', 'correct_business_refs'],
  ['business_refs: another knowledge network', () => ({ ...A, business_refs: [ref('object_type', 'object:kn_ops:ot_pod')] }), 'invalid_business_ref', 400, 'correct_business_refs', 'correct_business_refs'],
  ['business_refs: more than 64', () => ({ ...A, business_refs: Array.from({ length: 65 }, (_, i) => ref('object_instance', `object_instance:kn_medical:ot_drug:d${i}`)) }), 'invalid_business_ref', 400, 'correct_business_refs', 'correct_business_refs'],
  ['business_refs: not an array', () => ({ ...A, business_refs: { ref_type: 'knowledge_network' } }), 'invalid_business_ref', 400, 'correct_business_refs', 'correct_business_refs'],
  ['interaction of another conversation', () => ({ conversation_id: A.conversation_id, interaction_id: B.interaction_id }), 'interaction_required', 400, 'bkn_start_interaction', 'start_interaction'],
  ['finished interaction', () => ({ ...F }), 'interaction_terminal', 409, 'bkn_start_interaction', 'start_interaction'],
  ['unknown ids', () => ({ conversation_id: `conv_${'0'.repeat(32)}`, interaction_id: `int_${'0'.repeat(32)}` }), 'resource_not_disclosed', 404, null, null],
];

for (const [title, ctx, code, status, mcpAction, restAction] of CASES) {
  test(`bkn_context ${title} -> ${code} (MCP and REST), no downstream call`, async () => {
    const since = await lastSeq();
    const e = mcpError(await mcp('query_object_instance', { ...QUERY, bkn_context: ctx() }));
    assert.equal(e.code, code, JSON.stringify(e));
    if (mcpAction) assert.equal(e.required_action, mcpAction);
    if (title === 'interaction of another conversation') assert.match(e.description, /该交互不属于此会话/); // the default language, zh-CN
    const r = await rest('query_object_instance', { ...QUERY, bkn_context: ctx() });
    assert.equal(r.status, status, r.text);
    assert.equal(r.json.code, code, r.text);
    if (restAction) assert.equal(r.json.required_action, restAction);
    assert.equal(r.headers.get('bkn-receipt-id'), null);
    assert.deepEqual(await downstreamSince(since), []);
  });
}

test('a known business ref of the current network is accepted', async () => {
  const since = await lastSeq();
  const refs = [ref('knowledge_network', 'kn:kn_medical'), ref('object_type', 'object:kn_medical:ot_drug'), ref('object_type', 'object:kn_medical:ot_drug')];
  const r = await rest('query_object_instance', { ...QUERY, bkn_context: { ...A, business_refs: refs } });
  assert.equal(r.status, 200, r.text);
  assert.match(r.headers.get('bkn-receipt-id') || '', /^rcpt_/);
  assert.equal((await downstreamSince(since)).length, 1);
});

test('malformed invocation id hint -> lifecycle_hint_invalid, no downstream call', async () => {
  const since = await lastSeq();
  const long = 'x'.repeat(257);
  for (const v of ['has space', long, 'caf\u00e9']) {
    const r = await rest('query_object_instance', { ...QUERY, bkn_context: A }, { 'X-OpenBKN-Client-Invocation-Id': v });
    assert.equal(r.status, 400, `${v}: ${r.text}`);
    assert.equal(r.json.code, 'lifecycle_hint_invalid', r.text);
    assert.equal(r.json.required_action, 'fix_host_lifecycle_hint');
    // ad hoc reads too: the hint is checked first
    const adhoc = await rest('query_object_instance', QUERY, { 'X-OpenBKN-Client-Invocation-Id': v });
    assert.equal(adhoc.status, 400, adhoc.text);
    assert.equal(adhoc.json.code, 'lifecycle_hint_invalid');
  }
  for (const v of ['has space', long, '\u5bf9\u8bdd-1', 'tab\there', '', 17]) {
    const e = mcpError(await mcp('query_object_instance', { ...QUERY, bkn_context: A }, { meta: { 'openbkn.ai/client-invocation-id': v } }));
    assert.equal(e.code, 'lifecycle_hint_invalid', `${JSON.stringify(v)}: ${JSON.stringify(e)}`);
    assert.equal(e.required_action, 'fix_host_lifecycle_hint');
  }
  const hdr = mcpError(await mcp('query_object_instance', { ...QUERY, bkn_context: A }, { headers: { 'X-OpenBKN-Client-Invocation-Id': 'a b' } }));
  assert.equal(hdr.code, 'lifecycle_hint_invalid');
  // the longest valid id is fine
  const ok = await rest('query_object_instance', { ...QUERY, bkn_context: A }, { 'X-OpenBKN-Client-Invocation-Id': 'y'.repeat(256) });
  assert.equal(ok.status, 200, ok.text);
  assert.equal((await downstreamSince(since)).length, 1);
});

test("a second principal using the first one's conversation -> resource_not_disclosed", async () => {
  const since = await lastSeq();
  const e = mcpError(await mcp('query_object_instance', { ...QUERY, bkn_context: A }, { token: 'demo-user2-token' }));
  assert.equal(e.code, 'resource_not_disclosed', JSON.stringify(e));
  const r = await rest('query_object_instance', { ...QUERY, bkn_context: A }, {}, 'demo-user2-token');
  assert.equal(r.status, 404, r.text);
  assert.equal(r.json.code, 'resource_not_disclosed');
  // nor may it finish the first principal's interaction
  const fin = mcpError(await mcp('bkn_finish_interaction', { interaction_id: A.interaction_id, outcome: 'cancelled' }, { token: 'demo-user2-token' }));
  assert.equal(fin.code, 'resource_not_disclosed');
  // nor continue its conversation
  const cont = mcpError(await mcp('bkn_start_interaction', { question: 'q', agent_name: 'refusal-agent', conversation_mode: 'continue', conversation_id: A.conversation_id }, { token: 'demo-user2-token' }));
  assert.equal(cont.code, 'resource_not_disclosed');
  assert.deepEqual(await downstreamSince(since), []);
});

test('MCP business tools require bkn_context: absent or {} -> conversation_required', async () => {
  const since = await lastSeq();
  for (const args of [QUERY, { ...QUERY, bkn_context: {} }]) {
    const e = mcpError(await mcp('query_object_instance', args));
    assert.equal(e.code, 'conversation_required');
    assert.equal(e.required_action, 'bkn_start_interaction');
    assert.equal(e.retryable, false);
  }
  const e = mcpError(await mcp('list_knowledge_networks', {}));
  assert.equal(e.code, 'conversation_required');
  assert.deepEqual(await downstreamSince(since), []);
});

test('REST execution routes require bkn_context; with it they run managed', async () => {
  const since = await lastSeq();
  for (const body of [{ kn_id: 'kn_medical' }, { kn_id: 'kn_medical', bkn_context: {} }]) {
    const r = await rest('execute_probe', body);
    assert.equal(r.status, 400, r.text);
    assert.deepEqual(Object.keys(r.json), ['code', 'description', 'solution', 'retryable', 'required_action']);
    assert.equal(r.json.code, 'conversation_required');
    assert.equal(r.json.required_action, 'create_conversation');
    assert.equal(r.json.retryable, false);
    assert.equal(typeof r.json.description, 'string');
  }
  assert.deepEqual(await downstreamSince(since), []);
  const ok = await rest('execute_probe', { kn_id: 'kn_medical', bkn_context: A });
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.json.executed, true);
  const rid = ok.headers.get('bkn-receipt-id');
  assert.match(rid || '', /^rcpt_/);
  assert.match(ok.headers.get('bkn-operation-id') || '', /^op_/);
  assert.equal((await downstreamSince(since)).length, 1);
  const st = await simGet('/_sim/trace/state');
  const op = st.operations.find((o) => o.operation_id === ok.headers.get('bkn-operation-id'));
  assert.equal(op.tool_name, 'execute_probe');
  assert.equal(op.receipt_id, rid);
});

// The lifecycle tools are declared like every tool: the schema tools/list shows is the
// one their arguments are checked against, and a refusal carries the schema check's
// details (one {path, message} per fault, path a JSON pointer) as any tool's invalid
// arguments do, next to the lifecycle message naming the field; nothing reaches Trace Core.
test('lifecycle arguments are checked against the listed schema: details with JSON pointer paths, before any Trace Core call', async () => {
  const sid = await session('demo-user-token');
  const list = await post(stack.server.mcpUrl, { jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} }, { 'mcp-session-id': sid });
  const byName = Object.fromEntries(list.json.result.tools.map((t) => [t.name, t.inputSchema]));
  const startSchema = byName.bkn_start_interaction;
  const finishSchema = byName.bkn_finish_interaction;
  const good = { question: 'q', agent_name: 'schema-agent', conversation_mode: 'new' };
  // a business tool's invalid arguments, for the shape and texts of the details
  const biz = await mcp('query_object_instance', { kn_id: 'kn_medical', limit: 'ten', extra: 1, bkn_context: A });
  const bizDetails = JSON.parse(biz.content[0].text).details;
  const bizText = (p) => bizDetails.find((d) => d.path === p).message;
  const cases = [
    ['wrong type', 'bkn_start_interaction', { ...good, question: 5 }, '/question'],
    ['unknown field', 'bkn_start_interaction', { ...good, extra: 1 }, '/extra'],
    ['too long', 'bkn_start_interaction', { ...good, agent_name: 'x'.repeat(startSchema.properties.agent_name.maxLength + 1) }, '/agent_name'],
    ['not in the enum', 'bkn_start_interaction', { ...good, conversation_mode: 'fresh' }, '/conversation_mode'],
    ['finish: wrong type', 'bkn_finish_interaction', { interaction_id: 7, outcome: 'failed' }, '/interaction_id'],
    ['finish: unknown field', 'bkn_finish_interaction', { interaction_id: B.interaction_id, outcome: 'failed', extra: 1 }, '/extra'],
  ];
  // every required field of the listed schemas is enforced
  for (const f of startSchema.required) {
    const args = { ...good };
    delete args[f];
    cases.push([`missing ${f}`, 'bkn_start_interaction', args, `/${f}`]);
  }
  for (const f of finishSchema.required) {
    const args = { interaction_id: B.interaction_id, outcome: 'failed' };
    delete args[f];
    cases.push([`finish: missing ${f}`, 'bkn_finish_interaction', args, `/${f}`]);
  }
  assert.equal(startSchema.additionalProperties, false);
  assert.equal(finishSchema.additionalProperties, false);
  const seq = await lastSeq();
  for (const [what, name, args, pointer] of cases) {
    const e = mcpError(await mcp(name, args));
    assert.equal(e.code, 'invalid_params', `${what}: ${JSON.stringify(e)}`);
    assert.equal(e.required_action, 'fix_arguments', what);
    assert.ok(e.description.includes(pointer.slice(1)), `${what}: the message names the field: ${e.description}`);
    assert.ok(Array.isArray(e.details) && e.details.length > 0, `${what}: ${JSON.stringify(e)}`);
    for (const d of e.details) assert.deepEqual(Object.keys(d), Object.keys(bizDetails[0]), `${what}: ${JSON.stringify(d)}`);
    const d = e.details.find((x) => x.path === pointer);
    assert.ok(d, `${what}: no detail at ${pointer}: ${JSON.stringify(e.details)}`);
    if (what === 'unknown field') assert.equal(d.message, bizText('/extra'), 'the same text as any tool');
  }
  const { requests } = await simGet(`/_sim/requests?since=${seq}`);
  assert.deepEqual(requests.filter((r) => r.service === 'trace_core').map((r) => `${r.method} ${r.path}`), []);
});
