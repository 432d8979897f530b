// Helpers for the fault matrix (tests/integration/faults.test.mjs): one-shot HTTP
// requests on fresh connections (no keep-alive pool, so a server-side idle close never
// races a reused socket), simulator control, the server's access log and its
// /proc figures.
import http from 'node:http';
import fs from 'node:fs';
import net from 'node:net';
import { execFileSync } from 'node:child_process';
import { PREFIX } from './stack.mjs';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// One request on its own connection. Resolves {status, headers, text, json, ms};
// rejects on a transport error or after timeoutMs. opts.onRequest(req) sees the
// request object (to destroy it mid-call).
export function hreq(url, { method = 'POST', headers = {}, body, timeoutMs = 10000, onRequest } = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const data = body === undefined ? undefined : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
    const t0 = Date.now();
    const req = http.request({
      host: '127.0.0.1', port: u.port, path: u.pathname + u.search, method, agent: false,
      headers: { ...(data ? { 'content-type': 'application/json', 'content-length': data.length } : {}), ...headers },
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        clearTimeout(timer);
        const text = Buffer.concat(chunks).toString('utf8');
        let json;
        try { json = JSON.parse(text); } catch { json = undefined; }
        resolve({ status: res.statusCode, headers: res.headers, text, json, ms: Date.now() - t0 });
      });
      res.on('error', reject);
    });
    const timer = setTimeout(() => req.destroy(new Error(`no answer after ${timeoutMs} ms`)), timeoutMs);
    req.on('error', (e) => { clearTimeout(timer); reject(e); });
    if (onRequest) onRequest(req);
    req.end(data);
  });
}

// A client for one stack: REST, MCP (one session per token), simulator control.
export function client(stack) {
  const sessions = {};
  const auth = (token) => ({ authorization: `Bearer ${token}` });
  const rest = (tool, body, { token = 'demo-user-token', headers = {}, ...o } = {}) =>
    hreq(`${stack.server.base}${PREFIX}/kn/${tool}`, { body, headers: { ...auth(token), ...headers }, ...o });
  async function session(token) {
    if (!sessions[token]) {
      const r = await hreq(stack.server.mcpUrl, {
        body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'faults', version: '1' } } },
        headers: { ...auth(token), accept: 'application/json, text/event-stream' },
      });
      if (r.status !== 200) throw new Error(`initialize: ${r.status} ${r.text}`);
      sessions[token] = r.headers['mcp-session-id'];
    }
    return sessions[token];
  }
  async function rpc(msg, { token = 'demo-user-token', ...o } = {}) {
    const sid = await session(token);
    return hreq(stack.server.mcpUrl, { body: msg, headers: { ...auth(token), accept: 'application/json, text/event-stream', 'mcp-session-id': sid }, ...o });
  }
  const call = (name, args, o) => rpc({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name, arguments: args } }, o);
  async function sim(method, p, body) {
    const r = await hreq(`${stack.sim.base}${p}`, { method, body, timeoutMs: 5000 });
    if (r.status !== 200) throw new Error(`${method} ${p}: ${r.status} ${r.text}`);
    return r.json;
  }
  const fault = (spec) => sim('POST', '/_sim/faults', spec);
  const reset = () => sim('POST', '/_sim/reset');
  return { rest, rpc, call, sim, fault, reset, session };
}

// The JSON error of an MCP tool error (isError with one text block).
export function toolError(r) {
  if (r.status !== 200 || r.json?.result?.isError !== true) throw new Error(`not a tool error: ${r.status} ${r.text}`);
  return JSON.parse(r.json.result.content[0].text);
}

// Access-log lines ({"msg":"request",…}) the server has written so far.
export function accessLog(server) {
  return server.logs.join('').split('\n').flatMap((l) => {
    try { const j = JSON.parse(l); return j.msg === 'request' ? [j] : []; } catch { return []; }
  });
}

// Waits until pred(line) holds for an access-log line; returns it.
export async function waitLog(server, pred, timeoutMs = 5000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const hit = accessLog(server).find(pred);
    if (hit) return hit;
    if (Date.now() > end) return undefined;
    await sleep(50);
  }
}

// Resident set size (KiB) and open descriptors of a process.
// The process's CPU time so far (user + system, all threads), in ms: what the server
// spent, whatever the machine's load.
let tickMs;
export function cpuMs(pid) {
  if (!tickMs) tickMs = 1000 / Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * tickMs; // fields 14 and 15
}

export function procStats(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const rss = Number(/VmRSS:\s+(\d+)/.exec(status)[1]);
  return { rssKb: rss, fds: fs.readdirSync(`/proc/${pid}/fd`).length };
}

// Server-side ESTABLISHED TCP connections to 127.0.0.1:port (accepted or waiting in
// the accept queue), from /proc/net/tcp.
export function established(port) {
  const local = `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  let n = 0;
  for (const line of fs.readFileSync('/proc/net/tcp', 'utf8').split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f[1] === local && f[3] === '01') n++;
  }
  return n;
}

// This process's soft limit on open files (Node cannot raise it).
export function fdLimit() {
  const m = /Max open files\s+(\d+|unlimited)/.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
  return !m || m[1] === 'unlimited' ? Infinity : Number(m[1]);
}

// Opens n idle TCP connections to port, batch at a time; resolves the sockets.
// settle(opened), when given, is awaited after each batch: a batch larger than the
// listen backlog can leave connections the client thinks are open but the server
// never accepts (the final ACK of a full accept queue is dropped).
// localAddress: the clients' source address (any 127.x.y.z): each has its own
// ephemeral ports, so ten thousand connections do not depend on how many sockets
// other processes on the machine hold in TIME_WAIT from 127.0.0.1.
export async function openIdle(port, n, batch = 250, settle = undefined, localAddress = undefined) {
  const socks = [];
  for (let i = 0; i < n; i += batch) {
    const k = Math.min(batch, n - i);
    const part = await Promise.all(Array.from({ length: k }, () => new Promise((resolve, reject) => {
      const s = net.connect({ host: '127.0.0.1', port, ...(localAddress ? { localAddress } : {}) });
      s.once('connect', () => { s.removeListener('error', reject); s.on('error', () => {}); resolve(s); });
      s.once('error', reject);
    })));
    socks.push(...part);
    if (settle) await settle(socks.length);
  }
  return socks;
}

export async function closeAll(socks) {
  await Promise.all(socks.map((s) => new Promise((resolve) => {
    if (s.destroyed) return resolve();
    s.once('close', resolve);
    s.destroy();
  })));
}

// Polls fn() until it returns a truthy value or timeoutMs passes; returns the last value.
export async function until(fn, timeoutMs = 5000, stepMs = 100) {
  const end = Date.now() + timeoutMs;
  let v;
  while (!(v = await fn()) && Date.now() < end) await sleep(stepMs);
  return v;
}
