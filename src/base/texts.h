/* texts: the one catalogue of the gateway's own texts, in every supported language.
 *
 * Everything the gateway itself says to a model or a person - the description and
 * solution of each HTTP status, lifecycle and guard messages, progress notes,
 * validation details - is an entry here. C reads it with text_get / text_status;
 * Lua reads the same entries through the `cltexts` module (lua/catalog.lua wraps
 * it), so a text is written once. Tools keep their own business texts.
 *
 * Adding a text: one X(...) line in CL_TEXTS with an id, the zh-CN and the en-US
 * string. The id becomes TEXT_<ID> in C and the lower-case key in Lua
 * (TEXT_RETRY_LATER -> cltexts.text.retry_later). Every string is static. */
#ifndef CL_TEXTS_H
#define CL_TEXTS_H

#include <stddef.h>

typedef enum { LANG_ZH_CN = 0, LANG_EN_US = 1, LANG_COUNT = 2 } lang_id;

/* HTTP statuses the gateway answers with: status, name (the code's suffix in
 * "Public.<Name>"), description and solution in zh-CN and en-US. */
#define CL_STATUS_TEXTS(X)                                                                         \
    X(400, BadRequest, "参数错误", "Invalid parameters", "请检查参数是否正确",                     \
      "Please check if the parameters are correct")                                                \
    X(401, Unauthorized, "认证失败", "Authentication failed",                                      \
      "请获取新的访问令牌（Bearer token）后重试", "Obtain a fresh access token, then call again")  \
    X(403, Forbidden, "权限错误", "Permission denied", "请向管理员申请所缺的权限，获批后重试",     \
      "Ask an administrator for the missing permission, then call again once it is granted")       \
    X(404, NotFound, "对象不存在", "Resource not found",                                           \
      "请检查请求的地址与 ID：用 list_knowledge_networks、"                            \
      "search_schema 或 get_object_types 查找有效的 ID",                                           \
      "Check the path and the ids of the request: find valid ids with "                            \
      "list_knowledge_networks, search_schema or get_object_types")                                \
    X(405, MethodNotAllowed, "请求方法不允许", "Method not allowed", "请使用该路由支持的请求方法", \
      "Use a method this route accepts")                                                           \
    X(406, NotAcceptable, "无法满足 Accept 要求", "Not acceptable",                                \
      "请在 Accept 中同时声明 application/json 与 text/event-stream",                              \
      "Accept application/json and text/event-stream")                                             \
    X(408, RequestTimeout, "请求超时", "Request timeout", "请稍后重试", "Retry later")             \
    X(409, Conflict, "资源冲突", "Conflict with the current state",                                \
      "请检查请求是否与已有数据冲突", "Check whether the request conflicts with existing data")    \
    X(413, RequestEntityTooLarge, "请求过大", "Request too large", "请减小请求后重试",             \
      "Send a smaller request")                                                                    \
    X(414, URITooLong, "请求地址过长", "Request target too long", "请缩短请求地址",                \
      "Send a shorter request target")                                                             \
    X(415, UnsupportedMediaType, "不支持的内容类型", "Unsupported content type",                   \
      "请使用 Content-Type: application/json", "Send Content-Type: application/json")              \
    X(417, ExpectationFailed, "不支持该 Expect 要求", "Expectation not supported",                 \
      "请使用 Expect: 100-continue 或不发送 Expect",                                               \
      "Send Expect: 100-continue or no Expect header")                                             \
    X(422, UnprocessableEntity, "请求无法处理", "Unprocessable request", "请检查请求内容是否正确", \
      "Check the content of the request")                                                          \
    X(429, TooManyRequests, "请求过多", "Too many requests", "请稍后重试", "Retry later")          \
    X(500, InternalServerError, "内部错误", "Internal server error",                               \
      "请将响应中的 bkn-request-id 告知管理员",                                                    \
      "Report the bkn-request-id of this response to an administrator")                            \
    X(501, NotImplemented, "不支持的请求", "Not implemented", "请使用支持的请求方法与传输编码",    \
      "Use a supported method and transfer coding")                                                \
    X(502, BadGateway, "依赖服务不可用", "Upstream service unavailable",                           \
      "依赖服务出错，重试无效；"                                                       \
      "请将响应中的 bkn-request-id 告知管理员",                                                    \
      "The upstream service failed and a retry will not help; report the "                         \
      "bkn-request-id of this response to an administrator")                                       \
    X(503, ServiceUnavailable, "服务不可用", "Service unavailable", "请稍后重试", "Retry later")   \
    X(504, GatewayTimeout, "依赖服务响应超时", "Upstream service timed out", "请稍后重试",         \
      "Retry later")                                                                               \
    X(505, HTTPVersionNotSupported, "不支持的 HTTP 版本", "HTTP version not supported",            \
      "请使用 HTTP/1.1", "Use HTTP/1.1")

/* What a caller does after a gateway error of a status: X(status, retryable,
 * retry_after_ms, required_action). retry_after_ms is the wait before a retry when
 * retryable (never 0; a Retry-After header, when sent, says the same rounded up to
 * seconds); required_action is the machine token of the next step (docs/errors.md
 * lists them); the status's solution text says the same step in words. A status
 * without a row reads as 400 when 4xx and 500 otherwise. */
#define CL_STATUS_NEXT(X)                                                                          \
    X(400, 0, 0, "fix_arguments")                                                                  \
    X(401, 0, 0, "refresh_token")                                                                  \
    X(403, 0, 0, "request_permission")                                                             \
    X(404, 0, 0, "check_ids")                                                                      \
    X(405, 0, 0, "fix_request")                                                                    \
    X(406, 0, 0, "fix_request")                                                                    \
    X(408, 1, 1000, "retry_later")                                                                 \
    X(409, 0, 0, "resolve_conflict")                                                               \
    X(413, 0, 0, "fix_request")                                                                    \
    X(414, 0, 0, "fix_request")                                                                    \
    X(415, 0, 0, "fix_request")                                                                    \
    X(417, 0, 0, "fix_request")                                                                    \
    X(422, 0, 0, "fix_arguments")                                                                  \
    X(429, 1, 1000, "retry_later")                                                                 \
    X(500, 0, 0, "contact_administrator")                                                          \
    X(501, 0, 0, "fix_request")                                                                    \
    X(502, 0, 0, "contact_administrator")                                                          \
    X(503, 1, 1000, "retry_later")                                                                 \
    X(504, 1, 1000, "retry_later")                                                                 \
    X(505, 0, 0, "fix_request")

