// BKN Trace Core (agent-observability), the lifecycle API Context Loader calls
// (see ../README.md). In memory, cleared by
// /_sim/reset. Base path /api/agent-observability/v1; the internal listener's
// trust model: the owner tuple comes from headers, no secret.
//
// Besides the documented Trace Core routes it serves GET /capture-policy and GET
// /health (Context Loader's capture policy and availability probe), and the control
// routes /_sim/trace and /_sim/trace/state.

import { createHash, randomBytes } from 'node:crypto';
import { json, parseBody, isPlainObject } from '../lib/http.mjs';
import { stringify, keysOf, isNumeric } from '../lib/json.mjs';

const BASE = '/api/agent-observability/v1';
const DEFAULT_LEASE_S = 300;
const MAX_LEASE_S = 86400;
const MAX_OPS = 128;
const MAX_CLAIMS = 32;
const MAX_EVIDENCE_REFS = 2048;
const ASSEMBLER_DEADLINE_MS = 5 * 60 * 1000;
const ONE_MIB = 1024 * 1024;

// Core error code -> [HTTP status, required_action, retryable].
const ERRORS = {
  conversation_required: [400, 'bkn_start_interaction', false],
  conversation_not_found: [404, 'bkn_start_interaction', false],
  conversation_closed: [409, 'bkn_start_interaction', false],
  interaction_required: [400, 'bkn_start_interaction', false],
  interaction_in_progress: [409, 'bkn_finish_interaction', false],
  interaction_terminal: [409, 'bkn_start_interaction', false],
  agent_name_conflict: [409, 'reuse_conversation_agent_name', false],
  agent_name_invalid: [422, 'fix_agent_name', false],
  operation_required: [400, 'ensure_operation', false],
  idempotency_conflict: [409, 'use_new_idempotency_key', false],
  receipt_pending: [409, 'retry_same_business_tool', true],
  terminal_conflict: [409, 'reuse_authoritative_interaction', false],
  closure_manifest_invalid: [422, 'fix_closure_manifest', false],
  resource_not_disclosed: [404, 'verify_scope_or_identifier', false],
  permission_denied: [401, 'request_authorization', false],
  invalid_evidence_artifact: [400, 'fix_evidence_artifact', false],
  method_not_allowed: [405, '', false],
};

/** The Core error envelope; `extra` may carry current_status / current_interaction_id, `status` overrides. */
function coreError(code, message, extra = {}) {
  const [defStatus, action, retryable] = ERRORS[code];
  const status = extra.status || defStatus;
  const error = { code, message };
  if (extra.current_status) error.current_status = extra.current_status;
  if (extra.current_interaction_id) error.current_interaction_id = extra.current_interaction_id;
  error.retryable = retryable;
  error.required_action = action;
  error.retry_after_ms = 0;
  return json(status, { error });
}

const newId = (prefix) => prefix + randomBytes(16).toString('hex');
const iso = (ms) => new Date(ms).toISOString();
const sha256hex = (s) => createHash('sha256').update(s, 'utf8').digest('hex');

/** Canonical JSON (keys sorted at every level, numbers as written) for payload comparison. */
function canonical(v) {
  if (v === null || typeof v !== 'object' || isNumeric(v)) return stringify(v);
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  const keys = keysOf(v).filter((k) => v[k] !== undefined).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
}

const isStr = (v, max = 1024) => typeof v === 'string' && v.length > 0 && v.length <= max;
const isStrArray = (v, max) => Array.isArray(v) && v.length <= max && v.every((s) => isStr(s));
const isInt = (v) => typeof v === 'number' && Number.isInteger(v);

/**
 * Strict decode like Core's: exactly one JSON object, only `allowed` keys.
 * Returns {value} or {error: message}.
 */
function decodeStrict(bodyText, allowed) {
  const p = parseBody(bodyText, undefined);
  if (p.error) return { error: `request body is not valid JSON: ${p.error}` };
  if (!isPlainObject(p.value)) return { error: 'request body must be one JSON object' };
  for (const k of Object.keys(p.value)) if (!allowed.includes(k)) return { error: `unknown field "${k}"` };
  return { value: p.value };
}

// ---- owner tuple ----

const SUBJECT_TYPES = ['user', 'service'];
const AUTH_METHODS = ['oauth', 'api_key', 'service_header'];

/** {owner, key, authMethod} from the identity headers, or {error}. */
function ownerOf(headers) {
  const h = (name) => String(headers[name] ?? '').trim();
  const account = h('x-account-id');
  const accountType = h('x-account-type');
  const tenant = h('x-tenant-id');
  const domain = h('x-business-domain');
  const principal = h('x-bkn-application-principal-id');
  const subjectType = h('x-bkn-effective-subject-type');
  const subjectId = h('x-bkn-effective-subject-id');
  const authMethod = h('x-bkn-auth-method');
  if (!account) return { error: 'x-account-id is required' };
  if (!accountType || accountType === 'anonymous') return { error: 'an authenticated, non-anonymous x-account-type is required' };
  if (!tenant) return { error: 'x-tenant-id is required' };
  if (!domain) return { error: 'x-business-domain is required' };
  if (!principal) return { error: 'X-BKN-Application-Principal-ID is required' };
  if (!SUBJECT_TYPES.includes(subjectType)) return { error: 'X-BKN-Effective-Subject-Type must be user or service' };
  if (!subjectId) return { error: 'X-BKN-Effective-Subject-ID is required' };
  if (!AUTH_METHODS.includes(authMethod)) return { error: 'X-BKN-Auth-Method must be oauth, api_key or service_header' };
  const owner = {
    tenant_id: tenant,
    business_domain_id: domain,
    application_principal_id: principal,
    effective_subject_type: subjectType,
    effective_subject_id: subjectId,
  };
  return { owner, key: canonical(owner), authMethod };
}

