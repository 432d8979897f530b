// permission_guidance: a 403 from query_object_instance and from
// get_logic_properties_values, masked fields and a row filter on success, a user vs
// an app account, a caller who may not view the type, ingress vs in-cluster links,
// both languages, permission_request.disabled, and an empty result not being a
// permission problem. The restricted type is kn_medical/ot_patient: u_demo sees
// `phone` masked and only region 华东; u_other may view it but not query it; the app
// account may do neither.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startSimulator, startServer, PREFIX } from './lib/stack.mjs';

const USER = 'demo-user-token'; // u_demo
const USER2 = 'demo-user2-token'; // u_other
const APP = 'demo-app-token';
const TEMPLATE_PATH = '/studio/bkn/kn_medical/object-types/ot_patient';
const CJK = /[\u4e00-\u9fff]/;
let sim;
let server;
let disabled;

async function post(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${USER}`, ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10000),
  });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, headers: r.headers, text, json };
}

const rest = (srv, tool, body, headers) => post(`${srv.base}${PREFIX}/kn/${tool}`, body, headers);

async function mcpCall(srv, name, args, headers = {}) {
  const url = srv.mcpUrl;
  const init = await post(url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'permission-test', version: '1' } } }, headers);
  assert.equal(init.status, 200, init.text);
  const h = { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id') };
  await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  const r = await post(url, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name, arguments: { ...args, response_format: 'json' } } }, h);
  assert.equal(r.status, 200, r.text);
  return r.json.result;
}

before(async () => {
  sim = await startSimulator({ capture: 'disabled' });
  server = await startServer(sim.base, {});
  disabled = await startServer(sim.base, { env: { CL_PERMISSION_REQUEST_DISABLED: 'true' } });
});

after(async () => {
  if (server) assert.equal(await server.stop(), 0);
  if (disabled) assert.equal(await disabled.stop(), 0);
  if (sim) await sim.stop();
});

const PATIENTS = { kn_id: 'kn_medical', ot_id: 'ot_patient', limit: 10 };
const VISITS = { kn_id: 'kn_medical', ot_id: 'ot_patient', query: 'how many visits', _instance_identities: [{ patient_id: 'p_0001' }], properties: ['visit_count'] };
const INGRESS = { 'x-forwarded-host': 'studio.example.com', 'x-forwarded-proto': 'https' };

function checkResource(g, named) {
  assert.deepEqual({ ...g.resource, name: undefined }, { type: 'object_type', id: 'kn_medical/ot_patient', kn_id: 'kn_medical', ot_id: 'ot_patient', name: undefined });
  if (named) assert.equal(g.resource.name, '患者');
  else assert.equal('name' in g.resource, false, JSON.stringify(g.resource));
}

function linkOf(shortfall, { absolute }) {
  const url = shortfall.request_permission_url;
  assert.equal(typeof url, 'string', JSON.stringify(shortfall));
  if (absolute) assert.ok(url.startsWith(`https://studio.example.com${TEMPLATE_PATH}?`), url);
  else assert.ok(url.startsWith(`${TEMPLATE_PATH}?`), url);
  const u = new URL(url, 'http://x');
  assert.equal(u.searchParams.get('source'), 'agent');
  assert.equal(u.searchParams.get('apply_permission'), '1');
  assert.ok(!url.includes('+'), `spaces are %20: ${url}`);
  return u;
}

