// bkn-safe: AppKey introspection (downstream.md §2.4). Always 200.

import { json, parseBody, isPlainObject } from '../lib/http.mjs';

const KEYS = {
  bak_demo_appkey: { sub: 'u_demo', subject_name: 'Demo User', account_type: 'user', key_id: 'key_demo_0001', key_name: 'demo key' },
  bak_demo_app_appkey: { sub: 'demo-app', subject_name: 'Demo App', account_type: 'app', key_id: 'key_demo_0002', key_name: 'demo app key' },
};

export default {
  name: 'bkn_safe',
  prefix: '/api/safe/',
  handle(ctx) {
    if (ctx.path !== '/api/safe/v1/api-keys/introspect') return null;
    if (ctx.method !== 'POST') return json(405, { error_code: 'Public.MethodNotAllowed', description: 'use POST' });
    const { value } = parseBody(ctx.bodyText, null);
    const token = isPlainObject(value) && typeof value.token === 'string' ? value.token : '';
    const k = Object.prototype.hasOwnProperty.call(KEYS, token) ? KEYS[token] : null;
    if (!k) return json(200, { active: false });
    return json(200, { active: true, ...k });
  },
};
