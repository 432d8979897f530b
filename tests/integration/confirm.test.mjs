// A person confirms before execute_action changes anything (confirm.tools =
// execute_action): the stateless era asks with an input_required result and takes
// the answer on the retry (the v2 SDK's own multi-round-trip driver with an
// elicitation handler: accept runs the action once and has its receipt, decline
// runs nothing and Trace Core records the attempt as failed); a tampered, foreign,
// replayed or expired requestState is refused; a client that cannot ask gets a
// refusal naming the hosts that can; tools not named run as before.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startSimulator, startServer, ROOT, PREFIX } from './lib/stack.mjs';

const SDK2 = path.join(ROOT, 'build/ext/node_modules/@modelcontextprotocol/client/dist/index.mjs');
const NO_SDK2 = fs.existsSync(SDK2) ? false : `the v2 MCP SDK client is not installed (${SDK2}): run the test command's setup`;
const TOKEN = 'demo-user-token';
const V = '2026-07-28';
const META = {
  'io.modelcontextprotocol/protocolVersion': V,
  'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} } },
  'io.modelcontextprotocol/clientInfo': { name: 'confirm-test', version: '1.0.0' },
};
const ACTION = { kn_id: 'kn_ops', at_id: 'at_restart_pod', _instance_identities: [{ pod_ip: '192.168.1.1', id: 1 }, { pod_ip: '192.168.1.2', id: 2 }], dynamic_params: { grace_period_seconds: 7 } };

let sim, server, shortTtl;

before(async () => {
  sim = await startSimulator({ capture: 'enabled' });
  server = await startServer(sim.base, { env: { CL_CONFIRM_TOOLS: 'execute_action' } });
  shortTtl = await startServer(sim.base, { env: { CL_CONFIRM_TOOLS: 'execute_action', CL_CONFIRM_TTL_S: '1' } });
});

after(async () => {
  const codes = [];
  for (const s of [server, shortTtl]) if (s) codes.push(await s.stop());
  if (sim) await sim.stop();
  for (const c of codes) assert.equal(c, 0);
});

const mcpUrl = (s = server) => `${s.base}${PREFIX}/mcp`;

