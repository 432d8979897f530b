#!/usr/bin/env node
// Platform simulator: one process, one port, every service under its own path
// prefix. See README.md in this directory.
//
//   node tests/platform/sim.mjs [--port 0] [--host 127.0.0.1] [--ttl SECONDS]
//
// Prints one JSON line {"port":N,"base":"http://host:N"} once listening; exits on
// SIGTERM/SIGINT (and after --ttl seconds, a guard against orphaned test runs).

import http from 'node:http';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadDataset } from './lib/dataset.mjs';
import { Recorder, ExecutionLog, Faults, traceIdOf } from './lib/control.mjs';
import { json, platformError, parseBody, langOf, sendTruncated } from './lib/http.mjs';
import { stringify } from './lib/json.mjs';
import oauth from './services/oauth.mjs';
import bknSafe from './services/bkn_safe.mjs';
import bknBackend from './services/bkn_backend.mjs';
import ontologyQuery from './services/ontology_query.mjs';
import traceCore from './services/trace_core.mjs';
import mfModelApi from './services/mf_model_api.mjs';
import operatorIntegration from './services/operator_integration.mjs';
import vega from './services/vega.mjs';

const SERVICES = [oauth, bknSafe, bknBackend, ontologyQuery, traceCore, mfModelApi, operatorIntegration, vega];
const MAX_BODY = 10 * 1024 * 1024;

function parseArgs(argv) {
  const opts = { port: 0, host: '127.0.0.1', ttl: 0 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--port') opts.port = Number(val());
    else if (a === '--host') opts.host = val();
    else if (a === '--ttl') opts.ttl = Number(val());
    else throw new Error(`unknown argument ${a}`);
  }
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) throw new Error('--port must be 0..65535');
  if (!(opts.ttl >= 0)) throw new Error('--ttl must be a non-negative number');
  return opts;
}

