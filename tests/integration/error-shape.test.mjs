// One error object and one required_action vocabulary across MCP (/mcp, /mcp-compact)
// and REST, whoever refuses (the HTTP layer, the connection guard, the bkn_context
// guard, the lifecycle tools, Trace Core, a tool, an upstream), and every text an agent
// reads in the response language: this test walks the codes of docs/errors.md it can
// provoke under zh-CN (the default) and checks each error object's members, its token
// against the vocabulary table of docs/errors.md, and that its description, solution
// and any details the gateway writes itself hold no English sentence. Downstream
// bodies and Trace Core's own message (details.message) may stay as their authors
// wrote them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startSimulator, startServer, ROOT, PREFIX } from './lib/stack.mjs';
import { session } from './lib/mcp-session.mjs';
import { exchange, parseResponses } from './lib/raw.mjs';

const DOC = fs.readFileSync(path.join(ROOT, 'docs/errors.md'), 'utf8');
const section = (title) => DOC.slice(DOC.indexOf(title), DOC.indexOf('\n## ', DOC.indexOf(title) + 1));
const VOCAB = new Set([...section('## Next steps').matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]));
const CODES = new Set([...DOC.slice(DOC.indexOf('## Codes')).matchAll(/^\| `([A-Za-z_.]+)` \|/gm)].map((m) => m[1]));
const MEMBERS = ['code', 'description', 'solution', 'link', 'details', 'retryable', 'retry_after_ms', 'required_action',
  'permission_guidance', 'upstream_status', 'upstream_code', 'incident_id', 'current_status', 'current_interaction_id',
  'request_id', 'bkn_receipt'];
// Codes of docs/errors.md this test does not provoke, and why.
const NOT_HERE = {
  'Public.NotAcceptable': 'MCP answers a bad Accept with a JSON-RPC error (a protocol fault, read by the client library)',
  'Public.RequestTimeout': 'needs a client that stalls past the read timeout (framing.test.mjs)',
  'Public.Conflict': 'no gateway route answers a bare 409',
  'Public.UnprocessableEntity': 'no gateway route answers a bare 422',
  'Public.TooManyRequests': 'no gateway route answers a bare 429',
  'Public.TooManyRequests.CallsInFlight': 'needs calls held in flight (limits.test.mjs)',
  'Public.InternalServerError': 'needs a raising tool (hostile.test.mjs)',
  'Public.InternalServerError.InfoBuildFailed': 'needs a broken tool generation',
  'Public.InternalServerError.PageRenderFailed': 'needs a broken page.lua (page.test.mjs)',
  'Public.BadGateway': 'no gateway route answers a bare 502',
  'Public.ServiceUnavailable': 'no gateway route answers a bare 503',
  'Public.ServiceUnavailable.ShuttingDown': 'needs a draining server (lifecycle.test.mjs)',
  'Public.ServiceUnavailable.TooManyConnections': 'needs the connection cap reached (limits.test.mjs)',
  'Public.GatewayTimeout': 'no gateway route answers a bare 504',
  'agentRetrieval.InternalServerError.DynamicParamsGenerationFailed': 'needs a failing model service',
  'agentRetrieval.InternalServerError.PTCToolkitBuildFailed': 'needs a broken toolkit build',
  nonzero_exit: 'needs the PTC sandbox (ptc.test.mjs)',
  tool_error: 'needs a tool returning a bare message',
  in_progress: 'needs a duplicate still running after idempotency.wait_ms',
  operation_already_executed: 'needs a lost idempotency record (idempotency-gone.test.mjs)',
  operation_outcome_unknown: 'needs an instance stopped mid-call',
  receipt_pending: 'needs a concurrent claimant of the Operation',
  state_store_unavailable: 'needs Redis stopped (scaleout.test.mjs)',
  permission_denied: 'needs a principal without tenant',
  confirmation_answer_invalid: 'the confirmation flow: confirm.tools and a person answering (confirm.test.mjs)',
  confirmation_required: 'the confirmation flow: confirm.tools and a person answering (confirm.test.mjs)',
  confirmation_unavailable: 'the confirmation flow: confirm.tools and a person answering (confirm.test.mjs)',
  confirmation_declined: 'the confirmation flow: confirm.tools and a person answering (confirm.test.mjs)',
  confirmation_cancelled: 'the confirmation flow: confirm.tools and a person answering (confirm.test.mjs)',
  confirmation_state_invalid: 'the confirmation flow: confirm.tools and a person answering (confirm.test.mjs)',
  confirmation_state_expired: 'the confirmation flow: confirm.tools and a person answering (confirm.test.mjs)',
  confirmation_state_used: 'the confirmation flow: confirm.tools and a person answering (confirm.test.mjs)',
  confirmation_answer_invalid: 'the confirmation flow: confirm.tools and a person answering (confirm.test.mjs)',
  conversation_not_found: 'the simulated Trace Core answers resource_not_disclosed',
  conversation_closed: 'the simulated Trace Core closes no conversation',
  conversation_expired: 'needs a conversation past its TTL',
  conversation_owner_mismatch: 'the simulated Trace Core answers resource_not_disclosed',
  agent_name_invalid: 'the gateway checks agent_name first (invalid_params)',
  operation_required: 'needs an interaction past 128 operations',
  authorization_unavailable: 'needs an injected Trace Core code',
  internal_error: 'needs an injected Trace Core code',
};

