// Full managed turns through the official MCP SDK client: the
// catalogue order, start -> business tools with bkn_context -> finish, a second
// turn that continues the conversation, the host conversation key (header and
// _meta), and the managed vs ad hoc REST results with their Trace Core records.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startStack, ROOT, PREFIX } from './lib/stack.mjs';

const SDK_DIR = path.join(ROOT, 'build/ext/node_modules/@modelcontextprotocol/sdk/dist/esm/client');
const HAVE_SDK = fs.existsSync(path.join(SDK_DIR, 'index.js')) && fs.existsSync(path.join(SDK_DIR, 'streamableHttp.js'));
const NO_SDK = HAVE_SDK ? false : `the official MCP SDK is not installed in ${SDK_DIR} (run the test command's setup)`;
const TOKEN = 'demo-user-token';

let stack;
let Client;
let Transport;
const clients = [];

before(async () => {
  if (HAVE_SDK) {
    ({ Client } = await import(pathToFileURL(path.join(SDK_DIR, 'index.js')).href));
    ({ StreamableHTTPClientTransport: Transport } = await import(pathToFileURL(path.join(SDK_DIR, 'streamableHttp.js')).href));
  }
  stack = await startStack({ capture: 'enabled' });
});

after(async () => {
  for (const c of clients) await c.close().catch(() => {});
  if (stack) assert.equal(await stack.stop(), 0);
});

async function connect(token = TOKEN, headers = {}) {
  const transport = new Transport(new URL(stack.server.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${token}`, ...headers } } });
  const client = new Client({ name: 'turn-test', version: '1.0.0' });
  await client.connect(transport);
  clients.push(client);
  return client;
}

async function post(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKEN}`, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(10000),
  });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, headers: r.headers, text, json };
}

const simGet = async (p) => (await fetch(`${stack.sim.base}${p}`, { signal: AbortSignal.timeout(5000) })).json();
const traceState = () => simGet('/_sim/trace/state');
const lastSeq = async () => (await simGet('/_sim/requests')).last_seq;
const downstream = async (since) => (await simGet(`/_sim/requests?since=${since}`)).requests.filter((r) => r.service === 'ontology_query' || r.service === 'bkn_backend');

// The lifecycle error envelope of an isError result.
function errorOf(result) {
  assert.equal(result.isError, true, JSON.stringify(result));
  return JSON.parse(result.content[0].text);
}

function okResult(result) {
  assert.equal(result.isError, false, JSON.stringify(result));
  return result.structuredContent;
}

async function start(client, args, meta) {
  const r = await client.callTool({ name: 'bkn_start_interaction', arguments: args, ...(meta ? { _meta: meta } : {}) });
  const s = okResult(r);
  assert.match(s.conversation_id, /^conv_[0-9a-f]{32}$/);
  assert.match(s.interaction_id, /^int_[0-9a-f]{32}$/);
  assert.equal(s.execution_status, 'active');
  return s;
}

test('tools/list: the two lifecycle tools first, bkn_context on every business tool', { skip: NO_SDK }, async () => {
  const client = await connect();
  const { tools } = await client.listTools();
  assert.deepEqual(tools.slice(0, 2).map((t) => t.name), ['bkn_start_interaction', 'bkn_finish_interaction']);
  const business = tools.slice(2);
  assert.ok(business.length >= 2, JSON.stringify(tools.map((t) => t.name)));
  for (const t of business) {
    assert.ok(!t.name.startsWith('bkn_'), t.name);
    const bc = t.inputSchema.properties?.bkn_context;
    assert.ok(bc, `${t.name} has no bkn_context in its inputSchema`);
    assert.equal(bc.type, 'object', t.name);
    assert.ok(bc.properties.conversation_id && bc.properties.interaction_id, t.name);
    assert.deepEqual(bc.required, ['conversation_id', 'interaction_id'], t.name);
    assert.equal(bc.additionalProperties, false, t.name);
  }
  for (const t of tools.slice(0, 2)) assert.equal(t.inputSchema.properties.bkn_context, undefined, t.name);
});