/* Free-standing texts: X(ID, zh-CN, en-US). Keep each area's entries together. */
#define CL_TEXTS(X)                                                                                \
    /* generic next steps */                                                                       \
    X(CONTACT_ADMIN, "请联系管理员", "Contact administrator")                                      \
    /* the admin listener's 401: its token is a static secret, not an OAuth token */             \
    X(ADMIN_TOKEN_SOLUTION,                                                                        \
      "管理端口使用固定令牌：请发送 Authorization: Bearer <admin.token_file 所指文件的内容>",      \
      "The admin listener takes a static token: send Authorization: Bearer <the contents of "      \
      "the file admin.token_file names>")                                                          \
    X(RETRY_LATER, "请稍后重试", "Retry later")                                                    \
    /* idempotency: a call that already ran, its result gone (printf formats: operation            \
     * id, receipt id, RECEIPT_STATUS_*; the action one also kn_id and execution_id) */            \
    X(ALREADY_RAN_ACTION,                                                                          \
      "这次调用已经执行过（operation %s，receipt %s，%s），"                         \
      "原始结果已不在本服务保存，因此不再返回，行动也不会重复执行。" \
      "请用 get_action_execution（kn_id \"%s\"，execution_id \"%s\"）"                        \
      "查看这次执行的结果。",                                                                      \
      "This call already ran (operation %s, receipt %s, %s). Its original result is no "           \
      "longer stored here, so it is not returned again and the action is not executed "            \
      "again. Read the outcome with get_action_execution (kn_id \"%s\", execution_id "             \
      "\"%s\").")                                                                                  \
    X(ALREADY_RAN_READ,                                                                            \
      "这次调用已经执行过（operation %s，receipt %s，%s），"                         \
      "原始结果已不在本服务保存，不再返回。该工具只读取数据："          \
      "换一个新的 invocation id 重新调用即可取得当前结果。",                                       \
      "This call already ran (operation %s, receipt %s, %s). Its original result is no "           \
      "longer stored here and is not returned again. The tool only reads data: call it "           \
      "again with a new invocation id to get a current result.")                                   \
    X(ALREADY_RAN_OTHER,                                                                           \
      "这次调用已经执行过（operation %s，receipt %s，%s），"                         \
      "原始结果已不在本服务保存，不再返回，也不会重复执行。"             \
      "再次执行前请先确认它已产生的效果（details 中有 receipt），"            \
      "再换一个新的 invocation id 调用。",                                                         \
      "This call already ran (operation %s, receipt %s, %s). Its original result is no "           \
      "longer stored here; it is not returned again and the call is not run again. Check "         \
      "what it did (the receipt is in details) before running it again with a new "                \
      "invocation id.")                                                                            \
    /* idempotency: a call started and never finished (printf: operation id, receipt id) */     \
    X(OUTCOME_UNKNOWN_READ,                                                                        \
      "这次调用已经开始（operation %s，receipt %s 仍未完成），但执行它的实例中途停止，"       \
      "结果没有记录下来，也不会再有。它不会重复执行。该工具只读取数据："  \
      "换一个新的 invocation id 重新调用即可。",                                                   \
      "This call was started (operation %s, receipt %s still pending), but the instance "         \
      "running it stopped mid-call and its outcome was never recorded, nor will it be. It is "    \
      "not run again. The tool only reads data: call it again with a new invocation id.")       \
    X(OUTCOME_UNKNOWN_OTHER,                                                                       \
      "这次调用已经开始（operation %s，receipt %s 仍未完成），但执行它的实例中途停止，"       \
      "结果没有记录下来，也不会再有。它不会重复执行，但可能已经产生了效果："  \
      "请先确认它做了什么，再换一个新的 invocation id 调用。",                                     \
      "This call was started (operation %s, receipt %s still pending), but the instance "         \
      "running it stopped mid-call and its outcome was never recorded, nor will it be. It is "    \
      "not run again, but it may have taken effect: check what it did before running it "         \
      "again with a new invocation id.")                                                           \
    X(RECEIPT_STATUS_COMPLETED, "状态：已完成", "status: completed")                               \
    X(RECEIPT_STATUS_FAILED, "状态：失败", "status: failed")                                       \
    /* lifecycle tools: titles, descriptions, parameter descriptions */                            \
    X(LC_GROUP_TITLE, "会话生命周期", "Session Lifecycle")                                         \
    X(LC_START_TITLE, "开始交互", "Start Interaction")                                             \
    X(LC_START_DESC,                                                                               \
      "每轮对话先调用：提交用户的完整问题、固定的 agent_name 与 "            \
      "conversation_mode（new "                                                                   \
      "不传 conversation_id；continue 传入之前 start 返回的 "                            \
      "conversation_id）。返回 "                                                               \
      "conversation_id 与 interaction_id，本轮其他工具都以 bkn_context 携带它们。"  \
      "每次 new 都会新建会话，因此重复调用不是幂等的。",                                           \
      "Call first on every turn: submit the user's full question, your stable agent_name "         \
      "and conversation_mode (new without conversation_id, or continue with the "                  \
      "conversation_id an earlier start returned). Returns conversation_id and "                   \
      "interaction_id: pass them as bkn_context to every other tool of this turn. Every "          \
      "new start opens a new conversation, so repeating it is not idempotent.")                    \
    X(LC_FINISH_TITLE, "结束交互", "Finish Interaction")                                           \
    X(LC_FINISH_DESC,                                                                              \
      "回复用户之前调用：提交 interaction_id、outcome（completed、"                  \
      "failed、cancelled、"                                                                      \
      "handed_off），completed 时附上 answer。只结束本次交互，会话保持打开供下一轮使用。",         \
      "Call before replying to the user: the interaction_id, the outcome (completed, "             \
      "failed, cancelled, handed_off) and, for completed, your answer. Ends the "                  \
      "interaction only; the conversation stays open for the next turn.")                          \
    X(LC_P_QUESTION, "用户本轮的完整问题（原文，非空）",                                           \
      "The user's full question for this turn (verbatim, non-empty)")                              \
    X(LC_P_AGENT_NAME, "你的固定 agent 名称（每轮相同，1 到 128 个字符）",                         \
      "Your stable agent name (the same on every turn, 1 to 128 characters)")                      \
    X(LC_P_MODE,                                                                                   \
      "new：没有当前会话，新建一个（不传 conversation_id）；"                     \
      "continue：延续 conversation_id "                                                         \
      "指定的会话。宿主提供会话映射时以宿主映射为准。",                                            \
      "new: no current conversation, open one (no conversation_id); continue: continue "           \
      "the conversation conversation_id names. When the host supplies a conversation "             \
      "mapping, the mapping decides.")                                                             \
    X(LC_P_CONVERSATION_ID,                                                                        \
      "仅用于 conversation_mode=continue：之前 start 返回的 conversation_id",                      \
      "Only with conversation_mode=continue: the conversation_id an earlier start returned")       \
    X(LC_P_INTERACTION_ID, "本轮 bkn_start_interaction 返回的 interaction_id（顶层字段）",         \
      "The interaction_id this turn's bkn_start_interaction returned (a top-level field)")         \
    X(LC_P_OUTCOME,                                                                                \
      "本轮结果：completed 已回答用户（必须附 answer）；"                          \
      "failed 无法完成（可附 reason）；"                                                  \
      "cancelled 用户或 agent 中止；handed_off 转交人工或其他 agent",                              \
      "How the turn ended: completed = answered the user (answer required); failed = could "       \
      "not complete (give a reason); cancelled = stopped by the user or the agent; "               \
      "handed_off = passed to a person or another agent")                                          \
    X(LC_P_ANSWER, "给用户的回答（outcome 为 completed 时必填）",                                  \
      "The answer given to the user (required when outcome is completed)")                         \
    X(LC_P_REASON, "原因，用于 completed 以外的结果", "Why, for outcomes other than completed")    \
    /* lifecycle tools: refusals. printf formats: FIELD_REQUIRED field, rule;                      \
     * NOT_STRING / NOT_TEXT field; TOO_LONG field, limit; UNKNOWN_FIELD field, tool,              \
     * allowed fields */                                                                           \
    X(LC_FIELD_REQUIRED, "缺少必填字段 %s：%s", "%s is required: %s")                              \
    X(LC_NOT_STRING, "%s 必须是非空字符串", "%s must be a non-empty string")                       \
    X(LC_NOT_TEXT, "%s 必须是字符串", "%s must be a string")                                       \
    X(LC_TOO_LONG, "%s 最多 %d 个字符", "%s must be at most %d characters long")                   \
    X(LC_UNKNOWN_FIELD, "%s 不是 %s 的参数；允许的字段：%s",                                       \
      "%s is not a parameter of %s; allowed: %s")                                                  \
    X(LC_MODE_INVALID, "conversation_mode 必须是 \"new\" 或 \"continue\"",                         \
      "conversation_mode must be \"new\" or \"continue\"")                                         \
    X(LC_NEW_WITH_ID,                                                                              \
      "conversation_mode 为 \"new\" 时不能传 conversation_id；要延续该会话请用 \"continue\"",      \
      "conversation_id is not allowed with conversation_mode \"new\"; use \"continue\" to "        \
      "continue that conversation")                                                                \
    X(LC_CONTINUE_WITHOUT_ID,                                                                      \
      "conversation_mode 为 \"continue\" 时必须传 conversation_id（之前 start "            \
      "返回的值）；没有当前会话时用 \"new\"",                                                      \
      "conversation_mode \"continue\" requires conversation_id (the one an earlier start "         \
      "returned); use \"new\" when there is no current conversation")                              \
    X(LC_FINISH_NESTED_CONTEXT,                                                                    \
      "bkn_finish_interaction 不接受 bkn_context：interaction_id 是顶层字段，"           \
      "请去掉 bkn_context 后重试",                                                                 \
      "bkn_finish_interaction requires interaction_id as a top-level field; remove "               \
      "bkn_context and retry")                                                                     \
    X(LC_OUTCOME_INVALID, "outcome 必须是 completed、failed、cancelled、handed_off 之一",          \
      "bkn_finish_interaction outcome must be one of: completed, failed, cancelled, "              \
      "handed_off")                                                                                \
    X(LC_ANSWER_REQUIRED, "outcome 为 completed 时必须提供 answer（给用户的回答，非空字符串）",    \
      "completed outcome requires answer (the answer given to the user, a non-empty string)")      \
    X(LC_TRACE_NOT_INSTALLED, "本部署未配置 BKN Trace Core",                                       \
      "BKN Trace Core is not configured for this deployment")                                      \
    X(LC_NO_OWNER, "调用方缺少租户、业务域或账号",                                                 \
      "the caller has no tenant, business domain or account")                                      \
    X(LC_TRACE_UNAVAILABLE, "BKN Trace Core 暂时不可用",                                           \
      "BKN Trace Core is temporarily unavailable")                                                 \
    X(LC_NO_CONVERSATION, "BKN Trace Core 的应答中没有会话",                                       \
      "BKN Trace Core answered without a conversation")                                            \
    X(LC_ANSWER_NOT_STORED, "BKN Trace Core 未能保存回答",                                         \
      "BKN Trace Core did not store the answer")                                                   \
    X(LC_TERMINAL_CONFLICT, "该交互已以另一种结果结束", "another terminal outcome already won")    \
    /* host hints (src/flow/callcheck.c). printf format: the hint's header or _meta key */              \
    X(HINT_LENGTH, "%s 必须是 1 到 256 个不含空格的可打印 ASCII 字符",                             \
      "%s must be 1 to 256 printable ASCII characters without spaces")                             \
    X(HINT_CHARS, "%s 只能包含不含空格的可打印 ASCII 字符",                                        \
      "%s must be printable ASCII without spaces")                                                 \
    X(HINT_NOT_STRING, "%s 必须是字符串", "%s must be a string")                                   \
    /* bkn_context as every business tool lists it (lua/contract.lua) */                           \
    X(CTX_DESC,                                                                                    \
      "本轮上下文：原样传入 bkn_start_interaction 返回的 conversation_id 与 "        \
      "interaction_id。",                                                                          \
      "Turn context from bkn_start_interaction: pass conversation_id and interaction_id "          \
      "exactly as start returned them.")                                                           \
    X(CTX_CONVERSATION_ID, "bkn_start_interaction 返回的 conversation_id，原样传入",               \
      "The conversation_id bkn_start_interaction returned, unchanged")                             \
    X(CTX_INTERACTION_ID, "bkn_start_interaction 返回的 interaction_id，原样传入",                 \
      "The interaction_id bkn_start_interaction returned, unchanged")                              \
    X(CTX_PARENT_OPERATION_ID,                                                                     \
      "可选：促成本次调用的上一次调用的 operation_id（见其 bkn_receipt）",                         \
      "Optional: the operation_id (from its bkn_receipt) of the earlier call of this "             \
      "turn that led to this one")                                                                 \
    X(CTX_CAUSATION_EVENT_IDS, "可选：促成本次调用的事件 ID（最多 64 个）",                        \
      "Optional: ids of the events that caused this call (at most 64)")                            \
    X(CTX_BUSINESS_REFS, "可选：本次调用涉及的业务对象（最多 64 个），记录在回执上",               \
      "Optional: the business objects this call is about (at most 64), recorded on the "           \
      "receipt")                                                                                   \
    X(CTX_REF_TYPE, "业务对象的类型", "The kind of business object")                               \
    X(CTX_REF_ID, "业务对象的 ID（如知识网络 ID、对象类 ID 或实例标识）",                          \
      "The object's id (a network id, an object type id, an instance identity, ...)")              \
    X(CTX_REF_VERSION, "可选：业务对象的版本", "Optional: the object's version")                   \
    /* schema validation details (lua/schema.lua): the path is separate, these say what is         \
     * wrong with the value there. printf formats (%s each, in order as named) */                  \
    X(SCHEMA_REQUIRED, "为必填项", "is required")                                                  \
    X(SCHEMA_NOT_ALLOWED, "不是允许的字段", "is not allowed")                                      \
    X(SCHEMA_NON_STRING_KEY, "含有非字符串的键", "has a non-string key")                           \
    X(SCHEMA_TOO_DEEP, "嵌套过深", "is nested too deeply")                                         \
    X(SCHEMA_OR, " 或 ", " or ")                                                                   \
    X(SCHEMA_TYPE, "类型必须是 %s，实际是 %s", "must be of type %s, got %s") /* types, got */      \
    X(SCHEMA_ENUM, "必须是以下之一：%s", "must be one of %s")                                      \
    X(SCHEMA_CONST, "必须是 %s", "must be %s")                                                     \
    X(SCHEMA_MIN, "必须 >= %s", "must be >= %s")                                                   \
    X(SCHEMA_MAX, "必须 <= %s", "must be <= %s")                                                   \
    X(SCHEMA_XMIN, "必须 > %s", "must be > %s")                                                    \
    X(SCHEMA_XMAX, "必须 < %s", "must be < %s")                                                    \
    X(SCHEMA_MIN_LENGTH, "长度至少为 %s 个字符", "must be at least %s characters long")            \
    X(SCHEMA_MAX_LENGTH, "长度最多为 %s 个字符", "must be at most %s characters long")             \
    X(SCHEMA_MIN_ITEMS, "至少需要 %s 项", "must have at least %s items")                           \
    X(SCHEMA_MAX_ITEMS, "最多只能有 %s 项", "must have at most %s items")                          \
    X(SCHEMA_UNIQUE, "第 %s 项与第 %s 项相同；各项必须互不相同",                                   \
      "items %s and %s are equal; items must be unique")                                           \
    X(SCHEMA_ANY_OF, "不符合任何一种允许的形式（最接近的：%s %s）",                                \
      "must match one of the allowed forms (closest: %s %s)") /* path, message */                  \
    X(SCHEMA_ONE_OF, "必须恰好符合一种允许的形式（最接近的：%s %s）",                              \
      "must match exactly one of the allowed forms (closest: %s %s)")                              \
    X(SCHEMA_MANY_OF, "同时符合多种允许的形式；必须恰好符合一种",                                  \
      "matches more than one of the allowed forms; it must match exactly one")                     \
    /* MCP progress notifications. printf format: tool name, elapsed ms (long long) */             \
    X(PROGRESS_RUNNING, "%s 仍在运行（已 %lld 毫秒）", "%s is still running (%lld ms)")            \
    /* self-description (info.c): the sentences of the JSON document */                            \
    X(INFO_TRANSPORT,                                                                              \
      "Streamable HTTP：POST 一条 JSON-RPC 2.0 消息"                                          \
      "（initialize、tools/list、tools/call）；"                                              \
      "GET 打开 SSE 推送流；DELETE 结束会话",                                                      \
      "Streamable HTTP: POST one JSON-RPC 2.0 message (initialize, tools/list, "                   \
      "tools/call); GET opens an SSE stream; DELETE ends the session")                             \
    X(INFO_AUTH,                                                                                   \
      "每个请求带 Authorization: Bearer <token>："                                           \
      "OAuth 2.0 访问令牌，或以 bak_ 开头的 AppKey。"                                   \
      "无需其他身份头。",                                                                          \
      "Send Authorization: Bearer <token> on every request: an OAuth 2.0 access "                  \
      "token, or an AppKey starting with bak_. No other identity headers.")                        \
    /* the catalogue page for people (lua/page.lua) */                                             \
    X(PAGE_HEADING, "MCP 服务目录", "MCP service catalogue")                                       \
    X(PAGE_ENDPOINT, "端点", "Endpoint")                                                           \
    X(PAGE_PROTOCOL, "协议", "Protocol")                                                           \
    X(PAGE_AUTH, "鉴权", "Authentication")                                                         \
    X(PAGE_LANGUAGE, "语言", "Language")                                                           \
    X(PAGE_TOOLS, "个工具", "tools") /* after the number of tools */                               \
    X(PAGE_CONNECT, "接入配置", "Connect a client")                                                \
    X(PAGE_GENERIC, "通用配置（Cursor、Claude Code 等）",                                          \
      "Generic entry (Cursor, Claude Code, …)")                                                    \
    X(PAGE_GENERIC_NOTE,                                                                           \
      "把 <access-token> 换成你的 OAuth 访问令牌"                                         \
      "或 bak_ 开头的 AppKey。",                                                                   \
      "Replace <access-token> with your OAuth access token or a bak_ AppKey.")                     \
    X(PAGE_CLAUDE, "Claude Desktop（通过 npx mcp-remote）",                                        \
      "Claude Desktop (through npx mcp-remote)")                                                   \
    X(PAGE_CLAUDE_NOTE, "在 env 里把 <access-token> 换成你的令牌；需要 Node.js。",                 \
      "Replace <access-token> in env with your token; needs Node.js.")                             \
    X(PAGE_STATELESS, "v2 SDK 客户端（无状态协议 2026-07-28）",                                    \
      "v2 SDK client (stateless protocol 2026-07-28)")                                             \
    X(PAGE_STATELESS_NOTE,                                                                         \
      "@modelcontextprotocol/client 的 Client 与 StreamableHTTPClientTransport 选项；"             \
      "不需要 initialize 和会话。",                                                                \
      "Options of Client and StreamableHTTPClientTransport in @modelcontextprotocol/client; "      \
      "no initialize, no session.")                                                                \
    X(PAGE_ERAS, "协议代际", "Protocol eras")                                                      \
    X(PAGE_ERA_SESSION, "会话式（initialize，Mcp-Session-Id）",                                    \
      "session (initialize, Mcp-Session-Id)")                                                      \
    X(PAGE_ERA_STATELESS, "无状态（每个请求自带 _meta）",                                          \
      "stateless (_meta on every request)")                                                        \
    X(PAGE_COPY, "复制", "Copy")                                                                   \
    X(PAGE_COPIED, "已复制", "Copied")                                                             \
    X(PAGE_PARAMETERS, "输入参数", "Input")                                                        \
    X(PAGE_PARAM, "参数", "Parameter")                                                             \
    X(PAGE_TYPE, "类型", "Type")                                                                   \
    X(PAGE_REQUIRED, "必填", "Required")                                                           \
    X(PAGE_DESCRIPTION, "说明", "Description")                                                     \
    X(PAGE_NO_PARAMS, "无参数", "No parameters")                                                   \
    X(PAGE_OUTPUT, "输出结构", "Output schema")                                                    \
    X(PAGE_DEFINITIONS, "引用的定义", "Referenced definitions")                                    \
    X(PAGE_OTHER, "其他", "Other") /* the group of a tool without one */                           \
    X(PAGE_DEFAULT, "默认", "default")                                                             \
    X(PAGE_VALUES, "可选值", "one of")                                                             \
    X(PAGE_JSON_HINT,                                                                              \
      "同一地址以 Accept: application/json 请求即得到"                                   \
      "机器可读的 JSON（供 Agent 自举）。",                                                        \
      "The same address answers Accept: application/json with the machine-readable "               \
      "JSON (for agents to bootstrap).")                                                           \
    X(PAGE_YES, "是", "yes")                                                                       \
    X(PAGE_CONFIRM, "需由人确认", "A person confirms")                                             \
    X(INFO_CONFIRM,                                                                                \
      "本部署中，这些工具在执行前需要由人确认：MCP 客户端需声明 elicitation 能力"                  \
      "（2026-07-28 收到 input_required 后带着回答重试；2025-11-25 会话在调用的 SSE 流上收到 "     \
      "elicitation/create）；REST 返回 428 与确认令牌，确认后放在 X-OpenBKN-Confirmation 中重发。", \
      "In this deployment a person confirms these tools before they run: MCP clients must "        \
      "declare the elicitation capability (2026-07-28: answer the input_required result and "     \
      "retry; 2025-11-25 sessions: elicitation/create on the call's SSE stream); REST answers 428 " \
      "with a confirmation token to send back in X-OpenBKN-Confirmation once the person agreed.")  \
    X(PAGE_CONTENTS, "目录", "Contents")                                                           \
    X(PAGE_GATEWAY, "REST 与按需网关工具", "REST and gateway tools")                               \
    X(PAGE_GATEWAY_NOTE,                                                                           \
      "这些工具不在 tools/list 中：MCP 上用 search_capabilities 找到、用 execute_tool 调用；"      \
      "REST 上是 POST /kn/<工具名>。",                                                             \
      "No tools/list shows these: on MCP, find them with search_capabilities and run them with "   \
      "execute_tool; on REST, POST /kn/<tool>.")                                                   \
    /* the public shell of the page: a form for an access token */                                 \
    X(SHELL_INTRO,                                                                                 \
      "此目录列出本 MCP 端点的工具。请粘贴访问令牌后打开："                 \
      "令牌仅通过 Authorization 请求头发送，"                                           \
      "只保存在本页面中。",                                                                        \
      "This catalogue lists the tools of this MCP endpoint. Paste an access token to "             \
      "open it: it is sent in the Authorization header and kept in this page only.")               \
    X(SHELL_TOKEN, "访问令牌", "Access token")                                                     \
    X(SHELL_OPEN, "打开目录", "Open the catalogue")                                                \
    X(SHELL_REFUSED, "令牌未通过认证。", "The token was not accepted.")                            \
    X(SHELL_FORBIDDEN, "该令牌无权读取目录。", "This token may not read the catalogue.")           \
    /* error envelopes: next steps and the gateway's own error texts */                            \
    X(ERR_UPSTREAM_RETRY, "依赖服务暂时无法连接或响应超时，请稍候重试",                            \
      "The upstream service could not be reached or timed out; retry after a "                     \
      "short wait")                                                                                \
    X(ERR_UPSTREAM_BUSY, "依赖服务暂时不可用，请稍候重试",                                         \
      "The upstream service is temporarily unavailable; retry after a short "                      \
      "wait")                                                                                      \
    X(ERR_UPSTREAM_SAYS, "%s（依赖服务：%s）", "%s (upstream: %s)")                                \
    X(ERR_PERMISSION_NAMED, "请向管理员申请所缺的权限（%s），获批后重试",                          \
      "Ask an administrator for the missing permission (%s), then call again "                     \
      "once it is granted")                                                                        \
    X(ERR_PERMISSION_ON, "「%s」的 %s 权限", "%s: %s")                                           \
    X(ERR_CHECK_SCHEMA_ID,                                                                         \
      "请用 search_schema 或 get_object_types 确认 %s「%s」是否存在，"                 \
      "再用正确的 ID 重试",                                                                        \
      "Check %s '%s' with search_schema or get_object_types, then call again "                     \
      "with a valid id")                                                                           \
    X(ERR_CHECK_KN_ID,                                                                             \
      "请用 list_knowledge_networks 确认知识网络「%s」是否存在，再用正确的 "   \
      "ID 重试",                                                                                   \
      "Check knowledge network '%s' with list_knowledge_networks, then call "                      \
      "again with a valid id")                                                                     \
    X(ERR_CHECK_EXECUTION_ID,                                                                      \
      "请用 list_action_executions 列出知识网络「%s」的行动执行，确认执行「%s」是否存在，"         \
      "再用正确的 execution_id 重试",                                                              \
      "List the action executions of knowledge network '%s' with list_action_executions to "       \
      "check execution '%s', then call again with a valid execution_id")                           \
    X(ERR_CHECK_RELATION_TYPE,                                                                     \
      "请用 get_relation_types 查看知识网络「%s」的关系类，确认所用的 relation_type_id 后重试",    \
      "Look up the relation types of knowledge network '%s' with get_relation_types, check the "   \
      "relation_type_id used, then call again")                                                    \
    X(ERR_CHECK_SKILL_ID,                                                                          \
      "请用 list_skills 确认技能「%s」是否存在，再用正确的 skill_id 重试",                         \
      "Check skill '%s' with list_skills, then call again with a valid skill_id")                  \
    X(ERR_CHECK_SKILL_FILE,                                                                        \
      "请用 get_skill_content 查看技能「%s」的 files，确认文件「%s」的路径后重试",                 \
      "Look up the files of skill '%s' with get_skill_content, check the path '%s', then call "    \
      "again")                                                                                     \
    X(ERR_CHECK_RESOURCE_ID,                                                                       \
      "请用 list_resources 确认数据资源「%s」是否存在，再用正确的 resource_id 重试",               \
      "Check data resource '%s' with list_resources, then call again with a valid resource_id")    \
    X(ERR_LIST_RESOURCES, "请用 list_resources 确认所引用的数据资源 ID 后重试",                   \
      "Check the ids of the data resources used with list_resources, then call again")             \
    X(ERR_ORIGIN_SOLUTION,                                                                         \
      "请从允许的来源（Origin，见 security.allowed_origins）发送请求，或不带 Origin 请求头",       \
      "Send the request from an allowed Origin (security.allowed_origins), or without an Origin "  \
      "header")                                                                                    \
    X(ERR_INCIDENT_SOLUTION, "请将事件编号（incident_id）告知管理员；重试无效",                    \
      "Report the incident_id to an administrator; a retry will not help")                         \
    X(ERR_OUTPUT_TOO_LARGE, "工具结果过大", "Tool result too large")                               \
    X(ERR_OUTPUT_TOO_LARGE_SOLUTION, "请缩小查询范围（更小的 limit 或更少的字段）后重试",          \
      "Narrow the request (a smaller limit or fewer fields) and retry")                            \
    X(ERR_NO_SUCH_TOOL, "工具不存在：%s", "No such tool: %s")                                      \
    X(ERR_NO_SUCH_TOOL_SOLUTION,                                                                   \
      "请按 search_capabilities 结果中一项的标识调用：kind=tool 传 tool_id；function、mcp_tool "    \
      "另传 toolbox_id 与 kn_id；skill 传 skill_id。不传 kn_id 时找不到知识网络挂载的能力",        \
      "Call with the ids of an entry search_capabilities returned: tool_id for kind=tool; also "   \
      "toolbox_id and kn_id for function and mcp_tool; skill_id for a skill. Without kn_id no "    \
      "capability the knowledge network mounts is found")                                          \
    X(ERR_INPUT_SCHEMA, "请按工具的输入模式（inputSchema）修正 details 中列出的参数后重试",        \
      "Fix the arguments listed in details to match the tool's input schema, "                     \
      "then call again")                                                                           \
    /* bkn_context refusals (guard.c) and the call's lifecycle refusals (flow.c) */                \
    X(GUARD_NOT_OBJECT, "bkn_context 必须是对象 {conversation_id, interaction_id}",                \
      "bkn_context must be an object {conversation_id, interaction_id}")                           \
    X(GUARD_UNKNOWN_FIELD,                                                                         \
      "bkn_context 含有不支持的字段「%.60s」（允许：conversation_id、"              \
      "interaction_id、parent_operation_id、causation_event_ids、"                              \
      "business_refs）",                                                                           \
      "bkn_context contains an unsupported field '%.60s' (allowed: "                               \
      "conversation_id, interaction_id, parent_operation_id, "                                     \
      "causation_event_ids, business_refs)")                                                       \
    X(GUARD_CONVERSATION_REQUIRED,                                                                 \
      "缺少 conversation_id：请先调用 bkn_start_interaction，"                             \
      "并传入它返回的两个 ID",                                                                     \
      "conversation_id is required")                                                               \
    X(GUARD_INTERACTION_REQUIRED,                                                                  \
      "缺少 interaction_id：请调用 bkn_start_interaction 开始本轮交互",                            \
      "interaction_id is required")                                                                \
    X(GUARD_ID_NOT_STRING, "%s 必须是字符串", "%s must be a string")                               \
    X(GUARD_ID_BAD, "%s 必须是非空 ID，最多 %zu 个字符",                                           \
      "%s must be a non-empty id of at most %zu characters")                                       \
    X(GUARD_CAUSATION_ARRAY, "causation_event_ids 必须是最多 64 个字符串的数组",                   \
      "causation_event_ids must be an array of at most 64 strings")                                \
    X(GUARD_CAUSATION_EMPTY, "causation_event_ids 的元素必须是非空字符串",                         \
      "causation_event_ids must hold non-empty strings")                                           \
    X(GUARD_REF_AT, "business_refs[%zu]：%s", "business_refs[%zu]: %s")                            \
    X(GUARD_REFS_ARRAY, "business_refs 必须是数组", "business_refs must be an array")              \
    X(GUARD_REFS_MAX, "business_refs 最多 64 项", "at most 64 business_refs are allowed")          \
    X(GUARD_REF_OBJECT, "每个 business ref 必须是对象", "each business ref must be an object")     \
    X(GUARD_REF_FIELD, "不支持的字段「%.60s」（允许：ref_type、ref_id、version）",                 \
      "unsupported field '%.60s' (allowed: ref_type, ref_id, version)")                            \
    X(GUARD_REF_VERSION_TYPE, "version 必须是字符串", "version must be a string")                  \
    X(GUARD_REF_VERSION_LONG, "version 不能超过 128 个字符",                                       \
      "version is longer than 128 characters")                                                     \
    X(GUARD_REF_TYPE, "未知的 ref_type", "unknown ref_type")                                       \
    X(GUARD_REF_ID_TYPE, "ref_id 必须是字符串", "ref_id must be a string")                         \
    X(GUARD_REF_ID_LONG, "ref_id 不能超过 512 个字符", "ref_id is longer than 512 characters")     \
    X(GUARD_REF_ID_EMPTY_SEGMENT, "ref_id 含有空段", "ref_id has an empty segment")                \
    X(GUARD_REF_ID_PREFIX, "ref_id 必须以「%s:」开头", "ref_id must start with '%s:'")             \
    X(GUARD_REF_ID_KN, "ref_id 必须指向当前知识网络「%s」",                                        \
      "ref_id must name the current knowledge network '%s'")                                       \
    X(GUARD_REF_ID_SEGMENTS, "ref_id 至少需要 %d 个以「:」分隔的段",                               \
      "ref_id needs at least %d ':'-separated segments")                                           \
    X(TRACE_CORE_REFUSED, "BKN Trace Core 拒绝了该请求（%s）", "BKN Trace Core refused the request (%s)") \
    X(FLOW_TRACE_UNAVAILABLE, "BKN Trace Core 暂时不可用，本次请求未执行",                         \
      "BKN Trace Core is temporarily unavailable")                                                 \
    X(FLOW_TRACE_NOT_INSTALLED, "本部署未配置 BKN Trace Core：请去掉 bkn_context 后调用",          \
      "BKN Trace Core is not configured for this deployment")                                      \
    X(FLOW_INTERACTION_FOREIGN, "该交互不属于此会话：请使用 bkn_start_interaction 返回的成对 ID",  \
      "interaction does not belong to conversation")                                               \
    X(FLOW_INTERACTION_TERMINAL, "该交互已是 %s 状态：请用 bkn_start_interaction 开始新的交互",    \
      "the interaction is %s; start a new interaction")                                            \
    X(FLOW_RECEIPT_PENDING, "另一次调用正在执行同一操作：请稍后用相同参数重试",                    \
      "another call is executing this operation; retry the same call later")                       \
    /* idempotency: an error stored as a call's outcome, replayed to a retry of the             \
     * same invocation id (it can never turn into another answer under that id) */                \
    X(REPLAYED_ERROR_READ,                                                                         \
      "这个 invocation id 的调用已以此错误结束，重试同一 ID 只会重复这个错误："   \
      "该工具只读取数据，请换一个新的 invocation id 重新调用。",                                  \
      "The call with this invocation id already ended with this error, and retrying the "         \
      "same id only repeats it. The tool only reads data: call it again with a new "              \
      "invocation id.")                                                                            \
    X(REPLAYED_ERROR_OTHER,                                                                        \
      "这个 invocation id 的调用已以此错误结束，重试同一 ID 只会重复这个错误。"   \
      "它可能已经产生了效果：请先确认它做了什么，再换一个新的 invocation id 调用。",  \
      "The call with this invocation id already ended with this error, and retrying the "         \
      "same id only repeats it. It may have taken effect: check what it did before "              \
      "running it again with a new invocation id.")                                                \
    X(FLOW_RECORD_UNREADABLE, "无法读取已保存的结果：请稍后重试",                                  \
      "the stored result could not be read; retry later")                                          \
    X(FLOW_IDEM_CONFLICT, "该调用 ID 已用于不同的输入：请为新的调用使用新的 ID",                   \
      "this invocation id was already used with different input; use a new id for a new call")     \
    X(FLOW_IDEM_IN_PROGRESS, "相同的调用仍在执行：请稍后重试",                                     \
      "the same call is still running; retry it later")                                            \
    X(FLOW_IDEM_UNAVAILABLE, "幂等记录存储暂不可用：请稍后重试该调用",                             \
      "the idempotency store is unavailable; retry the call")                                      \
    X(FLOW_CONVERSATION_REQUIRED,                                                                  \
      "需要 bkn_context {conversation_id, interaction_id}：请先调用 "                       \
      "bkn_start_interaction",                                                                     \
      "bkn_context {conversation_id, interaction_id} from "                                        \
      "bkn_start_interaction is required")