let sim;
let server; // capture enabled, a 4 KiB body limit
let bare; // no Trace Core
const seen = new Map(); // code -> [where]

before(async () => {
  sim = await startSimulator({ capture: 'enabled' });
  [server, bare] = await Promise.all([
    startServer(sim.base, { env: { CL_LIMITS_MAX_BODY_BYTES: '4096' } }),
    startServer(sim.base, { env: { BKN_TRACE_CORE_URL: '' } }),
  ]);
});

after(async () => {
  const codes = [];
  for (const s of [server, bare]) if (s) codes.push(await s.stop());
  if (sim) await sim.stop();
  assert.deepEqual(codes, codes.map(() => 0));
});

const CJK = /[\u4e00-\u9fff]/;
// An English sentence: three words of letters in a row (identifiers with _ . / - or
// digits, and the product name, are not words of a sentence).
function english(text) {
  const t = String(text).replace(/BKN Trace Core/g, '').replace(/[A-Za-z0-9]*[_./{}<>:-][A-Za-z0-9_./{}<>:-]*/g, ' ');
  return /\b[A-Za-z]{2,} +[A-Za-z]{2,} +[A-Za-z]{2,}\b/.test(t);
}

// The checks every error object passes; where: where it came from. own: the gateway
// wrote details itself (a string, or [{path, message}]).
function check(e, where, { own = true } = {}) {
  const text = `${where}: ${JSON.stringify(e)}`;
  assert.equal(typeof e, 'object', text);
  assert.ok(!('error' in e) && !('message' in e), `no wrapper, no message: ${text}`);
  for (const k of Object.keys(e)) assert.ok(MEMBERS.includes(k), `unknown member ${k}: ${text}`);
  assert.equal(typeof e.code, 'string', text);
  assert.ok(typeof e.description === 'string' && e.description.length > 0, text);
  assert.ok(typeof e.solution === 'string' && e.solution.length > 0, text);
  assert.equal(typeof e.retryable, 'boolean', text);
  if (e.retryable) assert.ok(Number.isInteger(e.retry_after_ms) && e.retry_after_ms > 0, text);
  else assert.equal('retry_after_ms' in e, false, text);
  assert.ok(VOCAB.has(e.required_action), `required_action ${e.required_action} is not in the vocabulary: ${text}`);
  // zh-CN: no English sentence in what the agent reads
  assert.match(e.description, CJK, `description in zh-CN: ${text}`);
  assert.ok(!english(e.description), `English in description: ${text}`);
  assert.match(e.solution, CJK, `solution in zh-CN: ${text}`);
  assert.ok(!english(e.solution), `English in solution: ${text}`);
  if (own && typeof e.details === 'string' && e.details) assert.ok(!english(e.details), `English in details: ${text}`);
  if (own && Array.isArray(e.details)) for (const d of e.details) if (d?.message) assert.ok(!english(d.message), `English in details: ${text}`);
  if (!seen.has(e.code)) seen.set(e.code, []);
  seen.get(e.code).push(where);
  return e;
}

