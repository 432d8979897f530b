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
// The same tools/call in the stateless protocol era (2026-07-28): no session; the
// version and capabilities in _meta, method and name repeated in headers.
export const MODERN_CALL = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"query_object_instance","arguments":${ARGS.replace(/^\{/, `{"response_format":"${process.env.MCP_FORMAT || 'json'}",`)},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`;
export const MODERN_HEADERS = { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'query_object_instance' };
export const CALL = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"query_object_instance","arguments":${ARGS.replace(/^\{/, `{"response_format":"${process.env.MCP_FORMAT || 'json'}",`)}}}`;
