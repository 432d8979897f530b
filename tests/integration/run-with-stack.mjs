#!/usr/bin/env node
// Runs one command against a fresh simulator + context-loader pair:
//   node run-with-stack.mjs <command> [args...]
// CL_SIM_CAPTURE=disabled|enabled sets the simulated capture policy first.
// The command sees MCP_URL, MCP_TOKEN, CL_BASE and SIM_BASE; "{MCP_URL}" in its
// arguments is replaced. Both processes are stopped by PID afterwards; the exit
// status is the command's.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { startStack } from './lib/stack.mjs';

const [cmd, ...rest] = process.argv.slice(2);
if (!cmd) { console.error('usage: run-with-stack.mjs <command> [args...]'); process.exit(2); }
const stack = await startStack({ quiet: !process.env.CL_VERBOSE, capture: process.env.CL_SIM_CAPTURE });
let code = 1;
try {
  const env = { ...process.env, MCP_URL: stack.server.mcpUrl, MCP_TOKEN: process.env.MCP_TOKEN || 'demo-user-token', CL_BASE: stack.server.base, SIM_BASE: stack.sim.base };
  const args = rest.map((a) => a.replaceAll('{MCP_URL}', stack.server.mcpUrl));
  const child = spawn(cmd, args, { stdio: 'inherit', env });
  const t = setTimeout(() => child.kill('SIGKILL'), Number(process.env.CL_CMD_TIMEOUT_MS || 300000));
  [code] = await once(child, 'exit');
  clearTimeout(t);
} finally {
  const serverCode = await stack.stop();
  if (serverCode) { console.error(`context-loader exited with ${serverCode} on SIGTERM`); code = code || 1; }
}
process.exit(code ?? 1);