async function post(u, body, headers = {}) {
  const r = await fetch(u, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKEN}`, ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30000),
  });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, headers: r.headers, text, json };
}

let nextId = 1;
function modern(params, { meta = META, s = server } = {}) {
  const body = { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { ...params, _meta: meta } };
  return post(mcpUrl(s), body, { 'mcp-protocol-version': V, 'mcp-method': 'tools/call', 'mcp-name': params.name });
}

const simGet = async (p) => (await fetch(`${sim.base}${p}`, { signal: AbortSignal.timeout(5000) })).json();
const lastSeq = async () => (await simGet('/_sim/requests')).last_seq;
const executes = async (seq) => (await simGet(`/_sim/requests?since=${seq}&service=ontology_query`)).requests
  .filter((c) => c.path.endsWith('/action-types/at_restart_pod/execute'));
const traceOps = async (interaction) => (await simGet('/_sim/trace/state')).operations.filter((o) => o.interaction_id === interaction);

function errorOf(result) {
  assert.equal(result.isError, true, JSON.stringify(result));
  return JSON.parse(result.content[0].text);
}

// ---- the v2 SDK client: its own multi-round-trip driver ----

let sdk;
async function client(handler) {
  sdk ??= await import(pathToFileURL(SDK2).href);
  const transport = new sdk.StreamableHTTPClientTransport(new URL(mcpUrl()), { requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } } });
  const c = new sdk.Client({ name: 'confirm-test', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: V } } });
  if (handler) c.setRequestHandler('elicitation/create', handler);
  await c.connect(transport);
  return c;
}

async function startTurn(c) {
  const r = await c.callTool({ name: 'bkn_start_interaction', arguments: { question: 'Restart the failed pods', agent_name: 'confirm-agent', conversation_mode: 'new' } });
  assert.equal(r.isError, false, JSON.stringify(r));
  const s = r.structuredContent;
  return { conversation_id: s.conversation_id, interaction_id: s.interaction_id };
}

test('v2 SDK, modern: accept -> the action runs once and has its receipt; the question names what will happen', { skip: NO_SDK2 }, async () => {
  const asked = [];
  const c = await client(async (req) => { asked.push(req.params); return { action: 'accept', content: { confirm: true } }; });
  try {
    const ctx = await startTurn(c);
    const seq = await lastSeq();
    const r = await c.callTool({ name: 'execute_action', arguments: { ...ACTION, bkn_context: ctx } });
    assert.equal(r.isError, false, JSON.stringify(r));
    assert.match(r.structuredContent.execution_id, /\S/);
    assert.match(r.structuredContent.bkn_receipt.receipt_id, /^rcpt_/);
    assert.equal((await executes(seq)).length, 1);
    assert.equal(asked.length, 1);
    const q = asked[0];
    assert.equal(q.mode ?? 'form', 'form');
    assert.match(q.message, /2 (个实例|instance)/);
    for (const w of ['at_restart_pod', 'kn_ops', '192.168.1.1', '192.168.1.2', 'grace_period_seconds']) assert.ok(q.message.includes(w), `${w}: ${q.message}`);
    assert.equal(q.requestedSchema.properties.confirm.type, 'boolean');
  } finally {
    await c.close();
  }
});

test('v2 SDK, modern: decline -> nothing runs, a non-retryable result says so, Trace Core records the failed attempt', { skip: NO_SDK2 }, async () => {
  for (const [action, code] of [['decline', 'confirmation_declined'], ['cancel', 'confirmation_cancelled']]) {
    const c = await client(async () => ({ action }));
    try {
      const ctx = await startTurn(c);
      const seq = await lastSeq();
      const r = await c.callTool({ name: 'execute_action', arguments: { ...ACTION, bkn_context: ctx } });
      const e = errorOf(r);
      assert.equal(e.code, code);
      assert.equal(e.retryable, false);
      assert.equal(e.required_action, 'respect_decline');
      assert.deepEqual(await executes(seq), []);
      const ops = await traceOps(ctx.interaction_id);
      assert.equal(ops.length, 1, JSON.stringify(ops));
      assert.equal(ops[0].tool_name, 'execute_action');
      assert.match(JSON.stringify(ops[0]), /fail/i, JSON.stringify(ops[0]));
    } finally {
      await c.close();
    }
  }
});

test('v2 SDK, modern: a retry of an accepted call (same invocation id) is asked again and replays; it runs once', { skip: NO_SDK2 }, async () => {
  let asked = 0;
  const c = await client(async () => { asked++; return { action: 'accept', content: { confirm: true } }; });
  try {
    const ctx = await startTurn(c);
    const seq = await lastSeq();
    const params = { name: 'execute_action', arguments: { ...ACTION, bkn_context: ctx }, _meta: { 'openbkn.ai/client-invocation-id': `confirm-inv-${process.pid}` } };
    const a = await c.callTool(params);
    assert.equal(a.isError, false, JSON.stringify(a));
    const b = await c.callTool(params);
    assert.deepEqual(b.structuredContent, a.structuredContent);
    assert.equal(asked, 2);
    assert.equal((await executes(seq)).length, 1);
  } finally {
    await c.close();
  }
});

test('v2 SDK, modern: a call through execute_tool is judged as the call it makes', { skip: NO_SDK2 }, async () => {
  const asked = [];
  sdk ??= await import(pathToFileURL(SDK2).href);
  const transport = new sdk.StreamableHTTPClientTransport(new URL(`${server.base}${PREFIX}/mcp-compact`), { requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } } });
  const c = new sdk.Client({ name: 'confirm-test', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: V } } });
  c.setRequestHandler('elicitation/create', async (req) => { asked.push(req.params.message); return { action: 'decline' }; });
  await c.connect(transport);
  try {
    const ctx = await startTurn(c);
    const seq = await lastSeq();
    const r = await c.callTool({ name: 'execute_tool', arguments: { tool_id: 'execute_action', arguments: ACTION, bkn_context: ctx } });
    assert.equal(errorOf(r).code, 'confirmation_declined');
    assert.equal(asked.length, 1);
    assert.match(asked[0], /at_restart_pod/);
    assert.deepEqual(await executes(seq), []);
  } finally {
    await c.close();
  }
});

// ---- raw stateless requests: the state ----

async function ask(args) {
  const r = await modern({ name: 'execute_action', arguments: args });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.result.resultType, 'input_required', r.text);
  const ir = r.json.result.inputRequests.confirm;
  assert.equal(ir.method, 'elicitation/create');
  assert.match(r.json.result.requestState, /^cs1\./);
  return r.json.result.requestState;
}

const ACCEPT = { confirm: { action: 'accept', content: { confirm: true } } };

function refused(r, code) {
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.error?.code, -32602, r.text);
  assert.equal(r.json.error.data.code, code, r.text);
}

test('modern: a tampered, foreign or replayed requestState is refused precisely; nothing runs', async () => {
  const c = await client(null);
  let ctx;
  try { ctx = await startTurn(c); } finally { await c.close(); }
  const args = { ...ACTION, bkn_context: ctx };
  const state = await ask(args);
  const seq = await lastSeq();
  const flip = state.slice(0, -1) + (state.endsWith('0') ? '1' : '0');
  refused(await modern({ name: 'execute_action', arguments: args, inputResponses: ACCEPT, requestState: flip }), 'confirmation_state_invalid');
  refused(await modern({ name: 'execute_action', arguments: args, inputResponses: ACCEPT, requestState: 'nonsense' }), 'confirmation_state_invalid');
  // the state is bound to the arguments
  refused(await modern({ name: 'execute_action', arguments: { ...args, dynamic_params: { grace_period_seconds: 0 } }, inputResponses: ACCEPT, requestState: state }), 'confirmation_state_invalid');
  // and to the caller
  const other = await post(mcpUrl(), { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name: 'execute_action', arguments: args, inputResponses: ACCEPT, requestState: state, _meta: META } },
    { 'mcp-protocol-version': V, 'mcp-method': 'tools/call', 'mcp-name': 'execute_action', authorization: 'Bearer demo-app-token' });
  refused(other, 'confirmation_state_invalid');
  assert.deepEqual(await executes(seq), []);
  // the genuine answer runs it once; the same state again is a replay
  const ok = await modern({ name: 'execute_action', arguments: args, inputResponses: ACCEPT, requestState: state });
  assert.equal(ok.json.result?.isError, false, ok.text);
  assert.equal(ok.json.result.resultType, 'complete');
  refused(await modern({ name: 'execute_action', arguments: args, inputResponses: ACCEPT, requestState: state }), 'confirmation_state_used');
  assert.equal((await executes(seq)).length, 1);
  // a retry without an answer asks again
  const again = await modern({ name: 'execute_action', arguments: args, requestState: await ask(args) });
  assert.equal(again.json.result.resultType, 'input_required', again.text);
});

test('modern: an expired requestState is refused', async () => {
  const r = await modern({ name: 'execute_action', arguments: ACTION }, { s: shortTtl });
  const state = r.json.result.requestState;
  await new Promise((res) => setTimeout(res, 2200));
  refused(await modern({ name: 'execute_action', arguments: ACTION, inputResponses: ACCEPT, requestState: state }, { s: shortTtl }), 'confirmation_state_expired');
});

test('modern without the elicitation capability -> 400 -32021 naming the hosts that can confirm', async () => {
  const meta = { ...META, 'io.modelcontextprotocol/clientCapabilities': {} };
  const seq = await lastSeq();
  const r = await modern({ name: 'execute_action', arguments: ACTION }, { meta });
  assert.equal(r.status, 400, r.text);
  assert.equal(r.json.error.code, -32021);
  assert.deepEqual(r.json.error.data.requiredCapabilities, { elicitation: {} });
  assert.equal(r.json.error.data.code, 'confirmation_unavailable');
  assert.match(r.json.error.message, /elicitation/);
  assert.deepEqual(await executes(seq), []);
});

test('legacy session without elicitation -> a non-retryable refusal; tools not named run as before', async () => {
  const init = await post(mcpUrl(), { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'confirm-legacy', version: '1' } } });
  const h = { 'mcp-session-id': init.headers.get('mcp-session-id') };
  const seq = await lastSeq();
  const r = await post(mcpUrl(), { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'execute_action', arguments: ACTION } }, h);
  const e = errorOf(r.json.result);
  assert.equal(e.code, 'confirmation_unavailable');
  assert.equal(e.retryable, false);
  assert.equal(e.required_action, 'confirm_by_person');
  assert.match(e.description + e.solution, /elicitation/);
  assert.deepEqual(await executes(seq), []);
  const list = await post(mcpUrl(), { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'list_knowledge_networks', arguments: {} } }, h);
  assert.notEqual(JSON.parse(list.json.result.content[0].text).code, 'confirmation_unavailable');
});

// ---- the session era with the elicitation capability ----

async function legacyClient(handler) {
  sdk ??= await import(pathToFileURL(SDK2).href);
  const transport = new sdk.StreamableHTTPClientTransport(new URL(mcpUrl()), { requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } } });
  const c = new sdk.Client({ name: 'confirm-legacy', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: 'legacy' } });
  c.setRequestHandler('elicitation/create', handler);
  await c.connect(transport);
  assert.notEqual(c.getProtocolEra?.(), 'modern');
  return c;
}

test('v2 SDK, session era with elicitation: accept runs once with its receipt; decline and cancel run nothing', { skip: NO_SDK2 }, async () => {
  const asked = [];
  let answer = { action: 'accept', content: { confirm: true } };
  const c = await legacyClient(async (req) => { asked.push(req.params); return answer; });
  try {
    const ctx = await startTurn(c);
    let seq = await lastSeq();
    const r = await c.callTool({ name: 'execute_action', arguments: { ...ACTION, bkn_context: ctx } });
    assert.equal(r.isError, false, JSON.stringify(r));
    assert.match(r.structuredContent.bkn_receipt.receipt_id, /^rcpt_/);
    assert.equal((await executes(seq)).length, 1);
    assert.equal(asked.length, 1);
    for (const w of ['at_restart_pod', 'kn_ops', '192.168.1.2']) assert.ok(asked[0].message.includes(w), asked[0].message);
    for (const [action, code] of [['decline', 'confirmation_declined'], ['cancel', 'confirmation_cancelled']]) {
      answer = { action };
      seq = await lastSeq();
      const d = await c.callTool({ name: 'execute_action', arguments: { ...ACTION, bkn_context: ctx } });
      const e = errorOf(d);
      assert.equal(e.code, code);
      assert.equal(e.retryable, false);
      assert.deepEqual(await executes(seq), []);
    }
  } finally {
    await c.close();
  }
});

// The question read off the call's own stream, the answer POSTed by hand.
async function legacyAsk(sessionId, id, args) {
  const res = await fetch(mcpUrl(), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKEN}`, 'mcp-session-id': sessionId },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'execute_action', arguments: args } }),
  });
  assert.equal(res.headers.get('content-type')?.split(';')[0], 'text/event-stream');
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let text = '';
  const events = async (want) => {
    for (;;) {
      const msgs = text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
      if (msgs.length >= want) return msgs;
      const { value, done } = await reader.read();
      if (done) return msgs;
      text += dec.decode(value, { stream: true });
    }
  };
  const [q] = await events(1);
  assert.equal(q.method, 'elicitation/create', JSON.stringify(q));
  assert.match(q.id, /^confirm-[0-9a-f]{32}$/);
  return { q, final: async () => (await events(2))[1] };
}