// ---- state ----

function freshState() {
  return {
    // SIM_TRACE_CAPTURE (sim.mjs --capture) sets the deployment default, kept across resets.
    policy: { capture: process.env.SIM_TRACE_CAPTURE === 'disabled' ? 'disabled' : 'enabled', ttl_s: 30, overrides: new Map() }, // overrides: "tenant\0domain" -> capture
    conversations: new Map(),
    currentByKey: new Map(), // ownerKey \0 external key -> conversation_id
    interactions: new Map(),
    startIdem: new Map(), // conversation_id \0 idempotency_key -> {request_hash, interaction_id}
    operations: new Map(),
    opByKey: new Map(), // interaction_id \0 operation_key -> operation_id
    receipts: new Map(),
    artifacts: new Map(),
  };
}

// A resource is visible only to its exact owner tuple; anything else is "not disclosed".
const visible = (res, who) => res && res.ownerKey === who.key;
const notDisclosed = (what) => coreError('resource_not_disclosed', `${what} was not found in the caller's scope`);

// ---- views (what the API returns) ----

function conversationView(c) {
  return {
    conversation_id: c.conversation_id,
    agent_name: c.agent_name || undefined,
    owner: c.owner,
    external_conversation_key: c.external_conversation_key,
    business_context: 'managed',
    creation_auth_method: c.creation_auth_method,
    generation: c.generation,
    status: c.status,
    one_shot: false,
    row_version: c.row_version,
    created_at: iso(c.created),
    updated_at: iso(c.updated),
  };
}

function interactionView(i) {
  return {
    interaction_id: i.interaction_id,
    conversation_id: i.conversation_id,
    ordinal: i.ordinal,
    execution_status: i.execution_status,
    evidence_status: i.evidence_status,
    closure_manifest: i.closure_manifest || undefined,
    lease_token: i.lease_token,
    lease_epoch: i.lease_epoch,
    lease_version: i.lease_version,
    lease_expires_at: iso(i.lease_expires),
    row_version: i.row_version,
    created_at: iso(i.created),
    updated_at: iso(i.updated),
    terminal_at: i.terminal ? iso(i.terminal) : undefined,
  };
}

function operationView(o) {
  return {
    operation_id: o.operation_id,
    conversation_id: o.conversation_id,
    interaction_id: o.interaction_id,
    operation_key: o.operation_key,
    tool_name: o.tool_name,
    parent_operation_id: o.parent_operation_id || undefined,
    causation_event_ids: o.causation_event_ids.length ? o.causation_event_ids : undefined,
    attempt: o.attempt,
    attempt_status: o.attempt_status,
    retryable: o.retryable,
    row_version: o.row_version,
    created_at: iso(o.created),
    updated_at: iso(o.updated),
  };
}

function receiptView(r) {
  return {
    receipt_id: r.receipt_id,
    schema_version: '3.0.0',
    owner: r.owner,
    conversation_id: r.conversation_id,
    interaction_id: r.interaction_id,
    operation_id: r.operation_id,
    attempt: r.attempt,
    operation_key: r.operation_key,
    tool_name: r.tool_name,
    receipt_status: r.receipt_status,
    evidence_durability: r.evidence_durability,
    required: r.required,
    request_id: r.request_id,
    trace_id: r.trace_id,
    causation_event_ids: r.causation_event_ids,
    observed_evidence_refs: r.observed_evidence_refs,
    business_refs: r.business_refs,
    artifact_refs: r.artifact_refs,
    partial_reasons: r.partial_reasons,
    row_version: r.row_version,
    issued_at: iso(r.issued),
    terminal_at: r.terminal ? iso(r.terminal) : undefined,
  };
}

// ---- lease expiry and evidence status ----

/** Abandon every active Interaction whose lease has run out (the reaper, run lazily). */
function reap(t, now = Date.now()) {
  for (const i of t.interactions.values()) {
    if (i.execution_status !== 'active' || i.lease_expires > now) continue;
    i.execution_status = 'abandoned';
    i.terminal = now;
    i.updated = now;
    i.row_version += 1;
    i.finish = null; // no finish record: any finish afterwards is a terminal_conflict
    i.closure_manifest = manifestFor(t, i, {
      answer: '', reason: 'interaction_abandoned', claims: [], terminalKey: `lease-expired:${i.lease_token}`, now,
    });
    const c = t.conversations.get(i.conversation_id);
    if (c && c.active_interaction_id === i.interaction_id) c.active_interaction_id = null;
    i.evidence_status = evidenceStatus(t, i, now);
  }
  // The assembler: deadlines that passed turn "assembling" into "partial".
  for (const i of t.interactions.values()) {
    if (i.execution_status !== 'active' && i.evidence_status === 'assembling') i.evidence_status = evidenceStatus(t, i, now);
  }
}

