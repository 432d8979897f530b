-- _lib.action: shared pieces of the action tools: the
-- ontology-query paths and the trimming of action executions.
local util = require "_lib.util"

local M = {}

function M.kn_path(kn_id)
    return "/in/v1/knowledge-networks/" .. util.escape(kn_id)
end

-- Top-level execution fields an agent decides with. Everything else goes:
-- action_type_snapshot, executor / executor_id, action_source(_type),
-- object_type_id, instance_identity_hash (the response is trimmed: "响应做过裁剪").
M.EXECUTION_KEYS = {
    "id", "kn_id", "action_type_id", "action_type_name", "status", "trigger_type",
    "execution_mode", "target_count", "total_count", "success_count", "failed_count",
    "results_total", "results_offset", "results_limit", "start_time", "end_time",
    "duration_ms", "dynamic_params", "results",
}

-- Per-object result fields; nested paging metadata and timestamps go.
M.RESULT_KEYS = {
    "_instance_id", "_instance_identity", "_display", "targets", "targets_total",
    "targets_truncated", "status", "parameters", "duration_ms", "error_message", "result",
}

M.MAX_TARGETS = 20

local function trim_result(r)
    if type(r) ~= "table" then
        return
    end
    util.keep_only(r, M.RESULT_KEYS)
    local targets = r.targets
    if type(targets) == "table" and #targets > M.MAX_TARGETS then
        local n = #targets
        for i = n, M.MAX_TARGETS + 1, -1 do
            table.remove(targets, i)
        end
        r.targets_total = n
        r.targets_truncated = true
    end
end

-- trim_execution(e, keep_results) -> e, trimmed in place (decoded tables kept).
function M.trim_execution(e, keep_results)
    if type(e) ~= "table" then
        return e
    end
    util.keep_only(e, M.EXECUTION_KEYS)
    if not keep_results then
        e.results = nil
        return e
    end
    if type(e.results) == "table" then
        for _, r in ipairs(e.results) do
            trim_result(r)
        end
    end
    return e
end

return M