/* The one required_action vocabulary of every error on every surface (docs/errors.md
 * lists the same tokens; scripts/check-error-codes compares): X(token, solution in
 * zh-CN, in en-US). The solution is the step in words, for an error whose writer has
 * none more concrete. */
#define CL_ACTIONS(X)                                                                              \
    X(fix_arguments, "请按 details 修正参数后重试", "Fix the arguments details names, then call again") \
    X(fix_request, "请按 details 修改请求本身（方法、请求头、大小或编码）后重试",                  \
      "Change the request itself (method, headers, size or encoding) as details says")             \
    X(refresh_token, "请获取新的访问令牌（Bearer token）后重试",                                   \
      "Obtain a fresh access token, then call again")                                              \
    X(request_permission, "请向管理员申请所缺的权限，获批后重试",                                  \
      "Ask an administrator for the missing permission, then call again once it is granted")       \
    X(check_ids, "请确认调用中的 ID 存在且属于你，再用正确的 ID 重试",                             \
      "Check that the ids of the call exist and are yours, then call again with valid ids")        \
    X(resolve_conflict, "请检查请求是否与已有数据冲突", "Check whether the request conflicts with existing data") \
    X(retry_later, "请等待 retry_after_ms 毫秒后用相同参数重试",                                   \
      "Wait retry_after_ms, then send the same call again")                                        \
    X(contact_administrator, "调用方无法自行解决：请将 bkn-request-id 告知管理员",                 \
      "Nothing the caller can change: report the bkn-request-id to an administrator")              \
    X(use_next_call, "请改为调用 details.next_call 指明的工具", "Make the call details.next_call names instead") \
    X(bkn_start_interaction,                                                                       \
      "请调用 bkn_start_interaction 开始本轮交互，并在 bkn_context 中传入它返回的 "                \
      "conversation_id 与 interaction_id",                                                         \
      "Call bkn_start_interaction to start the turn and pass the conversation_id and "             \
      "interaction_id it returns in bkn_context")                                                  \
    X(bkn_finish_interaction,                                                                      \
      "请先用 bkn_finish_interaction 结束该会话中进行中的交互（current_interaction_id），再开始新的交互", \
      "Finish the conversation's active interaction (current_interaction_id) with "                \
      "bkn_finish_interaction, then start the next one")                                           \
    X(create_conversation, "请先创建会话与交互，并在 bkn_context 中传入两者的 ID",                 \
      "Create a conversation and an interaction first, and pass both ids in bkn_context")          \
    X(start_interaction, "请开始新的交互，并在 bkn_context 中传入它的 ID",                         \
      "Start a new interaction and pass its ids in bkn_context")                                   \
    X(correct_bkn_context, "请按 description 修正 bkn_context 后重试",                             \
      "Correct bkn_context as the description says, then call again")                              \
    X(correct_business_refs, "请按 description 修正 bkn_context.business_refs 后重试",             \
      "Correct bkn_context.business_refs as the description says, then call again")                \
    X(fix_host_lifecycle_hint, "请修正宿主提供的调用 ID 或会话键（可打印 ASCII，不含空格，最多 256 字节）", \
      "Fix the host's invocation id or conversation key (printable ASCII without spaces, at "      \
      "most 256 bytes)")                                                                           \
    X(use_new_idempotency_key, "请为新的调用使用新的调用 ID（openbkn.ai/client-invocation-id）",   \
      "Use a new invocation id (openbkn.ai/client-invocation-id) for a new call")                  \
    X(read_outcome, "该调用已执行过：请按 details.next_call 读取它的结果，不要再次执行",           \
      "The call already ran: read its outcome with details.next_call instead of running it again") \
    X(reuse_authoritative_interaction,                                                             \
      "该交互已结束（见 current_status）：不要再结束它；下一轮请用 bkn_start_interaction 开始",    \
      "The interaction has ended (current_status): do not finish it again; start the next turn "   \
      "with bkn_start_interaction")                                                                \
    X(confirm_by_person,                                                                           \
      "本部署要求由人确认此调用：请使用能发起确认的宿主（MCP elicitation），或在 REST 上回传确认令牌", \
      "This deployment requires a person to confirm the call: use a host that can ask one (MCP "   \
      "elicitation), or on REST send the confirmation token back once the person agreed")          \
    X(respect_decline, "用户拒绝了此调用：除非用户再次要求，不要重复它",                           \
      "The person said no: do not repeat the call unless the person asks for it again")

