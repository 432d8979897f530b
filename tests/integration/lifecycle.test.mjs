// Process lifecycle: graceful SIGTERM, start refused on a
// broken tools directory or bad configuration, --check-tools, and hot reload
// through the admin listener keeping the old generation on failure.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { startStack, serverEnv, stop, ROOT, PREFIX } from './lib/stack.mjs';

const BIN = process.env.CL_BIN || path.join(ROOT, 'build/context-loader');
const CONF = path.join(ROOT, 'etc/context-loader.conf');
// Nothing listens here: the failing starts never reach an upstream.
const NO_SIM = 'http://127.0.0.1:9';
const BROKEN = 'local M = {\n    name = "broken",\n    version = "1.0.0" +\n}\nreturn M\n';
// The business tools /mcp lists from a tools directory: files declaring the "mcp"
// surface and no gate (file name = tool name), sorted by name.
function mcpToolsOf(dir) {
  return fs.readdirSync(dir).filter((f) => f.endsWith('.lua')).filter((f) => {
    const src = fs.readFileSync(path.join(dir, f), 'utf8');
    return /^    surfaces = \{[^}]*"mcp"/m.test(src) && !/^    gate = /m.test(src);
  }).map((f) => f.slice(0, -4)).sort();
}
const luaFiles = (dir) => fs.readdirSync(dir).filter((f) => f.endsWith('.lua'));

const tmpDirs = [];
const running = [];

function toolsCopy() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-tools-'));
  tmpDirs.push(dir);
  fs.cpSync(path.join(ROOT, 'tools'), dir, { recursive: true });
  return dir;
}

// Runs the binary to completion (bounded); kills it by PID on timeout.
function run(args, env = {}, timeoutMs = 10000) {
  return new Promise((resolve) => {
    const proc = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...serverEnv(NO_SIM, env) } });
    running.push(proc);
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (c) => { stdout += c; });
    proc.stderr.on('data', (c) => { stderr += c; });
    const t = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
    proc.on('close', (code, signal) => {
      clearTimeout(t);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

async function post(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: 'Bearer demo-user-token', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(10000),
  });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, headers: r.headers, text, json };
}

async function initialize(server) {
  const r = await post(server.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'lifecycle', version: '1' } } });
  assert.equal(r.status, 200, r.text);
  return r.headers.get('mcp-session-id');
}

// Opens GET /mcp and resolves with the request once the first chunk arrived.
function openStream(server, sid) {
  return new Promise((resolve, reject) => {
    const u = new URL(server.mcpUrl);
    const req = http.request({ host: '127.0.0.1', port: u.port, path: u.pathname, method: 'GET', agent: false, headers: { accept: 'text/event-stream', authorization: 'Bearer demo-user-token', 'mcp-session-id': sid } }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`stream status ${res.statusCode}`));
      res.once('data', () => resolve({ req, res }));
      res.on('error', () => {});
    });
    req.on('error', () => {});
    setTimeout(() => reject(new Error('stream did not open')), 5000).unref();
    req.end();
  });
}

// Every stderr line of the server is one JSON object (structured logs).
function assertJsonLogs(server) {
  const lines = server.logs.join('').split('\n').filter((l) => l.length);
  assert.ok(lines.length > 0);
  for (const l of lines) {
    let j;
    assert.doesNotThrow(() => { j = JSON.parse(l); }, `not a JSON log line: ${l}`);
    assert.equal(typeof j.msg, 'string', l);
  }
  return lines.map((l) => JSON.parse(l));
}

after(async () => {
  for (const p of running) await stop(p, 'SIGKILL', 2000);
  for (const d of tmpDirs) fs.rmSync(d, { recursive: true, force: true });
});

