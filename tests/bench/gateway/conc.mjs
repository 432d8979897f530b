// conc.mjs GATEWAY_BASE CONC ROUNDS: the request mix of mix.mjs sent by CONC clients at
// once, each on its own keep-alive connection: one MCP session (initialize and its
// notification), then every client runs one warm-up round (an ad hoc REST read and an
// MCP tools/call of the benchmark query_object_instance request), then, once all are
// done, the command in BARRIER (if set; callgrind.sh dumps the counts there, so
// connection set-up and the first growth of the heap are not counted) runs, then every
// client runs ROUNDS rounds. So up to CONC calls are in flight at the gateway at once.
// Exits non-zero unless every answer is a 200 carrying the rows. Prints the number of
// requests sent after the barrier. MCP_FORMAT=toon asks the MCP calls for TOON text.
import http from 'node:http';
import { execSync } from 'node:child_process';
import { PREFIX, ARGS, headers, INITIALIZE, INITIALIZED, CALL as call } from './request.mjs';

const [base, concArg, roundsArg] = process.argv.slice(2);
const conc = Number(concArg || 256);
const rounds = Number(roundsArg || 4);
const url = new URL(base);

// One agent per client: one socket each, kept between its requests.
function post(agent, path, body, extra = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: url.hostname, port: url.port, method: 'POST', path: PREFIX + path, agent,
      headers: { ...headers, ...extra, 'content-length': Buffer.byteLength(body) }, timeout: 600000,
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        if (res.statusCode !== 200 && res.statusCode !== 202) reject(new Error(`${path}: HTTP ${res.statusCode} ${text.slice(0, 300)}`));
        else resolve({ headers: res.headers, text });
      });
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`${path}: timeout`)));
    req.end(body);
  });
}

const first = new http.Agent({ keepAlive: true, maxSockets: 1 });
const init = await post(first, '/mcp', INITIALIZE);
const sid = init.headers['mcp-session-id'];
await post(first, '/mcp', INITIALIZED, { 'mcp-session-id': sid });
first.destroy();

async function round(agent) {
  const a = await post(agent, '/kn/query_object_instance', ARGS);
  const b = await post(agent, '/mcp', call, { 'mcp-session-id': sid });
  if (!a.text.includes('9007199254740993') || !b.text.includes('9007199254740993')) throw new Error('rows missing');
}

const agents = Array.from({ length: conc }, () => new http.Agent({ keepAlive: true, maxSockets: 1 }));
await Promise.all(agents.map((a) => round(a)));
if (process.env.BARRIER) execSync(process.env.BARRIER, { stdio: 'ignore' });
await Promise.all(agents.map(async (a) => {
  for (let i = 0; i < rounds; i++) await round(a);
}));
for (const a of agents) a.destroy();
console.log(conc * rounds * 2);