function receiptsOf(t, i) {
  return i.operation_ids.map((id) => t.receipts.get(t.operations.get(id).receipt_id));
}

function manifestFor(t, i, { answer, reason, claims, terminalKey, now }) {
  const receipts = receiptsOf(t, i);
  const pendingRequired = receipts.some((r) => r.required && r.receipt_status === 'pending');
  if (pendingRequired) i.assembler_deadline = now + ASSEMBLER_DEADLINE_MS;
  return {
    completion_manifest_version: '3.0.0',
    operations: receipts.map((r) => ({
      operation_id: r.operation_id, receipt_id: r.receipt_id, required: r.required, receipt_status: r.receipt_status,
    })),
    answer_artifact_ref: answer || undefined,
    completion_reason: reason,
    claims: claims.length ? claims : undefined,
    terminal_key: terminalKey,
    assembler_deadline: pendingRequired ? iso(i.assembler_deadline) : undefined,
  };
}

function evidenceStatus(t, i, now = Date.now()) {
  const receipts = receiptsOf(t, i);
  if (i.execution_status === 'active') return receipts.length ? 'assembling' : 'not_applicable';
  const claims = (i.finish && i.finish.claims.length) || 0;
  if (!receipts.length && !claims) return 'not_applicable';
  const required = receipts.filter((r) => r.required);
  if (required.some((r) => r.evidence_durability === 'failed' || r.partial_reasons.length)) return 'partial';
  if (required.some((r) => r.receipt_status === 'pending')) {
    return i.assembler_deadline && now >= i.assembler_deadline ? 'partial' : 'assembling';
  }
  return 'complete';
}

function renewLease(i, now) {
  i.lease_expires = now + i.lease_seconds * 1000;
  i.lease_version += 1;
  i.row_version += 1;
  i.updated = now;
}

// ---- L1 ----

function ensureConversation(t, who, bodyText) {
  const d = decodeStrict(bodyText, ['external_conversation_key', 'idempotency_key', 'one_shot']);
  if (d.error) return coreError('conversation_required', d.error);
  const b = d.value;
  if (!isStr(b.external_conversation_key, 512)) return coreError('conversation_required', 'external_conversation_key is required');
  if (b.idempotency_key !== undefined && typeof b.idempotency_key !== 'string') {
    return coreError('conversation_required', 'idempotency_key must be a string');
  }
  if (b.one_shot !== undefined && b.one_shot !== false) {
    return coreError('conversation_required', 'one-shot conversations are not simulated');
  }
  // No idempotency record: the current-generation slot per (owner, key) is the idempotency.
  const slot = `${who.key}\0${b.external_conversation_key}`;
  const cur = t.conversations.get(t.currentByKey.get(slot));
  if (cur && cur.status === 'active') return json(201, conversationView(cur));
  const now = Date.now();
  const c = {
    conversation_id: newId('conv_'),
    ownerKey: who.key,
    owner: who.owner,
    external_conversation_key: b.external_conversation_key,
    creation_auth_method: who.authMethod,
    generation: cur ? cur.generation + 1 : 1,
    status: 'active',
    agent_name: '',
    active_interaction_id: null,
    interaction_count: 0,
    row_version: 1,
    created: now,
    updated: now,
  };
  t.conversations.set(c.conversation_id, c);
  t.currentByKey.set(slot, c.conversation_id);
  return json(201, conversationView(c));
}

// ---- L2 (checks in a fixed order) ----

function startInteraction(t, who, cid, bodyText) {
  const d = decodeStrict(bodyText, ['idempotency_key', 'request_hash', 'agent_name', 'lease_seconds']);
  if (d.error) return coreError('interaction_required', d.error);
  const b = d.value;
  if (!isStr(b.idempotency_key, 256)) return coreError('interaction_required', 'idempotency_key is required');
  if (!isStr(b.request_hash, 256)) return coreError('interaction_required', 'request_hash is required');
  if (b.lease_seconds !== undefined && !(isInt(b.lease_seconds) && b.lease_seconds >= 1 && b.lease_seconds <= MAX_LEASE_S)) {
    return coreError('interaction_required', `lease_seconds must be an integer 1..${MAX_LEASE_S}`);
  }
  if (b.agent_name !== undefined && !(typeof b.agent_name === 'string' && /^[^\x00-\x1f\x7f]{1,128}$/.test(b.agent_name))) {
    return coreError('agent_name_invalid', 'agent_name must be 1..128 characters without control characters');
  }
  const c = t.conversations.get(cid);
  if (!visible(c, who)) return notDisclosed('conversation');
  if (c.status !== 'active') return coreError('conversation_closed', `conversation is ${c.status}`);
  if (b.agent_name !== undefined && c.agent_name && c.agent_name !== b.agent_name) {
    return coreError('agent_name_conflict', 'conversation is pinned to a different agent_name');
  }
  const idemKey = `${cid}\0${b.idempotency_key}`;
  const rec = t.startIdem.get(idemKey);
  if (rec) {
    if (rec.request_hash !== b.request_hash) {
      return coreError('idempotency_conflict', 'idempotency_key was already used with a different request_hash');
    }
    return json(201, interactionView(t.interactions.get(rec.interaction_id)));
  }
  if (b.agent_name !== undefined && !c.agent_name) c.agent_name = b.agent_name;
  const active = t.interactions.get(c.active_interaction_id);
  if (active && active.execution_status === 'active') {
    return coreError('interaction_in_progress', 'the conversation already has an active interaction', {
      current_interaction_id: active.interaction_id, current_status: active.execution_status,
    });
  }
  const now = Date.now();
  const leaseS = b.lease_seconds ?? DEFAULT_LEASE_S;
  c.interaction_count += 1;
  c.row_version += 1;
  c.updated = now;
  const i = {
    interaction_id: newId('int_'),
    conversation_id: cid,
    ownerKey: who.key,
    ordinal: c.interaction_count,
    execution_status: 'active',
    evidence_status: 'not_applicable',
    closure_manifest: null,
    lease_token: newId('lease_'),
    lease_epoch: 1,
    lease_version: 1,
    lease_seconds: leaseS,
    lease_expires: now + leaseS * 1000,
    row_version: 1,
    created: now,
    updated: now,
    terminal: 0,
    finish: null,
    assembler_deadline: 0,
    operation_ids: [],
    evidence_refs: new Set(),
  };
  t.interactions.set(i.interaction_id, i);
  t.startIdem.set(idemKey, { request_hash: b.request_hash, interaction_id: i.interaction_id });
  c.active_interaction_id = i.interaction_id;
  return json(201, interactionView(i));
}