test('SIGTERM exits 0 promptly, even with an open GET stream', async () => {
  const stack = await startStack({ capture: 'disabled' });
  try {
    const sid = await initialize(stack.server);
    const { res } = await openStream(stack.server, sid);
    const ended = new Promise((resolve) => { res.on('end', resolve); res.on('close', resolve); });
    const code = await stack.server.stop();
    assert.equal(code, 0);
    // it did not wait out the grace period for the stream: nothing was left in flight
    // (judged on what the server reports, not on the time: a loaded machine is slow)
    const lines = stack.server.logs.join('').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    const shutdown = lines.find((l) => l.msg === 'shutdown');
    assert.ok(shutdown, 'no shutdown log line');
    assert.equal(shutdown.abandoned, 0, JSON.stringify(shutdown));
    await ended; // the stream was closed by the server, not left hanging
  } finally {
    await stack.stop();
  }
});

test('SIGTERM lets an in-flight call finish', async () => {
  const stack = await startStack({ capture: 'disabled' });
  try {
    const f = await fetch(`${stack.sim.base}/_sim/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ service: 'bkn_backend', latency_ms: 700, count: 1 }), signal: AbortSignal.timeout(5000) });
    assert.ok(f.ok);
    const pending = post(`${stack.server.base}${PREFIX}/kn/list_knowledge_networks`, '{}');
    await new Promise((r) => setTimeout(r, 200));
    const stopping = stack.server.stop();
    const r = await pending;
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.total_count, 3);
    assert.equal(await stopping, 0);
  } finally {
    await stack.stop();
  }
});

test('a broken tool script refuses the start and names file:line', async () => {
  const dir = toolsCopy();
  fs.writeFileSync(path.join(dir, 'broken.lua'), BROKEN);
  const r = await run(['--config', CONF], { CL_TOOLS_DIR: dir });
  assert.notEqual(r.code, 0, 'started with a broken tool');
  assert.equal(r.signal, null, 'killed by the timeout instead of exiting');
  assert.match(r.stderr, /broken\.lua:4:/);
  assert.doesNotMatch(r.stderr, /"msg":"listening"/);
});

test('--check-tools: 1 with the error listed for a broken dir, 0 for tools/', async () => {
  const dir = toolsCopy();
  fs.writeFileSync(path.join(dir, 'broken.lua'), BROKEN);
  const bad = await run(['--check-tools', dir, '--config', CONF]);
  assert.equal(bad.code, 1, bad.stdout + bad.stderr);
  assert.match(bad.stdout + bad.stderr, /broken\.lua:4:/);
  const good = await run(['--check-tools', path.join(ROOT, 'tools'), '--config', CONF]);
  assert.equal(good.code, 0, good.stdout + good.stderr);
});

test('bad configuration fails at start naming the key', async () => {
  const lang = await run(['--config', CONF], { CL_LANGUAGE: 'fr-FR' });
  assert.notEqual(lang.code, 0);
  assert.equal(lang.signal, null);
  assert.match(lang.stderr, /CL_LANGUAGE/);
  assert.match(lang.stderr, /\blanguage\b/);
  assert.match(lang.stderr, /fr-FR/);
  const listen = await run(['--config', CONF], { CL_LISTEN: 'nonsense' });
  assert.notEqual(listen.code, 0);
  assert.equal(listen.signal, null);
  assert.match(listen.stderr, /CL_LISTEN/);
  assert.match(listen.stderr, /\blisten\b/);
});

test('admin reload: 200 for a good dir, 422 naming file:line for a broken file, old tools keep serving', async () => {
  const dir = toolsCopy();
  const stack = await startStack({ capture: 'disabled', env: { CL_TOOLS_DIR: dir } });
  const reload = async () => {
    const r = await fetch(`${stack.server.admin}/admin/reload`, { method: 'POST', signal: AbortSignal.timeout(10000) });
    return { status: r.status, json: await r.json() };
  };
  const toolNames = async (sid) => {
    const r = await post(stack.server.mcpUrl, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { 'mcp-session-id': sid });
    assert.equal(r.status, 200, r.text);
    // business tools only (the lifecycle tools are the core's: declared in lua/, not in tools/)
    return r.json.result.tools.map((t) => t.name).filter((n) => !n.startsWith('bkn_')).sort();
  };
  try {
    const sid = await initialize(stack.server);
    const base = mcpToolsOf(dir);
    assert.ok(base.includes('list_knowledge_networks') && base.includes('query_object_instance'), base.join(' '));
    assert.deepEqual(await toolNames(sid), base);
    const withCopy = [...base, 'list_knowledge_networks_copy'].sort();
    const same = await reload();
    assert.equal(same.status, 200, JSON.stringify(same.json));
    assert.equal(same.json.ok, true);

    // A new tool appears after a good reload.
    const src = fs.readFileSync(path.join(dir, 'list_knowledge_networks.lua'), 'utf8');
    // Names and display orders are unique per generation.
    const copy = src.replace('name = "list_knowledge_networks"', 'name = "list_knowledge_networks_copy"').replace('order = 110,', 'order = 111,');
    assert.notEqual(copy, src);
    fs.writeFileSync(path.join(dir, 'list_knowledge_networks_copy.lua'), copy);
    const added = await reload();
    assert.equal(added.status, 200, JSON.stringify(added.json));
    assert.deepEqual(await toolNames(sid), withCopy);
    const viaCopy = await post(`${stack.server.base}${PREFIX}/kn/list_knowledge_networks_copy`, '{}');
    assert.equal(viaCopy.status, 200, viaCopy.text);

    fs.writeFileSync(path.join(dir, 'broken.lua'), BROKEN);
    const bad = await reload();
    assert.equal(bad.status, 422, JSON.stringify(bad.json));
    assert.equal(bad.json.ok, false);
    assert.match(bad.json.report, /broken\.lua:4:/);
    // The previous generation keeps serving, unchanged.
    assert.deepEqual(await toolNames(sid), withCopy);
    const call = await post(stack.server.mcpUrl, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'list_knowledge_networks', arguments: {} } }, { 'mcp-session-id': sid });
    assert.equal(call.json.result.isError, false, call.text);
    const restCall = await post(`${stack.server.base}${PREFIX}/kn/query_object_instance`, { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1 });
    assert.equal(restCall.status, 200, restCall.text);

    // Fixing the directory makes the next reload succeed again.
    fs.rmSync(path.join(dir, 'broken.lua'));
    fs.rmSync(path.join(dir, 'list_knowledge_networks_copy.lua'));
    const fixed = await reload();
    assert.equal(fixed.status, 200, JSON.stringify(fixed.json));
    assert.deepEqual(await toolNames(sid), base);
    const gone = await post(`${stack.server.base}${PREFIX}/kn/list_knowledge_networks_copy`, '{}');
    assert.equal(gone.status, 404);
    const ready = await (await fetch(`${stack.server.base}/health/ready`, { signal: AbortSignal.timeout(5000) })).json();
    assert.equal(ready.tools, luaFiles(dir).length);
    assert.equal(ready.tools, luaFiles(path.join(ROOT, 'tools')).length);
    assert.ok(ready.generation >= 3, JSON.stringify(ready));
  } finally {
    assert.equal(await stack.stop(), 0);
  }
  const reloads = assertJsonLogs(stack.server).filter((j) => j.msg === 'reload');
  assert.deepEqual(reloads.map((j) => j.ok), [true, true, false, true]);
  assert.match(reloads[2].report, /broken\.lua:4:/);
});

test('a reload during an in-flight call does not drop it', async () => {
  const stack = await startStack({ capture: 'disabled' });
  try {
    const f = await fetch(`${stack.sim.base}/_sim/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ service: 'ontology_query', latency_ms: 600, count: 1 }), signal: AbortSignal.timeout(5000) });
    assert.ok(f.ok);
    const pending = post(`${stack.server.base}${PREFIX}/kn/query_object_instance`, { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 3 });
    await new Promise((r) => setTimeout(r, 150));
    const rl = await fetch(`${stack.server.admin}/admin/reload`, { method: 'POST', signal: AbortSignal.timeout(5000) });
    assert.equal(rl.status, 200);
    assert.equal((await rl.json()).ok, true);
    const r = await pending;
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.datas.length, 3);
    const ready = await (await fetch(`${stack.server.base}/health/ready`, { signal: AbortSignal.timeout(5000) })).json();
    assert.equal(ready.generation, 2);
  } finally {
    assert.equal(await stack.stop(), 0);
  }
  assertJsonLogs(stack.server);
});