test('403 on query_object_instance: guidance beside code and details, a link for a user who may view', async () => {
  for (const [lang, cjk] of [['zh-CN', true], ['en-US', false]]) {
    const r = await rest(server, 'query_object_instance', PATIENTS, { authorization: `Bearer ${USER2}`, 'accept-language': lang });
    assert.equal(r.status, 403, r.text);
    assert.equal(r.json.code, 'Public.Forbidden');
    assert.ok(r.json.details, r.text);
    const g = r.json.permission_guidance;
    checkResource(g, true);
    assert.equal(g.shortfalls.length, 1);
    assert.equal(g.shortfalls[0].scope, 'grant');
    assert.deepEqual(g.shortfalls[0].operations, ['query_data']);
    const u = linkOf(g.shortfalls[0], { absolute: false });
    assert.equal(u.searchParams.get('operations'), 'query_data');
    assert.equal(CJK.test(u.searchParams.get('reason').replace(/「[^」]*」|“[^”]*”/g, '')), cjk, u.href);
    assert.equal(CJK.test(g.message.replace(/「[^」]*」|“[^”]*”/g, '')), cjk, g.message);
    // The next step with a link: submit, wait for approval, call again.
    if (lang === 'en-US') assert.match(g.message, /request link.*administrator.*approve.*rerun/s);
    else assert.match(g.message, /申请.*管理员.*重新/s);
    // Identical over MCP.
    const m = await mcpCall(server, 'query_object_instance', PATIENTS, { authorization: `Bearer ${USER2}`, 'accept-language': lang });
    assert.equal(m.isError, true);
    const body = JSON.parse(m.content[0].text);
    assert.deepEqual(body.permission_guidance, g);
    assert.equal(body.code, r.json.code);
  }
});

test('403 on get_logic_properties_values: the same guidance', async () => {
  const r = await rest(server, 'get_logic_properties_values', VISITS, { authorization: `Bearer ${USER2}`, 'accept-language': 'en-US' });
  assert.equal(r.status, 403, r.text);
  const g = r.json.permission_guidance;
  assert.ok(g, r.text);
  checkResource(g, true);
  assert.equal(g.shortfalls[0].scope, 'grant');
  assert.equal(linkOf(g.shortfalls[0], { absolute: false }).searchParams.get('operations'), 'query_data');
  const m = await mcpCall(server, 'get_logic_properties_values', VISITS, { authorization: `Bearer ${USER2}`, 'accept-language': 'en-US' });
  assert.equal(m.isError, true);
  assert.deepEqual(JSON.parse(m.content[0].text).permission_guidance, g);
});

test('masked fields and a row filter on success: guidance at the top of the result', async () => {
  const r = await rest(server, 'query_object_instance', PATIENTS, { 'accept-language': 'en-US' });
  assert.equal(r.status, 200, r.text);
  assert.ok(r.json.datas.every((d) => d.region === '华东'));
  assert.ok(r.json.datas.every((d) => /\*/.test(d.phone)));
  const g = r.json.permission_guidance;
  checkResource(g, true);
  const scopes = Object.fromEntries(g.shortfalls.map((s) => [s.scope, s]));
  assert.deepEqual(Object.keys(scopes).sort(), ['property_grants', 'row_filter']);
  assert.deepEqual(scopes.property_grants.properties, ['phone']);
  assert.equal(linkOf(scopes.property_grants, { absolute: false }).searchParams.get('properties'), 'phone');
  assert.equal(linkOf(scopes.row_filter, { absolute: false }).searchParams.get('properties'), null);
  assert.match(g.message, /phone/);
  assert.match(g.message, /part of the data/);
  const m = await mcpCall(server, 'query_object_instance', PATIENTS, { 'accept-language': 'en-US' });
  assert.equal(m.isError, false);
  assert.deepEqual(m.structuredContent.permission_guidance, g);
});

test('only the requested properties count: without phone, the row filter alone', async () => {
  const r = await rest(server, 'query_object_instance', { ...PATIENTS, properties: ['name', 'age'] });
  assert.equal(r.status, 200, r.text);
  const g = r.json.permission_guidance;
  assert.deepEqual(g.shortfalls.map((s) => s.scope), ['row_filter']);
  assert.ok(!g.message.includes('phone'), g.message);
});