test('two full turns: start -> query -> list -> finish(completed), then continue', { skip: NO_SDK }, async () => {
  const client = await connect();
  await client.listTools(); // the SDK then checks structuredContent against each outputSchema
  const t1 = await start(client, { question: 'Which drugs are in the network?', agent_name: 'turn-agent', conversation_mode: 'new' });
  const ctx1 = { conversation_id: t1.conversation_id, interaction_id: t1.interaction_id };

  const since = await lastSeq();
  const q = okResult(await client.callTool({ name: 'query_object_instance', arguments: { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 2, bkn_context: ctx1 } }));
  assert.equal(q.datas.length, 2);
  const r1 = q.bkn_receipt;
  assert.ok(r1, 'no bkn_receipt on a managed result');
  assert.equal(r1.receipt_status, 'completed');
  assert.equal(r1.conversation_id, t1.conversation_id);
  assert.equal(r1.interaction_id, t1.interaction_id);
  assert.equal(r1.tool_name, 'query_object_instance');
  assert.match(r1.receipt_id, /^rcpt_/);
  assert.match(r1.operation_id, /^op_/);

  const l = okResult(await client.callTool({ name: 'list_knowledge_networks', arguments: { bkn_context: ctx1 } }));
  assert.equal(l.total_count, 3);
  const r2 = l.bkn_receipt;
  assert.equal(r2.receipt_status, 'completed');
  assert.equal(r2.tool_name, 'list_knowledge_networks');
  assert.notEqual(r2.operation_id, r1.operation_id);
  const calls = await downstream(since);
  assert.deepEqual(calls.map((c) => c.service), ['ontology_query', 'bkn_backend']);

  // Trace Core holds both operations and their completed receipts under the interaction.
  let st = await traceState();
  const inter = st.interactions.find((i) => i.interaction_id === t1.interaction_id);
  assert.deepEqual(inter.operation_ids.sort(), [r1.operation_id, r2.operation_id].sort());
  for (const r of [r1, r2]) {
    const op = st.operations.find((o) => o.operation_id === r.operation_id);
    assert.equal(op.receipt_id, r.receipt_id);
    assert.equal(op.attempt_status, 'completed');
    assert.equal(st.receipts.find((x) => x.receipt_id === r.receipt_id).receipt_status, 'completed');
  }

  const fin = okResult(await client.callTool({ name: 'bkn_finish_interaction', arguments: { interaction_id: t1.interaction_id, outcome: 'completed', answer: 'Two drugs shown.' } }));
  assert.deepEqual(fin, { conversation_id: t1.conversation_id, interaction_id: t1.interaction_id, execution_status: 'completed', evidence_status: 'complete' });
  st = await traceState();
  assert.equal(st.interactions.find((i) => i.interaction_id === t1.interaction_id).execution_status, 'completed');
  assert.equal(st.conversations.find((c) => c.conversation_id === t1.conversation_id).status, 'active');

  // Second turn: the conversation stays reusable.
  const t2 = await start(client, { question: 'And the manufacturers?', agent_name: 'turn-agent', conversation_mode: 'continue', conversation_id: t1.conversation_id });
  assert.equal(t2.conversation_id, t1.conversation_id);
  assert.notEqual(t2.interaction_id, t1.interaction_id);
  const q2 = okResult(await client.callTool({ name: 'query_object_instance', arguments: { kn_id: 'kn_medical', ot_id: 'ot_manufacturer', limit: 1, bkn_context: { conversation_id: t2.conversation_id, interaction_id: t2.interaction_id } } }));
  assert.equal(q2.bkn_receipt.interaction_id, t2.interaction_id);
  const fin2 = okResult(await client.callTool({ name: 'bkn_finish_interaction', arguments: { interaction_id: t2.interaction_id, outcome: 'completed', answer: 'One manufacturer.' } }));
  assert.equal(fin2.execution_status, 'completed');
  // The first turn's context is now terminal.
  const late = await client.callTool({ name: 'list_knowledge_networks', arguments: { bkn_context: ctx1 } });
  assert.equal(errorOf(late).code, 'interaction_terminal');
});