/** Build the simulator (not yet listening). Exported for embedding in tests. */
export function createSimulator() {
  // SIM_DATA_DIR: another dataset directory (the token benchmark generates a larger one)
  const dataset = loadDataset(process.env.SIM_DATA_DIR || undefined);
  const recorder = new Recorder();
  const faults = new Faults();
  const state = {};
  const executions = new ExecutionLog();
  const hung = new Map(); // responses held open by mode "hang" -> the fault's id
  const startedAt = Date.now();

  const reset = () => {
    recorder.clear();
    executions.clear();
    faults.clear();
    for (const res of hung.keys()) res.destroy();
    hung.clear();
    for (const s of SERVICES) if (s.reset) s.reset(state);
  };
  reset();

  const send = (res, r) => {
    if (res.destroyed || res.headersSent) return;
    const body = Buffer.from(r.body ?? '', 'utf8');
    res.writeHead(r.status, { ...r.headers, 'content-length': body.length });
    res.end(body);
  };

  const control = (method, path, query, bodyText) => {
    if (path === '/_sim/health' && method === 'GET') {
      return json(200, { status: 'ok', uptime_ms: Date.now() - startedAt, services: SERVICES.map((s) => s.name) });
    }
    if (path === '/_sim/requests' && method === 'GET') {
      const since = query.has('since') ? Number(query.get('since')) : undefined;
      const list = recorder.list({ service: query.get('service') || undefined, since });
      return json(200, { requests: list, last_seq: recorder.seq });
    }
    if (path === '/_sim/reset' && method === 'POST') {
      reset();
      return json(200, { ok: true, last_seq: recorder.seq });
    }
    if (path === '/_sim/executions' && method === 'GET') {
      const since = query.has('since') ? Number(query.get('since')) : undefined;
      const list = executions.list({ service: query.get('service') || undefined, since, trace_id: query.get('trace_id') || undefined });
      return json(200, { executions: list, last_seq: executions.seq });
    }
    if (path === '/_sim/faults' && method === 'GET') return json(200, { faults: faults.items });
    const del = /^\/_sim\/faults\/(\d+)$/.exec(path);
    if (del && method === 'DELETE') {
      const id = Number(del[1]);
      if (!faults.remove(id)) return json(404, { error: `no fault ${id}` });
      // the requests this fault held ("hang") are let go: their connections close
      for (const [res, fid] of hung) if (fid === id) res.destroy();
      return json(200, { ok: true, id });
    }
    if (path === '/_sim/faults' && method === 'POST') {
      const p = parseBody(bodyText, null);
      if (p.error) return json(400, { error: `invalid JSON: ${p.error}` });
      const specs = Array.isArray(p.value) ? p.value : [p.value];
      const added = [];
      for (const spec of specs) {
        const r = faults.add(spec);
        if (r.error) return json(400, { error: r.error });
        added.push(r.fault);
      }
      return json(200, Array.isArray(p.value) ? { faults: added } : added[0]);
    }
    // Service-specific control routes (e.g. /_sim/trace), when a service exports control().
    for (const s of SERVICES) {
      const r = s.control ? s.control(method, path, bodyText, state) : null;
      if (r) return r;
    }
    return json(404, { error: `unknown control route ${method} ${path}` });
  };

  const handle = async (req, res, bodyText) => {
    const url = new URL(req.url, 'http://sim.invalid');
    const path = url.pathname;
    const method = req.method;
    if (path.startsWith('/_sim/')) return send(res, control(method, path, url.searchParams, bodyText));

    const svc = SERVICES.find((s) => path.startsWith(s.prefix));
    const service = svc ? svc.name : 'unknown';
    recorder.add({
      time: new Date().toISOString(),
      service,
      method,
      path,
      query: Object.fromEntries([...url.searchParams.keys()].map((k) => {
        const all = url.searchParams.getAll(k);
        return [k, all.length === 1 ? all[0] : all];
      })),
      headers: { ...req.headers },
      body: bodyText,
    });

    const fault = faults.take(service, path);
    // mode "truncate" cuts whatever would be sent (the injected status or the real answer)
    const reply = fault?.mode === 'truncate' ? sendTruncated : send;
    if (fault) {
      if (fault.latency_ms) await new Promise((r) => setTimeout(r, fault.latency_ms));
      if (res.destroyed) return undefined;
      if (fault.mode === 'close') {
        req.socket.destroy();
        return undefined;
      }
      if (fault.mode === 'hang') {
        hung.set(res, fault.id);
        res.on('close', () => hung.delete(res));
        return undefined;
      }
      if (fault.status) {
        const body = fault.body ?? stringify({
          error_code: 'Sim.InjectedFault', description: 'injected fault', solution: '', error_link: '',
          error_details: `fault ${fault.id} on ${service}`,
        });
        return reply(res, { status: fault.status, body, headers: { 'content-type': 'application/json; charset=utf-8' } });
      }
    }

    const lang = langOf(req.headers);
    if (!svc) return send(res, platformError(404, 'Public.NotFound', `no simulated service serves ${path}`, lang));
    const ctx = { method, path, query: url.searchParams, headers: req.headers, bodyText, lang, dataset, state };
    let r;
    try {
      r = await svc.handle(ctx);
    } catch (e) {
      r = e instanceof URIError
        ? platformError(400, 'Public.BadRequest', `malformed path: ${e.message}`, lang)
        : platformError(500, 'Public.InternalServerError', `simulator error: ${e.message}`, lang);
    }
    if (!r) r = platformError(404, 'Public.NotFound', `no route ${method} ${path}`, lang);
    executions.add({
      time: new Date().toISOString(), service, method, path, status: r.status,
      trace_id: traceIdOf(req.headers.traceparent), account: String(req.headers['x-account-id'] || ''),
      ...(fault?.mode === 'truncate' ? { answer: 'truncated' } : {}),
    });
    // answer_latency_ms: the service has done the work; only its answer is late (a
    // caller that gives up meanwhile does not undo it)
    if (fault?.answer_latency_ms) await new Promise((res2) => setTimeout(res2, fault.answer_latency_ms));
    return reply(res, r);
  };

  const server = http.createServer((req, res) => {
    const chunks = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (c) => {
      size += c.length;
      if (size > MAX_BODY) tooLarge = true;
      else chunks.push(c);
    });
    req.on('end', () => {
      if (tooLarge) {
        send(res, platformError(413, 'Public.RequestEntityTooLarge', 'body exceeds 10 MiB', langOf(req.headers)));
        return;
      }
      const bodyText = Buffer.concat(chunks).toString('utf8');
      handle(req, res, bodyText).catch((e) => {
        send(res, platformError(500, 'Public.InternalServerError', `simulator error: ${e.message}`, 'en'));
      });
    });
  });
  server.keepAliveTimeout = 5000;

  const close = () =>
    new Promise((resolve) => {
      for (const res of hung.keys()) res.destroy();
      server.close(() => resolve());
      server.closeAllConnections();
    });

  return { server, dataset, recorder, executions, faults, reset, close };
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`sim: ${e.message}\n`);
    process.exit(2);
  }
  const sim = createSimulator();
  sim.server.on('error', (e) => {
    process.stderr.write(`sim: ${e.message}\n`);
    process.exit(1);
  });
  sim.server.listen(opts.port, opts.host, () => {
    const { port } = sim.server.address();
    const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
    process.stdout.write(JSON.stringify({ port, base: `http://${host}:${port}` }) + '\n');
  });
  const stop = () => {
    sim.close().then(() => process.exit(0));
    setTimeout(() => process.exit(0), 1000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  if (opts.ttl > 0) setTimeout(stop, opts.ttl * 1000).unref();
}

// Run only when executed directly, so tests can import createSimulator().
if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
