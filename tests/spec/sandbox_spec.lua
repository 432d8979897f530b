-- The harness loads tools through the server's own sandbox (clsandbox.so, built
-- from src/host/lvm.c): what the server refuses fails here too, with the server's words.
local helper = require "helper"

local function load_fails(sb, name, message)
    local tool, errs = sb.load(name)
    assert.is_nil(tool)
    local joined = table.concat(errs, "\n")
    assert.truthy(joined:find(message, 1, true), "expected '" .. message .. "' in:\n" .. joined)
end

local function tool(handle)
    return {
        name = "probe", version = "1.0.0", kind = "read",
        title = { ["zh-CN"] = "探针", ["en-US"] = "Probe" },
        description = { ["zh-CN"] = "探针", ["en-US"] = "Probe" },
        group = "query", order = 1, surfaces = { "mcp", "rest" },
        input_schema = { type = "object", properties = {} },
        handle = handle,
    }
end

describe("the tool sandbox in busted", function()
    local sb = helper.sandbox(helper.root .. "/tests/spec/fixtures/tools_bad")

    it("refuses the globals the server refuses, with the server's message", function()
        load_fails(sb, "loads_without_env", "load: an explicit env table (4th argument) is required")
        load_fails(sb, "sets_finalizer", "__gc metamethods are not allowed in tools")
        load_fails(sb, "writes_global", "assignment to global 'counter' (tools define no globals; use local)")
    end)

    it("keeps the runtime's modules private and the public ones read-only", function()
        load_fails(sb, "requires_host", "module 'host' is private to the runtime")
        load_fails(sb, "patches_errors", "attempt to modify a read-only table (field 'envelope')")
        for _, name in ipairs({ "contract", "schema", "host", "authz", "cltexts", "ptc_stub" }) do
            local ok, err = pcall(sb.tool_require, name)
            assert.is_false(ok, name)
            assert.truthy(tostring(err):find("module '" .. name .. "' is private to the runtime", 1, true))
        end
        local errors = sb.tool_require("errors")
        assert.is_function(errors.envelope)
        assert.is_nil(errors.platform_codes) -- only the listed fields
        assert.has_error(function()
            errors.UPSTREAM_CODES[502] = "x"
        end)
        assert.is_function(sb.tool_require("sqlguard").check)
        assert.is_nil(sb.tool_require("sqlguard").tokens)
    end)

    it("gives the tool a read-only ctx, nested tables included", function()
        for _, write in ipairs({
            function(ctx) ctx.stash = 1 end,
            function(ctx) ctx.principal.account_id = "someone_else" end,
        }) do
            local ok, err = pcall(helper.call, tool(function(_, ctx)
                write(ctx)
                return {}
            end))
            assert.is_false(ok)
            assert.truthy(tostring(err):find("read-only table", 1, true), tostring(err))
        end
        local res = helper.call(tool(function(_, ctx)
            local seen = {}
            for k in pairs(ctx.principal) do
                seen[#seen + 1] = k
            end
            table.sort(seen)
            return { lang = ctx.lang, account = ctx.principal.account_id, keys = table.concat(seen, ",") }
        end))
        assert.same({ lang = "zh-CN", account = "u1", keys = "account_id,account_type" }, res)
    end)
end)

describe("ctx through the host", function()
    local function host_with(handle)
        local host = helper.sandbox().require("host")
        assert(host.register("probe", tool(handle)))
        assert(host.check_set())
        return host
    end

    local function ctx_of(account)
        return { lang = "en-US", surface = "mcp", principal = { account_id = account, account_type = "user" },
                 config = { gates = {} } }
    end

    it("raises when a tool writes into ctx or its config", function()
        for _, write in ipairs({ function(ctx) ctx.invoke = nil end, function(ctx) ctx.config.gates.X = true end }) do
            local host = host_with(function(_, ctx)
                write(ctx)
                return {}
            end)
            local ok, err = pcall(host.invoke, "probe", nil, ctx_of("a"))
            assert.is_false(ok)
            assert.truthy(tostring(err):find("ctx and its tables are read-only", 1, true), tostring(err))
        end
    end)

    it("scopes ctx.authz per principal and per generation", function()
        local function cached(_, ctx)
            local before = ctx.authz.get("probe")
            ctx.authz.put("probe", ctx.principal.account_id)
            return { before = before or "none" }
        end
        local host = host_with(cached)
        local _, body = host.invoke("probe", nil, ctx_of("alice"))
        assert.equal("none", body.before)
        _, body = host.invoke("probe", nil, ctx_of("alice"))
        assert.equal("alice", body.before)
        _, body = host.invoke("probe", nil, ctx_of("bob")) -- alice's entry is not bob's
        assert.equal("none", body.before)
        _, body = host.invoke("probe", nil, ctx_of("bob"))
        assert.equal("bob", body.before)
        -- a new generation (a reload) starts empty
        _, body = host_with(cached).invoke("probe", nil, ctx_of("alice"))
        assert.equal("none", body.before)
    end)

    it("makes ctx.invoke, ctx.list_tools and ctx.authz on first read, and lists them in pairs", function()
        local untouched = ctx_of("a")
        local _, body = host_with(function(_, ctx)
            return { lang = ctx.lang }
        end).invoke("probe", nil, untouched)
        assert.equal("en-US", body.lang)
        for _, k in ipairs({ "invoke", "list_tools", "authz" }) do
            assert.is_nil(rawget(untouched, k)) -- never read: never made
        end
        local read = ctx_of("a")
        _, body = host_with(function(_, ctx)
            local keys = {}
            for k in pairs(ctx) do
                keys[#keys + 1] = k
            end
            table.sort(keys)
            return { keys = table.concat(keys, ","), same = rawequal(ctx.invoke, ctx.invoke),
                     authz = type(ctx.authz.get), list = type(ctx.list_tools) }
        end).invoke("probe", nil, read)
        assert.same({ keys = "authz,config,invoke,lang,list_tools,principal,surface", same = true,
                      authz = "function", list = "function" }, body)
        assert.is_function(rawget(read, "invoke"))
    end)

    it("keeps nothing for a call without an account", function()
        local host = host_with(function(_, ctx)
            local stored = ctx.authz.put("k", true)
            return { stored = stored, after = ctx.authz.get("k") == true }
        end)
        local _, body = host.invoke("probe", nil, { lang = "en-US", principal = {} })
        assert.same({ stored = false, after = false }, body)
    end)
end)
