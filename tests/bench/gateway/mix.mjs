// mix.mjs GATEWAY_BASE N: the fixed request mix of callgrind.sh, sent one at a time
// over keep-alive connections: an MCP initialize, then N ad hoc REST reads and N MCP
// tools/call of the same query_object_instance request. Exits non-zero unless every
// answer is a 200 carrying the rows. Prints the number of requests sent.
// MCP_FORMAT=toon asks the MCP calls for TOON text (default json).
// MIX=mcp: only the N MCP calls (after the session's two messages).
// MIX=rest: only the N REST reads (no MCP session).
// MIX=managed SID=<session> LINES=<file>: only N managed MCP calls on that session,
// the bodies of LINES (interactions.mjs output) each used at most 100 times; every
// answer must carry a receipt. Prints the number of calls.
// MIX=legacy SID=<session>: only N MCP calls on that (already open) session, with the
// MCP-Protocol-Version header a session-era client sends after initialize.
// MIX=modern: only N MCP calls in the stateless era (no session at all).
import { PREFIX, ARGS, headers, INITIALIZE, INITIALIZED, CALL as call, MODERN_CALL, MODERN_HEADERS } from './request.mjs';

const [base, nArg] = process.argv.slice(2);
const n = Number(nArg || 200);

async function post(path, body, extra = {}) {
  const r = await fetch(base + PREFIX + path, {
    method: 'POST', headers: { ...headers, ...extra }, body, signal: AbortSignal.timeout(60000),
  });
  const text = await r.text();
  if (r.status !== 200 && r.status !== 202) throw new Error(`${path}: HTTP ${r.status} ${text.slice(0, 300)}`);
  return { r, text };
}

const mix = process.env.MIX || 'rest+mcp';
if (mix === 'managed') {
  const fs = await import('node:fs');
  const lines = fs.readFileSync(process.env.LINES, 'utf8').split('\n').filter(Boolean);
  for (let i = 0; i < n; i++) {
    const body = lines[Math.floor(i / 100)];
    if (!body) throw new Error('not enough interactions for the managed calls');
    const m = await post('/mcp', body, { 'mcp-session-id': process.env.SID });
    if (!m.text.includes('9007199254740993') || !m.text.includes('bkn_receipt') || m.text.includes('"isError":true')) {
      throw new Error(`managed call failed: ${m.text.slice(0, 300)}`);
    }
  }
  console.log(n);
  process.exit(0);
}
if (mix === 'legacy' || mix === 'modern') {
  // A session-era client sends the negotiated version on every request after
  // initialize, as the stateless one sends its own.
  const LEGACY_HEADERS = { 'mcp-session-id': process.env.SID, 'mcp-protocol-version': '2025-06-18' };
  for (let i = 0; i < n; i++) {
    const m = mix === 'modern' ? await post('/mcp', MODERN_CALL, MODERN_HEADERS) : await post('/mcp', call, LEGACY_HEADERS);
    if (!m.text.includes('9007199254740993') || m.text.includes('"isError":true')) throw new Error(`${mix} call failed: ${m.text.slice(0, 300)}`);
    if (mix === 'modern' && !m.text.includes('"resultType":"complete"')) throw new Error('not a stateless answer');
  }
  console.log(n);
  process.exit(0);
}
if (mix === 'rest') {
  for (let i = 0; i < n; i++) {
    const a = await post('/kn/query_object_instance', ARGS);
    if (!a.text.includes('9007199254740993')) throw new Error('rows missing');
  }
  console.log(n);
  process.exit(0);
}
const init = await post('/mcp', INITIALIZE);
const sid = init.r.headers.get('mcp-session-id');
await post('/mcp', INITIALIZED, { 'mcp-session-id': sid });
let sent = 2;
for (let i = 0; i < n; i++) {
  const a = mix === 'mcp' ? null : await post('/kn/query_object_instance', ARGS);
  const b = await post('/mcp', call, { 'mcp-session-id': sid });
  sent += a ? 2 : 1;
  if ((a && !a.text.includes('9007199254740993')) || !b.text.includes('9007199254740993')) throw new Error('rows missing');
}
console.log(sent);
