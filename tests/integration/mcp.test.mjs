// The MCP Streamable HTTP surface: initialize and version negotiation,
// notifications, ping, tools/list (metadata, localization, pagination),
// tools/call, sessions, the GET stream, header checks and transport security.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { startStack, ROOT, PREFIX } from './lib/stack.mjs';

// The catalogue as the tools directory declares it (file name = tool name; the
// top-level surfaces, order, kind and gate of each file), so that this test follows
// the files rather than a copy of their list.
function declaredTools() {
  const dir = path.join(ROOT, 'tools');
  return fs.readdirSync(dir).filter((f) => f.endsWith('.lua')).map((f) => {
    const src = fs.readFileSync(path.join(dir, f), 'utf8');
    const field = (k) => new RegExp(`^    ${k} = (.+?),?$`, 'm').exec(src)?.[1];
    const surfaces = [...(field('surfaces') ?? '').matchAll(/"([a-z_]+)"/g)].map((m) => m[1]);
    return { name: f.slice(0, -4), surfaces, order: Number(field('order')), kind: JSON.parse(field('kind')), gate: field('gate') };
  });
}
// tools/list of /mcp with the default configuration (no gate switched on): the two
// lifecycle tools (the core's, orders 10 and 20), then the MCP business tools by order.
const MCP_TOOLS = declaredTools().filter((t) => t.surfaces.includes('mcp') && !t.gate).sort((a, b) => a.order - b.order);
const MCP_NAMES = ['bkn_start_interaction', 'bkn_finish_interaction', ...MCP_TOOLS.map((t) => t.name)];

const VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'];
const CJK = /[\u4e00-\u9fff]/;

let stack; // defaults
let paged; // CL_MCP_TOOLS_PAGE_SIZE=1, CL_ALLOWED_ORIGINS=https://studio.example.com

async function post(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: 'Bearer demo-user-token',
      ...headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(10000),
  });
  const text = await r.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: r.status, headers: r.headers, text, json };
}

function initBody(version = '2025-11-25', id = 1) {
  return { jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'mcp-test', version: '1' } } };
}

async function initialize(url, headers = {}) {
  const r = await post(url, initBody(), headers);
  assert.equal(r.status, 200, r.text);
  const sid = r.headers.get('mcp-session-id');
  assert.ok(sid, 'no Mcp-Session-Id');
  return sid;
}

const rpc = (id, method, params) => (params === undefined ? { jsonrpc: '2.0', id, method } : { jsonrpc: '2.0', id, method, params });

// Raw HTTP/1.1 request with full control over Host, method and headers. For
// streams, resolves on the first body chunk and destroys the socket.
function raw(url, { method = 'POST', headers = {}, body, firstChunkOnly = false } = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    // Node frames an OPTIONS body with neither Content-Length nor chunking, so
    // the length is always set explicitly.
    const h = body === undefined ? headers : { 'content-length': Buffer.byteLength(body), ...headers };
    const req = http.request(
      { host: '127.0.0.1', port: u.port, path: u.pathname + u.search, method, headers: h, timeout: 10000, agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => {
          text += c;
          if (firstChunkOnly) {
            req.destroy();
            resolve({ status: res.statusCode, headers: res.headers, text });
          }
        });
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text }));
        res.on('error', () => {});
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => { if (!firstChunkOnly || e.message === 'timeout') reject(e); });
    if (body !== undefined) req.write(body);
    req.end();
  });
}

before(async () => {
  stack = await startStack({ capture: 'disabled' });
  paged = await startStack({ capture: 'disabled', env: { CL_MCP_TOOLS_PAGE_SIZE: '1', CL_ALLOWED_ORIGINS: 'https://studio.example.com' } });
});

after(async () => {
  const codes = [];
  if (stack) codes.push(await stack.stop());
  if (paged) codes.push(await paged.stop());
  assert.deepEqual(codes, codes.map(() => 0));
});