// ---- PayloadEnvelope ----

function envelopeError(e, name) {
  if (!isPlainObject(e)) return `${name} must be a PayloadEnvelope object`;
  const allowed = ['mode', 'media_type', 'byte_length', 'inline', 'ref', 'omitted_reason'];
  for (const k of Object.keys(e)) if (!allowed.includes(k)) return `${name}: unknown field "${k}"`;
  if (e.media_type !== 'application/json') return `${name}.media_type must be application/json`;
  if (!(isInt(e.byte_length) && e.byte_length >= 0)) return `${name}.byte_length must be a non-negative integer`;
  if (e.mode === 'inline') {
    if (!('inline' in e)) return `${name}.inline is required in inline mode`;
  } else if (e.mode === 'omitted') {
    if (!isStr(e.omitted_reason, 128)) return `${name}.omitted_reason is required in omitted mode`;
  } else if (e.mode === 'referenced') {
    if (!(typeof e.ref === 'string' && /^artifact:.+/.test(e.ref))) return `${name}.ref must be artifact:<id>`;
    if (e.byte_length <= ONE_MIB) return `${name}: referenced payloads must be larger than 1 MiB`;
  } else {
    return `${name}.mode must be inline, omitted or referenced`;
  }
  return null;
}

// ---- L4 ----

const ENSURE_FIELDS = ['operation_key', 'tool_name', 'protocol', 'source_module', 'input', 'required', 'lease_token',
  'lease_epoch', 'parent_operation_id', 'causation_event_ids'];

function ensureOperation(t, who, cid, iid, bodyText) {
  const d = decodeStrict(bodyText, ENSURE_FIELDS);
  if (d.error) return coreError('operation_required', d.error);
  const b = d.value;
  const bad = (m) => coreError('operation_required', m);
  if (!isStr(b.operation_key, 256)) return bad('operation_key is required');
  if (!isStr(b.tool_name, 256)) return bad('tool_name is required');
  if (b.protocol !== 'mcp' && b.protocol !== 'sdk') return bad('protocol must be mcp or sdk');
  if (!isStr(b.source_module, 128)) return bad('source_module is required');
  const envErr = envelopeError(b.input, 'input');
  if (envErr) return bad(envErr);
  if (typeof b.required !== 'boolean') return bad('required must be a boolean');
  if (!isStr(b.lease_token, 256) || !isInt(b.lease_epoch)) return bad('lease_token and lease_epoch are required');
  if (b.parent_operation_id !== undefined && b.parent_operation_id !== null && !isStr(b.parent_operation_id, 64)) {
    return bad('parent_operation_id must be a string');
  }
  const causation = b.causation_event_ids ?? [];
  if (!isStrArray(causation, 64)) return bad('causation_event_ids must be at most 64 strings');
  const c = t.conversations.get(cid);
  if (!visible(c, who)) return notDisclosed('conversation');
  const i = t.interactions.get(iid);
  if (!visible(i, who) || i.conversation_id !== cid) return notDisclosed('interaction');
  if (i.execution_status !== 'active') {
    return coreError('interaction_terminal', `interaction is ${i.execution_status}`, { current_status: i.execution_status });
  }
  if (b.lease_token !== i.lease_token || b.lease_epoch !== i.lease_epoch) {
    return coreError('terminal_conflict', 'lease token or epoch does not match the interaction', { current_status: i.execution_status });
  }
  const parent = b.parent_operation_id || '';
  if (parent) {
    const p = t.operations.get(parent);
    if (!visible(p, who) || p.interaction_id !== iid) return notDisclosed('parent operation');
  }
  const causationSet = [...new Set(causation)].sort();
  // What makes two ensures "the same call"; an omitted input never compares equal.
  const fingerprint = b.input.mode === 'omitted' ? null : canonical({
    tool_name: b.tool_name, protocol: b.protocol, source_module: b.source_module, required: b.required,
    input: b.input, parent, causation: causationSet,
  });
  const now = Date.now();
  const existing = t.operations.get(t.opByKey.get(`${iid}\0${b.operation_key}`));
  if (existing) {
    if (fingerprint === null || existing.fingerprint !== fingerprint) {
      return coreError('idempotency_conflict', 'operation key was already used with different input');
    }
    renewLease(i, now);
    let execute = false;
    if (existing.attempt_status === 'ready') {
      existing.attempt_status = 'pending';
      existing.row_version += 1;
      existing.updated = now;
      execute = true;
    }
    const r = t.receipts.get(existing.receipt_id);
    return json(201, { operation: operationView(existing), receipt: receiptView(r), created: false, execute });
  }
  if (i.operation_ids.length >= MAX_OPS) return bad(`interaction operation limit of ${MAX_OPS} was reached`);
  const o = {
    operation_id: newId('op_'),
    conversation_id: cid,
    interaction_id: iid,
    ownerKey: who.key,
    operation_key: b.operation_key,
    tool_name: b.tool_name,
    parent_operation_id: parent,
    causation_event_ids: causationSet,
    attempt: 1,
    attempt_status: 'pending',
    retryable: false,
    row_version: 1,
    created: now,
    updated: now,
    fingerprint,
    input: b.input,
    receipt_id: '',
  };
  const r = {
    receipt_id: newId('rcpt_'),
    ownerKey: who.key,
    owner: who.owner,
    conversation_id: cid,
    interaction_id: iid,
    operation_id: o.operation_id,
    attempt: 1,
    operation_key: o.operation_key,
    tool_name: o.tool_name,
    receipt_status: 'pending',
    evidence_durability: 'pending',
    required: b.required,
    request_id: '',
    trace_id: '',
    causation_event_ids: causationSet,
    observed_evidence_refs: [],
    business_refs: [],
    artifact_refs: [],
    partial_reasons: [],
    row_version: 1,
    issued: now,
    terminal: 0,
    final: null, // canonical terminal payload, for replay comparison
  };
  o.receipt_id = r.receipt_id;
  t.operations.set(o.operation_id, o);
  t.receipts.set(r.receipt_id, r);
  t.opByKey.set(`${iid}\0${b.operation_key}`, o.operation_id);
  i.operation_ids.push(o.operation_id);
  renewLease(i, now);
  i.evidence_status = 'assembling';
  return json(201, { operation: operationView(o), receipt: receiptView(r), created: true, execute: true });
}

