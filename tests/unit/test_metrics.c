/* Unit tests of metrics.c: series bookkeeping, cumulative histogram buckets, label
 * escaping and the Prometheus text format 0.0.4 lines. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "metrics.h"

static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    const char *p = text;
    while ((p = strstr(p, line)) != NULL) {
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return 1;
        p += n;
    }
    return 0;
}

int main(void)
{
    metrics *m = metrics_new();
    buf b = BUF_INIT;

    metrics_request(m, "/mcp", 200);
    metrics_request(m, "/mcp", 200);
    metrics_request(m, "/kn", 500);
    metrics_tool_call(m, "t1", "ok", 3, 1, 0, 2);              /* 0.003 s: first bucket */
    metrics_tool_call(m, "t1", "ok", 120, 20, 100, 0);         /* 0.12 s: le=0.25 */
    metrics_tool_call(m, "t1", "tool_raised", 40000, 5, 0, 0); /* past every bucket */
    metrics_tool_call(m, "t\"2\\\n", NULL, 0, 0, 0, 0);
    metrics_upstream_error(m, "t1");
    metrics_render(m, &b);

    CHECK(has_line(b.data, "# TYPE cl_http_requests_total counter"));
    CHECK(has_line(b.data, "cl_http_requests_total{route=\"/mcp\",status=\"200\"} 2"));
    CHECK(has_line(b.data, "cl_http_requests_total{route=\"/kn\",status=\"500\"} 1"));
    CHECK(has_line(b.data, "cl_tool_calls_total{tool=\"t1\",outcome=\"ok\"} 2"));
    CHECK(has_line(b.data, "cl_tool_calls_total{tool=\"t1\",outcome=\"tool_raised\"} 1"));
    /* escaped label values; a missing outcome is "unknown" */
    CHECK(has_line(b.data, "cl_tool_calls_total{tool=\"t\\\"2\\\\\\n\",outcome=\"unknown\"} 1"));
    CHECK(has_line(b.data, "# TYPE cl_tool_call_duration_seconds histogram"));
    CHECK(has_line(b.data, "cl_tool_call_duration_seconds_bucket{tool=\"t1\",le=\"0.005\"} 1"));
    CHECK(has_line(b.data, "cl_tool_call_duration_seconds_bucket{tool=\"t1\",le=\"0.1\"} 1"));
    CHECK(has_line(b.data, "cl_tool_call_duration_seconds_bucket{tool=\"t1\",le=\"0.25\"} 2"));
    CHECK(has_line(b.data, "cl_tool_call_duration_seconds_bucket{tool=\"t1\",le=\"30\"} 2"));
    CHECK(has_line(b.data, "cl_tool_call_duration_seconds_bucket{tool=\"t1\",le=\"+Inf\"} 3"));
    CHECK(has_line(b.data, "cl_tool_call_duration_seconds_count{tool=\"t1\"} 3"));
    CHECK(has_line(b.data, "cl_tool_call_duration_seconds_sum{tool=\"t1\"} 40.123"));
    CHECK(has_line(b.data, "cl_tool_upstream_seconds_bucket{tool=\"t1\",le=\"0.1\"} 3"));
    CHECK(has_line(b.data, "cl_tool_trace_core_seconds_count{tool=\"t1\"} 3"));
    CHECK(has_line(b.data, "cl_tool_trace_core_seconds_sum{tool=\"t1\"} 0.002"));
    CHECK(has_line(b.data, "cl_upstream_errors_total{tool=\"t1\"} 1"));

    buf_reset(&b);
    metrics_write_header(&b, "x_total", "counter", "Things.");
    metrics_write_sample(&b, "x_total", "", 7);
    metrics_write_sample(&b, "x_ratio", "a=\"b\"", 0.25);
    CHECK_STR(b.data, "# HELP x_total Things.\n# TYPE x_total counter\nx_total 7\n"
                      "x_ratio{a=\"b\"} 0.25\n");

    buf_free(&b);
    metrics_free(m);
    return CHECK_DONE();
}
