// What a new operator meets first: the README's run command, from the repository root,
// with the shipped configuration (only the listeners moved to free ports, by the
// environment, which leaves the paths of the file as they are).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { ROOT, stop } from './lib/stack.mjs';

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