test('finish with another outcome, and start argument validation', { skip: NO_SDK }, async () => {
  const client = await connect();
  const t = await start(client, { question: 'q', agent_name: 'turn-agent-2', conversation_mode: 'new' });
  const fin = okResult(await client.callTool({ name: 'bkn_finish_interaction', arguments: { interaction_id: t.interaction_id, outcome: 'failed', reason: 'no data' } }));
  assert.equal(fin.execution_status, 'failed');
  // continue without conversation_id; new with one (completed without answer: below)
  for (const [name, args] of [
    ['bkn_start_interaction', { question: 'q', agent_name: 'a', conversation_mode: 'continue' }],
    ['bkn_start_interaction', { question: 'q', agent_name: 'a', conversation_mode: 'new', conversation_id: t.conversation_id }],
  ]) {
    const e = errorOf(await client.callTool({ name, arguments: args }));
    assert.equal(e.code, 'invalid_params', JSON.stringify(e));
    assert.equal(e.retryable, false);
    assert.equal(typeof e.description, 'string');
    assert.equal(typeof e.required_action, 'string');
    assert.equal('retry_after_ms' in e, false); // only a retryable error names a wait
  }
});

test('host conversation key via _meta: one conversation per key, the mapping wins', { skip: NO_SDK }, async () => {
  const client = await connect();
  const meta = { 'openbkn.ai/host-conversation-key': 'host-thread-42' };
  const a = await start(client, { question: 'first', agent_name: 'host-agent', conversation_mode: 'new' }, meta);
  const used = okResult(await client.callTool({ name: 'list_knowledge_networks', arguments: { bkn_context: { conversation_id: a.conversation_id, interaction_id: a.interaction_id } } }));
  assert.equal(used.bkn_receipt.conversation_id, a.conversation_id);
  okResult(await client.callTool({ name: 'bkn_finish_interaction', arguments: { interaction_id: a.interaction_id, outcome: 'completed', answer: 'ok' } }));
  // mode "new" again with the same key: the mapping wins, same conversation
  const b = await start(client, { question: 'second', agent_name: 'host-agent', conversation_mode: 'new' }, meta);
  assert.equal(b.conversation_id, a.conversation_id);
  assert.notEqual(b.interaction_id, a.interaction_id);
  okResult(await client.callTool({ name: 'bkn_finish_interaction', arguments: { interaction_id: b.interaction_id, outcome: 'cancelled', reason: 'user left' } }));
  // continue with the mapped id is fine; with another id it is a conflict
  const c = await start(client, { question: 'third', agent_name: 'host-agent', conversation_mode: 'continue', conversation_id: a.conversation_id }, meta);
  assert.equal(c.conversation_id, a.conversation_id);
  okResult(await client.callTool({ name: 'bkn_finish_interaction', arguments: { interaction_id: c.interaction_id, outcome: 'handed_off', reason: 'human' } }));
  const other = await start(client, { question: 'elsewhere', agent_name: 'host-agent', conversation_mode: 'new' });
  assert.notEqual(other.conversation_id, a.conversation_id);
  // The host's mapping wins over the caller's id and mode: another conversation_id,
  // "new" with an id, "continue" without one all land on the mapped conversation.
  for (const args of [
    { conversation_mode: 'continue', conversation_id: other.conversation_id },
    { conversation_mode: 'new', conversation_id: other.conversation_id },
    { conversation_mode: 'continue' },
  ]) {
    const m = await start(client, { question: 'x', agent_name: 'host-agent', ...args }, meta);
    assert.equal(m.conversation_id, a.conversation_id, JSON.stringify(args));
    okResult(await client.callTool({ name: 'bkn_finish_interaction', arguments: { interaction_id: m.interaction_id, outcome: 'cancelled' } }));
  }
  // another key: another conversation
  const d = await start(client, { question: 'fourth', agent_name: 'host-agent', conversation_mode: 'new' }, { 'openbkn.ai/host-conversation-key': 'host-thread-43' });
  assert.notEqual(d.conversation_id, a.conversation_id);
  const st = await traceState();
  const conv = st.conversations.find((x) => x.conversation_id === a.conversation_id);
  assert.match(conv.external_conversation_key, /^mcp-host:/);
});

