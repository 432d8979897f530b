// The campaign's own parts on synthetic inputs: the schedule follows from the seed
// alone, and the checker reports each kind of violation (and only those).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { makeSchedule, scheduleDigest } from './faults.mjs';
import { check, operationKey } from './checker.mjs';

test('the fault schedule is a function of the seed and the length', () => {
  const a = makeSchedule(3, 120);
  assert.deepEqual(makeSchedule(3, 120), a);
  assert.equal(scheduleDigest(makeSchedule(3, 120)), scheduleDigest(a));
  assert.notEqual(scheduleDigest(makeSchedule(4, 120)), scheduleDigest(a));
  assert.ok(a.length >= 20, `${a.length} faults in 120 s`);
  for (let i = 1; i < a.length; i++) assert.ok(a[i].at > a[i - 1].at);
  assert.ok(a.every((f) => f.at < 120000));
  const kinds = new Set(makeSchedule(1, 600).map((f) => f.kind));
  for (const k of ['kill_instance', 'sighup', 'redis_restart', 'trace_down', 'trace_hang', 'trace_5xx',
    'upstream_drop', 'upstream_delay', 'upstream_slow_answer', 'client_disconnect']) assert.ok(kinds.has(k), k);
});

test('the Operation key is the gateway\'s (canonical JSON of the five members)', () => {
  // the key the gateway gave this call (an execute_action on /mcp, invocation id ea-1)
  assert.equal(operationKey({ conversation_id: 'conv_4b35ec6ec5d93eab8d4bdd2b2c7fd425', interaction_id: 'int_1ce75d773c6146ea67bd8f74db8afe28', surface: 'mcp', tool: 'execute_action', inv: 'ea-1' }),
    'op_3e68d29399fc51403383769865391bc9');
  const k = operationKey({ conversation_id: 'conv_1', interaction_id: 'int_1', surface: 'mcp', tool: 'execute_action', inv: 'inv-1' });
  assert.match(k, /^op_[0-9a-f]{32}$/);
  assert.notEqual(k, operationKey({ conversation_id: 'conv_1', interaction_id: 'int_1', surface: 'rest', tool: 'execute_action', inv: 'inv-1' }));
});

const T = 'a'.repeat(32);
const turn = { id: 't1', interaction_id: 'int_1', conversation_id: 'conv_1', finished: 'ok' };
const ok = (extra = {}) => ({ kind: 'ok', attempt: 1, t0: 1000, t1: 1100, payload: '{"r":1}', receiptId: 'rc_1', receiptCount: 1, ...extra });
const call = (answers, extra = {}) => ({ inv: 'inv-1', trace: T, kind: 'business', tool: 'execute_action', outer: 'execute_action', family: 'mcp', turn: 't1', answers, ...extra });
const receipt = (extra = {}) => ({ receipt_id: 'rc_1', receipt_status: 'completed', trace_id: T, operation_key: 'k1', ...extra });
const exec = (time = '1970-01-01T00:00:01.000Z') => ({ trace_id: T, status: 200, path: '/api/ontology-query/in/v1/knowledge-networks/kn_ops/action-types/at_restart_pod/execute', time });
function judge({ calls, executions = [exec()], receipts = [receipt()], interactions = [{ interaction_id: 'int_1', execution_status: 'completed' }], faultLog = [], samples = [], inflight = {}, exitCodes = {} }) {
  return check({ history: { calls, turns: [turn] }, executions, trace: { receipts, interactions }, faultLog, samples, inflight, exitCodes });
}
const kinds = (r) => r.violations.map((v) => v.split(':')[0]);

test('a clean history has no violation', () => {
  const r = judge({ calls: [call([ok(), ok({ attempt: 2 })])] });
  assert.deepEqual(r.violations, []);
});

test('each violation is reported', () => {
  assert.deepEqual(kinds(judge({ calls: [call([ok()])], executions: [exec(), exec()] })), ['executed_twice']);
  assert.deepEqual(kinds(judge({ calls: [call([ok({ receiptId: '', receiptCount: 0 })])] })), ['no_receipt']);
  assert.deepEqual(kinds(judge({ calls: [call([ok()])], receipts: [receipt({ receipt_status: 'pending' })] })), ['no_receipt']);
  assert.deepEqual(kinds(judge({ calls: [call([ok(), ok({ attempt: 2, receiptId: 'rc_2' })])], receipts: [receipt(), receipt({ receipt_id: 'rc_2' })] })), ['two_receipts', 'two_receipts']);
  assert.deepEqual(kinds(judge({ calls: [call([ok(), ok({ attempt: 2, payload: '{"r":2}' })])] })), ['different_result']);
  assert.deepEqual(kinds(judge({ calls: [call([ok(), { kind: 'error', attempt: 2, code: 'in_progress', retryable: true, requiredAction: 'retry_later' }])] })), ['different_result']);
  assert.deepEqual(kinds(judge({ calls: [call([{ kind: 'error', attempt: 1, code: 'x', retryable: false, requiredAction: '', status: 502 }])], executions: [] })), ['no_next_step']);
  assert.deepEqual(kinds(judge({ calls: [call([{ kind: 'error', attempt: 1, code: 'x', retryable: true }], { recheck: { kind: 'gave_up' } })], executions: [] })), ['stuck_retryable']);
  assert.deepEqual(kinds(judge({ calls: [call([ok()])], interactions: [{ interaction_id: 'int_1', execution_status: 'active' }] })), ['interaction_open']);
  const samples = [0, 1, 2, 3].map((i) => ({ name: 'A', life: 1, uptimeMs: 6000 + i * 2000, fds: 20 + i * 100, rssKb: 10000 }));
  assert.deepEqual(kinds(judge({ calls: [call([ok()])], samples })), ['fd_growth']);
  assert.deepEqual(kinds(judge({ calls: [call([ok()])], inflight: { A: 2 } })), ['left_in_flight']);
  assert.deepEqual(kinds(judge({ calls: [call([ok()])], exitCodes: { B: 1 } })), ['unclean_exit']);
});

test('what the guarantee allows is not a violation', () => {
  // a success marked unrecorded needs no receipt
  assert.deepEqual(judge({ calls: [call([ok({ receiptId: '', receiptCount: 0, unrecorded: true })])], receipts: [] }).violations, []);
  // announced pending, finalized by the end
  assert.deepEqual(judge({ calls: [call([ok({ receiptCount: 0, receiptPending: true })])] }).violations, []);
  // the precise error after a success whose record was lost
  assert.deepEqual(judge({ calls: [call([ok(), { kind: 'error', attempt: 2, code: 'operation_already_executed', retryable: false, requiredAction: 'read_outcome' }])] }).violations, []);
  // an unrecorded call run twice after its record was lost is outside the guarantee
  const r = judge({
    calls: [call([ok({ receiptId: '', receiptCount: 0, unrecorded: true })])], receipts: [],
    executions: [exec('1970-01-01T00:00:01.000Z'), exec('1970-01-01T00:00:03.000Z')],
    faultLog: [{ kind: 'redis_restart', durable: false, start: 2000, end: 2500 }],
  });
  assert.deepEqual(r.violations, []);
  assert.equal(r.outside.length, 1);
});
