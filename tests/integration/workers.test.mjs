// workers = 2 (issue #17): one master binds the public socket and supervises two
// forked workers sharing one redis-server, all on 127.0.0.1, started here and
// stopped by PID. Every request goes over a fresh TCP connection so the kernel
// spreads them over both workers; the access log line of each request (found by its
// X-Request-Id) says which worker served it. Checked: both workers serve; an MCP
// session minted by one worker works on the other and, once ended, is refused by
// both; an idempotent retry replays across workers with one execution; SIGHUP to the
// master reloads every worker; a worker killed with -9 is replaced and service
// continues; SIGTERM to the master stops everything with exit 0 and no orphans;
// workers = 2 with the memory store refuses to start. Skipped (but for the last
// check) when redis-server is missing.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { startSimulator, startServer, stop, ROOT, PREFIX } from './lib/stack.mjs';
import { which, freePort, waitFor, startRedisServer } from './lib/redis.mjs';

const REDIS = which('redis-server');
const SKIP = REDIS ? false : 'redis-server is not installed (apt-get install redis-server)';
const BIN = process.env.CL_BIN || path.join(ROOT, 'build/context-loader');

const INV = 'X-OpenBKN-Client-Invocation-Id';
let tmp, toolsDir, redis, redisPort, sim, S, T;
let counter = 0;
const uniq = (p) => `${p}-${process.pid}-${++counter}`;

// One request over its own TCP connection (no keep-alive pool); rid: the request id
// the server answered with (bkn-request-id), to find its access log line.
function req(method, p, { body, headers = {} } = {}) {
  const u = new URL(S.base);
  const data = body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const r = http.request({
      host: '127.0.0.1', port: u.port, path: p, method, agent: false,
      headers: {
        connection: 'close', authorization: 'Bearer demo-user-token',
        accept: 'application/json, text/event-stream',
        ...(data === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) }),
        ...headers,
      },
      timeout: 15000,
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { text += c; });
      res.on('end', () => {
        let json;
        try { json = JSON.parse(text); } catch { json = undefined; }
        resolve({ status: res.statusCode, headers: res.headers, text, json, rid: res.headers['bkn-request-id'] });
      });
    });
    r.on('timeout', () => r.destroy(new Error(`${method} ${p}: timeout`)));
    r.on('error', reject);
    r.end(data);
  });
}

function logLines() {
  return S.logs.join('').split('\n').flatMap((l) => { try { return [JSON.parse(l)]; } catch { return []; } });
}

// Which worker served the request with this id (its access log line may trail the reply).
async function workerOf(rid) {
  let w;
  await waitFor(() => {
    const line = logLines().find((j) => j.msg === 'request' && j.request_id === rid);
    w = line?.worker;
    return w !== undefined;
  }, 3000, `access log of ${rid}`);
  return w;
}

// The kernel gives each new connection to whichever worker accepts first, not in
// turn: repeat one request (checked by check) until both workers have served it, at
// most max times. Returns the set of workers seen.
async function onBoth(send, check, max = 60) {
  const seen = new Set();
  for (let i = 0; i < max && seen.size < 2; i++) {
    const r = await send();
    check(r, i);
    seen.add(await workerOf(r.rid));
  }
  return seen;
}

// The current pid of each worker, from the master's "worker ready" lines.
function workerPids() {
  const pids = {};
  for (const j of logLines()) if (j.role === 'master' && j.msg === 'worker ready') pids[j.worker] = j.pid;
  return pids;
}

function alive(pid) {
  try { process.kill(pid, 0); return true; } catch { return false; }
}

