// OAuth server (Hydra admin API): RFC 7662 token introspection.
// POST /admin/oauth2/introspect, form body token=<raw token>.

import { json, platformError } from '../lib/http.mjs';

const HOURS = 3 * 3600;

// Demo tokens. exp is filled in per introspection (a few hours ahead), except for
// demo-short-token whose exp is fixed at start/reset time + 2 s.
const TOKENS = {
  'demo-user-token': {
    sub: 'u_demo', client_id: 'demo-client', scope: 'openid offline all',
    ext: { visitor_type: 'realname', visitor_name: 'Demo User', login_ip: '127.0.0.1', udid: 'udid-demo',
      account_type: 'other_category', client_type: 'web', phone_number: '' },
  },
  'demo-user2-token': {
    sub: 'u_other', client_id: 'demo-client', scope: 'openid offline all',
    ext: { visitor_type: 'realname', visitor_name: 'Other User', login_ip: '127.0.0.1', udid: 'udid-other',
      account_type: 'other_category', client_type: 'web', phone_number: '' },
  },
  // Client credentials: sub == client_id.
  'demo-app-token': { sub: 'demo-app', client_id: 'demo-app', scope: 'all', ext: {} },
  'demo-short-token': {
    sub: 'u_demo', client_id: 'demo-client', scope: 'openid offline all', short: true,
    ext: { visitor_type: 'realname', visitor_name: 'Demo User', login_ip: '127.0.0.1', udid: 'udid-demo',
      account_type: 'other_category', client_type: 'web', phone_number: '' },
  },
};

// The gateway sends the token without URL-encoding it, so decode leniently.
function tokenFromForm(body) {
  for (const pair of body.split('&')) {
    const eq = pair.indexOf('=');
    const k = eq < 0 ? pair : pair.slice(0, eq);
    if (k !== 'token') continue;
    const raw = eq < 0 ? '' : pair.slice(eq + 1);
    try {
      return decodeURIComponent(raw.replace(/\+/g, ' '));
    } catch {
      return raw;
    }
  }
  return '';
}

export default {
  name: 'oauth',
  prefix: '/admin/',
  reset(state) {
    state.shortTokenExp = Math.floor(Date.now() / 1000) + 2;
  },
  handle(ctx) {
    if (ctx.path !== '/admin/oauth2/introspect') return null;
    if (ctx.method !== 'POST') return platformError(405, 'Public.MethodNotAllowed', 'use POST', ctx.lang);
    const ct = String(ctx.headers['content-type'] || '').toLowerCase();
    if (!ct.startsWith('application/x-www-form-urlencoded')) {
      // Hydra answers with an OAuth2 error object.
      return json(400, { error: 'invalid_request', error_description: 'The request body must be application/x-www-form-urlencoded.' });
    }
    const token = tokenFromForm(ctx.bodyText);
    const t = Object.prototype.hasOwnProperty.call(TOKENS, token) ? TOKENS[token] : null;
    const now = Math.floor(Date.now() / 1000);
    const exp = t && t.short ? ctx.state.shortTokenExp : now + HOURS;
    if (!t || exp <= now) return json(200, { active: false });
    return json(200, {
      active: true, sub: t.sub, client_id: t.client_id, scope: t.scope, token_type: 'Bearer', token_use: 'access_token',
      exp, iat: now - 60, nbf: now - 60, iss: 'http://hydra-public.openbkn:4444/', aud: [], ext: t.ext,
    });
  },
};
