// One agent of the campaign: runs managed turns until the deadline or the call
// budget, retrying each call per the client rules, and records every call and answer
// in the shared history (see checker.mjs for what is judged).
import { makeRng } from './rng.mjs';
import { legacyTransport, modernTransport, restTransport } from './client.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// What the platform does for each business call (the checker counts these in the
// simulator's execution log, per trace id).
export const EXEC_PATHS = {
  execute_action: /\/action-types\/at_restart_pod\/execute$/,
  execute_skill: /\/skills\/[^/]+\/execute$/,
  query_object_instance: /\/knowledge-networks\/kn_medical\/object-types\/ot_drug$/,
};

const SKILLS = [['skill_incident_triage', 'sh triage.sh'], ['skill_contract_review', 'python main.py --strict']];

export function makeAgent({ id, token, principal, seed, targets, history, shared, opts }) {
  const rng = makeRng(seed, `agent-${id}`);
  const timeoutMs = opts.callTimeoutMs;
  const transports = {
    legacy: legacyTransport({ token, timeoutMs }),
    modern: modernTransport({ token, timeoutMs }),
    rest: restTransport({ token, timeoutMs }),
  };
  let seqNo = 0;
  let rpcId = 1;
  const pending = []; // turns whose finish (or start) was never answered: the drain ends them

  // A business call: the tool, its arguments (the same on every retry), and where
  // it may go: the MCP family moves between /mcp and /mcp-compact, the execute_tool
  // family likewise, REST stays on REST (another scope by design).
  function businessCall() {
    const tool = rng.weighted([['execute_action', 4], ['execute_skill', 2], ['query_object_instance', 4]]);
    let args;
    if (tool === 'execute_action') args = { kn_id: 'kn_ops', at_id: 'at_restart_pod', _instance_identities: [], dynamic_params: { grace_period_seconds: rng.int(1, 600) } };
    else if (tool === 'execute_skill') { const [s, e] = rng.pick(SKILLS); args = { skill_id: s, entry_shell: e }; }
    else args = { kn_id: 'kn_medical', ot_id: 'ot_drug', limit: rng.int(1, 5) };
    const family = tool === 'execute_skill' ? rng.weighted([['mcp', 3], ['rest', 1]])
      : rng.weighted([['mcp', 2], ['tool', 1], ['rest', 1]]);
    if (family === 'tool') return { tool, outer: 'execute_tool', family, surfaces: ['mcp', 'compact'], args: { tool_id: tool, arguments: args } };
    if (family === 'rest') return { tool, outer: tool, family, surfaces: ['rest'], args };
    return { tool, outer: tool, family, surfaces: tool === 'execute_skill' ? ['mcp'] : ['mcp', 'compact'], args };
  }

  function newCall(kind, spec, turn) {
    seqNo += 1;
    let trace = rng.hex(32);
    if (/^0+$/.test(trace)) trace = `1${trace.slice(1)}`;
    const call = {
      id: `${id}.${seqNo}`, inv: `chaos-${seed}-${id}-${seqNo}`, trace, kind, turn, principal, client: id,
      tool: spec.tool, outer: spec.outer, family: spec.family, surfaces: spec.surfaces,
      invInHeader: spec.family !== 'rest' && rng.chance(0.3), answers: [], final: null,
    };
    shared.calls += 1;
    history.calls.push(call);
    return call;
  }

  async function perform(call, args, budgetMs = opts.callBudgetMs, maxAttempts = opts.maxAttempts) {
    const deadline = Date.now() + budgetMs;
    let target = rng.pick(['LB', 'LB', 'A', 'B']);
    for (let attempt = 1; ; attempt++) {
      if (attempt > 1 && !rng.chance(0.5)) target = rng.pick(['LB', 'A', 'B'].filter((t) => t !== target));
      const surface = rng.pick(call.surfaces);
      // every try picks its era: a retry may move between the session and stateless
      // eras as it moves between instances and MCP surfaces (one idempotency scope)
      const era = surface === 'rest' ? 'rest' : rng.pick(opts.eras);
      const tr = transports[era];
      let ac = null;
      let cut = null;
      if (shared.disconnects > 0) {
        shared.disconnects -= 1;
        ac = new AbortController();
        cut = setTimeout(() => ac.abort(), rng.int(1, 600));
      }
      const t0 = Date.now();
      const span = rng.hex(16);
      let a = await tr.send(targets[target], surface, call.outer, args,
        { inv: call.inv, invInHeader: call.invInHeader, traceparent: `00-${call.trace}-${span}-01`, rpcId: rpcId++ }, ac?.signal);
      if (cut) clearTimeout(cut);
      if (a.kind === 'session') a = { kind: 'lost', why: 'session unknown to the instance (made again)' };
      const rec = { attempt, target, surface, era, t0, t1: Date.now(), ...a };
      delete rec.value;
      call.answers.push(rec);
      shared.attempts += 1;
      if (a.kind === 'ok' || (a.kind === 'error' && !a.retryable)) { call.final = rec; return a; }
      if (attempt >= maxAttempts || Date.now() > deadline) { call.final = { kind: 'gave_up', last: a.kind }; return call.final; }
      const backoff = Math.min(2000, Math.max(a.retryAfterMs || 0, 40 * 2 ** Math.min(attempt, 5)));
      await sleep(backoff + rng.int(0, 60));
    }
  }

  async function start(turn) {
    const c = newCall('start', { tool: 'bkn_start_interaction', outer: 'bkn_start_interaction', family: 'mcp', surfaces: ['mcp', 'compact'] }, turn.id);
    c.args = { question: `chaos turn ${turn.id}`, agent_name: 'chaos', conversation_mode: 'new' };
    turn.startCall = c;
    return perform(c, c.args);
  }

  async function finish(turn, budgetMs) {
    if (!turn.finishCall) {
      const c = newCall('finish', { tool: 'bkn_finish_interaction', outer: 'bkn_finish_interaction', family: 'mcp', surfaces: ['mcp', 'compact'] }, turn.id);
      c.args = { interaction_id: turn.interaction_id, outcome: 'completed', answer: `turn ${turn.id} done` };
      turn.finishCall = c;
    }
    return perform(turn.finishCall, turn.finishCall.args, budgetMs, budgetMs > opts.callBudgetMs ? 60 : opts.maxAttempts);
  }

  async function runTurn() {
    const turn = { id: `${id}.t${history.turns.length}`, client: id, principal, calls: [] };
    history.turns.push(turn);
    const s = await start(turn);
    if (s.kind !== 'ok') { turn.startFailed = s.kind; if (s.kind === 'gave_up') pending.push(turn); return; }
    const v = JSON.parse(s.payload).structuredContent;
    turn.conversation_id = v.conversation_id;
    turn.interaction_id = v.interaction_id;
    const ctx = { conversation_id: v.conversation_id, interaction_id: v.interaction_id };
    const n = rng.int(2, 6);
    for (let i = 0; i < n && !shared.stopping(); i++) {
      const spec = businessCall();
      const c = newCall('business', spec, turn.id);
      const args = { ...spec.args, bkn_context: ctx };
      if (spec.family !== 'rest') args.response_format = 'json';
      c.args = args;
      turn.calls.push(c.id);
      const a = await perform(c, args);
      if (a.kind === 'error' && a.code === 'interaction_terminal') break; // the turn is over
      await sleep(rng.int(0, opts.thinkMs));
    }
    const f = await finish(turn, opts.callBudgetMs);
    if (f.kind === 'gave_up') pending.push(turn);
    turn.finished = f.kind;
  }

  return {
    id,
    async run() {
      while (!shared.stopping()) await runTurn();
    },
    // After the faults: end every turn left open (a start never answered is asked
    // again with its invocation id, which returns the same interaction).
    async drain(budgetMs) {
      // every business call given up during the faults is asked again, as it was:
      // on a healthy cluster it must end in a result or a non-retryable error
      for (const c of history.calls) {
        if (c.client !== id || c.kind !== 'business' || c.final?.kind !== 'gave_up') continue;
        c.gaveUp = c.final;
        c.recheck = await perform(c, c.args, budgetMs, 20);
        c.final = c.recheck.kind === 'gave_up' ? c.recheck : c.final;
      }
      for (const turn of pending.splice(0)) {
        if (!turn.interaction_id) {
          const s = await perform(turn.startCall, turn.startCall.args, budgetMs, 60);
          if (s.kind !== 'ok') { turn.drain = `start ${s.kind}`; continue; }
          const v = JSON.parse(s.payload).structuredContent;
          turn.conversation_id = v.conversation_id;
          turn.interaction_id = v.interaction_id;
        }
        const f = await finish(turn, budgetMs);
        turn.finished = f.kind;
        turn.drain = `finish ${f.kind}`;
      }
    },
  };
}