// ---- L5 ----

const REF_PREFIX = {
  knowledge_network: ['kn', 2], object_type: ['object', 3], object_instance: ['object_instance', 4, true],
  property: ['property', 4], relation_type: ['relation', 3], metric: ['metric', 3], logic: ['logic', 3],
  function: ['function', 3], action_type: ['action_type', 3], action_instance: ['action_instance', 4, true],
  data_resource: ['resource', 2],
};

/** Core's canonical-ref check: exact segment counts except the *_instance types. */
function businessRefError(ref, owner) {
  if (!isPlainObject(ref)) return 'business_refs items must be objects';
  const allowed = ['ref_type', 'ref_id', 'business_domain_id', 'version', 'as_of', 'display_hint'];
  for (const k of Object.keys(ref)) if (!allowed.includes(k)) return `business_refs: unknown field "${k}"`;
  const spec = REF_PREFIX[ref.ref_type];
  if (!spec) return `business_refs: unknown ref_type ${JSON.stringify(ref.ref_type)}`;
  if (!isStr(ref.ref_id, 512)) return 'business_refs: ref_id is required';
  const seg = ref.ref_id.split(':');
  if (seg[0] !== spec[0] || seg.some((s) => s === '')) return `business_refs: ref_id must start with ${spec[0]}:`;
  if (spec[2] ? seg.length < spec[1] : seg.length !== spec[1]) return `business_refs: ref_id ${ref.ref_id} is not canonical`;
  if (ref.business_domain_id !== undefined && ref.business_domain_id !== owner.business_domain_id) {
    return 'business_refs: business_domain_id does not match the owner';
  }
  if (ref.version !== undefined && !isStr(ref.version, 128)) return 'business_refs: version must be a string';
  return null;
}

const isTraceId = (s) => typeof s === 'string' && /^[0-9a-f]{32}$/.test(s) && !/^0+$/.test(s);
const isSpanId = (s) => typeof s === 'string' && /^[0-9a-f]{16}$/.test(s) && !/^0+$/.test(s);

