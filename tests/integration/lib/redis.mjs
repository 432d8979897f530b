// A redis-server of a test's own, on 127.0.0.1 and a free port, and the small
// helpers the tests that need one share (scaleout, workers). The caller stops the
// returned process by PID (stack.mjs stop).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

// Absolute path of an executable on PATH (or /usr/sbin, /sbin), or null.
export function which(cmd) {
  for (const d of (process.env.PATH || '').split(':').concat(['/usr/sbin', '/sbin'])) {
    const p = path.join(d, cmd);
    try { fs.accessSync(p, fs.constants.X_OK); return p; } catch { /* next */ }
  }
  return null;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

// Polls fn (errors count as "not yet") every 50 ms until it is truthy; throws after ms.
export async function waitFor(fn, ms, what) {
  const end = Date.now() + ms;
  for (;;) {
    try { if (await fn()) return; } catch { /* not yet */ }
    if (Date.now() > end) throw new Error(`${what}: not ready after ${ms} ms`);
    await sleep(50);
  }
}

export function redisPing(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.setTimeout(500, () => { s.destroy(); resolve(false); });
    s.on('error', () => resolve(false));
    s.on('connect', () => s.write('PING\r\n'));
    s.on('data', (d) => { s.destroy(); resolve(d.toString().startsWith('+PONG')); });
  });
}

// Starts redis-server (binary at bin) on port with its files in dir and waits for
// PONG. durable: AOF with fsync on every write, so what was stored survives kill -9.
export async function startRedisServer(bin, { port, dir, durable = false }) {
  const persistence = durable ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no'];
  const proc = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '',
    ...persistence, '--daemonize', 'no', '--logfile', path.join(dir, 'redis.log')], { stdio: 'ignore' });
  await waitFor(() => redisPing(port), 5000, 'redis-server');
  return proc;
}
