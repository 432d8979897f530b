// The foreground half of scripts/demo (see there).
import os from 'node:os';
import path from 'node:path';
import { startSimulator, startServer, PREFIX } from '../tests/integration/lib/stack.mjs';

const port = process.env.PORT || '30779';
const adminPort = String(Number(port) + 1);
// One log file per demo (per port), so that several demos on one machine do not interleave.
const logFile = process.env.CL_DEMO_LOG || path.join(os.tmpdir(), `context-loader-demo-${port}.log`);
const sim = await startSimulator({ ttl: 0 });
let server;
try {
  server = await startServer(sim.base, { env: { CL_LISTEN: `127.0.0.1:${port}`, CL_ADMIN_LISTEN: `127.0.0.1:${adminPort}` }, quiet: !process.env.CL_VERBOSE, logFile });
} catch (e) {
  console.error(`context-loader did not start: ${e.message} (are ports ${port} and ${adminPort} free? set PORT=...; log: ${logFile})`);
  await sim.stop();
  process.exit(1);
}
const base = `http://127.0.0.1:${port}${PREFIX}`;
const url = `${base}/mcp`;
const token = 'demo-user-token';
// The client snippets are the service's own (GET /mcp/info), with the demo token filled in.
const info = await (await fetch(`${url}/info`, { headers: { authorization: `Bearer ${token}`, 'accept-language': 'en-US' } })).json();
const fill = (v) => JSON.parse(JSON.stringify(v).replaceAll('<access-token>', token));
console.log(`MCP URL: ${url}`);
console.log(`Token: ${token}`);
console.log('\nClient config (Cursor / Claude Code / any MCP client with headers):');
console.log(JSON.stringify(fill(info.client_config.generic), null, 2));
console.log('\nClaude Desktop (through mcp-remote):');
console.log(JSON.stringify(fill(info.client_config.claude_desktop), null, 2));
console.log(`\nREST: curl -s -X POST -H 'Authorization: Bearer ${token}' -H 'Content-Type: application/json' \\\n  -d '{"kn_id":"kn_medical","ot_id":"ot_drug","limit":2}' ${base}/kn/query_object_instance`);
console.log(`\nCatalogue (browser): ${url}/info   (paste the token when the page asks)`);
console.log(`Metrics: ${server.admin}/metrics   Tools: ${server.admin}/admin/tools   Admin routes: ${server.admin}/`);
console.log(`Service log: ${logFile}   (CL_VERBOSE=1 also prints it here)   Simulator: ${sim.base}`);
console.log('\nCtrl-C stops the service and the simulator.');
let stopping = false;
const shutdown = async () => {
  if (stopping) return;
  stopping = true;
  await server.stop();
  await sim.stop();
  process.exit(0);
};
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);
server.proc.on('exit', async (code) => { if (!stopping) { console.error(`context-loader exited (${code}); log: ${logFile}`); await sim.stop(); process.exit(1); } });
