/* test_toonview: the token-saving view's texts against texts recorded on a corpus
 * (tests/fixtures/toonview/golden.json: results of the demo tools, the TOON fuzz
 * corpus and cases of repeated, reordered and nested keys), so a change made for
 * speed cannot move a byte: for each value, the REST text (always the view) and the
 * MCP text (the view or the compact JSON, whichever the token estimate prefers),
 * without and with the instance id rule; and toonview_render_take (the view made of
 * the tree's own values, the tree consumed) gives the same texts.
 *
 * `test_toonview gen FILE` prints the golden file for FILE (a JSON array of JSON
 * texts) with the code it is built from. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "json.h"
#include "toonview.h"
#include "util.h"

/* query_object_instance's rule (its toon_view omit_id) with a call's prefix */
static const toonview_omit RULE = {"datas", "_instance_id", "_instance_identity", "kn-ot-",
                                   5,       12,             18,                   6};

/* The view's text of v into out (rest or MCP), "" with rc -1 on failure; take: made
 * by toonview_render_take from a copy of v. */
static int render(buf *out, const json_value *v, int rest, int prefixed, int take)
{
    buf json = BUF_INIT;
    char err[200] = "";
    json_write(&json, v, 0);
    int rc = take ? toonview_render_take(out, json_clone(v), json.data ? json.data : "", json.len,
                                         rest, prefixed ? &RULE : NULL, err, sizeof err)
                  : toonview_render(out, v, json.data ? json.data : "", json.len, rest,
                                    prefixed ? &RULE : NULL, err, sizeof err);
    buf_free(&json);
    return rc;
}

static const char *const FIELDS[4] = {"rest", "mcp", "rest_rule", "mcp_rule"};

static int gen(const char *path)
{
    char *text = NULL, err[200] = "";
    size_t len = 0;
    if (read_file_max(path, 1 << 24, &text, &len) != 0)
        return 2;
    json_value *in = json_parse(text, len, NULL, err, sizeof err);
    if (!in)
        return 2;
    json_value *out = json_new_array();
    for (size_t i = 0; i < json_count(in); i++) {
        size_t jl;
        const char *j = json_get_str(json_at(in, i), &jl);
        json_value *v = json_parse(j, jl, NULL, err, sizeof err);
        if (!v)
            continue;
        json_value *c = json_new_object();
        json_set(c, "json", json_new_str(j, jl));
        for (int f = 0; f < 4; f++) {
            buf b = BUF_INIT;
            if (render(&b, v, !(f & 1), f >= 2, 0) == 0)
                json_set(c, FIELDS[f], json_new_str(b.data ? b.data : "", b.len));
            buf_free(&b);
        }
        json_push(out, c);
        json_free(v);
    }
    buf b = BUF_INIT;
    json_write(&b, out, 0);
    fwrite(b.data, 1, b.len, stdout);
    buf_free(&b);
    json_free(out);
    json_free(in);
    free(text);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "gen") == 0)
        return gen(argv[2]);
    char *text = NULL, err[200] = "";
    size_t len = 0;
    CHECK(read_file_max(CL_SOURCE_DIR "/tests/fixtures/toonview/golden.json", 1 << 24, &text,
                        &len) == 0);
    json_value *cases = text ? json_parse(text, len, NULL, err, sizeof err) : NULL;
    CHECK(json_count(cases) >= 40);
    for (size_t i = 0; i < json_count(cases); i++) {
        const json_value *c = json_at(cases, i);
        size_t jl;
        const char *j = json_get_str(json_get(c, "json"), &jl);
        json_value *v = json_parse(j, jl, NULL, err, sizeof err);
        CHECK(v != NULL);
        for (int f = 0; f < 8 && v; f++) {
            buf b = BUF_INIT;
            size_t wl = 0;
            const char *want = json_get_str(json_get(c, FIELDS[f & 3]), &wl);
            int rc = render(&b, v, !(f & 1), (f & 3) >= 2, f >= 4);
            int same = want ? rc == 0 && b.len == wl && memcmp(b.data ? b.data : "", want, wl) == 0
                            : rc != 0;
            if (!same)
                fprintf(stderr, "case %zu (%s%s): the text differs from the recorded one\n", i,
                        FIELDS[f & 3], f >= 4 ? ", take" : "");
            CHECK(same);
            buf_free(&b);
        }
        json_free(v);
    }
    json_free(cases);
    free(text);
    return CHECK_DONE();
}
