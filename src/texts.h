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

typedef enum { LANG_ZH_CN = 0, LANG_EN_US = 1, LANG_COUNT = 2 } lang_id;

/* HTTP statuses the gateway answers with: status, name (the code's suffix in
 * "Public.<Name>"), description and solution in zh-CN and en-US. */
#define CL_STATUS_TEXTS(X)                                                                         \
    X(400, BadRequest, "参数错误", "Invalid parameters", "请检查参数是否正确",                     \
      "Please check if the parameters are correct")                                                \
    X(401, Unauthorized, "认证失败", "Authentication failed", "请联系管理员",                      \
      "Contact administrator")                                                                     \
    X(403, Forbidden, "权限错误", "Permission denied", "请联系管理员", "Contact administrator")    \
    X(404, NotFound, "对象不存在", "Resource not found", "请联系管理员", "Contact administrator")  \
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
    X(500, InternalServerError, "内部错误", "Internal server error", "请联系管理员",               \
      "Contact administrator")                                                                     \
    X(501, NotImplemented, "不支持的请求", "Not implemented", "请使用支持的请求方法与传输编码",    \
      "Use a supported method and transfer coding")                                                \
    X(502, BadGateway, "依赖服务不可用", "Upstream service unavailable", "请检查依赖服务是否可用", \
      "Check whether the upstream service is reachable")                                           \
    X(503, ServiceUnavailable, "服务不可用", "Service unavailable", "请稍后重试", "Retry later")   \
    X(504, GatewayTimeout, "依赖服务响应超时", "Upstream service timed out", "请稍后重试",         \
      "Retry later")                                                                               \
    X(505, HTTPVersionNotSupported, "不支持的 HTTP 版本", "HTTP version not supported",            \
      "请使用 HTTP/1.1", "Use HTTP/1.1")

/* Free-standing texts: X(ID, zh-CN, en-US). Keep each area's entries together. */
#define CL_TEXTS(X)                                                                                \
    /* generic next steps */                                                                       \
    X(CONTACT_ADMIN, "请联系管理员", "Contact administrator")                                      \
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
    X(RECEIPT_STATUS_COMPLETED, "状态：已完成", "status: completed")                               \
    X(RECEIPT_STATUS_FAILED, "状态：失败", "status: failed")

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

/* Lua module `cltexts` (texts_lua.c): a fresh table
 *   { languages = {"zh-CN","en-US"},
 *     status = { [400] = { name = "BadRequest", ["zh-CN"] = {desc, sol}, ["en-US"] = {...} }, ...},
 *     text = { retry_later = { ["zh-CN"] = "...", ["en-US"] = "..." }, ... } }. */
struct lua_State;
int luaopen_cltexts(struct lua_State *L);

#endif
