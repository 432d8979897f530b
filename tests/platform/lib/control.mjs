// Test-equipment state: the request log and the fault table (/_sim/* routes).

const MAX_RECORDS = 10000;

export const FAULT_SERVICES = ['ontology_query', 'bkn_backend', 'oauth', 'bkn_safe', 'trace_core', 'mf_model_api', 'operator_integration', 'vega', '*'];
// truncate: the answer declares its full Content-Length, sends half the body and
// closes the socket (a truncated upstream response).
const FAULT_MODES = ['close', 'hang', 'truncate'];

export class Recorder {
  constructor() {
    this.records = [];
    this.seq = 0;
  }
  /** Append one request; returns its sequence number (1, 2, ...; never reused). */
  add(rec) {
    this.seq += 1;
    this.records.push({ seq: this.seq, ...rec });
    if (this.records.length > MAX_RECORDS) this.records.splice(0, this.records.length - MAX_RECORDS);
    return this.seq;
  }
  list({ service, since } = {}) {
    return this.records.filter((r) => (!service || r.service === service) && (!(since >= 0) || r.seq > since));
  }
  // The sequence keeps counting across resets so "since" cursors stay valid.
  clear() {
    this.records = [];
  }
}

// The platform's own record of what it executed: one compact entry per request a
// service handled (a request a fault answered or dropped before the service saw it
// is not there), with the W3C trace id of its traceparent, so a checker can group the
// platform's executions by the caller's trace. Kept apart from the request log (and
// far longer) so a long fault campaign never loses an entry.
const MAX_EXECUTIONS = 500000;

export class ExecutionLog {
  constructor() {
    this.entries = [];
    this.seq = 0;
  }
  add(rec) {
    this.seq += 1;
    this.entries.push({ seq: this.seq, ...rec });
    if (this.entries.length > MAX_EXECUTIONS) this.entries.splice(0, this.entries.length - MAX_EXECUTIONS);
    return this.seq;
  }
  list({ service, since, trace_id: traceId } = {}) {
    return this.entries.filter((r) => (!service || r.service === service) && (!(since >= 0) || r.seq > since)
      && (!traceId || r.trace_id === traceId));
  }
  clear() {
    this.entries = [];
  }
}

/** The trace id of a traceparent header value, or '' when it has no valid form. */
export function traceIdOf(traceparent) {
  const m = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(String(traceparent || '').trim());
  return m ? m[1] : '';
}

export class Faults {
  constructor() {
    this.items = [];
    this.nextId = 1;
  }
  /**
   * Validate and add a fault spec; returns {fault} or {error}.
   * Spec: {service, path_prefix?, latency_ms?, answer_latency_ms?, status?, body?, mode?, count?}.
   */
  add(spec) {
    if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) return { error: 'fault must be a JSON object' };
    const known = ['service', 'path_prefix', 'latency_ms', 'answer_latency_ms', 'status', 'body', 'mode', 'count'];
    for (const k of Object.keys(spec)) if (!known.includes(k)) return { error: `unknown fault field "${k}"` };
    if (!FAULT_SERVICES.includes(spec.service)) return { error: `service must be one of ${FAULT_SERVICES.join(', ')}` };
    const num = (k, lo, hi) => spec[k] === undefined || (Number.isInteger(spec[k]) && spec[k] >= lo && spec[k] <= hi);
    if (spec.path_prefix !== undefined && typeof spec.path_prefix !== 'string') return { error: 'path_prefix must be a string' };
    if (!num('latency_ms', 0, 600000)) return { error: 'latency_ms must be an integer 0..600000' };
    if (!num('answer_latency_ms', 0, 600000)) return { error: 'answer_latency_ms must be an integer 0..600000' };
    if (!num('status', 100, 599)) return { error: 'status must be an integer 100..599' };
    if (!num('count', 1, 1e9)) return { error: 'count must be a positive integer' };
    if (spec.body !== undefined && typeof spec.body !== 'string') return { error: 'body must be a string' };
    if (spec.mode !== undefined && !FAULT_MODES.includes(spec.mode)) return { error: `mode must be one of ${FAULT_MODES.join(', ')}` };
    if (spec.latency_ms === undefined && spec.answer_latency_ms === undefined && spec.status === undefined && spec.mode === undefined) {
      return { error: 'a fault needs latency_ms, answer_latency_ms, status or mode' };
    }
    const fault = { id: this.nextId++, hits: 0, ...spec, remaining: spec.count === undefined ? null : spec.count };
    this.items.push(fault);
    return { fault };
  }
  /** The first live fault matching the request; consumes one of its uses. */
  take(service, path) {
    for (const f of this.items) {
      if (f.remaining === 0) continue;
      if (f.service !== '*' && f.service !== service) continue;
      if (f.path_prefix && !path.startsWith(f.path_prefix)) continue;
      f.hits += 1;
      if (f.remaining !== null) f.remaining -= 1;
      return f;
    }
    return null;
  }
  /** Removes one fault by id; true when it existed. */
  remove(id) {
    const i = this.items.findIndex((f) => f.id === id);
    if (i < 0) return false;
    this.items.splice(i, 1);
    return true;
  }
  clear() {
    this.items = [];
  }
}
