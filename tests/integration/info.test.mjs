// Self-description and localization (docs/info.md): GET /mcp/info,
// /mcp-compact/info and /mcp/ptc/info equal tools/list of their surface (names,
// schemas, display metadata) in both languages, with and without Accept-Language;
// the endpoint behind ingress headers; Accept-Language q-values; a deployment with
// CL_LANGUAGE=en-US; the PTC info with the gate off; and the pasted client configs
// working in the official SDK client and in mcp-remote over stdio.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startStack, ROOT, PREFIX } from './lib/stack.mjs';
import { TOKEN, get, post, session, flatten } from './lib/mcp-session.mjs';

const CJK = /[\u4e00-\u9fff]/;
const SURFACES = { mcp: '/mcp', compact: '/mcp-compact', ptc: '/mcp/ptc' };
const EXT = path.join(ROOT, 'build/ext');
const SDK_DIR = path.join(EXT, 'node_modules/@modelcontextprotocol/sdk/dist/esm/client');
const HAVE_SDK = fs.existsSync(path.join(SDK_DIR, 'index.js')) && fs.existsSync(path.join(SDK_DIR, 'streamableHttp.js'));
const MCP_REMOTE = path.join(EXT, 'node_modules/mcp-remote/package.json');
function which(cmd) {
  return (process.env.PATH || '').split(':').some((d) => d && fs.existsSync(path.join(d, cmd)));
}

let zh; // default zh-CN deployment, PTC gate on
let en; // CL_LANGUAGE=en-US, PTC gate off

before(async () => {
  zh = await startStack({ capture: 'disabled', env: { EXECUTE_SKILL_ENABLED: 'true' } });
  en = await startStack({ capture: 'disabled', env: { CL_LANGUAGE: 'en-US', EXECUTE_SKILL_ENABLED: 'false' } });
});

after(async () => {
  const codes = [];
  if (zh) codes.push(await zh.stop());
  if (en) codes.push(await en.stop());
  assert.deepEqual(codes, codes.map(() => 0));
});

const url = (stack, surface, tail = '') => `${stack.server.base}${PREFIX}${SURFACES[surface]}${tail}`;
const info = (stack, surface, headers = {}) => get(url(stack, surface, '/info'), headers);

function checkHeaders(r, lang) {
  assert.equal(r.status, 200, r.text);
  assert.match(r.headers.get('content-type'), /^application\/json/);
  assert.equal(r.headers.get('cache-control'), 'no-store');
  assert.equal(r.headers.get('content-language'), lang);
  assert.match(r.headers.get('vary') || '', /Accept-Language/);
  assert.match(r.headers.get('vary') || '', /Accept(,|$)/);
}

async function compareSurface(stack, surface, acceptLanguage, expectLang) {
  const headers = acceptLanguage ? { 'accept-language': acceptLanguage } : {};
  const r = await info(stack, surface, headers);
  checkHeaders(r, expectLang);
  const doc = r.json;
  const s = await session(url(stack, surface), headers);
  const listed = await s.listAll();
  assert.equal(doc.language, expectLang);
  assert.deepEqual(doc.tools.map((t) => t.name), listed.map((t) => t.name), `${surface} ${acceptLanguage}`);
  assert.deepEqual(doc.tools, listed.map(flatten), `${surface} ${acceptLanguage}: info equals tools/list`);
  assert.equal(doc.tool_count, listed.length);
  assert.equal(doc.instructions, s.init.instructions, 'the info carries the instructions initialize gives');
  return doc;
}

