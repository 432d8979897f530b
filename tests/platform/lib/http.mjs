// Shared reply helpers for the simulated services.

import { parse, stringify } from './json.mjs';

const TEXTS = {
  400: ['参数错误', 'Invalid parameters', '请检查参数是否正确', 'Please check if the parameters are correct'],
  401: ['认证失败', 'Authentication failed', '请联系管理员', 'Contact administrator'],
  403: ['权限错误', 'Permission denied', '请联系管理员', 'Contact administrator'],
  404: ['对象不存在', 'Resource not found', '请联系管理员', 'Contact administrator'],
  405: ['方法不允许', 'Method not allowed', '请联系管理员', 'Contact administrator'],
  406: ['请求头错误', 'Invalid request header', '请检查请求头', 'Please check the request headers'],
  413: ['请求体过大', 'Request entity too large', '请减小请求体', 'Reduce the request body'],
  500: ['内部错误', 'Internal server error', '请联系管理员', 'Contact administrator'],
  502: ['依赖服务不可用', 'Upstream service unavailable', '请检查依赖服务是否可用', 'Check whether the upstream service is reachable'],
  503: ['服务不可用', 'Service unavailable', '请稍后重试', 'Retry later'],
};

/**
 * Sends r's status and headers with the full Content-Length, then half the body, then
 * destroys the socket: the client sees a body cut mid-way (fault mode "truncate").
 */
export function sendTruncated(res, r) {
  if (res.destroyed || res.headersSent) return;
  const body = Buffer.from(r.body ?? '', 'utf8');
  res.writeHead(r.status, { ...r.headers, 'content-length': body.length });
  res.write(body.subarray(0, Math.floor(body.length / 2)), () => res.socket?.destroy());
}

/** "en" when Accept-Language starts with en, else "zh" (the platform default). */
export function langOf(headers) {
  const al = String(headers['accept-language'] || '').trim().toLowerCase();
  return al.startsWith('en') ? 'en' : 'zh';
}

/** A JSON reply (serialized losslessly). */
export function json(status, body, headers = {}) {
  return { status, body: stringify(body), headers: { 'content-type': 'application/json; charset=utf-8', ...headers } };
}

/**
 * The comm-go BaseError envelope the platform services use:
 * {error_code, description, solution, error_link, error_details}.
 */
export function platformError(status, errorCode, details, lang = 'zh') {
  const t = TEXTS[status] || TEXTS[500];
  const en = lang === 'en';
  return json(status, {
    error_code: errorCode,
    description: en ? t[1] : t[0],
    solution: en ? t[3] : t[2],
    error_link: en ? 'None' : '无',
    error_details: details,
  });
}

/** Parse a request body as lossless JSON; {value} or {error}. Empty body -> emptyValue. */
export function parseBody(text, emptyValue = undefined) {
  if (text === '' || /^\s*$/.test(text)) return { value: emptyValue };
  try {
    return { value: parse(text) };
  } catch (e) {
    return { error: e.message };
  }
}

export function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && Object.getPrototypeOf(v) === Object.prototype;
}

/** Integer value of a query parameter, or `def` when absent/empty; NaN when malformed. */
export function intParam(query, name, def) {
  const raw = query.get(name);
  if (raw === null || raw === '') return def;
  return /^-?\d{1,15}$/.test(raw) ? Number(raw) : NaN;
}