test('host conversation key via the X-OpenBKN-Host-Conversation-Key header (header wins over _meta)', { skip: NO_SDK }, async () => {
  const viaHeader = await connect(TOKEN, { 'X-OpenBKN-Host-Conversation-Key': 'header-thread-1' });
  const a = await start(viaHeader, { question: 'q1', agent_name: 'hdr-agent', conversation_mode: 'new' });
  okResult(await viaHeader.callTool({ name: 'bkn_finish_interaction', arguments: { interaction_id: a.interaction_id, outcome: 'completed', answer: 'a' } }));
  // The same key in _meta on a client without the header maps to the same conversation.
  const viaMeta = await connect();
  const b = await start(viaMeta, { question: 'q2', agent_name: 'hdr-agent', conversation_mode: 'new' }, { 'openbkn.ai/host-conversation-key': 'header-thread-1' });
  assert.equal(b.conversation_id, a.conversation_id);
  okResult(await viaMeta.callTool({ name: 'bkn_finish_interaction', arguments: { interaction_id: b.interaction_id, outcome: 'completed', answer: 'b' } }));
  // Header and _meta both present: the header's key decides.
  const c = await start(viaHeader, { question: 'q3', agent_name: 'hdr-agent', conversation_mode: 'new' }, { 'openbkn.ai/host-conversation-key': 'some-other-thread' });
  assert.equal(c.conversation_id, a.conversation_id);
  // A malformed key is refused, not ignored.
  const bad = errorOf(await viaMeta.callTool({ name: 'bkn_start_interaction', arguments: { question: 'q', agent_name: 'hdr-agent', conversation_mode: 'new' }, _meta: { 'openbkn.ai/host-conversation-key': 'has space' } }));
  assert.equal(bad.code, 'lifecycle_hint_invalid');
});

test('REST: managed reads carry receipt headers, ad hoc reads leave no Trace records', { skip: NO_SDK }, async () => {
  const client = await connect();
  const t = await start(client, { question: 'rest', agent_name: 'rest-agent', conversation_mode: 'new' });
  const url = `${stack.server.base}${PREFIX}/kn/query_object_instance`;
  const managed = await post(url, { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1, bkn_context: { conversation_id: t.conversation_id, interaction_id: t.interaction_id } });
  assert.equal(managed.status, 200, managed.text);
  assert.equal(managed.json.datas.length, 1);
  assert.equal(managed.json.bkn_receipt, undefined); // REST: the receipt is in the headers
  const rid = managed.headers.get('bkn-receipt-id');
  const oid = managed.headers.get('bkn-operation-id');
  assert.match(rid || '', /^rcpt_/);
  assert.match(oid || '', /^op_/);
  assert.equal(managed.headers.get('bkn-trace-status'), null);
  let st = await traceState();
  const op = st.operations.find((o) => o.operation_id === oid);
  assert.ok(op, 'operation not recorded');
  assert.equal(op.receipt_id, rid);
  assert.equal(op.interaction_id, t.interaction_id);
  assert.equal(st.receipts.find((r) => r.receipt_id === rid).receipt_status, 'completed');

  const before = st.operations.length;
  for (const body of [{ kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 }, { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1, bkn_context: {} }]) {
    const adhoc = await post(url, body);
    assert.equal(adhoc.status, 200, adhoc.text);
    assert.equal(adhoc.headers.get('bkn-receipt-id'), null);
    assert.equal(adhoc.headers.get('bkn-operation-id'), null);
    assert.equal(adhoc.headers.get('bkn-trace-status'), null);
    assert.deepEqual(adhoc.json.datas, managed.json.datas);
  }
  st = await traceState();
  assert.equal(st.operations.length, before, 'an ad hoc read recorded an operation');
  okResult(await client.callTool({ name: 'bkn_finish_interaction', arguments: { interaction_id: t.interaction_id, outcome: 'completed', answer: 'rest done' } }));
});