test('info equals tools/list of its surface, in both languages, with and without Accept-Language', async () => {
  for (const surface of Object.keys(SURFACES)) {
    const dflt = await compareSurface(zh, surface, undefined, 'zh-CN');
    const zhDoc = await compareSurface(zh, surface, 'zh-CN,zh;q=0.9', 'zh-CN');
    const enDoc = await compareSurface(zh, surface, 'en-US,en;q=0.9', 'en-US');
    assert.deepEqual(dflt, zhDoc);
    // Texts follow the language, group and order never do.
    assert.equal(zhDoc.tools.length, enDoc.tools.length);
    for (let i = 0; i < zhDoc.tools.length; i++) {
      const a = zhDoc.tools[i];
      const b = enDoc.tools[i];
      assert.equal(a.name, b.name);
      assert.equal(a.group, b.group);
      assert.equal(a.order, b.order);
      assert.match(a.title, CJK, `${a.name} zh title`);
      assert.doesNotMatch(b.title, CJK, `${b.name} en title`);
      assert.doesNotMatch(b.group_title, CJK);
      assert.doesNotMatch(b.description, CJK, `${b.name} en description`);
    }
    assert.match(zhDoc.instructions, CJK);
    assert.doesNotMatch(enDoc.instructions, CJK);
  }
});

test('schema descriptions are localized too', async () => {
  const zhDoc = (await info(zh, 'mcp')).json;
  const enDoc = (await info(zh, 'mcp', { 'accept-language': 'en' })).json;
  const q = (d) => d.tools.find((t) => t.name === 'query_object_instance');
  assert.match(q(zhDoc).input_schema.properties.kn_id.description, CJK);
  assert.doesNotMatch(q(enDoc).input_schema.properties.kn_id.description, CJK);
  assert.deepEqual(Object.keys(q(zhDoc).input_schema.properties), Object.keys(q(enDoc).input_schema.properties));
});

test('the document: service, endpoint, protocol, auth, languages, display order', async () => {
  const r = await info(zh, 'mcp');
  const d = r.json;
  assert.equal(d.service, 'context-loader');
  assert.equal(d.surface, 'mcp');
  assert.equal(d.endpoint, `${zh.server.base}${PREFIX}/mcp`);
  assert.equal(d.protocol, 'MCP Streamable HTTP');
  assert.deepEqual(d.protocol_versions, ['2025-11-25', '2025-06-18', '2025-03-26']);
  assert.equal(typeof d.transport, 'string');
  assert.equal(d.auth.type, 'bearer');
  assert.deepEqual(d.auth.tokens, ['oauth2_access_token', 'bak_appkey']);
  assert.deepEqual(d.supported_languages, ['zh-CN', 'en-US']);
  const orders = d.tools.map((t) => t.order);
  assert.deepEqual(orders, [...orders].sort((a, b) => a - b), 'listed in display order');
  assert.equal(new Set(orders).size, orders.length, 'orders are unique');
  assert.deepEqual(d.tools.slice(0, 2).map((t) => t.group), ['lifecycle', 'lifecycle']);
  // The gate is on in this deployment: execute_skill is part of /mcp; REST-only tools never are.
  const names = d.tools.map((t) => t.name);
  assert.ok(names.includes('execute_skill'));
  for (const n of ['run_sql', 'list_resources', 'describe_resource']) assert.ok(!names.includes(n), n);
  // The caller's token never appears; the configs carry placeholders.
  assert.ok(!r.text.includes(TOKEN));
  const g = d.client_config.generic.mcpServers['context-loader'];
  assert.equal(g.url, d.endpoint);
  assert.equal(g.headers.Authorization, 'Bearer <access-token>');
  assert.equal(g.headers['Accept-Language'], 'zh-CN');
  const c = d.client_config.claude_desktop.mcpServers['context-loader'];
  assert.equal(c.command, 'npx');
  assert.ok(c.args.includes('mcp-remote') && c.args.includes(d.endpoint));
  assert.equal(c.env.AUTH_HEADER, 'Bearer <access-token>');
  assert.ok(c.args.includes('Authorization:${AUTH_HEADER}'));
});

