// The admin listener's guard (Origin/Host like /mcp, bearer token, no start off
// loopback without one), exact Origin/Host parsing on /mcp, and the 401 challenge
// without credentials. Raw sockets where a Host header must be forged.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startStack, startServer, serverEnv, ROOT, PREFIX } from './lib/stack.mjs';
import { exchange, parseResponses } from './lib/raw.mjs';

let stack; // admin on loopback, no token
let tokened; // admin.token_file set
const TOKEN = 'admin-token-0123456789abcdef';
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-guards-'));
const tokenFile = path.join(tmp, 'admin.token');

before(async () => {
  fs.writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
  stack = await startStack({ capture: 'disabled' });
  tokened = await startServer(stack.sim.base, { env: { CL_ADMIN_TOKEN_FILE: tokenFile } });
});

after(async () => {
  if (tokened) assert.equal(await tokened.stop(), 0);
  if (stack) assert.equal(await stack.stop(), 0);
  fs.rmSync(tmp, { recursive: true, force: true });
});

const portOf = (base) => Number(new URL(base).port);

async function raw(base, req) {
  const r = await exchange(portOf(base), req);
  const [res] = parseResponses(r.data);
  assert.ok(res, `no response:\n${r.data}`);
  return res;
}

async function reloads(s = stack.server) {
  const m = await fetch(`${s.admin}/metrics`, { headers: s === tokened ? { authorization: `Bearer ${TOKEN}` } : {} });
  assert.equal(m.status, 200);
  return Number(/^cl_reloads_total (\d+)$/m.exec(await m.text())[1]);
}

test('admin: a cross-site POST /admin/reload (Origin http://evil, text/plain) is refused and reloads nothing', async () => {
  const before = await reloads();
  const r = await fetch(`${stack.server.admin}/admin/reload`, { method: 'POST', headers: { origin: 'http://evil', 'content-type': 'text/plain' }, body: 'x' });
  assert.equal(r.status, 403, await r.text());
  assert.equal(await reloads(), before, 'the refused request ran a reload');
  // the operator's own call still works
  const ok = await fetch(`${stack.server.admin}/admin/reload`, { method: 'POST' });
  assert.equal(ok.status, 200, await ok.text());
  assert.equal(await reloads(), before + 1);
});

test('admin: /admin/tools and /metrics refuse a foreign Host (DNS rebinding); /health stays open', async () => {
  for (const p of ['/admin/tools', '/metrics']) {
    const bad = await raw(stack.server.admin, `GET ${p} HTTP/1.1\r\nHost: rebind.evil.example:${portOf(stack.server.admin)}\r\nConnection: close\r\n\r\n`);
    assert.equal(bad.status, 403, `${p}: ${bad.body}`);
    assert.equal(JSON.parse(bad.body).code, 'Public.Forbidden.OriginRejected');
    assert.equal(JSON.parse(bad.body).retryable, false, bad.body);
    assert.equal('link' in JSON.parse(bad.body), false, bad.body);
    const trick = await raw(stack.server.admin, `GET ${p} HTTP/1.1\r\nHost: localhost:1@evil.example\r\nConnection: close\r\n\r\n`);
    assert.equal(trick.status, 403, `${p}: ${trick.body}`);
    const ok = await raw(stack.server.admin, `GET ${p} HTTP/1.1\r\nHost: 127.0.0.1:${portOf(stack.server.admin)}\r\nConnection: close\r\n\r\n`);
    assert.equal(ok.status, 200, `${p}: ${ok.body}`);
  }
  const h = await raw(stack.server.admin, 'GET /health/alive HTTP/1.1\r\nHost: probe.example\r\nConnection: close\r\n\r\n');
  assert.equal(h.status, 200);
});

