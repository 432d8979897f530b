// scripts/chaos: the fault campaign. Starts the cluster (cluster.mjs), runs agents
// of two principals (agent.mjs) while the seeded fault schedule (faults.mjs) is
// applied, heals the cluster, ends every open turn, and prints the checker's
// findings (checker.mjs), ending with one line:
//   violations: N (seed S, C calls, F faults)
// Options: --seed S (default 1), --seconds N (default 120), --max-calls N (default
// 20000), --clients N per principal (default 2), --min-calls N (the clients go on past
// --seconds until that many calls were made, up to three times --seconds) and
// --min-faults N (fail, exit 1, when fewer were made or applied; every scheduled fault
// is applied, later on a slow machine), --keep (keep the work directory), --bin PATH
// (default $CL_BIN or build/context-loader), --eras legacy,modern (the MCP protocol
// eras the clients use, per try; default both), --schedule (print the schedule only).
// Exit status: 0 when there is no violation (and the minimums are met), 1 otherwise,
// 77 when redis-server or nginx is missing.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from '../integration/lib/stack.mjs';
import { which } from '../integration/lib/redis.mjs';
import { startCluster, simJson } from './cluster.mjs';
import { makeAgent } from './agent.mjs';
import { makeSchedule, scheduleDigest, runSchedule, heal } from './faults.mjs';
import { check } from './checker.mjs';