test('each surface names its own endpoint and config entry', async () => {
  for (const [surface, p] of Object.entries(SURFACES)) {
    const d = (await info(zh, surface)).json;
    assert.equal(d.surface, surface);
    assert.equal(d.endpoint, `${zh.server.base}${PREFIX}${p}`);
    const key = surface === 'mcp' ? 'context-loader' : `context-loader-${surface}`;
    assert.equal(d.client_config.generic.mcpServers[key].url, d.endpoint);
  }
  const compact = (await info(zh, 'compact')).json;
  assert.equal(compact.tool_count, 14);
  const ptc = (await info(zh, 'ptc')).json;
  for (const t of ptc.tools) {
    assert.ok(['bkn_start_interaction', 'bkn_finish_interaction', 'run_code', 'run_shell'].includes(t.name), t.name);
  }
});

test('the endpoint behind ingress: X-Forwarded-Proto and X-Forwarded-Host, validated', async () => {
  const ep = async (headers) => (await info(zh, 'compact', headers)).json.endpoint;
  const local = `${zh.server.base}${PREFIX}/mcp-compact`;
  const host = new URL(zh.server.base).host;
  assert.equal(await ep({ 'x-forwarded-proto': 'https', 'x-forwarded-host': 'bkn.example.com' }), `https://bkn.example.com${PREFIX}/mcp-compact`);
  assert.equal(await ep({ 'x-forwarded-proto': 'HTTPS, http', 'x-forwarded-host': 'gw.example.com:8443, inner:80' }), `https://gw.example.com:8443${PREFIX}/mcp-compact`);
  assert.equal(await ep({ 'x-forwarded-host': '[2001:db8::1]:9443' }), `http://[2001:db8::1]:9443${PREFIX}/mcp-compact`);
  // Proto alone: the TLS-terminating proxy that keeps Host.
  assert.equal(await ep({ 'x-forwarded-proto': 'https' }), `https://${host}${PREFIX}/mcp-compact`);
  // Refused values fall back to the connection and Host.
  for (const bad of ['evil.example/path', 'user@evil.example', 'a b', 'evil.example:123456', '']) {
    assert.equal(await ep({ 'x-forwarded-host': bad }), local, bad);
  }
  assert.equal(await ep({ 'x-forwarded-proto': 'javascript' }), local);
  const d = (await info(zh, 'mcp', { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'bkn.example.com' })).json;
  assert.equal(d.client_config.generic.mcpServers['context-loader'].url, `https://bkn.example.com${PREFIX}/mcp`);
  assert.ok(!d.client_config.claude_desktop.mcpServers['context-loader'].args.includes('--allow-http'), 'https needs no --allow-http');
});

test('Accept-Language: q-values, wildcard, refusals, zh variants', async () => {
  const lang = async (stack, h) => (await info(stack, 'compact', h === undefined ? {} : { 'accept-language': h })).json.language;
  const cases = [
    // [header, on a zh-CN deployment, on an en-US deployment]
    [undefined, 'zh-CN', 'en-US'],
    ['', 'zh-CN', 'en-US'],
    ['en', 'en-US', 'en-US'],
    ['EN-gb', 'en-US', 'en-US'],
    ['en_US', 'en-US', 'en-US'],
    ['zh', 'zh-CN', 'zh-CN'],
    ['zh-CN', 'zh-CN', 'zh-CN'],
    ['zh_CN', 'zh-CN', 'zh-CN'],
    ['zh-Hans', 'zh-CN', 'zh-CN'],
    ['zh-Hans-CN', 'zh-CN', 'zh-CN'],
    ['fr-FR', 'zh-CN', 'en-US'],
    ['fr-FR, en;q=0.5', 'en-US', 'en-US'],
    ['fr-FR, zh;q=0.5', 'zh-CN', 'zh-CN'],
    ['zh;q=0.3, en;q=0.7', 'en-US', 'en-US'],
    ['en;q=0.7, zh;q=0.7', 'en-US', 'en-US'],
    ['zh;q=0.7, en;q=0.7', 'zh-CN', 'zh-CN'],
    ['en;q=0', 'zh-CN', 'en-US'],
    ['zh;q=0, en;q=0.1', 'en-US', 'en-US'],
    ['en;q=0, zh;q=0.1', 'zh-CN', 'zh-CN'],
    ['en;q=0.000, fr', 'zh-CN', 'en-US'],
    ['*', 'zh-CN', 'en-US'],
    ['*;q=0.5, en;q=0.1', 'zh-CN', 'zh-CN'],
    ['zh;q=0, *', 'en-US', 'en-US'],
    ['en;q=0, *;q=0.2', 'zh-CN', 'zh-CN'],
    ['zh-CN;q=0.2, zh;q=0.9, en;q=0.5', 'en-US', 'en-US'],
    ['en;q=bogus, zh;q=0.1', 'zh-CN', 'zh-CN'],
    ['english', 'zh-CN', 'en-US'],
  ];
  for (const [h, onZh, onEn] of cases) {
    assert.equal(await lang(zh, h), onZh, `zh deployment, Accept-Language: ${h}`);
    assert.equal(await lang(en, h), onEn, `en deployment, Accept-Language: ${h}`);
  }
});