// The refusals of start and finish name the field and the rule, in the response's
// language (the deployment's zh-CN, or Accept-Language).
const CJK = /[\u4e00-\u9fff]/;
const START_REFUSALS = [
  ['empty question', { question: '', agent_name: 'a', conversation_mode: 'new' }, ['question']],
  ['missing question', { agent_name: 'a', conversation_mode: 'new' }, ['question']],
  ['bad mode', { question: 'q', agent_name: 'a', conversation_mode: 'fresh' }, ['conversation_mode', 'new', 'continue']],
  ['extra field', { question: 'q', agent_name: 'a', conversation_mode: 'new', bkn_context: {} }, ['bkn_context', 'question, agent_name, conversation_mode, conversation_id']],
  ['new with an id', { question: 'q', agent_name: 'a', conversation_mode: 'new', conversation_id: 'conv_x' }, ['conversation_id', 'new']],
  ['continue without an id', { question: 'q', agent_name: 'a', conversation_mode: 'continue' }, ['conversation_id', 'continue']],
  ['long agent_name', { question: 'q', agent_name: 'a'.repeat(129), conversation_mode: 'new' }, ['agent_name', '128']],
];

test('start refusals name the field and the rule, in the language of the response', { skip: NO_SDK }, async () => {
  for (const [lang, client] of [['zh-CN', await connect()], ['en-US', await connect(TOKEN, { 'Accept-Language': 'en-US' })]]) {
    const messages = new Set();
    for (const [what, args, words] of START_REFUSALS) {
      const e = errorOf(await client.callTool({ name: 'bkn_start_interaction', arguments: args }));
      assert.equal(e.code, 'invalid_params', `${what}: ${JSON.stringify(e)}`);
      assert.equal(e.required_action, 'fix_arguments', what);
      assert.equal(e.retryable, false, what);
      for (const w of words) assert.ok(e.description.includes(w), `${lang} ${what}: "${e.description}" does not name ${w}`);
      assert.equal(CJK.test(e.description), lang === 'zh-CN', `${lang} ${what}: ${e.description}`);
      messages.add(e.description);
    }
    assert.equal(messages.size, START_REFUSALS.length, `${lang}: one message per rule: ${[...messages].join(' | ')}`);
  }
});

test('finish: completed without an answer is closure_manifest_invalid / fix_arguments; other refusals name the field', { skip: NO_SDK }, async () => {
  for (const [lang, client] of [['zh-CN', await connect()], ['en-US', await connect(TOKEN, { 'Accept-Language': 'en-US' })]]) {
    const t = await start(client, { question: 'q', agent_name: 'finish-agent', conversation_mode: 'new' });
    for (const args of [{ interaction_id: t.interaction_id, outcome: 'completed' }, { interaction_id: t.interaction_id, outcome: 'completed', answer: '' }]) {
      const e = errorOf(await client.callTool({ name: 'bkn_finish_interaction', arguments: args }));
      assert.equal(e.code, 'closure_manifest_invalid', JSON.stringify(e));
      assert.equal(e.required_action, 'fix_arguments');
      assert.equal(e.retryable, false);
      assert.ok(e.description.includes('answer'), e.description);
      assert.equal(CJK.test(e.description), lang === 'zh-CN', e.description);
    }
    for (const [args, words] of [
      [{ outcome: 'failed' }, ['interaction_id']],
      [{ interaction_id: t.interaction_id }, ['outcome', 'completed', 'handed_off']],
      [{ interaction_id: t.interaction_id, outcome: 'abandoned' }, ['outcome', 'handed_off']],
      [{ interaction_id: t.interaction_id, outcome: 'failed', note: 'x' }, ['note', 'interaction_id, outcome, answer, reason']],
      [{ interaction_id: t.interaction_id, outcome: 'failed', reason: 3 }, ['reason']],
    ]) {
      const e = errorOf(await client.callTool({ name: 'bkn_finish_interaction', arguments: args }));
      assert.equal(e.code, 'invalid_params', JSON.stringify(e));
      for (const w of words) assert.ok(e.description.includes(w), `${lang}: "${e.description}" does not name ${w}`);
      assert.equal(CJK.test(e.description), lang === 'zh-CN', e.description);
    }
    // the interaction is still active: a correct finish goes through
    okResult(await client.callTool({ name: 'bkn_finish_interaction', arguments: { interaction_id: t.interaction_id, outcome: 'completed', answer: 'done' } }));
  }
});