function parseArgs(argv) {
  const o = { seed: 1, seconds: 120, maxCalls: 20000, clients: 2, minCalls: 0, minFaults: 0, keep: false, eras: ['legacy', 'modern'], bin: process.env.CL_BIN || path.join(ROOT, 'build/context-loader'), scheduleOnly: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const num = () => { const n = Number(argv[++i]); if (!Number.isInteger(n) || n < 0) throw new Error(`${a} needs a non-negative integer`); return n; };
    if (a === '--seed') o.seed = num();
    else if (a === '--seconds') o.seconds = num();
    else if (a === '--max-calls') o.maxCalls = num();
    else if (a === '--clients') o.clients = num();
    else if (a === '--min-calls') o.minCalls = num();
    else if (a === '--min-faults') o.minFaults = num();
    else if (a === '--keep') o.keep = true;
    else if (a === '--bin') o.bin = argv[++i];
    else if (a === '--schedule') o.scheduleOnly = true;
    else if (a === '--eras') o.eras = argv[++i].split(',').filter(Boolean);
    else throw new Error(`unknown argument ${a}`);
  }
  if (o.seconds < 10) throw new Error('--seconds must be at least 10');
  if (!o.eras.length || o.eras.some((e) => e !== 'legacy' && e !== 'modern')) throw new Error('--eras is a list of legacy, modern');
  return o;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function inflightOf(c) {
  const out = {};
  for (const i of c.instances) {
    try {
      const t = await (await fetch(`http://127.0.0.1:${i.admin}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
      const m = /^cl_tool_calls_inflight(?:\{[^}]*\})?\s+(\d+)/m.exec(t);
      out[i.name] = m ? Number(m[1]) : 0;
    } catch { out[i.name] = -1; }
  }
  return out;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const schedule = makeSchedule(o.seed, o.seconds);
  if (o.scheduleOnly) {
    for (const f of schedule) console.log(JSON.stringify(f));
    console.log(`schedule ${scheduleDigest(schedule)} (seed ${o.seed}, ${schedule.length} faults)`);
    return 0;
  }
  const redisBin = which('redis-server');
  const nginxBin = which('nginx');
  if (!redisBin || !nginxBin) { console.log(`skipped: ${!redisBin ? 'redis-server' : 'nginx'} is not installed`); return 77; }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-chaos-'));
  fs.chmodSync(dir, 0o755); // nginx workers may run as another user
  console.log(`chaos: seed ${o.seed}, ${o.seconds} s, schedule ${scheduleDigest(schedule)} (${schedule.length} faults), work dir ${dir}`);
  const c = await startCluster({ bin: o.bin, dir, redisBin, nginxBin, simTtlS: o.seconds + 600 });
  // instance name by port, for answers that came through the load balancer (X-Upstream)
  const history = { calls: [], turns: [], instances: Object.fromEntries(c.instances.map((i) => [String(i.port), i.name])) };
  const faultLog = [];
  const t0 = Date.now();
  const stopAt = t0 + o.seconds * 1000;
  // The run ends when its time is up, every scheduled fault has been applied and at
  // least --min-calls calls were made (so a slow machine gets the same faults and
  // enough calls, only later), or at three times its length, or at --max-calls.
  const hardStop = t0 + o.seconds * 3000;
  const sched = { done: false };
  const shared = {
    calls: 0, attempts: 0, disconnects: 0,
    stopping: () => shared.calls >= o.maxCalls || Date.now() >= hardStop
      || (Date.now() >= stopAt && sched.done && shared.calls >= o.minCalls),
  };
  const principals = [['u_demo', 'demo-user-token'], ['u_other', 'demo-user2-token']];
  const agents = [];
  for (const [principal, token] of principals) {
    for (let k = 0; k < o.clients; k++) {
      agents.push(makeAgent({
        id: `${principal}-${k}`, token, principal, seed: o.seed, targets: c.targets, history, shared,
        opts: { callTimeoutMs: 20000, callBudgetMs: 20000, maxAttempts: 10, thinkMs: 400, eras: o.eras },
      }));
    }
  }
  let exitCodes = {};
  let report;
  try {
    const sampler = setInterval(() => c.sample('run'), 2000);
    c.sample('run');
    const faults = runSchedule({ schedule, cluster: c, shared, t0, log: faultLog, until: () => hardStop })
      .finally(() => { sched.done = true; });
    await Promise.all(agents.map((a) => a.run()));
    await faults;
    await heal(c, shared);
    await sleep(1000);
    await Promise.all(agents.map((a) => a.drain(60000)));
    clearInterval(sampler);
    await sleep(500);
    c.sample('end');
    const inflight = await inflightOf(c);
    const executions = (await simJson(c, 'GET', '/_sim/executions')).executions;
    const trace = await simJson(c, 'GET', '/_sim/trace/state');
    fs.writeFileSync(path.join(dir, 'history.json'), JSON.stringify({ schedule, faultLog, history, samples: c.samples }, null, 1));
    exitCodes = await c.stop();
    report = check({ history, executions, trace, faultLog, samples: c.samples, inflight, exitCodes });
  } catch (e) {
    await c.stop().catch(() => {});
    throw e;
  }
  const ok = history.calls.filter((x) => x.final?.kind === 'ok').length;
  const gaveUp = history.calls.filter((x) => x.final?.kind === 'gave_up').length;
  const unrecorded = history.calls.filter((x) => x.answers.some((a) => a.kind === 'ok' && a.unrecorded)).length;
  console.log(`calls: ${history.calls.length} (${ok} succeeded, ${gaveUp} given up, ${unrecorded} unrecorded), attempts: ${shared.attempts}, turns: ${history.turns.length}`);
  const byEra = {};
  for (const x of history.calls) for (const a of x.answers) byEra[a.era] = (byEra[a.era] || 0) + 1;
  console.log(`tries by era: ${Object.entries(byEra).map(([k, n]) => `${k} ${n}`).join(', ')}`);
  const byKind = {};
  for (const f of faultLog) byKind[f.kind] = (byKind[f.kind] || 0) + 1;
  console.log(`faults: ${Object.entries(byKind).map(([k, n]) => `${k} ${n}`).join(', ')}`);
  for (const f of faultLog) if (f.error) console.log(`fault error: ${f.kind} at ${f.at} ms: ${f.error}`);
  for (const line of report.outside) console.log(`outside the guarantee: ${line}`);
  for (const line of report.violations) console.log(`violation: ${line}`);
  let rc = report.violations.length ? 1 : 0;
  if (history.calls.length < o.minCalls) { console.log(`too few calls: ${history.calls.length} < ${o.minCalls}`); rc = 1; }
  if (faultLog.length < o.minFaults) { console.log(`too few faults: ${faultLog.length} < ${o.minFaults}`); rc = 1; }
  if (o.keep || rc) console.log(`work dir kept: ${dir}`);
  else fs.rmSync(dir, { recursive: true, force: true });
  console.log(`violations: ${report.violations.length} (seed ${o.seed}, ${history.calls.length} calls, ${faultLog.length} faults)`);
  return rc;
}

main().then((rc) => process.exit(rc), (e) => { console.error(`chaos: ${e.stack || e}`); process.exit(2); });