/* The codes Trace Core is known to send, mapped to the catalogue (its own message is
 * kept in details.message): X(code, required_action on MCP, on REST, description in
 * zh-CN, in en-US). An unknown code keeps Trace Core's required_action when it is a
 * token of CL_ACTIONS (else contact_administrator) and reads TRACE_CORE_REFUSED. */
#define CL_TRACE_CODES(X)                                                                          \
    X(conversation_required, "bkn_start_interaction", "create_conversation",                       \
      "需要会话：请先开始交互", "A conversation is required")                                      \
    X(conversation_not_found, "bkn_start_interaction", "create_conversation", "会话不存在",        \
      "The conversation does not exist")                                                           \
    X(conversation_closed, "bkn_start_interaction", "create_conversation", "会话已关闭",           \
      "The conversation is closed")                                                                \
    X(conversation_expired, "bkn_start_interaction", "create_conversation", "会话已过期",          \
      "The conversation has expired")                                                              \
    X(conversation_owner_mismatch, "bkn_start_interaction", "create_conversation",                 \
      "该会话属于其他调用方", "The conversation belongs to another caller")                        \
    X(interaction_required, "bkn_start_interaction", "start_interaction", "需要有效的交互",        \
      "A valid interaction is required")                                                           \
    X(interaction_in_progress, "bkn_finish_interaction", "resolve_conflict",                       \
      "该会话已有进行中的交互", "The conversation already has an active interaction")              \
    X(interaction_terminal, "bkn_start_interaction", "start_interaction", "该交互已结束",          \
      "The interaction has ended")                                                                 \
    X(agent_name_conflict, "fix_arguments", "fix_arguments",                                       \
      "该会话已绑定另一个 agent_name：请使用该会话原来的 agent_name，或开始新会话",                \
      "The conversation is pinned to another agent_name: use its agent_name, or start a new "      \
      "conversation")                                                                              \
    X(agent_name_invalid, "fix_arguments", "fix_arguments", "agent_name 不合法",                   \
      "agent_name is not valid")                                                                   \
    X(operation_required, "contact_administrator", "contact_administrator",                        \
      "BKN Trace Core 未能记录该操作", "BKN Trace Core could not record the operation")            \
    X(idempotency_conflict, "use_new_idempotency_key", "use_new_idempotency_key",                  \
      "该调用 ID 已用于不同的输入", "The invocation id was already used with different input")     \
    X(receipt_pending, "retry_later", "retry_later", "另一次调用正在执行同一操作",                 \
      "Another call is executing this operation")                                                  \
    X(terminal_conflict, "reuse_authoritative_interaction", "reuse_authoritative_interaction",     \
      "该交互已以另一种结果结束", "Another terminal outcome already won")                          \
    X(closure_manifest_invalid, "fix_arguments", "fix_arguments", "结束交互的内容不完整",          \
      "The closing of the interaction is incomplete")                                              \
    X(resource_not_disclosed, "check_ids", "check_ids", "在你的范围内找不到该会话或交互",          \
      "The conversation or interaction was not found in your scope")                               \
    X(permission_denied, "request_permission", "request_permission", "BKN Trace Core 拒绝了该调用方", \
      "BKN Trace Core refused the caller")                                                         \
    X(trace_core_unavailable, "retry_later", "retry_later", "BKN Trace Core 暂时不可用",           \
      "BKN Trace Core is temporarily unavailable")                                                 \
    X(authorization_unavailable, "retry_later", "retry_later", "BKN Trace Core 暂时无法校验权限",  \
      "BKN Trace Core cannot check authorization right now")                                       \
    X(internal_error, "contact_administrator", "contact_administrator", "BKN Trace Core 内部错误", \
      "BKN Trace Core failed internally")

