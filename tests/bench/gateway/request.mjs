// The benchmark request of mix.mjs and conc.mjs: the REST path prefix, the
// query_object_instance arguments, the headers, the MCP initialize and the MCP
// tools/call body (MCP_FORMAT=toon asks for TOON text, default json).
export const PREFIX = '/api/agent-retrieval/v1';
export const ARGS = '{"kn_id":"kn_medical","ot_id":"ot_drug","limit":10,"sort":[{"field":"drug_id","direction":"desc"}]}';
export const headers = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  authorization: 'Bearer demo-user-token',
};
export const INITIALIZE = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}';
export const INITIALIZED = '{"jsonrpc":"2.0","method":"notifications/initialized"}';
export const CALL = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"query_object_instance","arguments":${ARGS.replace(/^\{/, `{"response_format":"${process.env.MCP_FORMAT || 'json'}",`)}}}`;
