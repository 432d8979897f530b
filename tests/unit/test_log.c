/* log: each line is one valid JSON object with ts, worker, level, role and msg in
 * front, members in the order added, and every string escaped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "json.h"
#include "log.h"

static int g_pipe[2];

/* Everything written since the last call, NUL-terminated (a static buffer). */
static char *drain(void)
{
    static char text[65536];
    ssize_t n = read(g_pipe[0], text, sizeof text - 1);
    text[n > 0 ? n : 0] = '\0';
    return text;
}

/* The one line written since the last call, parsed; checks it is exactly one line. */
static json_value *one_line(char *text)
{
    size_t len = strlen(text);
    CHECK(len > 1 && text[len - 1] == '\n');
    CHECK(strchr(text, '\n') == text + len - 1);
    char err[200] = "";
    json_value *v = json_parse(text, len ? len - 1 : 0, NULL, err, sizeof err);
    if (!v)
        fprintf(stderr, "not JSON (%s): %s\n", err, text);
    CHECK(v != NULL);
    return v;
}

static void test_order_and_types(void)
{
    log_line *l = log_begin(LOG_WARN, "operation finalize failed");
    log_str(l, "request_id", "req_1");
    log_int(l, "trace_status", 503);
    log_bool(l, "sse", 1);
    log_str(l, "absent", NULL);
    log_strn(l, "principal", "0123456789abcdef0123", 16);
    log_end(l);
    char *text = drain();
    CHECK(strncmp(text, "{\"ts\":", 6) == 0);
    CHECK(strstr(text, ",\"level\":\"warn\",\"msg\":\"operation finalize failed\","
                       "\"request_id\":\"req_1\",\"trace_status\":503,\"sse\":true,"
                       "\"principal\":\"0123456789abcdef\"}\n") != NULL);
    CHECK(strstr(text, "absent") == NULL);
    CHECK(strstr(text, "worker") == NULL);
    CHECK(strstr(text, "role") == NULL);
    json_value *v = one_line(text);
    /* RFC 3339, UTC, milliseconds */
    const char *ts = json_get_string(v, "ts");
    CHECK(ts != NULL && strlen(ts) == 24 && ts[4] == '-' && ts[10] == 'T' && ts[19] == '.' &&
          ts[23] == 'Z' && strncmp(ts, "20", 2) == 0);
    json_free(v);
}

static void test_escaping(void)
{
    /* a quote, a backslash, control characters, a newline, a cut UTF-8 sequence */
    const char *nasty = "say \"hi\"\\ \x01\t\nend \xe4\xbd";
    log_line *l = log_begin(LOG_ERROR, "msg with \"quotes\"\n");
    log_str(l, "error", nasty);
    log_str(l, "key \"odd\"", "v");
    log_end(l);
    char *text = drain();
    json_value *v = one_line(text);
    CHECK_STR(json_get_string(v, "msg"), "msg with \"quotes\"\n");
    CHECK_STR(json_get_string(v, "error"), "say \"hi\"\\ \x01\t\nend ");
    CHECK_STR(json_get_string(v, "key \"odd\""), "v");
    CHECK_STR(json_get_string(v, "level"), "error");
    json_free(v);
}

static void test_worker_and_role(void)
{
    log_set_worker(3);
    log_end(log_begin(LOG_INFO, "listening"));
    char *text = drain();
    CHECK(strstr(text, ",\"worker\":3,\"level\":\"info\",\"msg\":\"listening\"}") != NULL);
    json_free(one_line(text));
    log_set_worker(-1);
    log_set_role("master");
    log_line *l = log_begin(LOG_INFO, "worker ready");
    log_int(l, "worker", 1);
    log_end(l);
    text = drain();
    CHECK(strstr(text, ",\"level\":\"info\",\"role\":\"master\",\"msg\":\"worker ready\","
                       "\"worker\":1}") != NULL);
    json_free(one_line(text));
    log_set_role(NULL);
}

static void test_values_and_nesting(void)
{
    const char *obj = "{\"ok\":false,\"errors\":[\"a.lua:1: x\"],\"n\":12}";
    json_value *reply = json_parse(obj, strlen(obj), NULL, NULL, 0);
    CHECK(reply != NULL);
    log_line *outer = log_begin(LOG_DEBUG, "reload");
    /* a line begun while another is open is its own */
    log_line *inner = log_begin(LOG_INFO, "inner");
    log_end(inner);
    json_free(one_line(drain()));
    log_str(outer, "trigger", "admin");
    log_members(outer, reply);
    log_value(outer, "copy", json_get(reply, "errors"));
    log_value(outer, "none", NULL);
    log_members(outer, json_get(reply, "errors")); /* not an object: nothing */
    log_end(outer);
    char *text = drain();
    CHECK(strstr(text, "\"level\":\"debug\",\"msg\":\"reload\",\"trigger\":\"admin\",\"ok\":false,"
                       "\"errors\":[\"a.lua:1: x\"],\"n\":12,\"copy\":[\"a.lua:1: x\"],"
                       "\"none\":null}\n") != NULL);
    json_free(one_line(text));
    json_free(reply);
}

static void test_levels(void)
{
    log_level lv = LOG_INFO;
    CHECK(log_level_parse("debug", &lv) == 0 && lv == LOG_DEBUG);
    CHECK(log_level_parse("warn", &lv) == 0 && lv == LOG_WARN);
    CHECK(log_level_parse("error", &lv) == 0 && lv == LOG_ERROR);
    CHECK(log_level_parse("info", &lv) == 0 && lv == LOG_INFO);
    CHECK(log_level_parse("fatal", &lv) < 0);
    CHECK(log_level_parse(NULL, &lv) < 0);
}

/* A fatal start-up error is a JSON line like the rest, its text (newlines and all) in
 * "error". */
static void test_fatal(void)
{
    log_fatal("cannot listen on %s: %s\n%s", "127.0.0.1:1", "Address in use", "next \"line\"");
    json_value *v = one_line(drain());
    CHECK_STR(json_get_string(v, "level"), "error");
    CHECK_STR(json_get_string(v, "msg"), "fatal");
    CHECK_STR(json_get_string(v, "error"),
              "cannot listen on 127.0.0.1:1: Address in use\nnext \"line\"");
    json_free(v);
}

int main(void)
{
    if (pipe(g_pipe) < 0)
        return 1;
    log_set_fd(g_pipe[1]);
    test_order_and_types();
    test_escaping();
    test_worker_and_role();
    test_values_and_nesting();
    test_levels();
    test_fatal();
    log_set_fd(2);
    return CHECK_DONE();
}