test('ingress: absolute links on the caller\'s host; in-cluster: relative', async () => {
  const a = await rest(server, 'query_object_instance', PATIENTS, { ...INGRESS, authorization: `Bearer ${USER2}` });
  linkOf(a.json.permission_guidance.shortfalls[0], { absolute: true });
  const b = await rest(server, 'query_object_instance', PATIENTS, { ...INGRESS });
  for (const s of b.json.permission_guidance.shortfalls) linkOf(s, { absolute: true });
  const c = await rest(server, 'query_object_instance', PATIENTS, {});
  for (const s of c.json.permission_guidance.shortfalls) linkOf(s, { absolute: false });
  // Each call reads its own request's headers, alternating ones included.
  for (const host of ['other.example.com', 'studio.example.com', 'other.example.com']) {
    const d = await rest(server, 'query_object_instance', PATIENTS, { ...INGRESS, 'x-forwarded-host': host });
    for (const s of d.json.permission_guidance.shortfalls) {
      assert.ok(s.request_permission_url.startsWith(`https://${host}${TEMPLATE_PATH}?`), s.request_permission_url);
    }
  }
  // The reason is localized and %20-encoded.
  const en = await rest(server, 'query_object_instance', PATIENTS, { ...INGRESS, authorization: `Bearer ${USER2}`, 'accept-language': 'en-US' });
  const url = en.json.permission_guidance.shortfalls[0].request_permission_url;
  assert.match(url, /reason=The%20agent%20/);
});

test('an app account, and a caller who may not view the type: no name, no link, contact an administrator', async () => {
  for (const [tool, args] of [['query_object_instance', PATIENTS], ['get_logic_properties_values', VISITS]]) {
    for (const lang of ['zh-CN', 'en-US']) {
      const r = await rest(server, tool, args, { ...INGRESS, authorization: `Bearer ${APP}`, 'accept-language': lang });
      assert.equal(r.status, 403, r.text);
      const g = r.json.permission_guidance;
      assert.ok(g, r.text);
      checkResource(g, false);
      for (const s of g.shortfalls) assert.equal(s.request_permission_url, undefined, JSON.stringify(s));
      assert.ok(!r.text.includes('患者'), `the type name leaked: ${r.text}`);
      assert.ok(!r.text.includes('request_permission_url'));
      if (lang === 'en-US') assert.match(g.message, /administrator/);
      else assert.match(g.message, /联系管理员/);
    }
  }
});

test('permission_request.disabled: the same guidance without links', async () => {
  const on = await rest(server, 'query_object_instance', PATIENTS, { authorization: `Bearer ${USER2}` });
  const off = await rest(disabled, 'query_object_instance', PATIENTS, { authorization: `Bearer ${USER2}` });
  assert.equal(off.status, 403, off.text);
  const g = off.json.permission_guidance;
  checkResource(g, true);
  assert.deepEqual(g.shortfalls, [{ scope: 'grant', operations: ['query_data'] }]);
  assert.notEqual(g.message, on.json.permission_guidance.message);
  assert.match(g.message, /联系管理员/);
  const ok = await rest(disabled, 'query_object_instance', PATIENTS, INGRESS);
  assert.equal(ok.status, 200);
  assert.ok(!ok.text.includes('request_permission_url'), ok.text);
  assert.equal(ok.json.permission_guidance.shortfalls.length, 2);
});

test('an empty result is not a permission problem', async () => {
  for (const args of [
    { kn_id: 'kn_medical', ot_id: 'ot_drug', filters: [{ field: 'name', op: '==', value: 'no such drug' }] },
    { kn_id: 'kn_medical', ot_id: 'ot_drug', properties: ['name'], limit: 1, filters: [{ field: 'drug_id', op: '==', value: -1 }] },
  ]) {
    const r = await rest(server, 'query_object_instance', args);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.datas, []);
    assert.equal(r.json.permission_guidance, undefined, r.text);
  }
  // Fully granted types carry no guidance either.
  const d = await rest(server, 'query_object_instance', { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 2 });
  assert.equal(d.json.permission_guidance, undefined);
  // And an empty row-filtered page of the restricted type still says only what the service said.
  const e = await rest(server, 'query_object_instance', { ...PATIENTS, filters: [{ field: 'region', op: '==', value: '华北' }] });
  assert.equal(e.status, 200, e.text);
  assert.deepEqual(e.json.datas, []);
  assert.ok((e.json.permission_guidance?.shortfalls || []).every((s) => s.scope !== 'grant'), e.text);
});
