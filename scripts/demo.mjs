// The foreground half of scripts/demo (see there).
import { startSimulator, startServer, PREFIX } from '../tests/integration/lib/stack.mjs';

const port = process.env.PORT || '30779';
const sim = await startSimulator({ ttl: 0 });
let server;
try {
  server = await startServer(sim.base, { env: { CL_LISTEN: `127.0.0.1:${port}`, CL_ADMIN_LISTEN: '127.0.0.1:0' }, quiet: !process.env.CL_VERBOSE });
} catch (e) {
  console.error(`context-loader did not start: ${e.message} (is port ${port} free? set PORT=...)`);
  await sim.stop();
  process.exit(1);
}
const url = `http://127.0.0.1:${port}${PREFIX}/mcp`;
const token = 'demo-user-token';
console.log(`MCP URL: ${url}`);
console.log(`Token: ${token}`);
console.log('\nClient config (Cursor / Claude Code / any MCP client with headers):');
console.log(JSON.stringify({ mcpServers: { 'context-loader': { url, headers: { Authorization: `Bearer ${token}` } } } }, null, 2));
console.log('\nClaude Desktop (through mcp-remote):');
console.log(JSON.stringify({ mcpServers: { 'context-loader': { command: 'npx', args: ['mcp-remote', url, '--header', `Authorization: Bearer ${token}`] } } }, null, 2));
console.log(`\nREST: curl -s -X POST -H 'Authorization: Bearer ${token}' -H 'Content-Type: application/json' \\\n  -d '{"kn_id":"kn_medical","ot_id":"ot_drug","limit":2}' http://127.0.0.1:${port}${PREFIX}/kn/query_object_instance`);
console.log(`Admin (reload, health): ${server.admin}   Simulator: ${sim.base}`);
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
server.proc.on('exit', async (code) => { if (!stopping) { console.error(`context-loader exited (${code})`); await sim.stop(); process.exit(1); } });