function finalizeAttempt(t, who, opId, n, verb, bodyText) {
  const payloadField = verb === 'complete' ? 'output' : 'error';
  const d = decodeStrict(bodyText, ['receipt_id', 'evidence_durability', 'retryable', 'request_id', 'trace_id', 'span_id',
    'observed_evidence_refs', 'business_refs', 'artifact_refs', 'partial_reasons', payloadField]);
  if (d.error) return coreError('operation_required', d.error);
  const b = d.value;
  const bad = (m) => coreError('operation_required', m);
  if (!isStr(b.receipt_id, 64)) return bad('receipt_id is required');
  if (!['pending', 'durable', 'failed'].includes(b.evidence_durability)) return bad('evidence_durability must be pending, durable or failed');
  if (b.retryable !== undefined && typeof b.retryable !== 'boolean') return bad('retryable must be a boolean');
  if (!isStr(b.request_id, 256)) return bad('request_id is required');
  if (!isTraceId(b.trace_id)) return bad('trace_id must be 32 lowercase hex digits, not all zero');
  if (b.span_id !== undefined && b.span_id !== '' && !isSpanId(b.span_id)) return bad('span_id must be 16 lowercase hex digits');
  const observed = b.observed_evidence_refs ?? [];
  const refs = b.business_refs ?? [];
  const artifactRefs = b.artifact_refs ?? [];
  const partial = b.partial_reasons ?? [];
  if (!isStrArray(observed, MAX_EVIDENCE_REFS)) return bad('observed_evidence_refs must be an array of strings');
  if (!Array.isArray(refs) || refs.length > 64) return bad('business_refs must be an array of at most 64 refs');
  for (const ref of refs) {
    const e = businessRefError(ref, who.owner);
    if (e) return bad(e);
  }
  if (!isStrArray(artifactRefs, 64)) return bad('artifact_refs must be an array of strings');
  if (!isStrArray(partial, 64)) return bad('partial_reasons must be an array of strings');
  const envErr = envelopeError(b[payloadField], payloadField);
  if (envErr) return bad(envErr);

  const o = t.operations.get(opId);
  if (!visible(o, who)) return notDisclosed('operation');
  const r = t.receipts.get(o.receipt_id);
  if (n !== o.attempt || b.receipt_id !== r.receipt_id) {
    return coreError('idempotency_conflict', 'attempt or receipt does not match the operation\'s current attempt');
  }
  const final = canonical({ verb, ...b });
  if (r.receipt_status !== 'pending') {
    if (r.final !== final) return coreError('idempotency_conflict', 'the attempt was already finalized with a different payload');
    return json(200, { operation: operationView(o), receipt: receiptView(r), created: false, execute: false });
  }
  if (o.attempt_status === 'ready') return coreError('receipt_pending', 'the attempt has not started');
  const i = t.interactions.get(o.interaction_id);
  const merged = new Set([...i.evidence_refs, ...observed]);
  if (merged.size > MAX_EVIDENCE_REFS) return bad(`interaction evidence ref limit of ${MAX_EVIDENCE_REFS} was reached`);
  i.evidence_refs = merged;

  const now = Date.now();
  const reasons = [...partial];
  for (const env of [o.input, b[payloadField]]) if (env.mode === 'omitted' && !reasons.includes(env.omitted_reason)) reasons.push(env.omitted_reason);
  if (b.evidence_durability === 'failed' && !reasons.includes('evidence_durability_failed')) reasons.push('evidence_durability_failed');
  const failed = verb === 'fail';
  r.receipt_status = failed ? 'failed' : 'completed';
  r.evidence_durability = b.evidence_durability;
  r.request_id = b.request_id;
  r.trace_id = b.trace_id;
  r.span_id = b.span_id || '';
  r.observed_evidence_refs = [...new Set(observed)];
  r.business_refs = refs.map((x) => ({
    ref_type: x.ref_type, ref_id: x.ref_id, business_domain_id: who.owner.business_domain_id,
    version: x.version || 'unversioned', as_of: x.as_of, display_hint: x.display_hint,
  }));
  r.artifact_refs = [...artifactRefs];
  r.partial_reasons = reasons;
  r.payload = b[payloadField];
  r.row_version += 1;
  r.terminal = now;
  r.final = final;
  o.attempt_status = r.receipt_status;
  // Core keeps `retryable` only for a failed attempt whose evidence also failed.
  o.retryable = failed && b.evidence_durability === 'failed' && b.retryable === true;
  o.row_version += 1;
  o.updated = now;
  if (i.execution_status !== 'active') {
    // Late finalization re-evaluates the frozen manifest's evidence status.
    if (i.closure_manifest) {
      for (const m of i.closure_manifest.operations) if (m.receipt_id === r.receipt_id) m.receipt_status = r.receipt_status;
    }
    i.evidence_status = evidenceStatus(t, i, now);
  }
  return json(200, { operation: operationView(o), receipt: receiptView(r), created: false, execute: false });
}

// ---- L7 ----

const OUTCOMES = { completed: 'completed', failed: 'failed', cancelled: 'canceled', handed_off: 'handed_off' };