function mcpError(r, where, opts) {
  assert.equal(r.result?.isError, true, `${where}: ${JSON.stringify(r)}`);
  assert.equal(r.result.structuredContent, undefined, where);
  return check(JSON.parse(r.result.content[0].text), `MCP ${where}`, opts);
}

async function rest(srv, tool, body, headers = {}, token = 'demo-user-token') {
  const r = await fetch(`${srv.base}${PREFIX}/kn/${tool}`, {
    method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
    signal: AbortSignal.timeout(15000),
  });
  return { status: r.status, json: await r.json() };
}
async function restError(srv, tool, body, status, where, headers, token, opts) {
  const r = await rest(srv, tool, body, headers, token);
  assert.equal(r.status, status, `${where}: ${JSON.stringify(r.json)}`);
  return check(r.json, `REST ${where}`, opts);
}
async function raw(srv, text, status, where) {
  const port = Number(new URL(srv.base).port);
  const [res] = parseResponses((await exchange(port, text)).data);
  assert.equal(res?.status, status, `${where}: ${JSON.stringify(res)}`);
  return check(JSON.parse(res.body), `HTTP ${where}`);
}
const fault = (spec) => fetch(`${sim.base}/_sim/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(spec) });

async function turn(s, agent = 'shape-agent') {
  const r = await s.call('bkn_start_interaction', { question: 'q', agent_name: agent, conversation_mode: 'new' });
  assert.equal(r.result.isError, false, JSON.stringify(r));
  return { conversation_id: r.result.structuredContent.conversation_id, interaction_id: r.result.structuredContent.interaction_id };
}

test('the HTTP layer and the connection guard', async () => {
  const p = `${PREFIX}/kn/get_kn_detail`;
  await raw(server, `POST ${PREFIX}/nope HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer demo-user-token\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`, 404, 'no such route');
  await raw(server, `POST ${p} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`, 401, 'no token');
  await raw(server, `GET ${p} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer demo-user-token\r\nConnection: close\r\n\r\n`, 405, 'GET on a tool');
  await raw(server, `POST ${p} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer demo-user-token\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`, 415, 'text/plain');
  await raw(server, `POST ${p} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer demo-user-token\r\nContent-Type: application/json\r\nContent-Length: 5\r\nConnection: close\r\n\r\n{"a":`, 400, 'bad JSON');
  await raw(server, `POST ${p} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer demo-user-token\r\nContent-Type: application/json\r\nContent-Length: 5000\r\nConnection: close\r\n\r\n`, 413, 'body over the limit');
  await raw(server, `POST ${p} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer demo-user-token\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\nConnection: close\r\n\r\n`, 501, 'transfer coding');
  await raw(server, `GET /${'a'.repeat(20000)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, 414, 'long target');
  await raw(server, `GET / HTTP/2.0\r\nHost: x\r\nConnection: close\r\n\r\n`, 505, 'HTTP/2.0');
  await raw(server, `POST ${p} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer demo-user-token\r\nContent-Type: application/json\r\nExpect: 200-ok\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`, 417, 'Expect');
  await raw(server, `POST ${PREFIX}/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://evil.example\r\nAuthorization: Bearer demo-user-token\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`, 403, 'Origin');
  assert.equal((await fault({ service: 'oauth', status: 503, count: 10 })).status, 200);
  try {
    await restError(server, 'get_kn_detail', { kn_id: 'kn_medical' }, 503, 'introspection down', {}, 'never-seen-token');
  } finally {
    await fetch(`${sim.base}/_sim/reset`, { method: 'POST' });
  }
});

