// finish.mjs GATEWAY_BASE SESSION_ID LINES: finishes, through the gateway (MCP
// bkn_finish_interaction, one at a time), every interaction named by the managed-call
// bodies of LINES (interactions.mjs output), outcome completed with a short answer.
// Exits non-zero unless every answer is a completed interaction. Prints the number
// of calls.
import fs from 'node:fs';

const [base, sid, file] = process.argv.slice(2);
const PREFIX = '/api/agent-retrieval/v1';
const headers = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  authorization: 'Bearer demo-user-token',
  'mcp-session-id': sid,
};
const lines = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
let n = 0;
for (const line of lines) {
  const iid = JSON.parse(line).params.arguments.bkn_context.interaction_id;
  const body = JSON.stringify({
    jsonrpc: '2.0', id: 3000 + n, method: 'tools/call',
    params: { name: 'bkn_finish_interaction', arguments: { interaction_id: iid, outcome: 'completed', answer: `benchmark answer ${n}` } },
  });
  const r = await fetch(base + PREFIX + '/mcp', { method: 'POST', headers, body, signal: AbortSignal.timeout(30000) });
  const text = await r.text();
  if (r.status !== 200 || !/execution_status\\?":\\?"completed/.test(text) || text.includes('"isError":true')) {
    throw new Error(`bkn_finish_interaction: HTTP ${r.status} ${text.slice(0, 300)}`);
  }
  n++;
}
console.log(n);
