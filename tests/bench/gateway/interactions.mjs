// interactions.mjs GATEWAY_BASE SESSION_ID COUNT: starts COUNT interactions through
// the gateway (MCP bkn_start_interaction, 8 at a time) and prints, one per line, the
// managed tools/call body of the benchmark request bound to each of them. The
// managed-call rows of gateway-bench.sh spend each line at most 100 times
// (WRK_BODY_REUSE), below Trace Core's limit of 128 operations per interaction.
const [base, sid, countArg] = process.argv.slice(2);
const count = Number(countArg || 100);
const PREFIX = '/api/agent-retrieval/v1';
const ARGS = { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 10, sort: [{ field: 'drug_id', direction: 'desc' }] };
const headers = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  authorization: 'Bearer demo-user-token',
  'mcp-session-id': sid,
};

async function start(i) {
  const body = JSON.stringify({
    jsonrpc: '2.0', id: 1000 + i, method: 'tools/call',
    params: { name: 'bkn_start_interaction', arguments: { question: `benchmark ${i}`, agent_name: 'bench', conversation_mode: 'new' } },
  });
  const r = await fetch(base + PREFIX + '/mcp', { method: 'POST', headers, body, signal: AbortSignal.timeout(30000) });
  const text = await r.text();
  const conv = /"conversation_id\\?":\\?"([^"\\]+)/.exec(text);
  const inter = /"interaction_id\\?":\\?"([^"\\]+)/.exec(text);
  if (r.status !== 200 || !conv || !inter) throw new Error(`bkn_start_interaction: HTTP ${r.status} ${text.slice(0, 300)}`);
  const args = { response_format: 'json', bkn_context: { conversation_id: conv[1], interaction_id: inter[1] }, ...ARGS };
  return JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'query_object_instance', arguments: args } });
}

const lines = new Array(count);
let next = 0;
async function worker() {
  while (next < count) {
    const i = next++;
    lines[i] = await start(i);
  }
}
await Promise.all(Array.from({ length: 8 }, worker));
process.stdout.write(lines.join('\n') + '\n');