function finishInteraction(t, who, iid, bodyText) {
  const d = decodeStrict(bodyText, ['outcome', 'idempotency_key', 'answer_artifact_ref', 'reason', 'claims']);
  if (d.error) return coreError('interaction_required', d.error);
  const b = d.value;
  if (typeof b.outcome !== 'string' || !Object.prototype.hasOwnProperty.call(OUTCOMES, b.outcome)) {
    return coreError('interaction_required', 'outcome must be one of: completed, failed, cancelled, handed_off', { status: 422 });
  }
  if (!isStr(b.idempotency_key, 256)) return coreError('interaction_required', 'idempotency_key is required');
  if (b.answer_artifact_ref !== undefined && typeof b.answer_artifact_ref !== 'string') {
    return coreError('closure_manifest_invalid', 'answer_artifact_ref must be a string');
  }
  if (b.reason !== undefined && typeof b.reason !== 'string') return coreError('interaction_required', 'reason must be a string');
  const claims = b.claims ?? [];
  if (!Array.isArray(claims) || claims.length > MAX_CLAIMS) return coreError('closure_manifest_invalid', `claims must be an array of at most ${MAX_CLAIMS}`);
  const i = t.interactions.get(iid);
  if (!visible(i, who)) return notDisclosed('interaction');
  const status = OUTCOMES[b.outcome];
  const answer = b.answer_artifact_ref || '';
  const reason = b.reason || b.outcome;
  const record = canonical({ key: b.idempotency_key, status, answer, reason, claims });
  if (i.execution_status !== 'active') {
    if (i.finish && i.finish.record === record) return json(200, interactionView(i));
    const msg = i.execution_status === 'abandoned' ? 'interaction lease has expired' : 'another terminal outcome already won';
    return coreError('terminal_conflict', msg, { current_status: i.execution_status });
  }
  if (i.lease_expires <= Date.now()) {
    return coreError('terminal_conflict', 'interaction lease has expired', { current_status: i.execution_status });
  }
  if (status === 'completed') {
    if (!answer) return coreError('closure_manifest_invalid', 'completed outcome requires an answer artifact');
    const art = t.artifacts.get(answer.replace(/^artifact:/, ''));
    if (!answer.startsWith('artifact:') || !visible(art, who) || art.interaction_id !== iid) {
      return coreError('closure_manifest_invalid', 'answer_artifact_ref does not name an artifact of this interaction');
    }
  }
  const now = Date.now();
  i.execution_status = status;
  i.finish = { record, claims };
  i.terminal = now;
  i.updated = now;
  i.row_version += 1;
  i.closure_manifest = manifestFor(t, i, { answer, reason, claims, terminalKey: b.idempotency_key, now });
  i.evidence_status = evidenceStatus(t, i, now);
  const c = t.conversations.get(i.conversation_id);
  if (c && c.active_interaction_id === iid) c.active_interaction_id = null;
  return json(200, interactionView(i));
}

// ---- E1 ----

const ARTIFACT_FIELDS = ['artifact_id', 'artifact_type', 'bkn.request.id', 'trace_id', 'interaction_id', 'content_type',
  'schema_version', 'observed_at', 'content_hash', 'content', 'bkn.tenant.id', 'business_domain', 'bkn.account.id',
  'bkn.account.type', 'effective_subject_id', 'application_principal_id', 'initiator', 'agent_or_app'];
// Core refuses content that looks like a credential or a bare object-storage URL.
const SECRET_RE = /(token|password|passwd|secret|api[_-]?key)\s*[=:]/i;
const STORAGE_URL_RE = /\b(s3|oss|minio|gs):\/\//i;

function postArtifact(t, who, bodyText) {
  const d = decodeStrict(bodyText, ARTIFACT_FIELDS);
  const bad = (m) => coreError('invalid_evidence_artifact', m);
  if (d.error) return bad(d.error);
  const b = d.value;
  if (b.artifact_type !== 'question' && b.artifact_type !== 'result') return bad('artifact_type must be question or result');
  if (!isStr(b.interaction_id, 64)) return bad('interaction_id is required');
  if (!(typeof b.content_hash === 'string' && /^sha256:[0-9a-f]{64}$/.test(b.content_hash))) return bad('content_hash must be sha256:<64 hex>');
  if (!('content' in b)) return bad('content is required');
  if (b.content_type !== undefined && b.content_type !== 'application/json') return bad('content_type must be application/json');
  const want = `art_${b.artifact_type}_${sha256hex(`${b.interaction_id}|${b.artifact_type}|${b.content_hash}`).slice(0, 32)}`;
  if (b.artifact_id !== want) return bad('artifact_id must be art_<type>_ + 32 hex of sha256(interaction_id|type|content_hash)');
  const text = typeof b.content === 'string' ? b.content : stringify(b.content);
  if (SECRET_RE.test(text)) return bad('content looks like it contains a credential');
  if (STORAGE_URL_RE.test(text)) return bad('content contains a bare object-storage URL');
  const i = t.interactions.get(b.interaction_id);
  if (!visible(i, who)) return notDisclosed('interaction');
  const reply = (status, a, created) => json(status, {
    artifact_id: a.artifact_id, artifact_type: a.artifact_type, 'bkn.request.id': a.request_id, trace_id: a.trace_id,
    content_hash: a.content_hash, created,
  });
  const prev = t.artifacts.get(b.artifact_id);
  if (prev) {
    if (!visible(prev, who) || prev.canonical_content !== canonical(b.content)) {
      return coreError('idempotency_conflict', 'artifact_id was already used with different content');
    }
    return reply(200, prev, false);
  }
  const a = {
    artifact_id: b.artifact_id, artifact_type: b.artifact_type, interaction_id: b.interaction_id, ownerKey: who.key,
    request_id: typeof b['bkn.request.id'] === 'string' ? b['bkn.request.id'] : '',
    trace_id: typeof b.trace_id === 'string' ? b.trace_id : '',
    content_hash: b.content_hash, content: b.content, canonical_content: canonical(b.content), created: Date.now(),
  };
  t.artifacts.set(a.artifact_id, a);
  return reply(201, a, true);
}

// ---- capture policy (Context Loader's contract, not in Trace Core's documented API) ----

function capturePolicy(t, owner) {
  const o = t.policy.overrides.get(`${owner.tenant_id}\0${owner.business_domain_id}`);
  return { capture: o || t.policy.capture, ttl_s: t.policy.ttl_s };
}

// ---- routing ----