test('session era with elicitation: forged answers (another id, another caller) are ignored; the answer is taken once', async () => {
  const init = await post(mcpUrl(), { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: { elicitation: {} }, clientInfo: { name: 'confirm-raw', version: '1' } } });
  const sid = init.headers.get('mcp-session-id');
  const start = await post(mcpUrl(), { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'bkn_start_interaction', arguments: { question: 'Restart', agent_name: 'confirm-raw', conversation_mode: 'new' } } }, { 'mcp-session-id': sid });
  const s = start.json.result.structuredContent;
  const seq = await lastSeq();
  const { q, final } = await legacyAsk(sid, 7, { ...ACTION, bkn_context: { conversation_id: s.conversation_id, interaction_id: s.interaction_id } });
  const reply = (id, result, token = TOKEN) => post(mcpUrl(), { jsonrpc: '2.0', id, result }, { 'mcp-session-id': sid, authorization: `Bearer ${token}` });
  const yes = { action: 'accept', content: { confirm: true } };
  assert.equal((await reply(`confirm-${'0'.repeat(32)}`, yes)).status, 202);
  assert.equal((await reply(q.id, yes, 'demo-app-token')).status, 202);
  await new Promise((r) => setTimeout(r, 600));
  assert.deepEqual(await executes(seq), []);
  assert.equal((await reply(q.id, { action: 'decline' })).status, 202);
  const f = await final();
  assert.equal(f.id, 7);
  assert.equal(JSON.parse(f.result.content[0].text).code, 'confirmation_declined');
  // too late: the question is closed, a later accept runs nothing
  assert.equal((await reply(q.id, yes)).status, 202);
  await new Promise((r) => setTimeout(r, 600));
  assert.deepEqual(await executes(seq), []);
});