const MCP = `${PREFIX}/mcp`;
async function initialize() {
  const r = await req('POST', MCP, { body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'workers', version: '1' } } } });
  assert.equal(r.status, 200, r.text);
  return r.headers['mcp-session-id'];
}
const ping = (sid) => req('POST', MCP, { body: { jsonrpc: '2.0', id: 2, method: 'ping' }, headers: { 'mcp-session-id': sid } });
const toolNames = async (sid) => {
  const r = await req('POST', MCP, { body: { jsonrpc: '2.0', id: 3, method: 'tools/list' }, headers: { 'mcp-session-id': sid } });
  assert.equal(r.status, 200, r.text);
  return { r, names: r.json.result.tools.map((t) => t.name) };
};
const rest = (tool, body, headers = {}) => req('POST', `${PREFIX}/kn/${tool}`, { body, headers });
const query = (extra = {}) => ({ kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 3, ...extra });
const simCall = async (method, p) => {
  const r = await fetch(`${sim.base}${p}`, { method, signal: AbortSignal.timeout(5000) });
  assert.ok(r.ok, `${method} ${p}: ${r.status}`);
  return r.json();
};
const lastSeq = async () => (await simCall('GET', '/_sim/requests')).last_seq;
const isQuery = (r) => r.method === 'POST' && /\/object-types\/[^/?]+(\?|$)/.test(r.path);
const executions = async (since) => (await simCall('GET', `/_sim/requests?since=${since}&service=ontology_query`)).requests.filter(isQuery).length;

before(async () => {
  if (SKIP) return;
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-workers-'));
  toolsDir = path.join(tmp, 'tools');
  fs.cpSync(path.join(ROOT, 'tools'), toolsDir, { recursive: true });
  redisPort = await freePort();
  redis = await startRedisServer(REDIS, { port: redisPort, dir: tmp });
  sim = await startSimulator({ capture: 'enabled' });
  // No session_secret: the master generates one before forking, so every worker
  // accepts every worker's session ids.
  S = await startServer(sim.base, {
    bin: BIN,
    env: {
      CL_WORKERS: '2',
      CL_STATE_STORE: `redis://127.0.0.1:${redisPort}/0`,
      CL_STATE_STORE_KEY_PREFIX: `workers-${process.pid}:`,
      CL_TOOLS_DIR: toolsDir,
      CL_ACCESS_LOG: 'true',
      CL_SHUTDOWN_GRACE_S: '3',
    },
  });
  // startServer returns on the listening lines; the public one comes once every
  // worker is ready
  assert.equal(Object.keys(workerPids()).length, 2);
  const sid = await initialize();
  const r = await req('POST', MCP, { body: { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'bkn_start_interaction', arguments: { question: 'q', agent_name: 'workers', conversation_mode: 'new' } } }, headers: { 'mcp-session-id': sid } });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.result.isError, false, r.text);
  const s = r.json.result.structuredContent;
  T = { conversation_id: s.conversation_id, interaction_id: s.interaction_id };
});

