// One error envelope on every route (docs/errors.md): every error carries retryable,
// retry_after_ms exactly when retryable (a real wait that agrees with Retry-After),
// a required_action where there is a next step, and no link placeholder; downstream
// errors keep a 4xx's meaning and the platform's code and text; upstream 5xx follow
// one mapping; an MCP tool error is the error object as the JSON of its one text block
// and carries no structuredContent.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, PREFIX } from './lib/stack.mjs';
import { hreq, client, toolError } from './lib/faultkit.mjs';

let plain; // capture disabled
let traced; // capture enabled (managed calls get receipts)
let A;
let T;

before(async () => {
  [plain, traced] = await Promise.all([
    startStack({ capture: 'disabled', env: { CL_LIMITS_MAX_BODY_BYTES: '4096' } }),
    startStack({ capture: 'enabled' }),
  ]);
  A = client(plain);
  T = client(traced);
});

after(async () => {
  const codes = [];
  if (plain) codes.push(await plain.stop());
  if (traced) codes.push(await traced.stop());
  assert.deepEqual(codes, codes.map(() => 0));
});

// The envelope rules every error object follows.
function assertEnvelope(e, { retryable, action, text = JSON.stringify(e) } = {}) {
  assert.equal(typeof e.code, 'string', text);
  assert.equal(typeof e.retryable, 'boolean', text);
  if (retryable !== undefined) assert.equal(e.retryable, retryable, text);
  if (e.retryable) assert.ok(Number.isInteger(e.retry_after_ms) && e.retry_after_ms > 0, `a real wait: ${text}`);
  else assert.equal('retry_after_ms' in e, false, `no wait when a retry cannot help: ${text}`);
  if (action !== undefined) assert.equal(e.required_action, action, text);
  assert.ok(!('link' in e) || !['', '无', 'None'].includes(e.link), `a link placeholder: ${text}`);
  if ('description' in e) {
    assert.ok(e.description.length > 0, text);
    assert.ok(e.solution.length > 0, text);
    assert.notEqual(e.solution, '请联系管理员', text);
    assert.notEqual(e.solution, 'Contact administrator', text);
  }
}

// The MCP tool error: the error object is the text block's JSON; no structuredContent
// (a client checks structuredContent against the tool's outputSchema, made for results).
function mcpError(r) {
  const e = toolError(r);
  assert.equal('structuredContent' in r.json.result, false, `structuredContent on an error: ${r.text}`);
  return e;
}

test('a not-found ot_id: 404 kept, the platform code and text, the next step names search_schema (REST and MCP)', async () => {
  const args = { kn_id: 'kn_medical', ot_id: 'ot_nope', limit: 1 };
  for (const lang of ['zh-CN', 'en-US']) {
    const r = await A.rest('query_object_instance', args, { headers: { 'accept-language': lang } });
    assert.equal(r.status, 404, r.text);
    assertEnvelope(r.json, { retryable: false, action: 'check_ids' });
    assert.equal(r.json.code, 'OntologyQuery.ObjectType.NotFound', r.text);
    assert.match(r.json.solution, /search_schema/);
    assert.match(r.json.solution, /ot_nope/);
    assert.equal(r.json.details.error_code, 'OntologyQuery.ObjectType.NotFound', 'the downstream body stays in details');
    assert.equal('link' in r.json, false, r.text);
  }
  const e = mcpError(await A.call('query_object_instance', args));
  assertEnvelope(e, { retryable: false, action: 'check_ids' });
  assert.equal(e.code, 'OntologyQuery.ObjectType.NotFound');
  assert.match(e.solution, /get_object_types/);
});

test('a not-found kn_id: the next step names list_knowledge_networks', async () => {
  const r = await A.rest('get_kn_detail', { kn_id: 'kn_nope' }, { headers: { 'accept-language': 'en-US' } });
  assert.equal(r.status, 404, r.text);
  assertEnvelope(r.json, { retryable: false, action: 'check_ids' });
  assert.match(r.json.solution, /list_knowledge_networks/);
  assert.match(r.json.solution, /kn_nope/);
});