test('tools/list: lifecycle annotations and every parameter described in the listing language', { skip: NO_SDK }, async () => {
  for (const [lang, client] of [['zh-CN', await connect()], ['en-US', await connect(TOKEN, { 'Accept-Language': 'en-US' })]]) {
    const { tools } = await client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    const st = byName.bkn_start_interaction;
    const fin = byName.bkn_finish_interaction;
    // a repeated "new" start opens another conversation: not idempotent
    assert.equal(st.annotations.idempotentHint, false);
    assert.equal(fin.annotations.idempotentHint, true);
    for (const t of [st, fin]) {
      assert.equal(CJK.test(t.title), lang === 'zh-CN', t.title);
      assert.equal(CJK.test(t.description), lang === 'zh-CN', t.description);
      for (const [k, p] of Object.entries(t.inputSchema.properties)) {
        assert.equal(typeof p.description, 'string', `${t.name}.${k} has no description`);
        assert.equal(CJK.test(p.description), lang === 'zh-CN', `${lang} ${t.name}.${k}: ${p.description}`);
      }
    }
    for (const o of ['completed', 'failed', 'cancelled', 'handed_off']) assert.ok(fin.inputSchema.properties.outcome.description.includes(o), o);
    // bkn_context: every sub-field described, in the listing language
    const q = byName.query_object_instance.inputSchema.properties.bkn_context;
    for (const k of ['conversation_id', 'interaction_id', 'parent_operation_id', 'causation_event_ids', 'business_refs']) {
      assert.equal(typeof q.properties[k].description, 'string', `bkn_context.${k} has no description`);
      assert.equal(CJK.test(q.properties[k].description), lang === 'zh-CN', `${lang} bkn_context.${k}: ${q.properties[k].description}`);
    }
    const ref = q.properties.business_refs.items.properties;
    for (const k of ['ref_type', 'ref_id', 'version']) assert.equal(typeof ref[k].description, 'string', `business_refs[].${k} has no description`);
  }
});

test('a malformed host hint is refused naming the hint, in the language of the response (MCP and REST)', { skip: NO_SDK }, async () => {
  for (const [lang, client] of [['zh-CN', await connect()], ['en-US', await connect(TOKEN, { 'Accept-Language': 'en-US' })]]) {
    const e = errorOf(await client.callTool({ name: 'bkn_start_interaction', arguments: { question: 'q', agent_name: 'hint-agent', conversation_mode: 'new' }, _meta: { 'openbkn.ai/host-conversation-key': 'has space' } }));
    assert.equal(e.code, 'lifecycle_hint_invalid');
    assert.ok(e.description.includes('openbkn.ai/host-conversation-key'), e.description);
    assert.equal(CJK.test(e.description), lang === 'zh-CN', e.description);
    const r = await post(`${stack.server.base}${PREFIX}/kn/query_object_instance`, { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 },
      { 'X-OpenBKN-Client-Invocation-Id': 'has space', ...(lang === 'en-US' ? { 'accept-language': 'en-US' } : {}) });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.code, 'lifecycle_hint_invalid', r.text);
    assert.ok(r.json.description.includes('X-OpenBKN-Client-Invocation-Id'), r.text);
    assert.equal(CJK.test(r.json.description), lang === 'zh-CN', r.text);
  }
});