test('a deployment with CL_LANGUAGE=en-US: English without the header, Chinese on request', async () => {
  const d = await compareSurface(en, 'mcp', undefined, 'en-US');
  for (const t of d.tools) assert.doesNotMatch(`${t.title} ${t.group_title} ${t.description}`, CJK, t.name);
  assert.equal(d.client_config.generic.mcpServers['context-loader'].headers['Accept-Language'], 'en-US');
  const z = await compareSurface(en, 'mcp', 'zh', 'zh-CN');
  assert.match(z.tools[0].title, CJK);
  await compareSurface(en, 'compact', undefined, 'en-US');
  // Gate off here: execute_skill is absent from /mcp and its info.
  assert.ok(!d.tools.some((t) => t.name === 'execute_skill'));
});

test('messages for the person follow the request language', async () => {
  const zhErr = await get(`${en.server.base}${PREFIX}/no-such-route`, { 'accept-language': 'zh-CN' });
  assert.equal(zhErr.status, 404);
  assert.equal(zhErr.json.description, '对象不存在');
  assert.equal(zhErr.headers.get('content-language'), 'zh-CN');
  const enErr = await get(`${zh.server.base}${PREFIX}/no-such-route`, { 'accept-language': 'en' });
  assert.equal(enErr.json.description, 'Resource not found');
  // A tool error (argument validation) on MCP: in the request language on either deployment.
  for (const [stack, al, desc] of [[zh, 'en', 'Invalid parameters'], [en, 'zh-CN', '参数错误'], [zh, undefined, '参数错误'], [en, undefined, 'Invalid parameters']]) {
    const s = await session(url(stack, 'mcp'), al ? { 'accept-language': al } : {});
    const r = await s.call('query_object_instance', { kn_id: 'kn_medical', ot_id: 'x', limit: 'ten' });
    assert.equal(r.result.isError, true);
    assert.equal(JSON.parse(r.result.content[0].text).description, desc, `${al}`);
  }
});

test('/mcp/ptc/info answers with the gate off while /mcp/ptc itself is absent', async () => {
  const r = await info(en, 'ptc');
  checkHeaders(r, 'en-US');
  assert.equal(r.json.endpoint, `${en.server.base}${PREFIX}/mcp/ptc`);
  const names = r.json.tools.map((t) => t.name);
  assert.deepEqual(names.slice(0, 2), ['bkn_start_interaction', 'bkn_finish_interaction']);
  for (const n of names) assert.ok(['bkn_start_interaction', 'bkn_finish_interaction', 'run_code', 'run_shell'].includes(n), n);
  const p = await post(url(en, 'ptc'), { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } });
  const unknown = await post(`${en.server.base}${PREFIX}/mcp/nothing-here`, { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} });
  assert.equal(p.status, 404);
  assert.equal(p.json.code, unknown.json.code);
  assert.equal(p.json.description, unknown.json.description);
});

