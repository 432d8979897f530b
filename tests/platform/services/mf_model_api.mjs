// mf-model-api (model factory), private face /api/private/mf-model-api/v1/...
// (search_schema's reranking, logic-property parameters). Deterministic stand-ins for the models:
//   POST small-model/reranker  {query, documents, model} -> {results:[{index, relevance_score}]}
//   POST chat/completions      the parameter-filling call of get_logic_properties_values:
//        the answer is a JSON object of parameters for the logic property in the prompt.

import { json, platformError, parseBody, isPlainObject } from '../lib/http.mjs';

const BASE = '/api/private/mf-model-api/v1/';
const INVALID = 'ModelFactory.InvalidParameter';
const DAY = 86400000;

/** Lower-case words plus CJK bigrams: the same token model as the bkn-backend search. */
function tokens(text) {
  const out = new Set();
  const s = String(text).toLowerCase();
  for (const w of s.match(/[a-z0-9_]{2,}/g) || []) out.add(w);
  for (const run of s.match(/[\u3400-\u9fff]+/g) || []) {
    if (run.length === 1) out.add(run);
    for (let i = 0; i + 1 < run.length; i++) out.add(run.slice(i, i + 2));
  }
  return out;
}

/** Share of the query's tokens present in the document, rounded to 4 decimals. */
function overlap(query, doc) {
  const q = tokens(query);
  if (q.size === 0) return 0;
  const d = tokens(doc);
  let hit = 0;
  for (const t of q) if (d.has(t)) hit += 1;
  return Math.round((hit / q.size) * 10000) / 10000;
}

function reranker(ctx) {
  const p = parseBody(ctx.bodyText, null);
  if (p.error) return platformError(400, INVALID, `invalid JSON body: ${p.error}`, ctx.lang);
  const b = p.value;
  if (!isPlainObject(b) || typeof b.query !== 'string') return platformError(400, INVALID, 'query must be a string', ctx.lang);
  if (!Array.isArray(b.documents) || !b.documents.every((d) => typeof d === 'string')) {
    return platformError(400, INVALID, 'documents must be an array of strings', ctx.lang);
  }
  if (b.model !== undefined && typeof b.model !== 'string') return platformError(400, INVALID, 'model must be a string', ctx.lang);
  const results = b.documents.map((d, index) => ({ index, relevance_score: overlap(b.query, d) }));
  // Best first; ties keep document order so the ranking is stable.
  results.sort((x, y) => y.relevance_score - x.relevance_score || x.index - y.index);
  return json(200, { id: 'rerank-sim', model: b.model || 'sim-reranker', results });
}

/** The time window the question asks about: "YYYY年" / a year, else the last 180 days. */
function windowOf(question, nowMs) {
  const year = /(20\d\d)/.exec(question);
  if (year) {
    const y = Number(year[1]);
    return { start: Date.UTC(y, 0, 1) - 8 * 3600000, end: Date.UTC(y + 1, 0, 1) - 8 * 3600000 - 1 };
  }
  const days = /(?:最近|last\s+)(\d+)\s*(?:天|days?)/i.exec(question);
  const span = days ? Number(days[1]) * DAY : 180 * DAY;
  const end = Math.floor(nowMs / DAY) * DAY;
  return { start: end - span, end };
}

/** Parameters for one logic property, or {_error} when the question cannot supply them. */
function fillParams(req) {
  const lp = isPlainObject(req.logic_property) ? req.logic_property : {};
  const question = `${req.query ?? ''} ${req.additional_context ?? ''}`;
  if (/缺少参数|missing param/i.test(question)) {
    const names = (lp.parameters || []).filter((p) => p.value_from === 'input').map((p) => p.name);
    return { _error: `missing ${names.join(', ') || 'parameters'}: the question does not say which values to use` };
  }
  const now = typeof req.now_ms === 'number' ? req.now_ms : Date.now();
  const out = {};
  if (lp.type === 'metric') {
    const { start, end } = windowOf(question, now);
    const instant = /当前|现在|instant|current|now/i.test(question);
    out.instant = instant;
    out.start = start;
    out.end = end;
    if (!instant) out.step = /季度|quarter/i.test(question) ? 'quarter' : /年度|yearly|per year/i.test(question) ? 'year' : /周|week/i.test(question) ? 'week' : /天|daily|day/i.test(question) ? 'day' : 'month';
    return out;
  }
  for (const p of lp.parameters || []) {
    if (p.value_from !== 'input') continue;
    if (p.type === 'integer' || p.type === 'number') out[p.name] = (/(\d+)/.exec(question) || [0, 1])[1] * 1;
    else if (p.name === 'horizon') out[p.name] = /年|year/i.test(question) ? 'year' : 'quarter';
    else out[p.name] = String(req.query ?? '');
  }
  return out;
}

function chat(ctx) {
  const p = parseBody(ctx.bodyText, null);
  if (p.error) return platformError(400, INVALID, `invalid JSON body: ${p.error}`, ctx.lang);
  const b = p.value;
  if (!isPlainObject(b) || !Array.isArray(b.messages) || b.messages.length === 0) {
    return platformError(400, INVALID, 'messages must be a non-empty array', ctx.lang);
  }
  if (b.stream === true) return platformError(400, INVALID, 'stream=true is not supported by the simulator', ctx.lang);
  const user = [...b.messages].reverse().find((m) => isPlainObject(m) && m.role === 'user');
  if (!user || typeof user.content !== 'string') return platformError(400, INVALID, 'a user message with string content is required', ctx.lang);
  let req;
  try {
    const parsed = parseBody(user.content, null);
    if (parsed.error) throw new Error(parsed.error);
    req = parsed.value;
  } catch {
    req = null;
  }
  let content;
  if (isPlainObject(req) && isPlainObject(req.logic_property)) {
    const params = fillParams(req);
    const name = req.logic_property.name ?? 'property';
    content = params._error ? JSON.stringify({ _error: params._error }) : JSON.stringify({ [name]: params });
    // The real model wraps its JSON in prose and a code fence; the gateway takes the first {...}.
    content = `根据问题推断的参数如下：\n\`\`\`json\n${content}\n\`\`\``;
  } else {
    content = 'I can only fill logic-property parameters in this simulator.';
  }
  return json(200, {
    id: 'chatcmpl-sim',
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: b.model || 'sim-chat',
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
  });
}

export default {
  name: 'mf_model_api',
  prefix: '/api/private/mf-model-api/',
  handle(ctx) {
    if (!ctx.path.startsWith(BASE)) return null;
    const route = ctx.path.slice(BASE.length);
    if (route !== 'small-model/reranker' && route !== 'chat/completions') return null;
    if (ctx.method !== 'POST') return platformError(405, 'Public.MethodNotAllowed', `${ctx.method} not supported here`, ctx.lang);
    return route === 'small-model/reranker' ? reranker(ctx) : chat(ctx);
  },
};