test('a platform 403: the solution names the missing permission (REST and MCP)', async () => {
  const args = { kn_id: 'kn_medical', ot_id: 'ot_patient', limit: 1 };
  const r = await A.rest('query_object_instance', args, { token: 'demo-user2-token', headers: { 'accept-language': 'en-US' } });
  assert.equal(r.status, 403, r.text);
  assertEnvelope(r.json, { retryable: false, action: 'request_permission' });
  assert.match(r.json.solution, /query_data was not granted/, r.text);
  assert.ok(r.json.permission_guidance, r.text);
  const e = mcpError(await A.call('query_object_instance', args, { token: 'demo-user2-token' }));
  assert.match(e.solution, /query_data/);
  assert.ok(e.permission_guidance, 'permission_guidance reaches the MCP error too');
});

test('upstream 5xx follow one mapping across tools: 500 -> 502, 503 -> retryable 503', async () => {
  for (const [service, tool, args] of [
    ['ontology_query', 'query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 }],
    ['bkn_backend', 'list_knowledge_networks', {}],
  ]) {
    await A.fault({ service, status: 500 });
    try {
      const r = await A.rest(tool, args);
      assert.equal(r.status, 502, `${tool}: ${r.text}`);
      assert.equal(r.json.code, 'agentRetrieval.BadGateway.CommonExternalServerError', r.text);
      assert.equal(r.json.upstream_status, 500, r.text);
      assert.equal(r.json.upstream_code, 'Sim.InjectedFault', r.text);
      assert.match(r.json.description, /injected fault/, 'the upstream description is surfaced');
      assertEnvelope(r.json, { retryable: false, action: 'contact_administrator' });
      assertEnvelope(mcpError(await A.call(tool, args)), { retryable: false });
    } finally {
      await A.reset();
    }
    await A.fault({ service, status: 503 });
    try {
      const r = await A.rest(tool, args);
      assert.equal(r.status, 503, `${tool}: ${r.text}`);
      assert.equal(r.json.code, 'agentRetrieval.ServiceUnavailable.UpstreamUnavailable', r.text);
      assertEnvelope(r.json, { retryable: true, action: 'retry_later' });
      assertEnvelope(mcpError(await A.call(tool, args)), { retryable: true, action: 'retry_later' });
    } finally {
      await A.reset();
    }
  }
});

test('the MCP proxy route keeps a 4xx: a missing execute right is 403, an unknown server 404', async () => {
  const url = (mcp, tool) => `${plain.server.base}${PREFIX}/mcp/proxy/${mcp}/tools/${tool}/call`;
  const post = (u) => hreq(u, { body: {}, headers: { authorization: 'Bearer demo-user-token' } });
  const missing = await post(url('mcp_nope', 'ping'));
  assert.equal(missing.status, 404, missing.text);
  assertEnvelope(missing.json, { retryable: false, action: 'check_ids' });
  assert.match(missing.json.solution, /mcp_nope/);
  await A.fault({ service: 'operator_integration', status: 403, body: JSON.stringify({ error_code: 'Public.Forbidden', description: 'Permission denied', solution: 'Contact administrator', error_link: 'None', error_details: 'execute was not granted for mcp:mcp_k8s_ops' }) });
  try {
    const r = await post(url('mcp_k8s_ops', 'get_pod_logs'));
    assert.equal(r.status, 403, r.text);
    assertEnvelope(r.json, { retryable: false, action: 'request_permission' });
    assert.match(r.json.solution, /「mcp:mcp_k8s_ops」的 execute 权限/); // the permission the platform named, in zh-CN
    assert.equal('link' in r.json, false, 'error_link "None" is no link');
  } finally {
    await A.reset();
  }
});

test('invalid arguments: fix_arguments with the paths, on REST and MCP', async () => {
  const args = { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 'ten' };
  const r = await A.rest('query_object_instance', args);
  assert.equal(r.status, 400, r.text);
  assertEnvelope(r.json, { retryable: false, action: 'fix_arguments' });
  assert.equal('link' in r.json, false);
  assertEnvelope(mcpError(await A.call('query_object_instance', args)), { retryable: false, action: 'fix_arguments' });
});

test('HTTP-level errors carry the envelope rules: 401, 404, 405, 413, 415', async () => {
  const base = `${plain.server.base}${PREFIX}`;
  const auth = { authorization: 'Bearer demo-user-token' };
  const cases = [
    [401, 'refresh_token', hreq(`${base}/kn/list_knowledge_networks`, { body: {} })],
    [404, 'check_ids', hreq(`${base}/kn/no_such_tool`, { body: {}, headers: auth })],
    [405, 'fix_request', hreq(`${base}/kn/list_knowledge_networks`, { method: 'GET', headers: auth })],
    [413, 'fix_request', hreq(`${base}/kn/list_knowledge_networks`, { body: { name_pattern: 'x'.repeat(6000) }, headers: auth })],
    [415, 'fix_request', hreq(`${base}/kn/list_knowledge_networks`, { body: '{}', headers: { ...auth, 'content-type': 'text/plain' } })],
  ];
  for (const [status, action, p] of cases) {
    const r = await p;
    assert.equal(r.status, status, r.text);
    assertEnvelope(r.json, { retryable: false, action, text: `${status}: ${r.text}` });
    assert.equal(r.headers['retry-after'], undefined);
  }
});

test('a retryable gateway error: retry_after_ms and Retry-After say the same wait', async () => {
  await A.fault({ service: 'oauth', mode: 'close' });
  try {
    const r = await A.rest('list_knowledge_networks', {}, { token: 'demo-short-token' });
    assert.equal(r.status, 503, r.text);
    assertEnvelope(r.json, { retryable: true, action: 'retry_later' });
    assert.equal(Number(r.headers['retry-after']) * 1000, r.json.retry_after_ms);
  } finally {
    await A.reset();
  }
});

test('admin routes carry the envelope rules', async () => {
  const r = await hreq(`${plain.server.admin}/admin/reload`, { method: 'GET' });
  assert.equal(r.status, 405, r.text);
  assertEnvelope(r.json, { retryable: false, action: 'fix_request' });
});

test('a failed managed call: the error object in the text block, bkn_receipt one of its members', async () => {
  const s = await T.call('bkn_start_interaction', { question: 'q', agent_name: 'envelope-agent', conversation_mode: 'new' });
  assert.equal(s.json.result.isError, false, s.text);
  const { conversation_id, interaction_id } = s.json.result.structuredContent;
  const r = await T.call('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_nope', limit: 1, bkn_context: { conversation_id, interaction_id } });
  const e = mcpError(r);
  assert.equal(e.code, 'OntologyQuery.ObjectType.NotFound');
  assert.ok(e.bkn_receipt, r.text);
  assert.equal(e.result, undefined, 'no {"result":null} wrapper');
  // a lifecycle refusal on MCP: the same rules, no wait when not retryable
  const bad = await T.call('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', bkn_context: { conversation_id } });
  const env = mcpError(bad);
  assert.equal(env.code, 'interaction_required');
  assert.equal(env.retryable, false);
  assert.equal('retry_after_ms' in env, false);
});