after(async () => {
  if (S) await S.stop();
  if (sim) await sim.stop();
  if (redis) await stop(redis);
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

test('both workers serve fresh connections; every log line names its worker', { skip: SKIP }, async () => {
  const seen = await onBoth(() => req('GET', '/health/ready'), (r) => assert.equal(r.status, 200, r.text));
  assert.deepEqual([...seen].sort(), [0, 1]);
  // worker lines carry "worker", the master's carry "role":"master"
  for (const j of logLines()) assert.ok(j.worker !== undefined || j.role === 'master' || j.msg === 'listening', JSON.stringify(j));
  // one public listening line, printed once by the master
  assert.equal(logLines().filter((j) => j.msg === 'listening' && j.listener === 'public').length, 1);
});

test('a session minted by one worker works on the other; ended, it is refused by both', { skip: SKIP }, async () => {
  const sid = await initialize();
  const ok = await onBoth(() => ping(sid), (r) => {
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.result, {});
  });
  assert.equal(ok.size, 2, 'pings reached both workers');
  const del = await req('DELETE', MCP, { headers: { 'mcp-session-id': sid } });
  assert.equal(del.status, 204, del.text);
  const refused = await onBoth(() => ping(sid), (r) => {
    assert.equal(r.status, 404, r.text);
    assert.equal(r.json.error.code, -32001);
  });
  assert.equal(refused.size, 2, 'refused by both workers');
});

test('an idempotent retry replays across workers, one execution', { skip: SKIP }, async () => {
  const id = uniq('inv');
  const seq = await lastSeq();
  const first = await rest('query_object_instance', query({ bkn_context: T }), { [INV]: id });
  assert.equal(first.status, 200, first.text);
  assert.match(first.headers['bkn-receipt-id'] || '', /^rcpt_/);
  const firstBy = await workerOf(first.rid);
  const seen = await onBoth(() => rest('query_object_instance', query({ bkn_context: T }), { [INV]: id }), (r) => {
    assert.equal(r.status, 200, r.text);
    assert.equal(r.text, first.text);
    assert.equal(r.headers['bkn-receipt-id'], first.headers['bkn-receipt-id']);
  });
  assert.equal(seen.size, 2, 'replayed by both workers');
  assert.ok(seen.has(1 - firstBy), 'replayed by the worker that did not run it');
  assert.equal(await executions(seq), 1);
  const other = await rest('query_object_instance', query({ limit: 4, bkn_context: T }), { [INV]: id });
  assert.equal(other.status, 409, other.text);
  assert.equal(await executions(seq), 1);
});

test('SIGHUP to the master reloads every worker', { skip: SKIP }, async () => {
  const sid = await initialize();
  const probe = `-- added by workers.test.mjs
return {
    name = "workers_probe", version = "1.0.0", kind = "read",
    title = { ["zh-CN"] = "探针", ["en-US"] = "Probe" },
    description = { ["zh-CN"] = "Workers probe.", ["en-US"] = "Workers probe." },
    group = "query", order = 990, surfaces = { "mcp", "rest" },
    formats = { "json" }, upstream = "bkn_backend",
    input_schema = { type = "object", properties = {} },
    handle = function(_, ctx) return { generation = ctx.generation } end,
}
`;
  for (let i = 0; i < 6; i++) assert.ok(!(await toolNames(sid)).names.includes('workers_probe'));
  fs.writeFileSync(path.join(toolsDir, '.workers_probe.lua.tmp'), probe);
  fs.renameSync(path.join(toolsDir, '.workers_probe.lua.tmp'), path.join(toolsDir, 'workers_probe.lua'));
  const reloads = () => logLines().filter((j) => j.msg === 'reload' && j.trigger === 'SIGHUP' && j.ok && (j.added || []).includes('workers_probe'));
  S.proc.kill('SIGHUP');
  await waitFor(() => new Set(reloads().map((j) => j.worker)).size === 2, 5000, 'both workers reloaded');
  const listed = await onBoth(async () => {
    const { r, names } = await toolNames(sid);
    r.names = names;
    return r;
  }, (r, i) => assert.ok(r.names.includes('workers_probe'), `listed after the reload (request ${i})`));
  assert.equal(listed.size, 2);

  // POST /admin/reload (served by worker 0) reloads worker 0 and, through the
  // master, worker 1
  fs.rmSync(path.join(toolsDir, 'workers_probe.lua'));
  const ar = await fetch(`${S.admin}/admin/reload`, { method: 'POST', signal: AbortSignal.timeout(5000) });
  const aj = await ar.json();
  assert.equal(ar.status, 200, JSON.stringify(aj));
  assert.deepEqual(aj.removed, ['workers_probe']);
  await waitFor(() => logLines().some((j) => j.msg === 'reload' && j.worker === 1 && j.trigger === 'SIGHUP' && (j.removed || []).includes('workers_probe')), 5000, 'worker 1 reloaded after /admin/reload');
  assert.equal(logLines().filter((j) => j.msg === 'reload' && j.worker === 0 && (j.removed || []).includes('workers_probe')).length, 1, 'worker 0 reloaded once');
  for (let i = 0; i < 8; i++) assert.ok(!(await toolNames(sid)).names.includes('workers_probe'));
  // /metrics (served by worker 0) shows every worker's series, labelled by worker,
  // each family's HELP and TYPE once; worker 1's text is at most a second old
  await waitFor(async () => {
    const t = await (await fetch(`${S.admin}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
    return /^cl_http_requests_total\{worker="1",route="\/mcp",status="200"\} [1-9]/m.test(t);
  }, 5000, 'worker 1 series in the scrape');
  const metrics = await (await fetch(`${S.admin}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  assert.match(metrics, /^cl_workers\{worker="0"\} 2$/m);
  assert.match(metrics, /^cl_worker_index\{worker="0"\} 0$/m);
  assert.match(metrics, /^cl_worker_index\{worker="1"\} 1$/m);
  assert.match(metrics, /^cl_http_requests_total\{worker="0",route="\/mcp",status="200"\} [1-9]/m);
  assert.match(metrics, /^process_resident_memory_bytes\{worker="1"\} \d/m);
  const types = metrics.split('\n').filter((l) => l.startsWith('# TYPE ')).map((l) => l.split(' ')[2]);
  assert.equal(new Set(types).size, types.length, 'one TYPE line per family');
  // the samples of a family are consecutive (the exposition format requires it)
  const seen = new Set();
  let last = null;
  for (const l of metrics.split('\n')) {
    if (!l || l.startsWith('#')) continue;
    const name = l.match(/^[a-zA-Z_:][a-zA-Z0-9_:]*/)[0];
    const stripped = name.replace(/_(bucket|sum|count)$/, '');
    const fam = stripped !== name && types.includes(stripped) ? stripped : name;
    if (fam !== last) {
      assert.ok(!seen.has(fam), `family ${fam} split in two`);
      seen.add(fam);
      last = fam;
    }
  }
});

test('a worker killed with -9 is restarted and service continues', { skip: SKIP }, async () => {
  const before = workerPids();
  // worker 0: the admin listener (bound by the master) must come back on the same port
  const victim = before[0];
  process.kill(victim, 'SIGKILL');
  await waitFor(() => workerPids()[0] !== victim, 5000, 'replacement worker');
  const died = logLines().find((j) => j.role === 'master' && j.msg === 'worker died' && j.pid === victim);
  assert.ok(died, 'the master logged the death');
  assert.equal(died.signal, 9);
  assert.ok(!alive(victim));
  assert.equal(workerPids()[1], before[1], 'the other worker kept running');
  const h = await fetch(`${S.admin}/health/ready`, { signal: AbortSignal.timeout(5000) });
  assert.equal(h.status, 200, 'admin listener served by the new worker 0');
  const seen = await onBoth(() => req('GET', '/health/ready'), (r) => assert.equal(r.status, 200, r.text));
  assert.equal(seen.size, 2, 'the replacement serves too');
});

test('SIGTERM to the master stops every worker; exit 0, no orphans', { skip: SKIP }, async () => {
  const pids = Object.values(workerPids());
  assert.equal(pids.length, 2);
  for (const p of pids) assert.ok(alive(p));
  const code = await stop(S.proc, 'SIGTERM', 15000);
  assert.equal(code, 0);
  for (const p of pids) assert.ok(!alive(p), `worker ${p} is gone`);
  assert.equal(logLines().filter((j) => j.msg === 'shutdown' && j.worker !== undefined).length, 2, 'both workers drained');
  await assert.rejects(req('GET', '/health/alive'), 'nothing listens any more');
});

test('workers = 2 with the memory store refuses to start', async () => {
  const proc = spawn(BIN, ['--config', path.join(ROOT, 'etc/context-loader.conf')], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, CL_WORKERS: '2', CL_STATE_STORE: 'memory', CL_LISTEN: '127.0.0.1:0', CL_ADMIN_LISTEN: '127.0.0.1:0' },
  });
  let err = '';
  proc.stderr.on('data', (c) => { err += c; });
  const t = setTimeout(() => proc.kill('SIGKILL'), 10000);
  const [code] = await once(proc, 'exit');
  clearTimeout(t);
  assert.equal(code, 2);
  assert.match(err, /config key workers: workers > 1 needs a shared state_store \(redis:\/\/\.\.\.\): idempotency records and ended sessions must be visible to every worker/);
  // and the value itself is checked
  const bad = spawn(BIN, ['--print-config-keys'], { stdio: 'ignore', env: { ...process.env, CL_WORKERS: '65' } });
  assert.equal((await once(bad, 'exit'))[0], 0, '--print-config-keys needs no valid config');
  const check = spawn(BIN, ['--check-tools', path.join(ROOT, 'tools')], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, CL_WORKERS: '65', CL_LUA_DIR: path.join(ROOT, 'lua') } });
  let cerr = '';
  check.stderr.on('data', (c) => { cerr += c; });
  assert.equal((await once(check, 'exit'))[0], 2);
  assert.match(cerr, /CL_WORKERS: config key workers: '65' is not 1\.\.64 or auto/);
});
