// The campaign's cluster, all on 127.0.0.1: the platform simulator (Trace Core
// included), one redis-server, two context-loader instances on fixed ports sharing
// it, and nginx round-robin in front of them. Every process is started here and
// stopped by its PID; an instance can be killed (SIGKILL) and started again on the
// same port, reloaded (SIGHUP), and Redis restarted with or without its data.
import fs from 'node:fs';
import path from 'node:path';
import { startSimulator, startServer, stop } from '../integration/lib/stack.mjs';
import { freePort, startRedisServer, waitFor } from '../integration/lib/redis.mjs';
import { startNginx } from '../integration/lib/lb.mjs';
import { procStats } from '../integration/lib/faultkit.mjs';

export async function startCluster({ bin, dir, redisBin, nginxBin, simTtlS, env = {} }) {
  const c = { dir, instances: [], samples: [], pendingFaults: [] };
  c.redisPort = await freePort();
  c.lbPort = await freePort();
  c.redisDir = path.join(dir, 'redis');
  fs.mkdirSync(c.redisDir, { recursive: true });
  c.redis = await startRedisServer(redisBin, { port: c.redisPort, dir: c.redisDir, durable: true });
  c.sim = await startSimulator({ capture: 'enabled', ttl: simTtlS });
  const common = {
    CL_STATE_STORE: `redis://127.0.0.1:${c.redisPort}/0`,
    CL_SESSION_SECRET: 'chaos-session-secret',
    CL_STATE_STORE_COMMAND_TIMEOUT_MS: '500',
    CL_STATE_STORE_RECONNECT_MAX_MS: '300',
    CL_STATE_STORE_KEY_PREFIX: 'chaos:',
    EXECUTE_SKILL_ENABLED: 'true',
    CL_IDEMPOTENCY_WAIT_MS: '2000',
    // longer than the longest call here (4 s upstream, 1.5 s per Trace Core try)
    CL_IDEMPOTENCY_CLAIM_TTL_MS: '15000',
    CL_UPSTREAM_ONTOLOGY_QUERY_TIMEOUT_MS: '4000',
    CL_UPSTREAM_OPERATOR_INTEGRATION_TIMEOUT_MS: '4000',
    CL_UPSTREAM_BKN_BACKEND_TIMEOUT_MS: '4000',
    CL_TRACE_CORE_TIMEOUT_MS: '1500',
    CL_LUA_MAX_RUN_MS: process.env.CL_LUA_MAX_RUN_MS || '1000',
    ...env,
  };
  for (const name of ['A', 'B']) {
    const inst = { name, port: await freePort(), admin: await freePort(), server: null, lives: 0 };
    inst.env = { ...common, CL_LISTEN: `127.0.0.1:${inst.port}`, CL_ADMIN_LISTEN: `127.0.0.1:${inst.admin}` };
    inst.base = `http://127.0.0.1:${inst.port}`;
    c.instances.push(inst);
  }
  c.startInstance = async (inst) => {
    inst.lives += 1;
    const logFile = path.join(dir, `instance-${inst.name}.log`);
    inst.server = await startServer(c.sim.base, { bin, env: inst.env, logFile, quiet: true });
    inst.pid = inst.server.proc.pid;
    inst.startedAt = Date.now();
    inst.server.logs.length = 0;
  };
  for (const inst of c.instances) await c.startInstance(inst);
  c.nginx = await startNginx(nginxBin, { dir, port: c.lbPort, upstreams: c.instances.map((i) => i.port), workerConnections: 1024 });
  c.lb = `http://127.0.0.1:${c.lbPort}`;
  c.targets = { LB: c.lb, A: c.instances[0].base, B: c.instances[1].base };

  c.kill = async (inst) => {
    if (!inst.server) return;
    const s = inst.server;
    inst.server = null;
    await stop(s.proc, 'SIGKILL');
  };
  c.restart = async (inst) => {
    if (inst.server) return;
    // the port may still be held for a moment by the dead process's sockets
    await waitFor(async () => { await c.startInstance(inst); return true; }, 30000, `instance ${inst.name} restart`);
  };
  c.hup = (inst) => { if (inst.server) inst.server.proc.kill('SIGHUP'); };
  // durable: the AOF (fsync always) survives; otherwise the data directory is
  // emptied first, as a Redis without persistence comes back.
  c.restartRedis = async ({ durable, downMs }) => {
    await stop(c.redis, 'SIGKILL');
    if (!durable) {
      for (const f of fs.readdirSync(c.redisDir)) if (f !== 'redis.log') fs.rmSync(path.join(c.redisDir, f), { recursive: true, force: true });
    }
    await new Promise((r) => setTimeout(r, downMs));
    c.redis = await startRedisServer(redisBin, { port: c.redisPort, dir: c.redisDir, durable: true });
  };
  // /proc figures of every live instance, tagged with its life
  c.sample = (phase) => {
    for (const inst of c.instances) {
      if (!inst.server) continue;
      inst.server.logs.length = 0; // the driver keeps log files, not memory
      try {
        c.samples.push({ t: Date.now(), phase, name: inst.name, life: inst.lives, pid: inst.pid, uptimeMs: Date.now() - inst.startedAt, ...procStats(inst.pid) });
      } catch { /* exited between the check and the read */ }
    }
  };
  c.stop = async () => {
    const codes = {};
    if (c.nginx) await stop(c.nginx, 'SIGQUIT');
    for (const inst of c.instances) if (inst.server) codes[inst.name] = await stop(inst.server.proc, 'SIGTERM', 20000);
    await c.sim.stop();
    await stop(c.redis);
    return codes;
  };
  return c;
}

export async function simJson(c, method, p, body) {
  const r = await fetch(`${c.sim.base}${p}`, {
    method, headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(10000),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${text}`);
  return JSON.parse(text);
}