test('bkn_context refusals speak the request language', async () => {
  const args = { kn_id: 'kn_medical', ot_id: 'ot_drug', bkn_context: { conversation_id: 'conv_x', bogus: 1 } };
  const zh = await T.rest('query_object_instance', args);
  assert.equal(zh.status, 400, zh.text);
  assert.equal(zh.json.code, 'invalid_business_context');
  assert.match(zh.json.description, /不支持的字段「bogus」/, zh.text);
  const en = await T.rest('query_object_instance', args, { headers: { 'accept-language': 'en-US' } });
  assert.match(en.json.description, /unsupported field 'bogus'/, en.text);
  const m = mcpError(await T.call('query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug' }));
  assert.equal(m.code, 'conversation_required');
  assert.match(m.description, /bkn_start_interaction/);
  assert.match(m.description, /[\u4e00-\u9fff]/, 'zh-CN by default');
});

test('trace_core_unavailable asks for a real wait, never 0 ms', async () => {
  await T.fault({ service: 'trace_core', mode: 'close' });
  try {
    const r = await T.call('bkn_start_interaction', { question: 'q', agent_name: 'envelope-agent', conversation_mode: 'new' }, { timeoutMs: 15000 });
    const env = mcpError(r);
    assert.equal(env.code, 'trace_core_unavailable', r.text);
    assert.equal(env.retryable, true);
    assert.ok(env.retry_after_ms > 0, r.text);
    assert.equal(env.required_action, 'retry_later');
  } finally {
    await T.reset();
  }
});
