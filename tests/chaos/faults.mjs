// The fault schedule: a list of timed faults drawn from the seed alone (the same
// seed and length give the same list, whatever the machine's speed), and the
// executor that applies them to a cluster in order. A fault starts at its time or
// when the one before it has ended, whichever is later.
import { createHash } from 'node:crypto';
import { makeRng } from './rng.mjs';
import { simJson } from './cluster.mjs';

const TC = '/api/agent-observability/v1';

export function makeSchedule(seed, seconds) {
  const rng = makeRng(seed, 'faults');
  const out = [];
  let t = 2000 + rng.int(0, 1500);
  const end = seconds * 1000 - 6000;
  while (t < end) {
    const kind = rng.weighted([
      ['kill_instance', 3], ['sighup', 2], ['redis_restart', 2], ['trace_down', 2], ['trace_hang', 1],
      ['trace_5xx', 2], ['upstream_drop', 3], ['upstream_delay', 2], ['upstream_slow_answer', 2],
      ['client_disconnect', 3],
    ]);
    const f = { at: t, kind };
    const up = () => rng.pick(['ontology_query', 'operator_integration']);
    switch (kind) {
      case 'kill_instance': f.target = rng.pick(['A', 'B']); f.downMs = rng.int(200, 2500); break;
      case 'sighup': f.target = rng.pick(['A', 'B']); break;
      case 'redis_restart': f.durable = rng.chance(0.5); f.downMs = rng.int(100, 1500); break;
      case 'trace_down': f.ms = rng.int(800, 4000); break;
      case 'trace_hang': f.ms = rng.int(800, 3000); break;
      case 'trace_5xx':
        f.ms = rng.int(800, 3000);
        f.status = rng.pick([500, 502, 503]);
        // everything (the probe fails too), the recording steps only (the probe says
        // alive), or only the finalization of attempts (after the tool ran)
        f.prefix = rng.pick(['', `${TC}/conversations`, `${TC}/operations`]);
        break;
      case 'upstream_drop': f.service = up(); f.mode = rng.pick(['close', 'truncate']); f.count = rng.int(1, 4); break;
      case 'upstream_delay': f.service = up(); f.latencyMs = rng.int(300, 5500); f.count = rng.int(1, 4); break;
      // the platform executes at once and answers late (past the gateway's timeout at times)
      case 'upstream_slow_answer': f.service = up(); f.latencyMs = rng.int(300, 5500); f.count = rng.int(1, 4); break;
      case 'client_disconnect': f.count = rng.int(1, 4); break;
      default: break;
    }
    out.push(f);
    t += rng.int(2000, 4500);
  }
  return out;
}

export function scheduleDigest(schedule) {
  return createHash('sha256').update(JSON.stringify(schedule)).digest('hex').slice(0, 16);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Applies the schedule from t0, every fault of it unless the run's hard stop comes
// first; log gets {kind, start, end, ...} per fault applied.
export async function runSchedule({ schedule, cluster: c, shared, t0, log, until }) {
  const inst = (name) => c.instances.find((i) => i.name === name);
  const simFault = (spec) => simJson(c, 'POST', '/_sim/faults', spec);
  const unFault = async (id) => { try { await simJson(c, 'DELETE', `/_sim/faults/${id}`); } catch { /* used up and gone, or never there */ } };
  for (const f of schedule) {
    const wait = t0 + f.at - Date.now();
    if (wait > 0) await sleep(wait);
    if (Date.now() > until()) break;
    const entry = { ...f, start: Date.now() };
    log.push(entry);
    try {
      switch (f.kind) {
        case 'kill_instance': await c.kill(inst(f.target)); await sleep(f.downMs); await c.restart(inst(f.target)); break;
        case 'sighup': c.hup(inst(f.target)); break;
        case 'redis_restart': await c.restartRedis({ durable: f.durable, downMs: f.downMs }); break;
        case 'trace_down': { const x = await simFault({ service: 'trace_core', mode: 'close' }); await sleep(f.ms); await unFault(x.id); break; }
        case 'trace_hang': { const x = await simFault({ service: 'trace_core', mode: 'hang' }); await sleep(f.ms); await unFault(x.id); break; }
        case 'trace_5xx': {
          const x = await simFault({ service: 'trace_core', status: f.status, ...(f.prefix ? { path_prefix: f.prefix } : {}) });
          await sleep(f.ms);
          await unFault(x.id);
          break;
        }
        case 'upstream_drop': {
          const x = await simFault({ service: f.service, mode: f.mode, count: f.count });
          c.pendingFaults.push(x.id);
          break;
        }
        case 'upstream_delay': {
          const x = await simFault({ service: f.service, latency_ms: f.latencyMs, count: f.count });
          c.pendingFaults.push(x.id);
          break;
        }
        case 'upstream_slow_answer': {
          const x = await simFault({ service: f.service, answer_latency_ms: f.latencyMs, count: f.count });
          c.pendingFaults.push(x.id);
          break;
        }
        case 'client_disconnect': shared.disconnects += f.count; break;
        default: break;
      }
    } catch (e) {
      entry.error = String(e.message || e);
    }
    entry.end = Date.now();
  }
}

// Ends every fault still in force: the campaign's drain runs on a healthy cluster.
export async function heal(c, shared) {
  shared.disconnects = 0;
  for (const id of c.pendingFaults.splice(0)) { try { await simJson(c, 'DELETE', `/_sim/faults/${id}`); } catch { /* gone */ } }
  for (const i of c.instances) if (!i.server) await c.restart(i);
}