test('admin token: missing 401 without an error code, wrong 401 invalid_token, right 200; health needs none', async () => {
  const none = await fetch(`${tokened.admin}/admin/tools`, { headers: { 'accept-language': 'en-US' } });
  assert.equal(none.status, 401);
  assert.equal(none.headers.get('www-authenticate'), 'Bearer realm="context-loader-admin"');
  // a static token: the answer says which token, not to obtain a fresh (OAuth) one
  const body = await none.json();
  assert.equal(body.required_action, 'fix_request', JSON.stringify(body));
  assert.match(body.solution, /static token.*admin\.token_file/, JSON.stringify(body));
  assert.match(body.details, /admin\.token_file/);
  assert.doesNotMatch(JSON.stringify(body), /fresh|refresh|OAuth/i);
  const wrong = await fetch(`${tokened.admin}/metrics`, { headers: { authorization: `Bearer ${TOKEN}x` } });
  assert.equal(wrong.status, 401);
  assert.match(wrong.headers.get('www-authenticate'), /error="invalid_token"/);
  const reload = await fetch(`${tokened.admin}/admin/reload`, { method: 'POST', headers: { authorization: 'Bearer nope' } });
  assert.equal(reload.status, 401);
  const ok = await fetch(`${tokened.admin}/admin/tools`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(ok.status, 200, await ok.text());
  const health = await fetch(`${tokened.admin}/health/ready`);
  assert.equal(health.status, 200);
});

async function startFails(env) {
  const proc = spawn(process.env.CL_BIN || path.join(ROOT, 'build/context-loader'), ['--config', path.join(ROOT, 'etc/context-loader.conf')],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...serverEnv(stack.sim.base, env) } });
  let err = '';
  proc.stderr.on('data', (c) => { err += c; });
  const timer = setTimeout(() => proc.kill('SIGKILL'), 10000);
  const [code] = await once(proc, 'exit');
  clearTimeout(timer);
  return { code, err };
}

test('admin listener off loopback without admin.token_file: the start is refused with a precise error', async () => {
  const r = await startFails({ CL_ADMIN_LISTEN: '0.0.0.0:0' });
  assert.notEqual(r.code, 0);
  assert.match(r.err, /admin_listen: 0\.0\.0\.0:0 is not a loopback address/);
  assert.match(r.err, /admin\.token_file/);
  const short = path.join(tmp, 'short.token');
  fs.writeFileSync(short, 'abc\n');
  const s = await startFails({ CL_ADMIN_TOKEN_FILE: short });
  assert.notEqual(s.code, 0);
  assert.match(s.err, /admin\.token_file: .*at least 16 characters/);
  // with a token it starts
  const srv = await startServer(stack.sim.base, { env: { CL_ADMIN_LISTEN: '0.0.0.0:0', CL_ADMIN_TOKEN_FILE: tokenFile } });
  try {
    const r2 = await fetch(`${srv.admin}/admin/tools`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(r2.status, 200);
  } finally {
    await srv.stop();
  }
});

const mcpInit = (extra) => `POST ${PREFIX}/mcp HTTP/1.1\r\n${extra}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer demo-user-token\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`;

test('Origin and Host are parsed exactly: userinfo and suffix tricks are foreign', async () => {
  const port = portOf(stack.server.base);
  for (const origin of ['http://localhost:1@evil.com', `http://localhost:${port}.evil.com`, 'http://127.0.0.1.evil.com', 'http://localhost/path', 'http://localhost:99999']) {
    const r = await raw(stack.server.base, mcpInit(`Host: 127.0.0.1:${port}\r\nOrigin: ${origin}\r\n`));
    assert.equal(r.status, 403, `${origin}: ${r.status} ${r.body}`);
  }
  for (const host of [`localhost:${port}.evil.com`, 'localhost:1@evil.com', 'evil.com:80:localhost']) {
    const r = await raw(stack.server.base, mcpInit(`Host: ${host}\r\n`));
    assert.equal(r.status, 403, `Host ${host}: ${r.status} ${r.body}`);
  }
  // loopback origins with a port are still admitted (then the body fails JSON-RPC checks)
  for (const origin of [`http://localhost:${port}`, 'http://127.0.0.1', 'https://[::1]:8443']) {
    const r = await raw(stack.server.base, mcpInit(`Host: localhost:${port}\r\nOrigin: ${origin}\r\n`));
    assert.notEqual(r.status, 403, `${origin}: ${r.body}`);
  }
});

test('401 without credentials carries no error code; a bad token gets invalid_token', async () => {
  const url = `${stack.server.base}${PREFIX}/kn/list_knowledge_networks`;
  const none = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  assert.equal(none.status, 401);
  assert.equal(none.headers.get('www-authenticate'), 'Bearer realm="context-loader"');
  const bad = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer not-a-token' }, body: '{}' });
  assert.equal(bad.status, 401);
  assert.equal(bad.headers.get('www-authenticate'), 'Bearer realm="context-loader", error="invalid_token"');
  const mcpNone = await fetch(stack.server.mcpUrl, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
  assert.equal(mcpNone.status, 401);
  assert.doesNotMatch(mcpNone.headers.get('www-authenticate'), /error=/);
});
