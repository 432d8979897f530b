/* Unit tests of metrics.c: series bookkeeping, cumulative histogram buckets, label
 * escaping and the Prometheus text format 0.0.4 lines. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "metrics.h"
#include "mshare.h"

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
    buf_reset(&b);
    metrics_write_counter(&b, "y_total", "Ys.", 3);
    metrics_write_gauge(&b, "y_open", "Open Ys.", 2);
    CHECK_STR(b.data, "# HELP y_total Ys.\n# TYPE y_total counter\ny_total 3\n"
                      "# HELP y_open Open Ys.\n# TYPE y_open gauge\ny_open 2\n");

    /* several workers in one exposition: HELP/TYPE once, samples grouped by family
     * (histogram suffixes included), worker="k" first, other comments dropped */
    {
        const char *w0 = "# HELP a_total A.\n# TYPE a_total counter\na_total{r=\"x\"} 1\n"
                         "# HELP h_seconds H.\n# TYPE h_seconds histogram\n"
                         "h_seconds_bucket{le=\"+Inf\"} 2\nh_seconds_sum 0.5\nh_seconds_count 2\n"
                         "g 3\n";
        const char *w1 =
            "# a comment\n# HELP a_total A.\n# TYPE a_total counter\na_total{r=\"y\"} 4\n"
            "# HELP h_seconds H.\n# TYPE h_seconds histogram\nh_seconds_count 5\n";
        const char *texts[3] = {w0, NULL, w1};
        size_t lens[3] = {strlen(w0), 0, strlen(w1)};
        buf_reset(&b);
        metrics_merge_workers(texts, lens, 3, &b);
        CHECK_STR(b.data, "# HELP a_total A.\n# TYPE a_total counter\n"
                          "a_total{worker=\"0\",r=\"x\"} 1\na_total{worker=\"2\",r=\"y\"} 4\n"
                          "# HELP h_seconds H.\n# TYPE h_seconds histogram\n"
                          "h_seconds_bucket{worker=\"0\",le=\"+Inf\"} 2\n"
                          "h_seconds_sum{worker=\"0\"} 0.5\nh_seconds_count{worker=\"0\"} 2\n"
                          "h_seconds_count{worker=\"2\"} 5\n"
                          "g{worker=\"0\"} 3\n");
    }

    /* the process series */
    buf_reset(&b);
    metrics_write_process(&b);
    CHECK(strstr(b.data, "# TYPE process_cpu_seconds_total counter\n") != NULL);
    CHECK(strstr(b.data, "\nprocess_resident_memory_bytes ") != NULL);
    CHECK(strstr(b.data, "\nprocess_virtual_memory_bytes ") != NULL);
    CHECK(strstr(b.data, "\nprocess_open_fds ") != NULL);
    CHECK(strstr(b.data, "\nprocess_max_fds ") != NULL);

    /* the shared slots: what one publishes another reads; a long text is cut at a line */
    {
        mshare *sh = mshare_new(2, 256);
        buf r = BUF_INIT;
        CHECK(sh != NULL);
        CHECK(mshare_read(sh, 1, &r) == -1); /* never written */
        mshare_publish(sh, 1, "x 1\ny 2\n", 8);
        CHECK(mshare_read(sh, 1, &r) == 0);
        CHECK(r.len == 8 && !memcmp(r.data, "x 1\ny 2\n", 8));
        char big[400];
        memset(big, 'a', sizeof big);
        for (size_t i = 9; i < sizeof big; i += 10)
            big[i] = '\n';
        mshare_publish(sh, 0, big, sizeof big);
        buf_reset(&r);
        CHECK(mshare_read(sh, 0, &r) == 0);
        CHECK(r.len > 0 && r.len < 256 && r.data[r.len - 1] == '\n' && r.len % 10 == 0);
        CHECK(mshare_read(sh, 2, &r) == -1);
        buf_free(&r);
        mshare_free(sh);
    }

    buf_free(&b);
    metrics_free(m);
    return CHECK_DONE();
}
