local lifecycle = require "lifecycle"
local schema = require "schema"

local START = "bkn_start_interaction"
local FINISH = "bkn_finish_interaction"
local GOOD = { question = "q", agent_name = "a", conversation_mode = "new" }

local function with(t, over)
    local out = {}
    for k, v in pairs(t) do
        out[k] = v
    end
    for k, v in pairs(over) do
        out[k] = v ~= false and v or nil
    end
    return out
end

describe("lifecycle declarations", function()
    it("lists each tool with the schema check() enforces, described in the listing language", function()
        for _, name in ipairs(lifecycle.names) do
            for _, lang in ipairs({ "zh-CN", "en-US" }) do
                local e = lifecycle.list_entry(name, lang)
                assert.equal(name, e.name)
                assert.is_true(schema.check_schema(e.inputSchema))
                for k, p in pairs(e.inputSchema.properties) do
                    assert.equal("string", type(p.description), k)
                end
                assert.equal("lifecycle", e._meta["openbkn.ai/group"])
            end
        end
        assert.is_false(lifecycle.list_entry(START, "en-US").annotations.idempotentHint)
        assert.is_true(lifecycle.list_entry(FINISH, "en-US").annotations.idempotentHint)
    end)

    it("passes valid arguments", function()
        assert.is_nil(lifecycle.check(START, GOOD, "en-US", false))
        assert.is_nil(lifecycle.check(START, with(GOOD, { conversation_mode = "continue", conversation_id = "c" }),
            "en-US", false))
        assert.is_nil(lifecycle.check(FINISH, { interaction_id = "i", outcome = "completed", answer = "x" }, "en-US"))
        assert.is_nil(lifecycle.check(FINISH, { interaction_id = "i", outcome = "failed", reason = "r" }, "en-US"))
    end)

    it("refuses with the field named and the schema's details", function()
        local r = lifecycle.check(START, with(GOOD, { question = 5 }), "en-US", false)
        assert.equal("invalid_params", r.code)
        assert.equal("fix_arguments", r.required_action)
        assert.is_false(r.retryable)
        assert.equal("question must be a non-empty string", r.message)
        assert.equal("/question", r.details[1].path)
        r = lifecycle.check(START, with(GOOD, { extra = 1 }), "en-US", false)
        assert.truthy(r.message:find("extra is not a parameter of bkn_start_interaction; allowed: " ..
            "question, agent_name, conversation_mode, conversation_id", 1, true))
        r = lifecycle.check(START, with(GOOD, { agent_name = string.rep("é", 129) }), "en-US", false)
        assert.equal("agent_name must be at most 128 characters long", r.message)
        assert.is_nil(lifecycle.check(START, with(GOOD, { agent_name = string.rep("é", 128) }), "en-US", false))
    end)

    it("keeps the rules schema cannot say: mode and conversation_id agree unless a host key maps", function()
        local new_with_id = with(GOOD, { conversation_id = "c" })
        local continue_without = with(GOOD, { conversation_mode = "continue" })
        assert.equal("/conversation_id", lifecycle.check(START, new_with_id, "en-US", false).details[1].path)
        assert.equal("invalid_params", lifecycle.check(START, continue_without, "zh-CN", false).code)
        assert.is_nil(lifecycle.check(START, new_with_id, "en-US", true))
        assert.is_nil(lifecycle.check(START, continue_without, "en-US", true))
    end)

    it("answers a completed finish without an answer with closure_manifest_invalid", function()
        for _, args in ipairs({ { interaction_id = "i", outcome = "completed" },
            { interaction_id = "i", outcome = "completed", answer = "" } }) do
            local r = lifecycle.check(FINISH, args, "en-US")
            assert.equal("closure_manifest_invalid", r.code)
            assert.equal("fix_arguments", r.required_action)
        end
        local r = lifecycle.check(FINISH, { interaction_id = "i", outcome = "completed", bkn_context = {} }, "en-US")
        assert.equal("invalid_params", r.code)
        assert.truthy(r.message:find("remove bkn_context", 1, true))
    end)
end)