/* The gateway's own free-text error details (the HTTP layer, the connection guard,
 * authentication, routing, REST bodies) in every language but en-US, keyed by the
 * English text the code writes: X(kind, en-US, zh-CN); kind e = the whole text, p = a
 * prefix whose rest follows (a JSON parser message in the rest is translated too:
 * CL_JSON_DETAILS), d = a prefix whose rest is dropped. errenv.c translates every details text it writes. */
#define CL_DETAILS(X)                                                                      \
    X(e, "no such route", "没有这个路由") \
    X(e, "missing bearer token", "缺少 Bearer 访问令牌") \
    X(e, "token is invalid", "访问令牌无效") \
    X(e, "api key is invalid", "API Key 无效") \
    X(e, "admin token is invalid", "管理令牌无效") \
    X(e, "the admin listener needs a bearer token", "管理端口需要 Bearer 令牌") \
    X(e, "token introspection is unavailable", "令牌校验服务暂不可用") \
    X(p, "introspection endpoint unreachable: ", "令牌校验服务无法连接：") \
    X(p, "introspection endpoint returned HTTP ", "令牌校验服务返回 HTTP ") \
    X(e, "introspection endpoint is not configured", "未配置令牌校验服务") \
    X(e, "introspection request could not be started", "无法发起令牌校验请求") \
    X(e, "undecodable introspection response", "令牌校验服务的应答无法解析") \
    X(e, "introspection response field too long", "令牌校验服务的应答字段过长") \
    X(e, "Origin or Host header not allowed (DNS rebinding protection)", "不允许的 Origin 或 Host 请求头（DNS 重绑定防护）") \
    X(e, "Origin or Host header not allowed on the admin listener", "管理端口不允许该 Origin 或 Host 请求头") \
    X(e, "use POST on /admin/reload", "/admin/reload 只接受 POST") \
    X(e, "use GET on the resource metadata", "资源元数据只接受 GET") \
    X(e, "use POST on /kn routes", "/kn 路由只接受 POST") \
    X(e, "use POST on this route", "此路由只接受 POST") \
    X(e, "use POST, GET or DELETE on the MCP endpoint", "MCP 端点只接受 POST、GET 或 DELETE") \
    X(e, "malformed query string", "查询字符串格式错误") \
    X(e, "Content-Type must be application/json", "Content-Type 必须是 application/json") \
    X(p, "invalid JSON body: ", "请求体不是合法的 JSON：") \
    X(e, "the body must be a JSON object of tool arguments", "请求体必须是工具参数组成的 JSON 对象") \
    X(p, "invalid response_format: ", "response_format 无效：") \
    X(e, "connection limit reached (limits.max_connections)", "连接数已达上限（limits.max_connections）") \
    X(d, "this principal already has ", "该调用方进行中的调用已达上限（limits.max_calls_per_principal）") \
    X(e, "a HEAD request cannot carry a body", "HEAD 请求不能带请求体") \
    X(e, "an HTTP/1.1 request needs a Host header", "HTTP/1.1 请求必须带 Host 请求头") \
    X(e, "bare CR after chunk data", "分块数据后出现单独的 CR") \
    X(e, "bare CR in a chunk size line", "分块大小行中出现单独的 CR") \
    X(e, "bare CR in the header block", "请求头中出现单独的 CR") \
    X(e, "both Transfer-Encoding and Content-Length", "同时带有 Transfer-Encoding 与 Content-Length") \
    X(e, "chunk data not followed by CRLF", "分块数据后缺少 CRLF") \
    X(e, "chunk extensions are not accepted", "不接受分块扩展") \
    X(e, "expectation not supported (only 100-continue)", "不支持该 Expect（只支持 100-continue）") \
    X(e, "invalid character in a header value", "请求头的值中有非法字符") \
    X(e, "invalid character in the request target", "请求目标中有非法字符") \
    X(e, "malformed Content-Length", "Content-Length 格式错误") \
    X(e, "malformed HTTP version", "HTTP 版本格式错误") \
    X(e, "malformed authority in the request target", "请求目标中的主机部分格式错误") \
    X(e, "malformed chunk size", "分块大小格式错误") \
    X(e, "malformed header block", "请求头格式错误") \
    X(e, "malformed header field name", "请求头名称格式错误") \
    X(e, "malformed percent-encoding in the request target", "请求目标中的百分号编码格式错误") \
    X(e, "malformed request line (one space between method, target and version)", "请求行格式错误（方法、目标与版本之间各一个空格）") \
    X(e, "malformed request line", "请求行格式错误") \
    X(e, "malformed request method", "请求方法格式错误") \
    X(e, "malformed request target", "请求目标格式错误") \
    X(p, "more than one ", "请求头重复：") \
    X(e, "obsolete line folding is not accepted", "不接受已废弃的请求头折行") \
    X(e, "request body exceeds limits.max_body_bytes", "请求体超过 limits.max_body_bytes") \
    X(e, "chunked body framing exceeds limits.max_body_bytes", "分块请求体的分帧开销超过 limits.max_body_bytes") \
    X(e, "request header block exceeds limits.max_header_bytes", "请求头超过 limits.max_header_bytes") \
    X(e, "request line exceeds limits.max_header_bytes", "请求行超过 limits.max_header_bytes") \
    X(e, "request method not implemented", "不支持该请求方法") \
    X(e, "trailer fields are not accepted", "不接受尾部字段") \
    X(e, "transfer coding not implemented (only chunked)", "不支持该传输编码（只支持 chunked）") \
    X(e, "whitespace between a header name and the colon", "请求头名称与冒号之间有空白") \
    X(e, "HTTP version not supported (HTTP/1.1 or HTTP/1.0)", "不支持该 HTTP 版本（支持 HTTP/1.1 或 HTTP/1.0）") \
    X(e, "HTTP/0.9 request lines are not supported: give the HTTP version", "不支持 HTTP/0.9 请求行：请写明 HTTP 版本") \

