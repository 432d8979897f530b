// What a new operator meets first: the README's run command, from the repository root,
// with the shipped configuration (only the listeners moved to free ports, by the
// environment, which leaves the paths of the file as they are).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { ROOT, stop, startStack } from './lib/stack.mjs';
import { session } from './lib/mcp-session.mjs';

const BIN = process.env.CL_BIN || path.join(ROOT, 'build/context-loader');

// The environment without the CL_* variables of whoever runs the tests.
function cleanEnv(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('CL_') && k !== 'BKN_TRACE_CORE_URL') env[k] = v;
  return { ...env, ...extra };
}

// Starts `BIN --config etc/context-loader.conf` in ROOT; resolves with the process, its
// log lines (parsed) and the ports once both listeners are bound, or rejects with the
// log when it exits first.
export function startShipped(env = {}) {
  const proc = spawn(BIN, ['--config', 'etc/context-loader.conf'], {
    cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'],
    env: cleanEnv({ CL_LISTEN: '127.0.0.1:0', CL_ADMIN_LISTEN: '127.0.0.1:0', CL_LUA_MAX_RUN_MS: process.env.CL_LUA_MAX_RUN_MS || '1000', ...env }),
  });
  const lines = [];
  let text = '';
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error(`no start in 15 s:\n${text}`)); }, 15000);
    proc.stderr.on('data', (c) => {
      text += c.toString();
      const parts = text.split('\n');
      lines.length = 0;
      for (const l of parts) { try { lines.push(JSON.parse(l)); } catch { /* partial or not JSON */ } }
      const ports = Object.fromEntries(lines.filter((j) => j.msg === 'listening').map((j) => [j.listener, j.port]));
      if (ports.public && ports.admin && lines.some((j) => j.msg === 'started')) {
        clearTimeout(t);
        resolve({ proc, lines, log: () => text, public: `http://127.0.0.1:${ports.public}`, admin: `http://127.0.0.1:${ports.admin}` });
      }
    });
    proc.on('exit', (code) => { clearTimeout(t); reject(new Error(`exited ${code}:\n${text}`)); });
  });
}

test("the README's run command starts the service from the repository root with the shipped config", async () => {
  const s = await startShipped();
  try {
    const started = s.lines.find((j) => j.msg === 'started');
    assert.equal(started.config, 'etc/context-loader.conf');
    assert.ok(started.tools > 0, JSON.stringify(started));
    const r = await fetch(`${s.public}/health/ready`, { signal: AbortSignal.timeout(5000) });
    assert.equal(r.status, 200);
    assert.equal((await r.json()).tools, started.tools);
  } finally {
    assert.equal(await stop(s.proc), 0);
  }
});

// The shipped configuration has no Trace Core (trace_core.url is empty): the service
// starts, but every MCP tool answers feature_not_installed. That must be visible to the
// operator before a caller finds it: a warn line at start naming the setting, a notice
// from --check-config, and Trace Core in /health/ready.
test('a deployment without Trace Core says so: start-up warn, --check-config notice, /health/ready', async () => {
  const s = await startShipped();
  try {
    for (let i = 0; i < 1000 && !s.lines.some((j) => j.msg === 'trace core not configured'); i++) await new Promise((r) => setTimeout(r, 20)); // liveness only
    const warn = s.lines.find((j) => j.msg === 'trace core not configured');
    assert.ok(warn, s.log());
    assert.equal(warn.level, 'warn');
    assert.equal(warn.setting, 'trace_core.url');
    assert.equal(warn.env, 'BKN_TRACE_CORE_URL');
    assert.match(warn.effect, /feature_not_installed/);
    const r = await fetch(`${s.public}/health/ready`, { signal: AbortSignal.timeout(5000) });
    assert.equal(r.status, 200);
    const ready = await r.json();
    assert.equal(ready.trace_core.configured, false, JSON.stringify(ready));
    assert.match(ready.trace_core.effect, /feature_not_installed.*trace_core\.url/);
  } finally {
    assert.equal(await stop(s.proc), 0);
  }
  const check = spawnSync(BIN, ['--config', 'etc/context-loader.conf', '--check-config'], { cwd: ROOT, encoding: 'utf8', env: cleanEnv(), timeout: 30000 });
  assert.equal(check.status, 0, check.stderr);
  assert.match(check.stdout, /configuration etc\/context-loader\.conf is valid/);
  assert.match(check.stderr, /^context-loader: notice: trace_core\.url \(env BKN_TRACE_CORE_URL\) is empty: every MCP tool, lifecycle and business, answers feature_not_installed/m);
  // with Trace Core set, no notice
  const set = spawnSync(BIN, ['--config', 'etc/context-loader.conf', '--check-config'], { cwd: ROOT, encoding: 'utf8', env: cleanEnv({ BKN_TRACE_CORE_URL: 'http://127.0.0.1:9' }), timeout: 30000 });
  assert.equal(set.status, 0, set.stderr);
  assert.doesNotMatch(set.stderr, /trace_core/);
});

test('/health/ready reports a configured Trace Core and the last probe verdict', async () => {
  // a port nothing listens on: the first lifecycle call fails, and the probe that
  // verifies the outage says down
  const net = await import('node:net');
  const srv = net.createServer();
  await new Promise((ok) => srv.listen(0, '127.0.0.1', ok));
  const dead = srv.address().port;
  await new Promise((ok) => srv.close(ok));
  const stack = await startStack({ capture: 'enabled', env: { BKN_TRACE_CORE_URL: `http://127.0.0.1:${dead}` } });
  try {
    const ready = async () => (await (await fetch(`${stack.server.base}/health/ready`, { signal: AbortSignal.timeout(5000) })).json()).trace_core;
    let t = await ready();
    assert.deepEqual(t, { configured: true, breaker: 'closed', last_probe: null });
    // a managed call finds Trace Core unreachable; the probe verifies the outage and
    // the call runs unrecorded
    const mcp = await session(stack.server.mcpUrl);
    const r = await mcp.call('list_knowledge_networks', { bkn_context: { conversation_id: 'conv_x', interaction_id: 'int_x' } });
    assert.equal(r.result.isError, false, JSON.stringify(r));
    assert.equal(r.result._meta['openbkn.ai/trace-status'], 'unrecorded');
    t = await ready();
    assert.equal(t.configured, true);
    assert.equal(t.last_probe.verdict, 'down', JSON.stringify(t));
    assert.match(t.last_probe.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.equal(t.breaker, 'open');
  } finally {
    assert.equal(await stack.stop(), 0);
  }
});
