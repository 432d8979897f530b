-- Peer (d): the gateway a user would build with nginx + Lua (the OpenResty model),
-- doing the work of tools/query_object_instance.lua per request with lua-cjson:
-- decode the arguments, shape the ontology-query body, fetch it, decode, keep the
-- same keys (dropping overall_ms, search_from_index, object_type) and each row's
-- _score, encode. Runs on nginx's LuaJIT; cjson is Debian's lua-cjson.
local cjson = require "cjson"

local KEEP = { datas = true, total_count = true, search_after = true,
    effective_permissions = true, row_filter_applied = true }

ngx.req.read_body()
local ok, args = pcall(cjson.decode, ngx.req.get_body_data() or "")
if not ok or type(args) ~= "table" or type(args.kn_id) ~= "string" or type(args.ot_id) ~= "string" then
    ngx.status = 400
    ngx.header["Content-Type"] = "application/json"
    ngx.say('{"code":"bad_request"}')
    return
end
local body = { limit = args.limit or 10, need_total = true }
if args.condition ~= nil then body.condition = args.condition end
if args.sort ~= nil then body.sort = args.sort end
if args.properties ~= nil then body.properties = args.properties end

local res = ngx.location.capture(
    "/_upstream/knowledge-networks/" .. ngx.escape_uri(args.kn_id) .. "/object-types/" ..
        ngx.escape_uri(args.ot_id),
    { method = ngx.HTTP_POST, body = cjson.encode(body),
      args = { include_type_info = "false", include_logic_params = "false" } })
if res.status ~= 200 then
    ngx.status = 502
    ngx.say('{"code":"bad_gateway"}')
    return
end
local out = cjson.decode(res.body)
for k in pairs(out) do
    if not KEEP[k] then out[k] = nil end
end
for _, row in ipairs(out.datas or {}) do
    row._score = nil
end
ngx.header["Content-Type"] = "application/json"
ngx.print(cjson.encode(out))