test('info needs authentication', async () => {
  const r = await fetch(url(zh, 'mcp', '/info'), { signal: AbortSignal.timeout(5000) });
  assert.equal(r.status, 401);
  assert.match(r.headers.get('www-authenticate') || '', /^Bearer/);
  await r.text();
});

test('content negotiation: JSON unless text/html is preferred', async () => {
  const kind = async (accept) => {
    const r = await info(zh, 'mcp', accept === undefined ? {} : { accept });
    assert.equal(r.status, 200);
    return r.headers.get('content-type').split(';')[0];
  };
  assert.equal(await kind(undefined), 'application/json');
  assert.equal(await kind('*/*'), 'application/json');
  assert.equal(await kind('application/json'), 'application/json');
  assert.equal(await kind('text/html, application/json'), 'application/json');
  assert.equal(await kind('text/html;q=0.5, application/json'), 'application/json');
  assert.equal(await kind('text/*, application/json;q=0.8'), 'text/html');
  assert.equal(await kind('text/html'), 'text/html');
  assert.equal(await kind('text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8'), 'text/html');
});

// ---- the pasted client configs ----

test('the generic mcpServers entry works in the official SDK client', { skip: HAVE_SDK ? false : `the MCP SDK is not installed in ${SDK_DIR}` }, async () => {
  const { Client } = await import(pathToFileURL(path.join(SDK_DIR, 'index.js')).href);
  const { StreamableHTTPClientTransport } = await import(pathToFileURL(path.join(SDK_DIR, 'streamableHttp.js')).href);
  for (const surface of ['mcp', 'compact']) {
    const d = (await info(zh, surface, { 'accept-language': 'en' })).json;
    const entry = Object.values(d.client_config.generic.mcpServers)[0];
    const headers = Object.fromEntries(Object.entries(entry.headers).map(([k, v]) => [k, v.replace('<access-token>', TOKEN)]));
    const client = new Client({ name: 'pasted-config', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(entry.url), { requestInit: { headers } }));
    try {
      const listed = await client.listTools();
      assert.deepEqual(listed.tools.map((t) => t.name), d.tools.map((t) => t.name));
      assert.equal(listed.tools[0].title, 'Start Interaction', 'Accept-Language from the config is honoured');
    } finally {
      await client.close();
    }
  }
});

// Reads newline-delimited JSON-RPC messages from a child's stdout.
function lineReader(stream) {
  let buf = '';
  const waiting = [];
  const seen = [];
  stream.setEncoding('utf8');
  stream.on('data', (chunk) => {
    buf += chunk;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (!line) continue;
      let msg;
      try { msg = JSON.parse(line); } catch { continue; }
      seen.push(msg);
      for (const w of [...waiting]) if (w.pred(msg)) { waiting.splice(waiting.indexOf(w), 1); w.resolve(msg); }
    }
  });
  return (pred, ms, what) => {
    const hit = seen.find(pred);
    if (hit) return Promise.resolve(hit);
    return new Promise((resolve, reject) => {
      const w = { pred, resolve: (m) => { clearTimeout(t); resolve(m); } };
      const t = setTimeout(() => { waiting.splice(waiting.indexOf(w), 1); reject(new Error(`mcp-remote: no ${what} within ${ms} ms`)); }, ms);
      waiting.push(w);
    });
  };
}

const NO_REMOTE = !which('npx') ? 'npx is not installed'
  : !fs.existsSync(MCP_REMOTE) ? `mcp-remote is not installed in ${EXT} (scripts/lib.sh install_checks installs it; needs the npm registry)`
  : false;

