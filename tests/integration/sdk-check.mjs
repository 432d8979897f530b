// Drives the official TypeScript SDK client (../shared/checks/sdk-client.mjs,
// installed into build/ext) against the server: initialize, tools/list, and a
// query_object_instance call whose text block must carry the simulator's big
// integers, [] and {} byte for byte. Run through run-with-stack.mjs.
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const ext = process.argv[2];
const args = JSON.stringify({ kn_id: 'kn_medical', ot_id: 'ot_drug', limit: 1, response_format: 'json',
  condition: { field: 'name', operation: '==', value_from: 'const', value: '阿司匹林肠溶片' } });
const r = spawnSync(process.execPath, [path.join(ext, 'sdk-client.mjs'), process.env.MCP_URL, 'query_object_instance', args],
  { encoding: 'utf8', env: { ...process.env, MCP_TERMINATE: '1' }, timeout: 60000 });
process.stdout.write(r.stdout);
process.stderr.write(r.stderr);
const fail = (m) => { console.error(`FAIL: ${m}`); process.exit(1); };
if (r.status !== 0) fail(`sdk-client exited with ${r.status}`);
const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
if (!lines[0].connected || !lines[0].sessionId) fail('not connected / no session');
if (!lines[1].tools.includes('query_object_instance') || !lines[1].tools.includes('list_knowledge_networks')) fail('tools missing from tools/list');
const call = lines[2];
if (call.result.isError) fail(`tool error: ${call.result.content[0].text}`);
const text = call.result.content[0].text;
for (const needle of ['"drug_id":9007199254740993', '"batch_no":12345678901234567890123', '"tags":[]', '"ext":{}']) {
  if (!text.includes(needle)) fail(`text block lacks ${needle}`);
}
console.log('sdk-check: ok');
