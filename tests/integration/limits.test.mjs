// limits.max_connections (503 then close at the cap, a clean refusal when file
// descriptors run out) and limits.max_calls_per_principal (429 with Retry-After),
// with real connections.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startStack, startServer, ROOT, PREFIX } from './lib/stack.mjs';
import { exchange, parseResponses } from './lib/raw.mjs';

let stack; // max_connections 4, max_calls_per_principal 2
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-limits-'));

before(async () => {
  stack = await startStack({ capture: 'disabled', env: { CL_LIMITS_MAX_CONNECTIONS: '4', CL_LIMITS_MAX_CALLS_PER_PRINCIPAL: '2' } });
});

after(async () => {
  if (stack) assert.equal(await stack.stop(), 0, 'the server did not exit cleanly (sanitizer report?)');
  fs.rmSync(tmp, { recursive: true, force: true });
});

const portOf = (base) => Number(new URL(base).port);
const ALIVE = 'GET /health/alive HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';

// A connection that has been served once and stays open (keep-alive).
async function held(port) {
  const sock = net.connect({ port, host: '127.0.0.1' });
  await new Promise((resolve, reject) => {
    sock.once('error', reject);
    sock.write(ALIVE);
    sock.once('data', () => resolve());
  });
  sock.on('error', () => {});
  return sock;
}

test('max_connections: past the cap a connection gets a JSON 503 with Retry-After and is closed; capacity comes back', async () => {
  const port = portOf(stack.server.base);
  const socks = [];
  for (let i = 0; i < 4; i++) socks.push(await held(port));
  const r = await exchange(port, ALIVE, { timeoutMs: 3000 });
  const [res] = parseResponses(r.data);
  assert.equal(res?.status, 503, r.data);
  assert.equal(res.headers['retry-after'], '1');
  assert.equal(res.headers.connection, 'close');
  assert.equal(JSON.parse(res.body).code, 'Public.ServiceUnavailable.TooManyConnections');
  assert.ok(r.closed, 'the refused connection stayed open');
  for (const s of socks) s.destroy();
  await sleep(100);
  const again = await exchange(port, ALIVE.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n'));
  assert.equal(parseResponses(again.data)[0]?.status, 200, again.data);
  const m = await (await fetch(`${stack.server.admin}/metrics`)).text();
  assert.match(m, /^cl_connections_refused_total [1-9]/m);
});

test('max_calls_per_principal: the third call in flight gets 429 with Retry-After; other principals and later calls go through', async () => {
  const sim = stack.sim.base;
  const fault = await fetch(`${sim}/_sim/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ service: 'ontology_query', latency_ms: 1500, count: 2 }) });
  assert.equal(fault.status, 200);
  const call = (token) => fetch(`${stack.server.base}${PREFIX}/kn/query_object_instance`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: '{"kn_id":"kn_medical","ot_id":"ot_drug","limit":1}', signal: AbortSignal.timeout(10000),
  });
  try {
    const slow = [call('demo-user-token'), call('demo-user-token')];
    await sleep(400); // both are waiting on the slowed upstream
    const third = await call('demo-user-token');
    const text = await third.text();
    assert.equal(third.status, 429, text);
    assert.equal(third.headers.get('retry-after'), '1');
    const j = JSON.parse(text);
    assert.equal(j.code, 'Public.TooManyRequests.CallsInFlight');
    // retryable, and retry_after_ms says the same wait as Retry-After
    assert.equal(j.retryable, true, text);
    assert.equal(j.retry_after_ms, 1000, text);
    assert.equal(j.required_action, 'retry_later', text);
    assert.match(j.details, /limits\.max_calls_per_principal/);
    const other = await call('demo-user2-token');
    assert.equal(other.status, 200, await other.text());
    for (const r of await Promise.all(slow)) assert.equal(r.status, 200);
    const later = await call('demo-user-token');
    assert.equal(later.status, 200);
  } finally {
    await fetch(`${sim}/_sim/reset`, { method: 'POST' });
  }
});

function cpuTicks(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return Number(f[11]) + Number(f[12]); // utime + stime
}

test('file descriptors exhausted (EMFILE): a new connection is refused at once and the loop does not spin', async () => {
  // the server under a small descriptor limit (connection cap above it)
  const wrapper = path.join(tmp, 'low-fd.sh');
  fs.writeFileSync(wrapper, `#!/bin/sh\nulimit -n 64\nexec "${process.env.CL_BIN || path.join(ROOT, 'build/context-loader')}" "$@"\n`, { mode: 0o755 });
  const srv = await startServer(stack.sim.base, { bin: wrapper });
  const socks = [];
  try {
    const port = portOf(srv.base);
    // hold connections until one is refused
    let refused;
    for (let i = 0; i < 80 && !refused; i++) {
      const r = await new Promise((resolve) => {
        const sock = net.connect({ port, host: '127.0.0.1' });
        let data = '';
        const t = setTimeout(() => resolve({ sock, data, hung: true }), 2000);
        sock.on('error', () => {});
        sock.on('data', (c) => { data += c; if (data.includes('"status":"alive"')) { clearTimeout(t); resolve({ sock, data }); } });
        sock.on('close', () => { clearTimeout(t); resolve({ sock, data, closed: true }); });
        sock.write(ALIVE);
      });
      assert.ok(!r.hung, `connection ${i} was neither served nor refused within 2 s`);
      if (r.closed) refused = r;
      else socks.push(r.sock);
    }
    assert.ok(refused, 'no connection was refused under a 64-descriptor limit');
    if (refused.data) assert.match(refused.data, /^HTTP\/1\.1 503 [\s\S]*TooManyConnections/);
    // while out of descriptors the server does not spin on the listener
    const t0 = cpuTicks(srv.proc.pid);
    const waiting = net.connect({ port, host: '127.0.0.1' });
    waiting.on('error', () => {});
    await sleep(1000);
    const ticks = cpuTicks(srv.proc.pid) - t0;
    waiting.destroy();
    assert.ok(ticks < 50, `${ticks} CPU ticks in 1 s at EMFILE`);
    for (const s of socks) s.destroy();
    socks.length = 0;
    await sleep(1500); // the guard drops closed connections at its once-a-second sweep
    const ok = await exchange(port, ALIVE.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n'));
    assert.equal(parseResponses(ok.data)[0]?.status, 200, ok.data);
  } finally {
    for (const s of socks) s.destroy();
    assert.equal(await srv.stop(), 0);
  }
});
