// The campaign's clients: an agent of one principal running managed turns
// (bkn_start_interaction -> business calls -> bkn_finish_interaction), every call
// with an invocation id and a traceparent of its own, retried on every retryable
// answer or lost connection, on the same or the other instance, and every answer
// written to the history the checker reads.
//
// Transports are small objects with one method, `send(target, surface, tool, args,
// hints, signal)` -> Answer, so an era is one more transport: `legacy` (2025
// sessions: initialize, Mcp-Session-Id) and `rest` exist; a stateless era adds a
// transport that puts its protocol fields in `_meta` and needs no session.
import http from 'node:http';
import { PREFIX } from '../integration/lib/stack.mjs';

const INV_HEADER = 'X-OpenBKN-Client-Invocation-Id';
const INV_META = 'openbkn.ai/client-invocation-id';
const SURFACE_PATH = { mcp: '/mcp', compact: '/mcp-compact' };

const MODERN = '2026-07-28';
const SERVER_INFO = 'io.modelcontextprotocol/serverInfo';

// JSON with its keys sorted at every level: the comparable form of a result.
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  return JSON.stringify(v);
}

// A CallToolResult as the same call's result in either era: without the stateless
// era's framing (resultType, the server's identity in _meta).
function comparable(res) {
  const r = { ...res };
  delete r.resultType;
  if (r._meta) {
    const m = { ...r._meta };
    delete m[SERVER_INFO];
    if (Object.keys(m).length) r._meta = m; else delete r._meta;
  }
  return canonical(r);
}

// One HTTP exchange on a fresh connection. Resolves {status, headers, text} or
// {lost: reason}; never rejects.
function exchange(url, { method = 'POST', headers = {}, body, timeoutMs, signal }) {
  return new Promise((resolve) => {
    const u = new URL(url);
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    let done = false;
    const end = (v) => { if (!done) { done = true; clearTimeout(timer); resolve(v); } };
    const req = http.request({
      host: '127.0.0.1', port: u.port, path: u.pathname + u.search, method, agent: false,
      headers: { ...(data ? { 'content-type': 'application/json', 'content-length': data.length } : {}), ...headers },
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => end({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', (e) => end({ lost: `response: ${e.code || e.message}` }));
      res.on('aborted', () => end({ lost: 'response aborted' }));
    });
    const timer = setTimeout(() => { req.destroy(); end({ lost: `no answer after ${timeoutMs} ms` }); }, timeoutMs);
    req.on('error', (e) => end({ lost: e.code || e.message }));
    if (signal) {
      const onAbort = () => { req.destroy(); end({ lost: 'client disconnected', disconnected: true }); };
      if (signal.aborted) onAbort(); else signal.addEventListener('abort', onAbort, { once: true });
    }
    req.end(data);
  });
}

function parseJson(text) {
  try { return JSON.parse(text); } catch { return undefined; }
}

// The body of an SSE answer: the last `data:` message that is a JSON-RPC response.
function sseMessage(text) {
  let last;
  for (const block of text.split(/\r?\n\r?\n/)) {
    const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
    const j = data && parseJson(data);
    if (j && (j.result !== undefined || j.error !== undefined)) last = j;
  }
  return last;
}

// An error object of either envelope: {"error":{code,...}} or the service envelope.
function errorOf(v) {
  const e = v && typeof v === 'object' ? (v.error && typeof v.error === 'object' ? v.error : v) : {};
  return {
    code: typeof e.code === 'string' ? e.code : String(e.code ?? 'unknown'),
    retryable: e.retryable === true,
    requiredAction: typeof e.required_action === 'string' ? e.required_action : '',
    retryAfterMs: Number.isFinite(e.retry_after_ms) ? e.retry_after_ms : 0,
    message: String(e.message ?? e.description ?? ''),
  };
}

// Answer kinds: ok (a result), error (a tool or protocol error), lost (no usable
// answer: connection lost, timeout, a proxy's own page), session (the MCP session
// must be made again).
function mcpAnswer(r) {
  if (r.lost) return { kind: 'lost', why: r.lost, disconnected: !!r.disconnected };
  const ct = String(r.headers['content-type'] || '');
  const j = ct.includes('text/event-stream') ? sseMessage(r.text) : parseJson(r.text);
  const via = r.headers['x-upstream'] || '';
  if (!j || (j.result === undefined && j.error === undefined)) return { kind: 'lost', why: `HTTP ${r.status} without a JSON-RPC answer`, via };
  if (j.error) {
    if (r.status === 404 && j.error.code === -32001) return { kind: 'session', via };
    const d = j.error.data && typeof j.error.data === 'object' ? j.error.data : {};
    return { kind: 'error', status: r.status, via, ...errorOf({ ...d, code: d.code ?? `jsonrpc${j.error.code}`, message: j.error.message }) };
  }
  const res = j.result;
  const sc = res.structuredContent;
  if (res.isError) {
    let v = sc;
    if (!v) v = parseJson(res.content?.[0]?.text ?? '');
    return { kind: 'error', status: r.status, via, ...errorOf(v), payload: comparable(res) };
  }
  return {
    kind: 'ok', status: r.status, via, payload: comparable(res),
    receiptId: sc?.bkn_receipt?.receipt_id || res._meta?.['openbkn.ai/receipt-id'] || '', receiptCount: sc?.bkn_receipt ? 1 : 0,
    unrecorded: res._meta?.['openbkn.ai/trace-status'] === 'unrecorded',
    receiptPending: res._meta?.['openbkn.ai/trace-status'] === 'receipt_pending',
    value: sc,
  };
}

function restAnswer(r) {
  if (r.lost) return { kind: 'lost', why: r.lost, disconnected: !!r.disconnected };
  const via = r.headers['x-upstream'] || '';
  const j = parseJson(r.text);
  if (r.status === 200) {
    return {
      kind: 'ok', status: 200, via, payload: r.text, receiptId: r.headers['bkn-receipt-id'] || '',
      receiptCount: r.headers['bkn-receipt-id'] ? String(r.headers['bkn-receipt-id']).split(',').length : 0,
      unrecorded: r.headers['bkn-trace-status'] === 'unrecorded',
      receiptPending: r.headers['bkn-trace-status'] === 'receipt_pending', value: j,
    };
  }
  if (!j || typeof j !== 'object') return { kind: 'lost', why: `HTTP ${r.status} without a JSON body`, via };
  return { kind: 'error', status: r.status, via, ...errorOf(j), payload: r.text };
}

// The 2025 era: a session per (client, base URL, surface), made on first use and
// again when an instance no longer knows it.
export function legacyTransport({ token, timeoutMs }) {
  const sessions = new Map();
  const common = { authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream' };
  async function session(base, surface, signal) {
    const key = `${base}|${surface}`;
    if (sessions.has(key)) return { sid: sessions.get(key) };
    const r = await exchange(`${base}${PREFIX}${SURFACE_PATH[surface]}`, {
      headers: common, timeoutMs, signal,
      body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'chaos', version: '1' } } },
    });
    const sid = r.headers?.['mcp-session-id'];
    if (r.status !== 200 || !sid) return { answer: r.lost ? mcpAnswer(r) : { kind: 'lost', why: `initialize: HTTP ${r.status}` } };
    sessions.set(key, sid);
    return { sid };
  }
  return {
    era: 'legacy',
    async send(base, surface, tool, args, hints, signal) {
      const s = await session(base, surface, signal);
      if (s.answer) return s.answer;
      const headers = { ...common, 'mcp-session-id': s.sid, traceparent: hints.traceparent };
      const params = { name: tool, arguments: args };
      if (hints.inv) {
        if (hints.invInHeader) headers[INV_HEADER] = hints.inv;
        else params._meta = { [INV_META]: hints.inv };
      }
      const r = await exchange(`${base}${PREFIX}${SURFACE_PATH[surface]}`, {
        headers, timeoutMs, signal, body: { jsonrpc: '2.0', id: hints.rpcId, method: 'tools/call', params },
      });
      const a = mcpAnswer(r);
      if (a.kind === 'session') sessions.delete(`${base}|${surface}`);
      return a;
    },
  };
}