/* The JSON parser's messages ("<message> at byte N"): X(en-US, zh-CN). */
#define CL_JSON_DETAILS(X) \
    X("byte order mark not allowed", "不允许字节序标记（BOM）") \
    X("control character in string", "字符串中有控制字符") \
    X("expected ',' or ']'", "应为「,」或「]」") \
    X("expected ',' or '}'", "应为「,」或「}」") \
    X("expected ':'", "应为「:」") \
    X("expected digit after decimal point", "小数点后应为数字") \
    X("expected digit in exponent", "指数中应为数字") \
    X("invalid UTF-8 in string", "字符串中有非法的 UTF-8") \
    X("invalid \\u escape", "非法的 \\u 转义") \
    X("invalid escape in string", "字符串中有非法的转义") \
    X("invalid literal", "非法的字面量") \
    X("invalid number", "非法的数字") \
    X("leading zero in number", "数字有前导零") \
    X("lone high surrogate \\u escape", "孤立的高位代理 \\u 转义") \
    X("lone low surrogate \\u escape", "孤立的低位代理 \\u 转义") \
    X("nesting too deep", "嵌套过深") \
    X("unexpected character", "意外的字符") \
    X("unexpected end of input", "输入意外结束") \
    X("unterminated array", "数组未结束") \
    X("unterminated object", "对象未结束") \
    X("unterminated string", "字符串未结束") \
    X("trailing characters after JSON value", "JSON 值之后还有多余字符") \