test('initialize echoes every supported version and answers an unknown one with the newest', async () => {
  for (const v of VERSIONS) {
    const r = await post(stack.server.mcpUrl, initBody(v));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.result.protocolVersion, v);
  }
  const r = await post(stack.server.mcpUrl, initBody('2024-01-01'));
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.result.protocolVersion, '2025-11-25');
  assert.equal(r.json.id, 1);
  assert.equal(r.json.jsonrpc, '2.0');
  assert.ok(r.headers.get('mcp-session-id'));
  assert.equal(r.headers.get('cache-control'), 'no-store');
  assert.match(r.headers.get('bkn-request-id') ?? '', /^req_/);
  assert.equal(r.json.result.capabilities.tools.listChanged, true);
  assert.equal(r.json.result.serverInfo.name, 'context-loader');
});

test('instructions are localized: zh-CN by default, English with Accept-Language: en', async () => {
  const zh = await post(stack.server.mcpUrl, initBody());
  const en = await post(stack.server.mcpUrl, initBody(), { 'accept-language': 'en' });
  const zi = zh.json.result.instructions;
  const ei = en.json.result.instructions;
  assert.equal(typeof zi, 'string');
  assert.equal(typeof ei, 'string');
  assert.match(zi, CJK);
  assert.doesNotMatch(ei, CJK);
  assert.match(ei, /bkn_start_interaction/);
  assert.match(zi, /bkn_start_interaction/);
  assert.notEqual(zi, ei);
  // TOON is the MCP default: both say what it is and how to read a table header
  for (const i of [zi, ei]) {
    assert.match(i, /TOON/);
    assert.ok(i.includes('rows[2]{id,name}:'), i);
  }
  assert.match(ei, /table of 2 rows with the columns id and name/);
  assert.match(zi, /2 行的表，列依次为 id 和 name/);
});

test('notifications/initialized gets 202 with no body; ping answers {}', async () => {
  const sid = await initialize(stack.server.mcpUrl);
  const n = await post(stack.server.mcpUrl, { jsonrpc: '2.0', method: 'notifications/initialized' }, { 'mcp-session-id': sid });
  assert.equal(n.status, 202);
  assert.equal(n.text, '');
  const p = await post(stack.server.mcpUrl, rpc('p1', 'ping'), { 'mcp-session-id': sid });
  assert.equal(p.status, 200, p.text);
  assert.deepEqual(p.json, { jsonrpc: '2.0', id: 'p1', result: {} });
  const u = await post(stack.server.mcpUrl, rpc(3, 'resources/list'), { 'mcp-session-id': sid });
  assert.equal(u.json.error.code, -32601);
});

test('tools/list entries carry the display metadata, localized per Accept-Language', async () => {
  const sid = await initialize(stack.server.mcpUrl);
  const zh = await post(stack.server.mcpUrl, rpc(2, 'tools/list'), { 'mcp-session-id': sid });
  assert.equal(zh.status, 200, zh.text);
  const tools = zh.json.result.tools;
  // the two lifecycle tools come first (orders 10, 20), then the business tools by order
  assert.equal(MCP_TOOLS.length, 17, MCP_NAMES.join(' ')); // 2 lifecycle + 17 business
  for (const n of ['list_knowledge_networks', 'query_object_instance', 'execute_action', 'execute_tool'])
    assert.ok(MCP_NAMES.includes(n), `${n} is not declared for /mcp`);
  for (const n of ['run_sql', 'list_resources', 'describe_resource', 'execute_skill', 'mcp_proxy_call'])
    assert.ok(!MCP_NAMES.includes(n), `${n} must not be listed on /mcp`);
  assert.deepEqual(tools.map((t) => t.name), MCP_NAMES);
  assert.equal(zh.json.result.nextCursor, undefined);
  assert.equal(tools[0].title, '开始交互');
  assert.equal(tools[0]._meta['openbkn.ai/group'], 'lifecycle');
  assert.equal(tools[0].annotations.readOnlyHint, false);
  const declared = Object.fromEntries(MCP_TOOLS.map((t) => [t.name, t]));
  for (const t of tools.slice(2)) {
    for (const k of ['name', 'title', 'description', 'inputSchema', 'annotations', '_meta'])
      assert.ok(t[k] !== undefined, `${t.name} lacks ${k}`);
    assert.equal(t.inputSchema.type, 'object');
    // read tools are read-only; execute_action and execute_tool are not
    assert.equal(t.annotations.readOnlyHint, declared[t.name].kind === 'read', t.name);
    assert.equal(typeof t._meta['openbkn.ai/group'], 'string');
    assert.ok(t._meta['openbkn.ai/group_title'].length > 0);
    assert.equal(t._meta['openbkn.ai/order'], declared[t.name].order, t.name);
    assert.match(t.title, CJK);
  }
  assert.equal(tools.find((t) => t.name === 'execute_action').annotations.readOnlyHint, false);
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  assert.equal(byName.list_knowledge_networks.title, '知识网络列表');
  assert.equal(byName.list_knowledge_networks._meta['openbkn.ai/group'], 'discovery');
  assert.equal(byName.list_knowledge_networks._meta['openbkn.ai/order'], 110);
  assert.equal(byName.query_object_instance.title, '实例查询');
  assert.equal(byName.query_object_instance._meta['openbkn.ai/group'], 'query');
  assert.equal(byName.query_object_instance._meta['openbkn.ai/order'], 210);
  assert.deepEqual(byName.query_object_instance.inputSchema.required, ['kn_id', 'ot_id', 'bkn_context']);
  assert.deepEqual(byName.query_object_instance.inputSchema.properties.bkn_context.required, ['conversation_id', 'interaction_id']);

  const en = await post(stack.server.mcpUrl, rpc(3, 'tools/list'), { 'mcp-session-id': sid, 'accept-language': 'en-US' });
  const enBy = Object.fromEntries(en.json.result.tools.map((t) => [t.name, t]));
  assert.equal(enBy.list_knowledge_networks.title, 'Knowledge Networks');
  assert.equal(enBy.query_object_instance.title, 'Query Instances');
  for (const t of en.json.result.tools) {
    assert.doesNotMatch(t.description, CJK);
    assert.doesNotMatch(t._meta['openbkn.ai/group_title'], CJK);
  }
});