function route(ctx) {
  const t = ctx.state.trace;
  const p = ctx.path.slice(BASE.length);
  const m = ctx.method;
  const only = (method, fn) => (m === method ? fn() : coreError('method_not_allowed', `use ${method}`));
  // The probe target answers without identity, so an outage check needs no credentials.
  if (p === '/health') return only('GET', () => json(200, { status: 'ok' }));

  const who = ownerOf(ctx.headers);
  if (who.error) return coreError('permission_denied', who.error);
  reap(t);
  let g;
  if (p === '/capture-policy') return only('GET', () => json(200, capturePolicy(t, who.owner)));
  if (p === '/conversations:ensure-current') return only('POST', () => ensureConversation(t, who, ctx.bodyText));
  if ((g = /^\/conversations\/([^/]+)\/interactions$/.exec(p))) {
    return only('POST', () => startInteraction(t, who, decodeURIComponent(g[1]), ctx.bodyText));
  }
  if ((g = /^\/conversations\/([^/]+)\/interactions\/([^/]+)\/operations:ensure$/.exec(p))) {
    return only('POST', () => ensureOperation(t, who, decodeURIComponent(g[1]), decodeURIComponent(g[2]), ctx.bodyText));
  }
  if ((g = /^\/interactions\/([^/]+)$/.exec(p))) {
    return only('GET', () => {
      const i = t.interactions.get(decodeURIComponent(g[1]));
      return visible(i, who) ? json(200, interactionView(i)) : notDisclosed('interaction');
    });
  }
  if ((g = /^\/interactions\/([^/]+)\/finish$/.exec(p))) {
    return only('POST', () => finishInteraction(t, who, decodeURIComponent(g[1]), ctx.bodyText));
  }
  if ((g = /^\/operations\/([^/]+)\/attempts\/([0-9]{1,9}):(complete|fail)$/.exec(p))) {
    return only('POST', () => finalizeAttempt(t, who, decodeURIComponent(g[1]), Number(g[2]), g[3], ctx.bodyText));
  }
  if ((g = /^\/operations\/([^/]+)$/.exec(p))) {
    return only('GET', () => {
      const o = t.operations.get(decodeURIComponent(g[1]));
      return visible(o, who) ? json(200, operationView(o)) : notDisclosed('operation');
    });
  }
  if ((g = /^\/receipts\/([^/]+)$/.exec(p))) {
    return only('GET', () => {
      const r = t.receipts.get(decodeURIComponent(g[1]));
      return visible(r, who) ? json(200, receiptView(r)) : notDisclosed('receipt');
    });
  }
  if (p === '/evidence/artifacts') return only('POST', () => postArtifact(t, who, ctx.bodyText));
  return null;
}

// ---- control API: /_sim/trace, /_sim/trace/state ----

function control(method, path, bodyText, state) {
  const t = state.trace;
  const policyView = () => ({
    capture: t.policy.capture,
    ttl_s: t.policy.ttl_s,
    overrides: [...t.policy.overrides].map(([k, capture]) => {
      const [tenant_id, business_domain] = k.split('\0');
      return { tenant_id, business_domain, capture };
    }),
  });
  if (path === '/_sim/trace' && method === 'GET') return json(200, policyView());
  if (path === '/_sim/trace' && method === 'POST') {
    const d = decodeStrict(bodyText, ['capture', 'ttl_s', 'tenant_id', 'business_domain']);
    if (d.error) return json(400, { error: d.error });
    const b = d.value;
    if (b.capture !== undefined && b.capture !== 'enabled' && b.capture !== 'disabled') {
      return json(400, { error: 'capture must be "enabled" or "disabled"' });
    }
    if (b.ttl_s !== undefined && !(isInt(b.ttl_s) && b.ttl_s >= 0 && b.ttl_s <= 86400)) {
      return json(400, { error: 'ttl_s must be an integer 0..86400' });
    }
    const scoped = b.tenant_id !== undefined || b.business_domain !== undefined;
    if (scoped && !(isStr(b.tenant_id) && isStr(b.business_domain) && b.capture !== undefined)) {
      return json(400, { error: 'a scoped policy needs tenant_id, business_domain and capture' });
    }
    if (scoped) t.policy.overrides.set(`${b.tenant_id}\0${b.business_domain}`, b.capture);
    else if (b.capture !== undefined) t.policy.capture = b.capture;
    if (b.ttl_s !== undefined) t.policy.ttl_s = b.ttl_s;
    return json(200, policyView());
  }
  if (path === '/_sim/trace/state' && method === 'GET') {
    reap(t);
    return json(200, {
      capture: policyView(),
      conversations: [...t.conversations.values()].map(conversationView),
      interactions: [...t.interactions.values()].map((i) => ({
        ...interactionView(i), operation_ids: i.operation_ids,
      })),
      operations: [...t.operations.values()].map((o) => ({ ...operationView(o), receipt_id: o.receipt_id, input: o.input })),
      receipts: [...t.receipts.values()].map(receiptView),
      artifacts: [...t.artifacts.values()].map((a) => ({
        artifact_id: a.artifact_id, artifact_type: a.artifact_type, interaction_id: a.interaction_id,
        content_hash: a.content_hash, content: a.content,
      })),
    });
  }
  return null;
}

export default {
  name: 'trace_core',
  prefix: '/api/agent-observability/',
  reset(state) {
    state.trace = freshState();
  },
  handle(ctx) {
    if (ctx.path !== BASE && !ctx.path.startsWith(`${BASE}/`)) return null;
    return route(ctx);
  },
  control,
};
