// Starts the platform simulator and a context-loader wired to it, both on
// 127.0.0.1 with ephemeral ports, and stops them by PID. Used by the integration
// tests, the external-check runner and scripts/demo.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const PREFIX = '/api/agent-retrieval/v1';

function waitForLine(stream, predicate, timeoutMs, what) {
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => { cleanup(); reject(new Error(`${what}: not ready after ${timeoutMs} ms`)); }, timeoutMs);
    const onData = (chunk) => {
      buf += chunk.toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        const v = predicate(line);
        if (v !== undefined) { cleanup(); resolve(v); return; }
      }
    };
    const onExit = (code) => { cleanup(); reject(new Error(`${what} exited early with ${code}`)); };
    function cleanup() { clearTimeout(timer); stream.off('data', onData); stream.proc?.off('exit', onExit); }
    stream.on('data', onData);
    stream.proc?.on('exit', onExit);
  });
}

// capture: the simulated deployment's Trace Core capture policy ('enabled' by
// default; 'disabled' survives /_sim/reset).
export async function startSimulator({ ttl = 600, capture } = {}) {
  const proc = spawn(process.execPath, [path.join(ROOT, 'tests/platform/sim.mjs'), '--port', '0', '--host', '127.0.0.1', '--ttl', String(ttl)],
    { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, SIM_TRACE_CAPTURE: capture || 'enabled' } });
  proc.stdout.proc = proc;
  const info = await waitForLine(proc.stdout, (l) => { try { const j = JSON.parse(l); return j.port ? j : undefined; } catch { return undefined; } }, 60000, 'simulator');
  return { proc, base: info.base, port: info.port, stop: () => stop(proc) };
}

export function serverEnv(simBase, extra = {}) {
  return {
    CL_LISTEN: '127.0.0.1:0',
    CL_ADMIN_LISTEN: '127.0.0.1:0',
    CL_TOOLS_DIR: path.join(ROOT, 'tools'),
    CL_LUA_DIR: path.join(ROOT, 'lua'),
    CL_UPSTREAM_ONTOLOGY_QUERY_URL: `${simBase}/api/ontology-query`,
    CL_UPSTREAM_BKN_BACKEND_URL: `${simBase}/api/bkn-backend`,
    CL_UPSTREAM_VEGA_URL: `${simBase}/api/vega-backend`,
    CL_UPSTREAM_OPERATOR_INTEGRATION_URL: `${simBase}/api/agent-operator-integration`,
    CL_UPSTREAM_MF_MODEL_API_URL: `${simBase}/api/private/mf-model-api`,
    CL_UPSTREAM_BKN_SAFE_URL: simBase,
    CL_OAUTH_INTROSPECT_URL: `${simBase}/admin/oauth2/introspect`,
    CL_BKN_SAFE_INTROSPECT_URL: `${simBase}/api/safe/v1/api-keys/introspect`,
    BKN_TRACE_CORE_URL: simBase,
    ...extra,
  };
}

// Starts the server; resolves when both listeners are bound.
// logFile: a path the service's log lines are appended to as well (the demo names it).
export async function startServer(simBase, { bin = process.env.CL_BIN || path.join(ROOT, 'build/context-loader'), env = {}, args = [], quiet = !process.env.CL_VERBOSE, logFile } = {}) {
  const proc = spawn(bin, ['--config', path.join(ROOT, 'etc/context-loader.conf'), ...args],
    { stdio: ['ignore', 'inherit', 'pipe'], env: { ...process.env, ...serverEnv(simBase, env) } });
  proc.stderr.proc = proc;
  const logs = [];
  const ports = {};
  const file = logFile ? fs.createWriteStream(logFile, { flags: 'a' }) : null;
  proc.stderr.on('data', (c) => { const s = c.toString(); logs.push(s); if (file) file.write(s); if (!quiet) process.stderr.write(s); });
  if (file) proc.on('exit', () => file.end());
  await waitForLine(proc.stderr, (l) => {
    try {
      const j = JSON.parse(l);
      if (j.msg === 'listening') ports[j.listener] = j.port;
      if (ports.public && ports.admin) return ports;
    } catch { /* not a log line */ }
    return undefined;
  }, 60000, 'context-loader');
  const base = `http://127.0.0.1:${ports.public}`;
  return {
    proc, logs, base, admin: `http://127.0.0.1:${ports.admin}`,
    mcpUrl: `${base}${PREFIX}/mcp`,
    stop: () => stop(proc),
  };
}

// (timeoutMs is a liveness cap: a sanitizer build's leak check at exit takes seconds
// on a loaded machine, and a SIGKILL then would read as an unclean exit)
export async function stop(proc, signal = 'SIGTERM', timeoutMs = 60000) {
  if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
  proc.kill(signal);
  const t = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  const [code] = await once(proc, 'exit');
  clearTimeout(t);
  return code;
}

// opts.capture: 'enabled' (default) | 'disabled': the simulated Trace Core's capture
// policy (tests that are not about the lifecycle run with capture disabled).
export async function startStack(opts = {}) {
  const sim = await startSimulator({ capture: opts.capture });
  try {
    const server = await startServer(sim.base, opts);
    return { sim, server, stop: async () => { const code = await server.stop(); await sim.stop(); return code; } };
  } catch (e) {
    await sim.stop();
    throw e;
  }
}

export async function setCapture(simBase, capture) {
  const r = await fetch(`${simBase}/_sim/trace`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ capture }) });
  if (r.status !== 200) throw new Error(`cannot set capture policy: HTTP ${r.status}`);
}