// ---- what the deployment shows ----

test('/mcp/info and the catalogue page say which tools a person confirms', async () => {
  const info = `${server.base}${PREFIX}/mcp/info`;
  const doc = await (await fetch(info, { headers: { authorization: `Bearer ${TOKEN}`, 'accept-language': 'en-US' } })).json();
  assert.deepEqual(doc.confirmation.tools, ['execute_action']);
  assert.deepEqual(doc.confirmation.rules, ['execute_action']);
  assert.match(doc.confirmation.description, /elicitation/);
  const html = await (await fetch(info, { headers: { authorization: `Bearer ${TOKEN}`, accept: 'text/html', 'accept-language': 'en-US' } })).text();
  const article = html.slice(html.indexOf('id="tool-execute_action"'));
  assert.match(article.slice(0, article.indexOf('</article>')), /class="confirm"><strong>A person confirms/);
  const other = html.slice(html.indexOf('id="tool-query_object_instance"'));
  assert.doesNotMatch(other.slice(0, other.indexOf('</article>')), /class="confirm"/);
});

// ---- REST: 428 with a token to send back ----

test('REST: 428 with the question and a token; the token runs it once; decline runs nothing; a changed call or a reused token is refused', async () => {
  const c = await client(null);
  let ctx;
  try { ctx = await startTurn(c); } finally { await c.close(); }
  const rest = (body, headers = {}) => post(`${server.base}${PREFIX}/kn/execute_action`, body, headers);
  const args = { ...ACTION, bkn_context: ctx };
  const seq = await lastSeq();
  const q = await rest(args, { 'accept-language': 'en-US' });
  assert.equal(q.status, 428, q.text);
  assert.equal(q.json.code, 'confirmation_required');
  assert.equal(q.json.retryable, false);
  assert.equal(q.json.required_action, 'confirm_by_person');
  assert.match(q.json.details.question, /at_restart_pod.*kn_ops/);
  assert.equal(q.json.details.header, 'X-OpenBKN-Confirmation');
  const token = q.json.details.confirmation_token;
  // bound to the arguments: the same token on another call is refused
  const changed = await rest({ ...args, dynamic_params: { grace_period_seconds: 0 } }, { 'x-openbkn-confirmation': token });
  assert.equal(changed.status, 400, changed.text);
  assert.equal(changed.json.code, 'confirmation_state_invalid');
  // a query parameter cannot move the call elsewhere either
  const moved = await post(`${server.base}${PREFIX}/kn/execute_action?at_id=at_other`, (({ at_id, ...rest }) => rest)(args), { 'x-openbkn-confirmation': token });
  assert.equal(moved.status, 400, moved.text);
  assert.deepEqual(await executes(seq), []);
  const ok = await rest(args, { 'x-openbkn-confirmation': token });
  assert.equal(ok.status, 200, ok.text);
  assert.match(ok.headers.get('bkn-receipt-id') || '', /^rcpt_/);
  const again = await rest(args, { 'x-openbkn-confirmation': token });
  assert.equal(again.status, 409, again.text);
  assert.equal(again.json.code, 'confirmation_state_used');
  assert.equal((await executes(seq)).length, 1);
  // decline
  const t2 = (await rest(args)).json.details.confirmation_token;
  const seq2 = await lastSeq();
  const d = await rest(args, { 'x-openbkn-confirmation': t2, 'x-openbkn-confirmation-answer': 'decline' });
  assert.equal(d.status, 409, d.text);
  assert.equal(d.json.code, 'confirmation_declined');
  assert.deepEqual(await executes(seq2), []);
  const t3 = (await rest(args)).json.details.confirmation_token;
  const bad = await rest(args, { 'x-openbkn-confirmation': t3, 'x-openbkn-confirmation-answer': 'maybe' });
  assert.equal(bad.status, 400, bad.text);
  assert.equal(bad.json.code, 'confirmation_answer_invalid');
  // execute_tool on REST is judged as the call it makes
  const via = await post(`${server.base}${PREFIX}/kn/execute_tool`, { tool_id: 'execute_action', arguments: ACTION, bkn_context: ctx });
  assert.equal(via.status, 428, via.text);
  assert.match(via.json.details.question, /at_restart_pod/);
  assert.deepEqual(await executes(seq2), []);
});
