// Simulator-only grant model shared by operator-integration, vega and bkn-safe.
//
// A data record may carry `access`: {"<account id>": [ops…], "*": [ops…]}. The
// caller's own entry wins over "*"; a record without `access` grants every
// operation to every account (the common, unrestricted case). `access` is never
// sent to clients.

export function can(access, account, op) {
  if (!access) return true;
  const own = Object.prototype.hasOwnProperty.call(access, account) ? access[account] : access['*'];
  return Array.isArray(own) && own.includes(op);
}

/** A shallow copy without the simulator-only keys. */
export function strip(obj, keys = ['access']) {
  const out = {};
  for (const [k, v] of Object.entries(obj)) if (!keys.includes(k)) out[k] = v;
  return out;
}

// The platform's demo credentials, for the routes that take the caller's own
// Bearer token (the public /v1 face of the execution factory). Mirrors
// services/oauth.mjs and services/bkn_safe.mjs; expiry is not modelled here.
const BEARERS = {
  'demo-user-token': { id: 'u_demo', type: 'user' },
  'demo-short-token': { id: 'u_demo', type: 'user' },
  'demo-user2-token': { id: 'u_other', type: 'user' },
  'demo-app-token': { id: 'demo-app', type: 'app' },
  bak_demo_appkey: { id: 'u_demo', type: 'user' },
  bak_demo_app_appkey: { id: 'demo-app', type: 'app' },
};

/** The account behind `Authorization: Bearer <token>`, or null. */
export function bearerAccount(headers) {
  const m = /^Bearer (.+)$/.exec(String(headers.authorization || ''));
  if (!m) return null;
  return Object.prototype.hasOwnProperty.call(BEARERS, m[1]) ? BEARERS[m[1]] : null;
}