test('tools and upstreams, on REST and both MCP surfaces', async () => {
  const full = await session(server.mcpUrl);
  const compact = await session(`${server.base}${PREFIX}/mcp-compact`);
  for (const [s, name] of [[full, '/mcp'], [compact, '/mcp-compact']]) {
    const T = await turn(s);
    mcpError(await s.call('get_kn_detail', { kn_id: 'kn_medical', bogus: 1, bkn_context: T }), `${name} bad arguments`);
    mcpError(await s.call('get_kn_detail', { kn_id: 'kn_nope', bkn_context: T }), `${name} unknown kn`, { own: false });
    mcpError(await s.call('execute_tool', { tool_id: 'no_such_tool', arguments: {}, bkn_context: T }), `${name} unknown tool`);
    mcpError(await s.call('list_knowledge_networks', { response_format: 'xml', bkn_context: T }), `${name} bad response_format`);
  }
  const u2 = await session(server.mcpUrl, { authorization: 'Bearer demo-user2-token' });
  mcpError(await u2.call('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_patient', limit: 1, bkn_context: await turn(u2, 'u2') }), 'platform 403', { own: false });
  const T = await turn(full);
  for (const [status, code] of [[500, 'agentRetrieval.BadGateway.CommonExternalServerError'], [503, 'agentRetrieval.ServiceUnavailable.UpstreamUnavailable'], [504, 'agentRetrieval.GatewayTimeout.UpstreamTimeout']]) {
    assert.equal((await fault({ service: 'bkn_backend', status, count: 1 })).status, 200);
    const e = mcpError(await full.call('get_kn_detail', { kn_id: 'kn_medical', bkn_context: T }), `upstream ${status}`, { own: false });
    assert.equal(e.code, code);
  }
  await restError(server, 'get_kn_detail', { kn_id: 'kn_medical', bogus: 1 }, 400, 'bad arguments');
  await restError(server, 'get_kn_detail', { kn_id: 'kn_nope' }, 404, 'unknown kn', {}, undefined, { own: false });
  await restError(server, 'query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_patient', limit: 1 }, 403, 'platform 403', {}, 'demo-user2-token', { own: false });
});

test('the bkn_context guard and the call lifecycle, on REST and MCP', async () => {
  const s = await session(server.mcpUrl);
  const A = await turn(s);
  const Q = { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 };
  const cases = [
    [undefined, 'conversation_required', 400],
    [{ conversation_id: A.conversation_id }, 'interaction_required', 400],
    [{ ...A, bogus: 1 }, 'invalid_business_context', 400],
    [{ ...A, business_refs: [{ ref_type: 'planet', ref_id: 'planet:kn_medical:x' }] }, 'invalid_business_ref', 400],
    [{ conversation_id: `conv_${'0'.repeat(32)}`, interaction_id: `int_${'0'.repeat(32)}` }, 'resource_not_disclosed', 404],
  ];
  for (const [ctx, code, status] of cases) {
    assert.equal(mcpError(await s.call('query_object_instance', { ...Q, ...(ctx ? { bkn_context: ctx } : {}) }), code).code, code);
    assert.equal((await restError(server, 'execute_action', { kn_id: 'kn_ops', at_id: 'at_restart_pod', ...(ctx ? { bkn_context: ctx } : {}) }, status, code)).code, code);
  }
  assert.equal(mcpError(await s.call('query_object_instance', { ...Q, bkn_context: A }, { 'openbkn.ai/client-invocation-id': 'has space' }), 'hint').code, 'lifecycle_hint_invalid');
  await restError(server, 'query_object_instance', { ...Q, bkn_context: A }, 400, 'hint', { 'x-openbkn-client-invocation-id': 'has space' });
  const id = `shape-${process.pid}`;
  assert.equal((await s.call('query_object_instance', { ...Q, bkn_context: A }, { 'openbkn.ai/client-invocation-id': id })).result.isError, false);
  assert.equal(mcpError(await s.call('query_object_instance', { ...Q, limit: 2, bkn_context: A }, { 'openbkn.ai/client-invocation-id': id }), 'reused id').code, 'idempotency_conflict');
  const fin = await s.call('bkn_finish_interaction', { interaction_id: A.interaction_id, outcome: 'completed', answer: 'a' });
  assert.equal(fin.result.isError, false);
  assert.equal(mcpError(await s.call('query_object_instance', { ...Q, bkn_context: A }), 'finished').code, 'interaction_terminal');
  await restError(server, 'query_object_instance', { ...Q, bkn_context: A }, 409, 'finished');
  // no Trace Core in this deployment
  const b = await session(bare.mcpUrl);
  assert.equal(mcpError(await b.call('bkn_start_interaction', { question: 'q', agent_name: 'a', conversation_mode: 'new' }), 'not installed').code, 'feature_not_installed');
});

