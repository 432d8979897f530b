// trace-capture.mjs SIM_BASE OUT_DIR: captures, once, the simulated Trace Core's
// answers to one managed call's requests - the capture policy (enabled and disabled),
// GET /interactions/{id}, operations:ensure (execute true) and attempts/1:complete -
// into OUT_DIR/*.json, for the canned Trace Core of gateway-bench.sh
// (gateway/trace-core.conf). The interaction is started on the simulator as the
// benchmark's principal, so the ids in the answers are ones the gateway accepts; the
// managed tools/call body bound to it is written to OUT_DIR/managed.json.
import fs from 'node:fs';

const [sim, out] = process.argv.slice(2);
const base = sim + '/api/agent-observability/v1';
// the owner the gateway sends for demo-user-token (the simulator's OAuth principal)
const owner = {
  'content-type': 'application/json',
  'x-account-id': 'u_demo', 'x-account-type': 'user', 'x-tenant-id': 'openbkn-local',
  'x-business-domain': 'bd_public', 'x-bkn-application-principal-id': 'demo-client',
  'x-bkn-effective-subject-type': 'user', 'x-bkn-effective-subject-id': 'u_demo',
  'x-bkn-auth-method': 'oauth',
};
async function core(method, path, body, file) {
  const r = await fetch(base + path, { method, headers: owner, body: body && JSON.stringify(body), signal: AbortSignal.timeout(10000) });
  const text = await r.text();
  if (r.status < 200 || r.status > 299) throw new Error(`${method} ${path}: HTTP ${r.status} ${text.slice(0, 300)}`);
  if (file) fs.writeFileSync(`${out}/${file}`, text);
  return JSON.parse(text);
}
async function policy(capture, file) {
  const r = await fetch(sim + '/_sim/trace', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ capture }) });
  if (!r.ok) throw new Error(`/_sim/trace: HTTP ${r.status}`);
  await core('GET', '/capture-policy', undefined, file);
}

await policy('enabled', 'policy-enabled.json');
await policy('disabled', 'policy-disabled.json');
const conv = await core('POST', '/conversations:ensure-current', { external_conversation_key: 'bench-canned', idempotency_key: 'bench-canned' });
const cid = conv.conversation_id;
const it = await core('POST', `/conversations/${cid}/interactions`, { idempotency_key: 'bench-canned', request_hash: '0'.repeat(64), agent_name: 'bench' });
const iid = it.interaction_id;
await core('GET', `/interactions/${iid}`, undefined, 'interaction.json');
const env = (v) => ({ mode: 'inline', media_type: 'application/json', byte_length: JSON.stringify(v).length, inline: v });
const input = { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 10 };
const ens = await core('POST', `/conversations/${cid}/interactions/${iid}/operations:ensure`, {
  operation_key: 'op_bench_canned', tool_name: 'query_object_instance', protocol: 'mcp', source_module: 'context-loader',
  input: env(input), required: true, lease_token: it.lease_token, lease_epoch: it.lease_epoch,
}, 'ensure.json');
if (ens.execute !== true) throw new Error('operations:ensure did not let the call run');
await core('POST', `/operations/${ens.operation.operation_id}/attempts/${ens.operation.attempt}:complete`, {
  receipt_id: ens.receipt.receipt_id, evidence_durability: 'durable', retryable: false, request_id: 'req_benchcanned',
  trace_id: '4bf92f3577b34da6a3ce929d0e0e4736', span_id: '00f067aa0ba902b7', observed_evidence_refs: [], business_refs: [],
  artifact_refs: null, partial_reasons: null, output: env({ ok: true }),
}, 'complete.json');
const r = await fetch(base + '/health', { signal: AbortSignal.timeout(10000) });
fs.writeFileSync(`${out}/health.json`, await r.text());
const args = { response_format: 'json', bkn_context: { conversation_id: cid, interaction_id: iid },
  kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 10, sort: [{ field: 'drug_id', direction: 'desc' }] };
fs.writeFileSync(`${out}/managed.json`, JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'query_object_instance', arguments: args } }));
