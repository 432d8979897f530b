// Routes a tool declares (its `routes`, checked by lua/contract.lua): the core
// registers them next to its own, fills the {parameter} segments and the body into
// the arguments, and refuses at load a route that clashes with one of the core's or
// with another tool's.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startStack, ROOT, PREFIX } from './lib/stack.mjs';

const BIN = process.env.CL_BIN || path.join(ROOT, 'build/context-loader');
const FIXTURE = path.join(ROOT, 'tests/fixtures/tools_routes/echo_route.lua');
const dirs = [];
let stack;

function toolsDir(extra = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-routes-'));
  dirs.push(dir);
  fs.cpSync(path.join(ROOT, 'tools'), dir, { recursive: true });
  fs.copyFileSync(FIXTURE, path.join(dir, 'echo_route.lua'));
  for (const [name, text] of Object.entries(extra)) fs.writeFileSync(path.join(dir, name), text);
  return dir;
}

before(async () => {
  stack = await startStack({ capture: 'disabled', env: { CL_TOOLS_DIR: toolsDir() } });
});

after(async () => {
  if (stack) assert.equal(await stack.stop(), 0);
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

async function call(p, { method = 'POST', body = {} } = {}) {
  const r = await fetch(`${stack.server.base}${PREFIX}${p}`, {
    method,
    headers: { 'content-type': 'application/json', authorization: 'Bearer demo-user-token' },
    body: method === 'POST' ? JSON.stringify(body) : undefined,
    signal: AbortSignal.timeout(10000),
  });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, headers: r.headers, text, json };
}

test('a declared route runs its tool: path parameters and the body become the arguments', async () => {
  const ok = await call('/echo/abc%20d/run', { body: { n: 3 } });
  assert.equal(ok.status, 200, ok.text);
  assert.deepEqual(ok.json, { id: 'abc d', n: 3 });
  // the path's parameter wins over the same name in the body
  const both = await call('/echo/abc/run', { body: { id: 'other', n: 1 } });
  assert.deepEqual(both.json, { id: 'abc', n: 1 }, both.text);
  // the tool's schema applies as on /kn/<tool>
  const bad = await call('/echo/abc/run', { body: { n: 'x' } });
  assert.equal(bad.status, 400, bad.text);
  assert.ok(JSON.stringify(bad.json.details).includes('/n'), bad.text);
  const dot = await call('/echo/a%2fb/run'); // decodes to another id
  assert.equal(dot.status, 400, dot.text);
  assert.ok(String(dot.json.details).startsWith('id '), dot.text);
  const get = await call('/echo/abc/run', { method: 'GET' });
  assert.equal(get.status, 405, get.text);
  assert.equal(get.headers.get('allow'), 'POST');
  // only its route reaches it: no /kn twin for a tool on no REST surface, no other shape
  assert.equal((await call('/kn/echo_route', { body: { id: 'a' } })).status, 404);
  assert.equal((await call('/echo/abc')).status, 404);
  assert.equal((await call('/echo/abc/run/more')).status, 404);
});

function checkTools(extra) {
  const dir = toolsDir(extra);
  return spawnSync(BIN, ['--check-tools', dir, '--config', path.join(ROOT, 'etc/context-loader.conf')],
    { encoding: 'utf8', env: { ...process.env, CL_LUA_DIR: path.join(ROOT, 'lua') }, timeout: 30000 });
}

const clashing = (name, order, route) => fs.readFileSync(FIXTURE, 'utf8')
  .replaceAll('echo_route', name).replace('order = 991', `order = ${order}`)
  .replace('path = "/echo/{id}/run"', `path = "${route}"`);

test('a route that clashes with the core\'s or another tool\'s is refused at load, naming both', () => {
  const core = checkTools({ 'shadow_info.lua': clashing('shadow_info', 992, '/mcp/info') });
  assert.notEqual(core.status, 0, core.stdout + core.stderr);
  assert.match(core.stdout + core.stderr, /shadow_info\.lua:\d+: routes\[1\]: POST \/mcp\/info clashes with the core's route \/mcp\/info/);
  const tool = checkTools({ 'shadow_proxy.lua': clashing('shadow_proxy', 993, '/mcp/proxy/{id}/tools/x/call') });
  assert.notEqual(tool.status, 0, tool.stdout + tool.stderr);
  assert.ok((tool.stdout + tool.stderr).includes('shadow_proxy: route POST /mcp/proxy/{id}/tools/x/call clashes with route POST /mcp/proxy/{mcp_id}/tools/{tool_name}/call of mcp_proxy_call'), tool.stdout + tool.stderr);
  const fine = checkTools({});
  assert.equal(fine.status, 0, fine.stdout + fine.stderr);
});