test('tools/list paginates with a cursor (page size 1) and rejects a bad cursor', async () => {
  const url = paged.server.mcpUrl;
  const sid = await initialize(url);
  const seen = [];
  let cursor;
  for (let page = 0; page <= MCP_NAMES.length; page++) {
    const r = await post(url, rpc(10 + page, 'tools/list', cursor === undefined ? {} : { cursor }), { 'mcp-session-id': sid });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.result.tools.length, 1, r.text);
    seen.push(r.json.result.tools[0].name);
    cursor = r.json.result.nextCursor;
    if (cursor === undefined) break;
    assert.equal(typeof cursor, 'string');
  }
  assert.deepEqual(seen, MCP_NAMES);
  assert.equal(cursor, undefined);
  for (const bad of ['nonsense', 'o:', 'o:x1', 42]) {
    const r = await post(url, rpc(20, 'tools/list', { cursor: bad }), { 'mcp-session-id': sid });
    assert.equal(r.json.error?.code, -32602, `cursor ${bad}: ${r.text}`);
  }
});

test('tools/call success has a text block, structuredContent and isError false', async () => {
  const sid = await initialize(stack.server.mcpUrl);
  const r = await post(stack.server.mcpUrl, rpc(5, 'tools/call', { name: 'list_knowledge_networks', arguments: { limit: 2, sort: 'name', direction: 'asc' } }), { 'mcp-session-id': sid });
  assert.equal(r.status, 200, r.text);
  assert.match(r.headers.get('content-type'), /^application\/json/);
  const res = r.json.result;
  assert.equal(res.isError, false);
  assert.equal(res.content.length, 1);
  assert.equal(res.content[0].type, 'text');
  // the default text block is TOON: a table of the two entries
  const lines = res.content[0].text.split('\n');
  assert.match(lines[0], /^entries\[2\]\{id,/, res.content[0].text);
  assert.deepEqual(lines.slice(1, 3).map((l) => l.trim().split(',')[0]), ['kn_supplychain', 'kn_medical']);
  assert.equal(lines[3], 'total_count: 3');
  assert.equal(res.structuredContent.entries.length, 2);
  assert.equal(res.structuredContent.total_count, 3);
  // Sorted by name code point: 供应链 < 医药 < 运维.
  assert.deepEqual(res.structuredContent.entries.map((e) => e.id), ['kn_supplychain', 'kn_medical']);

  // response_format json: the text block is the structured result as JSON
  const j = await post(stack.server.mcpUrl, rpc(6, 'tools/call', { name: 'list_knowledge_networks', arguments: { limit: 2, sort: 'name', direction: 'asc', response_format: 'json' } }), { 'mcp-session-id': sid });
  assert.equal(j.json.result.isError, false, j.text);
  assert.deepEqual(JSON.parse(j.json.result.content[0].text), j.json.result.structuredContent);
  assert.deepEqual(j.json.result.structuredContent, res.structuredContent);
});

test('sessions: missing 400, unknown 404, another principal 404, DELETE ends it', async () => {
  const url = stack.server.mcpUrl;
  const missing = await post(url, rpc(1, 'ping'));
  assert.equal(missing.status, 400, missing.text);
  assert.ok(missing.json.error, missing.text);

  const unknown = await post(url, rpc(1, 'ping'), { 'mcp-session-id': 'deadbeef.cafebabe' });
  assert.equal(unknown.status, 404, unknown.text);

  const sid = await initialize(url);
  const other = await post(url, rpc(1, 'ping'), { 'mcp-session-id': sid, authorization: 'Bearer demo-user2-token' });
  assert.equal(other.status, 404, other.text);
  // ... and it still works for its owner.
  assert.equal((await post(url, rpc(1, 'ping'), { 'mcp-session-id': sid })).status, 200);

  const del = await fetch(url, { method: 'DELETE', headers: { authorization: 'Bearer demo-user-token', 'mcp-session-id': sid }, signal: AbortSignal.timeout(5000) });
  await del.text();
  assert.ok(del.status >= 200 && del.status < 300, `DELETE gave ${del.status}`);
  const after = await post(url, rpc(2, 'ping'), { 'mcp-session-id': sid });
  assert.equal(after.status, 404, after.text);
  const del2 = await fetch(url, { method: 'DELETE', headers: { authorization: 'Bearer demo-user-token', 'mcp-session-id': sid }, signal: AbortSignal.timeout(5000) });
  await del2.text();
  assert.equal(del2.status, 404);
});

test('GET with Accept: text/event-stream opens an SSE stream', async () => {
  const sid = await initialize(stack.server.mcpUrl);
  const r = await raw(stack.server.mcpUrl, {
    method: 'GET',
    headers: { accept: 'text/event-stream', authorization: 'Bearer demo-user-token', 'mcp-session-id': sid },
    firstChunkOnly: true,
  });
  assert.equal(r.status, 200);
  assert.match(r.headers['content-type'], /^text\/event-stream/);
  assert.ok(r.text.length > 0);
  // A GET without a session is refused, and the server still serves afterwards.
  const nos = await raw(stack.server.mcpUrl, { method: 'GET', headers: { accept: 'text/event-stream', authorization: 'Bearer demo-user-token' } });
  assert.equal(nos.status, 400);
  const noacc = await raw(stack.server.mcpUrl, { method: 'GET', headers: { accept: 'application/json', authorization: 'Bearer demo-user-token', 'mcp-session-id': sid } });
  assert.equal(noacc.status, 406);
  assert.equal((await post(stack.server.mcpUrl, rpc(1, 'ping'), { 'mcp-session-id': sid })).status, 200);
});

test('MCP-Protocol-Version: unsupported 400, supported 200', async () => {
  const sid = await initialize(stack.server.mcpUrl);
  const bad = await post(stack.server.mcpUrl, rpc(1, 'ping'), { 'mcp-session-id': sid, 'mcp-protocol-version': '1999-01-01' });
  assert.equal(bad.status, 400, bad.text);
  assert.ok(bad.json.error.message.includes('1999-01-01'), bad.text);
  for (const v of VERSIONS) {
    const ok = await post(stack.server.mcpUrl, rpc(1, 'ping'), { 'mcp-session-id': sid, 'mcp-protocol-version': v });
    assert.equal(ok.status, 200, `${v}: ${ok.text}`);
  }
});

test('Accept without text/event-stream 406; wrong Content-Type 415', async () => {
  const sid = await initialize(stack.server.mcpUrl);
  const na = await post(stack.server.mcpUrl, rpc(1, 'ping'), { 'mcp-session-id': sid, accept: 'application/json' });
  assert.equal(na.status, 406, na.text);
  const ct = await post(stack.server.mcpUrl, rpc(1, 'ping'), { 'mcp-session-id': sid, 'content-type': 'text/plain' });
  assert.equal(ct.status, 415, ct.text);
  assert.equal((await post(stack.server.mcpUrl, rpc(1, 'ping'), { 'mcp-session-id': sid })).status, 200);
});

test('Accept q=0 means not acceptable, as on every route', async () => {
  const sid = await initialize(stack.server.mcpUrl);
  const sse0 = await post(stack.server.mcpUrl, rpc(1, 'ping'), { 'mcp-session-id': sid, accept: 'application/json, text/event-stream;q=0' });
  assert.equal(sse0.status, 406, sse0.text);
  const json0 = await post(stack.server.mcpUrl, rpc(1, 'ping'), { 'mcp-session-id': sid, accept: 'application/json;q=0, */*' });
  assert.equal(json0.status, 406, json0.text);
  const wild = await post(stack.server.mcpUrl, rpc(1, 'ping'), { 'mcp-session-id': sid, accept: 'application/*;q=0.5, text/*;q=0.1' });
  assert.equal(wild.status, 200, wild.text);
  const get0 = await raw(stack.server.mcpUrl, { method: 'GET', headers: { accept: 'text/event-stream;q=0, */*', authorization: 'Bearer demo-user-token', 'mcp-session-id': sid } });
  assert.equal(get0.status, 406);
});

test('Origin and Host checks (DNS rebinding protection) and the Origin allow-list', async () => {
  const url = stack.server.mcpUrl;
  const evil = await post(url, initBody(), { origin: 'http://evil.example.com' });
  assert.equal(evil.status, 403, evil.text);
  const port = new URL(url).port;
  const local = await post(url, initBody(), { origin: `http://127.0.0.1:${port}` });
  assert.equal(local.status, 200, local.text);
  const studioDefault = await post(url, initBody(), { origin: 'https://studio.example.com' });
  assert.equal(studioDefault.status, 403, 'an origin not in the (empty) allow-list must be rejected');

  const host = await raw(url, {
    headers: {
      host: 'evil.example.com',
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: 'Bearer demo-user-token',
    },
    body: JSON.stringify(initBody()),
  });
  assert.equal(host.status, 403, host.text);

  const studio = await post(paged.server.mcpUrl, initBody(), { origin: 'https://studio.example.com' });
  assert.equal(studio.status, 200, studio.text);
  const evil2 = await post(paged.server.mcpUrl, initBody(), { origin: 'https://evil.example.com' });
  assert.equal(evil2.status, 403, evil2.text);
});

test('methods other than GET, POST and DELETE get 405', async () => {
  for (const method of ['PUT', 'PATCH', 'OPTIONS']) {
    const r = await raw(stack.server.mcpUrl, { method, headers: { authorization: 'Bearer demo-user-token', 'content-type': 'application/json' }, body: '{}' });
    assert.equal(r.status, 405, `${method}: ${r.text}`);
    assert.match(r.headers.allow ?? '', /POST/);
  }
  assert.equal((await post(stack.server.mcpUrl, initBody())).status, 200);
});

test('/mcp/ with a trailing slash behaves like /mcp', async () => {
  const url = `${stack.server.base}${PREFIX}/mcp/`;
  const r = await post(url, initBody('2025-06-18'));
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.result.protocolVersion, '2025-06-18');
  const sid = r.headers.get('mcp-session-id');
  // A session from one spelling works on the other.
  assert.equal((await post(stack.server.mcpUrl, rpc(1, 'ping'), { 'mcp-session-id': sid })).status, 200);
  const list = await post(url, rpc(2, 'tools/list'), { 'mcp-session-id': sid });
  assert.deepEqual(list.json.result.tools.map((t) => t.name), MCP_NAMES);
  const call = await post(url, rpc(3, 'tools/call', { name: 'list_knowledge_networks', arguments: {} }), { 'mcp-session-id': sid });
  assert.equal(call.json.result.isError, false, call.text);
  assert.equal((await post(url, rpc(1, 'ping'))).status, 400);
  const put = await raw(url, { method: 'PUT', headers: { authorization: 'Bearer demo-user-token' } });
  assert.equal(put.status, 405);
  const del = await fetch(url, { method: 'DELETE', headers: { authorization: 'Bearer demo-user-token', 'mcp-session-id': sid }, signal: AbortSignal.timeout(5000) });
  await del.text();
  assert.ok(del.status >= 200 && del.status < 300);
  assert.equal((await post(url, rpc(1, 'ping'), { 'mcp-session-id': sid })).status, 404);
});