// The stateless era: no handshake; every request carries the protocol version and
// the client's capabilities in params._meta and mirrors the method and the tool name
// in headers.
export function modernTransport({ token, timeoutMs }) {
  return {
    era: 'modern',
    async send(base, surface, tool, args, hints, signal) {
      const headers = {
        authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': tool, traceparent: hints.traceparent,
      };
      const meta = {
        'io.modelcontextprotocol/protocolVersion': MODERN,
        'io.modelcontextprotocol/clientCapabilities': {},
        'io.modelcontextprotocol/clientInfo': { name: 'chaos', version: '1' },
      };
      if (hints.inv) {
        if (hints.invInHeader) headers[INV_HEADER] = hints.inv;
        else meta[INV_META] = hints.inv;
      }
      const r = await exchange(`${base}${PREFIX}${SURFACE_PATH[surface]}`, {
        headers, timeoutMs, signal,
        body: { jsonrpc: '2.0', id: hints.rpcId, method: 'tools/call', params: { name: tool, arguments: args, _meta: meta } },
      });
      return mcpAnswer(r);
    },
  };
}

export function restTransport({ token, timeoutMs }) {
  return {
    era: 'rest',
    async send(base, _surface, tool, args, hints, signal) {
      const headers = { authorization: `Bearer ${token}`, traceparent: hints.traceparent };
      if (hints.inv) headers[INV_HEADER] = hints.inv;
      return restAnswer(await exchange(`${base}${PREFIX}/kn/${tool}`, { headers, timeoutMs, signal, body: args }));
    },
  };
}