typedef enum {
#define CL_TEXT_ENUM(id, zh, en) TEXT_##id,
    CL_TEXTS(CL_TEXT_ENUM)
#undef CL_TEXT_ENUM
        TEXT_COUNT
} text_id;

/* "zh-CN" / "en-US" (out of range -> "zh-CN"). */
const char *lang_tag(lang_id l);

/* The text of id in lang (static; never NULL). */
const char *text_get(text_id id, lang_id lang);

/* The entry of an HTTP status; a status without one reads as 400 when 4xx and
 * 500 otherwise. name, desc and sol are static. */
void text_status(int status, lang_id lang, const char **name, const char **desc, const char **sol);

/* The next step after an error of status (CL_STATUS_NEXT): *retryable, *retry_after_ms
 * (0 when not retryable) and *action (static token). */
void text_status_next(int status, int *retryable, int *retry_after_ms, const char **action);

/* The solution text of a required_action token (CL_ACTIONS) in lang, or NULL for a
 * token outside the vocabulary. */
const char *text_action(const char *token, lang_id lang);

/* details: a details text the gateway wrote (in English). Returns the text in lang:
 * itself for en-US or when the catalogue has none (CL_DETAILS), else the translation
 * written into out (outlen bytes, cut to fit; out is then returned). */
const char *text_detail(const char *details, lang_id lang, char *out, size_t outlen);

/* A code Trace Core sends (CL_TRACE_CODES): 1 with its description in lang and its
 * required_action on MCP and on REST, else 0. */
int text_trace_code(const char *code, lang_id lang, const char **desc, const char **mcp_action,
                    const char **rest_action);

/* Lua module `cltexts` (texts_lua.c): a fresh table
 *   { languages = {"zh-CN","en-US"},
 *     status = { [400] = { name = "BadRequest", ["zh-CN"] = {desc, sol}, ["en-US"] = {...} },
 * ...}, text = { retry_later = { ["zh-CN"] = "...", ["en-US"] = "..." }, ... }, next = {
 * [400] = { retryable = false, required_action = "fix_arguments" }, [503] = { retryable =
 * true, retry_after_ms = 1000, required_action = "retry_later" }, ... } }. */
struct lua_State;
int luaopen_cltexts(struct lua_State *L);

#endif