test('the lifecycle tools and Trace Core\'s own refusals', async () => {
  const s = await session(server.mcpUrl);
  const codes = [];
  const e = async (name, args, meta) => codes.push(mcpError(await s.call(name, args, meta), name).code);
  await e('bkn_start_interaction', { question: 'q' });
  await e('bkn_finish_interaction', { interaction_id: `int_${'0'.repeat(32)}`, outcome: 'completed' });
  const done = await turn(s, 'pinned-agent');
  assert.equal((await s.call('bkn_finish_interaction', { interaction_id: done.interaction_id, outcome: 'failed' })).result.isError, false);
  await e('bkn_finish_interaction', { interaction_id: done.interaction_id, outcome: 'completed', answer: 'a' }); // gateway's check
  await e('bkn_finish_interaction', { interaction_id: done.interaction_id, outcome: 'cancelled' }); // Trace Core's
  await e('bkn_start_interaction', { question: 'q', agent_name: 'another-agent', conversation_mode: 'continue', conversation_id: done.conversation_id });
  const active = await turn(s);
  await e('bkn_start_interaction', { question: 'q', agent_name: 'shape-agent', conversation_mode: 'continue', conversation_id: active.conversation_id });
  const id = `start-${process.pid}`;
  assert.equal((await s.call('bkn_start_interaction', { question: 'one', agent_name: 'a', conversation_mode: 'new' }, { 'openbkn.ai/client-invocation-id': id })).result.isError, false);
  await e('bkn_start_interaction', { question: 'two', agent_name: 'a', conversation_mode: 'new' }, { 'openbkn.ai/client-invocation-id': id });
  await e('bkn_start_interaction', { question: 'q', agent_name: 'a', conversation_mode: 'continue', conversation_id: `conv_${'0'.repeat(32)}` });
  assert.deepEqual(codes, ['invalid_params', 'closure_manifest_invalid', 'terminal_conflict', 'terminal_conflict', 'agent_name_conflict',
    'interaction_in_progress', 'idempotency_conflict', 'resource_not_disclosed']);
});

// Last: the outage verdict stays cached for a while.
test('Trace Core unreachable, then every provokable code of docs/errors.md was walked', async () => {
  const s = await session(server.mcpUrl);
  assert.equal((await fault({ service: 'trace_core', mode: 'close' })).status, 200);
  try {
    assert.equal(mcpError(await s.call('bkn_start_interaction', { question: 'q', agent_name: 'a', conversation_mode: 'new' }), 'Trace Core down').code, 'trace_core_unavailable');
  } finally {
    await fetch(`${sim.base}/_sim/reset`, { method: 'POST' });
  }
  for (const c of seen.keys()) assert.ok(CODES.has(c) || /^[A-Z][A-Za-z]+\.[A-Za-z.]+$/.test(c), `${c} is emitted but not in docs/errors.md`);
  const missing = [...CODES].filter((c) => !seen.has(c) && !(c in NOT_HERE));
  assert.deepEqual(missing, [], 'codes of docs/errors.md neither provoked here nor listed in NOT_HERE');
});
