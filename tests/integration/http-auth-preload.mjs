// Preload for the 2026-07-28 conformance suite: some of its probes go through
// node:http's request(), which the shared auth preload (undici only) does not reach.
// This adds "Authorization: Bearer $MCP_TOKEN" to those too, unless a request set
// its own.
import http from 'node:http';

const token = process.env.MCP_TOKEN;
if (token) {
  const original = http.request;
  http.request = function request(...args) {
    const req = original.apply(this, args);
    if (!req.getHeader('authorization')) req.setHeader('authorization', `Bearer ${token}`);
    return req;
  };
}