test('the Claude Desktop entry works: npx mcp-remote over stdio', { skip: NO_REMOTE, timeout: 60000 }, async () => {
  const d = (await info(zh, 'mcp', { 'accept-language': 'en' })).json;
  const entry = d.client_config.claude_desktop.mcpServers['context-loader'];
  const env = Object.fromEntries(Object.entries(entry.env).map(([k, v]) => [k, v.replace('<access-token>', TOKEN)]));
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-mcp-remote-'));
  // npx resolves the pinned copy in build/ext without the network.
  const proc = spawn(entry.command, entry.args, {
    cwd: EXT,
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
    env: { ...process.env, ...env, MCP_REMOTE_CONFIG_DIR: home, npm_config_offline: 'true', npm_config_update_notifier: 'false' },
  });
  let stderr = '';
  proc.stderr.on('data', (c) => { stderr += c; });
  const next = lineReader(proc.stdout);
  const send = (m) => proc.stdin.write(`${JSON.stringify(m)}\n`);
  try {
    send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'claude-desktop-like', version: '1' } } });
    const init = await next((m) => m.id === 1, 30000, 'initialize result').catch((e) => { throw new Error(`${e.message}\n${stderr.slice(-2000)}`); });
    assert.ok(init.result, JSON.stringify(init));
    assert.equal(init.result.serverInfo.name, 'context-loader');
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    send({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} });
    const list = await next((m) => m.id === 2, 15000, 'tools/list result');
    assert.deepEqual(list.result.tools.map((t) => t.name), d.tools.map((t) => t.name));
    assert.equal(list.result.tools[0].title, 'Start Interaction');
  } finally {
    proc.stdin.end();
    try { process.kill(-proc.pid, 'SIGTERM'); } catch { /* already gone */ }
    const t = setTimeout(() => { try { process.kill(-proc.pid, 'SIGKILL'); } catch { /* gone */ } }, 5000);
    if (proc.exitCode === null && proc.signalCode === null) await new Promise((r) => proc.once('exit', r));
    clearTimeout(t);
    fs.rmSync(home, { recursive: true, force: true });
  }
});

test('forwarded headers count only from trusted_proxies; others get public_url or the listener', { timeout: 60000 }, async () => {
  const fwd = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'evil.example', host: 'evil.example:80' };
  // 127.0.0.1 is not a trusted proxy here: neither X-Forwarded-* nor Host is believed.
  const untrusted = await startStack({ capture: 'disabled', env: { CL_TRUSTED_PROXIES: '10.0.0.0/8, fd00::/8' } });
  try {
    const d = (await info(untrusted, 'mcp', fwd)).json;
    assert.equal(d.endpoint, `${untrusted.server.base}${PREFIX}/mcp`);
    assert.ok(!JSON.stringify(d.client_config).includes('evil'), JSON.stringify(d.client_config));
  } finally {
    await untrusted.stop();
  }
  const pub = await startStack({ capture: 'disabled', env: { CL_TRUSTED_PROXIES: '192.0.2.1', CL_PUBLIC_URL: 'https://gw.example.com/bkn' } });
  try {
    const d = (await info(pub, 'compact', fwd)).json;
    assert.equal(d.endpoint, `https://gw.example.com/bkn${PREFIX}/mcp-compact`);
    for (const srv of Object.values(d.client_config.generic.mcpServers)) assert.equal(srv.url, d.endpoint);
  } finally {
    await pub.stop();
  }
  // A malformed list or URL refuses to start.
  const bin = process.env.CL_BIN || path.join(ROOT, 'build/context-loader');
  for (const env of [{ CL_TRUSTED_PROXIES: '10.0.0.0/33' }, { CL_PUBLIC_URL: 'ftp://x' }, { CL_PUBLIC_URL: 'https://x/' }]) {
    const p = spawn(bin, ['--config', path.join(ROOT, 'etc/context-loader.conf')], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, CL_LISTEN: '127.0.0.1:0', CL_ADMIN_LISTEN: '127.0.0.1:0', ...env } });
    let errText = '';
    p.stderr.on('data', (c) => { errText += c; });
    const code = await new Promise((r) => p.on('exit', r));
    assert.equal(code, 2, `${JSON.stringify(env)}: ${errText}`);
    assert.match(errText, /trusted_proxies|public_url/);
  }
});
