// The checker: judges a campaign from three records that do not trust the gateway:
// the simulator's log of what the platform executed (per caller trace id), Trace
// Core's stored Operations, receipts and Interactions, and the history of what
// every client was answered. Each finding is one line; `violations` are broken
// guarantees, `outside` are double executions the guarantee does not cover
// (docs/faults.md: an unrecorded call whose idempotency record was lost).
import { createHash } from 'node:crypto';
import { EXEC_PATHS } from './agent.mjs';

const sha256 = (s) => createHash('sha256').update(s).digest('hex');

// The Trace Core Operation key the gateway derives for a call with an invocation id:
// op_ + 32 hex of SHA-256 over the canonical JSON of {conversation_id, identity,
// interaction_id, surface, tool} (docs/lifecycle.md).
export function operationKey({ conversation_id, interaction_id, surface, tool, inv }) {
  const o = { conversation_id, identity: `inv:${sha256(inv)}`, interaction_id, surface, tool };
  return `op_${sha256(JSON.stringify(o, Object.keys(o).sort())).slice(0, 32)}`;
}

export function check({ history, executions, trace, faultLog, samples, inflight, exitCodes }) {
  const violations = [];
  const outside = [];
  const v = (kind, msg) => violations.push(`${kind}: ${msg}`);
  const turns = new Map(history.turns.map((t) => [t.id, t]));
  const receipts = new Map(trace.receipts.map((r) => [r.receipt_id, r]));
  const byKey = new Map();
  for (const r of trace.receipts) byKey.set(r.operation_key, [...(byKey.get(r.operation_key) || []), r]);
  const execByTrace = new Map();
  for (const e of executions) {
    if (!e.trace_id || e.status < 200 || e.status > 299) continue;
    execByTrace.set(e.trace_id, [...(execByTrace.get(e.trace_id) || []), e]);
  }
  const recordLoss = faultLog.filter((f) => f.kind === 'kill_instance' || (f.kind === 'redis_restart' && !f.durable));

  for (const call of history.calls) {
    const oks = call.answers.filter((a) => a.kind === 'ok');
    const turn = turns.get(call.turn);
    // 1. at most once: the platform ran this call's effect at most once
    if (call.kind === 'business') {
      const runs = (execByTrace.get(call.trace) || []).filter((e) => EXEC_PATHS[call.tool].test(e.path));
      if (runs.length > 1) {
        const t1 = Date.parse(runs[0].time);
        const t2 = Date.parse(runs[runs.length - 1].time);
        const key = turn?.interaction_id && operationKey({ ...turn, surface: call.family === 'rest' ? 'rest' : 'mcp', tool: call.outer, inv: call.inv });
        const recorded = key && byKey.has(key);
        const lost = recordLoss.some((f) => f.start <= t2 && (f.end ?? f.start) >= t1 - 5000);
        const what = `${call.inv} (${call.tool} via ${call.family}) executed ${runs.length} times`;
        if (!recorded && lost) outside.push(`${what}: unrecorded, and its idempotency record lost between the runs`);
        else v('executed_twice', what);
      }
    }
    // 2. every acknowledged success has exactly one receipt (unless it said "unrecorded")
    const seen = new Set();
    for (const a of oks) {
      if (a.unrecorded) continue;
      if (a.receiptPending && call.kind === 'business') {
        // told "receipt pending": the gateway finalizes it later; by the end of the
        // campaign it must be there, unless the instance that owed it was killed
        const r = receipts.get(a.receiptId);
        if (r && r.receipt_status !== 'pending') { seen.add(a.receiptId); continue; }
        // the instance that answered (directly, or behind the load balancer) was killed
        // after the answer, before its background finalization could get through
        const who = a.target !== 'LB' ? a.target : history.instances?.[String(a.via || '').split(':').pop()];
        const killed = faultLog.some((f) => f.kind === 'kill_instance' && f.target === who && f.start >= a.t0 && f.start <= a.t1 + 60000);
        if (killed) outside.push(`${call.inv}: receipt ${a.receiptId} announced pending, its instance may have been killed before finalizing it`);
        else v('no_receipt', `${call.inv}: receipt ${a.receiptId} announced pending was never finalized`);
        seen.add(a.receiptId);
        continue;
      }
      if (call.kind !== 'business') continue; // lifecycle answers carry no receipt
      if (a.receiptCount > 1) v('two_receipts', `${call.inv}: an answer named ${a.receiptCount} receipts`);
      if (!a.receiptId) { v('no_receipt', `${call.inv} (${call.tool} via ${call.family}): success acknowledged without a receipt and without the unrecorded mark`); continue; }
      seen.add(a.receiptId);
      const r = receipts.get(a.receiptId);
      if (!r) v('no_receipt', `${call.inv}: receipt ${a.receiptId} is not in Trace Core`);
      else if (r.receipt_status === 'pending') v('no_receipt', `${call.inv}: receipt ${a.receiptId} is still pending in Trace Core`);
    }
    if (seen.size > 1) v('two_receipts', `${call.inv}: answers named ${seen.size} different receipts`);
    if (call.kind === 'business' && turn?.interaction_id) {
      const key = operationKey({ ...turn, surface: call.family === 'rest' ? 'rest' : 'mcp', tool: call.outer, inv: call.inv });
      const rs = byKey.get(key) || [];
      if (rs.length > 1) v('two_receipts', `${call.inv}: ${rs.length} receipts for one Operation key`);
      const byTrace = trace.receipts.filter((r) => r.trace_id === call.trace && r.receipt_status !== 'pending');
      if (byTrace.length > 1) v('two_receipts', `${call.inv}: ${byTrace.length} terminal receipts carry its trace id`);
    }
    // 3. a retry gets the original result, or an error that says what to do next
    const first = oks[0];
    for (const a of call.answers) {
      if (a.kind === 'ok' && first && a.payload !== first.payload) v('different_result', `${call.inv}: attempt ${a.attempt} answered another result than the first success`);
      if (a.kind === 'error' && first && call.answers.indexOf(a) > call.answers.indexOf(first) && a.code !== 'operation_already_executed') {
        v('different_result', `${call.inv}: attempt ${a.attempt} answered ${a.code} after a success`);
      }
      if (a.kind === 'error' && !a.retryable && !a.requiredAction) {
        v('no_next_step', `${call.inv} (${call.tool} via ${a.surface}, attempt ${a.attempt}): ${a.code} (HTTP ${a.status}) is not retryable and names no required action`);
      }
    }
    // 3b. retrying on a healed cluster must end: a result or a non-retryable error
    if (call.recheck && call.recheck.kind === 'gave_up') {
      const last = call.answers[call.answers.length - 1];
      v('stuck_retryable', `${call.inv} (${call.tool} via ${call.family}): after the faults, ${call.answers.length} attempts still end in ${last.kind === 'error' ? `${last.code} (retryable)` : last.kind}`);
    }
  }
  // 4. no interaction left open once the turns are over
  for (const i of trace.interactions) {
    if (i.execution_status === 'active') v('interaction_open', `${i.interaction_id} is still active after every turn ended`);
  }
  for (const t of history.turns) {
    if (t.interaction_id && t.finished !== 'ok') v('interaction_open', `turn ${t.id}: its finish was never acknowledged (${t.finished}${t.drain ? `, drain: ${t.drain}` : ''})`);
  }
  // 5. bounded processes: descriptors and memory of each instance life, from its
  // first sample after warm-up to its last; nothing left in flight; a clean exit
  const lives = new Map();
  for (const s of samples) lives.set(`${s.name}#${s.life}`, [...(lives.get(`${s.name}#${s.life}`) || []), s]);
  for (const [life, ss] of lives) {
    const warm = ss.filter((s) => s.uptimeMs >= 5000);
    if (warm.length < 3) continue;
    const base = warm[0];
    const last = warm[warm.length - 1];
    if (last.fds > base.fds + 64) v('fd_growth', `instance ${life}: ${base.fds} -> ${last.fds} descriptors`);
    if (last.rssKb > base.rssKb * 3 + 128 * 1024) v('memory_growth', `instance ${life}: RSS ${base.rssKb} -> ${last.rssKb} KiB`);
  }
  for (const [name, n] of Object.entries(inflight || {})) if (n) v('left_in_flight', `instance ${name}: ${n} calls still in flight after the drain`);
  for (const [name, code] of Object.entries(exitCodes || {})) if (code !== 0) v('unclean_exit', `instance ${name} exited with ${code} on SIGTERM`);
  return { violations, outside };
}
