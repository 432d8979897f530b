/* fuzz_toon: libFuzzer target for the TOON encoder (src/codec/toon.c).
 *
 * Input: two option bytes, then JSON text.
 *   byte 0: bits 0-4 indent (0 = default, 17..31 are invalid on purpose),
 *           bits 5-6 delimiter (default, ',', '\t', '|'), bit 7 an invalid delimiter;
 *   byte 1: bit 0 safe key folding, bits 1-3 flattenDepth - 1 (0 = no limit),
 *           bits 4-6 max_depth (0 = default, else 1..7 to reach the depth error).
 * Text that does not parse is skipped (fuzz_json covers the parser).
 *
 * Properties: valid options and the default depth always encode (but for the
 * documented refusal of exponents beyond 10^14); on error the
 * output buffer is restored byte for byte and err is set; output is valid UTF-8,
 * holds no NUL and no CR, no trailing newline and no line with trailing spaces,
 * every line is indented by a multiple of the indent; encoding twice and
 * encoding a clone give identical bytes.
 *
 * The token-saving view (src/codec/toonview.c) of the same value, with the _instance_id
 * rule's prefix when byte 1 bit 7 is set: it encodes with the default options
 * whenever the value does, under the same line rules, deterministically; the MCP
 * text is that encoding or exactly the compact JSON, the REST text always the view;
 * the view made of a copy's own values (toonview_render_take) is the same text. */
#include <string.h>

#include "fuzz_common.h"
#include "json.h"
#include "tokproxy.h"
#include "toon.h"
#include "toonview.h"

#define T "fuzz_toon"

static void check_lines(const char *s, size_t len, int indent);

static void check_view(const json_value *v, int prefixed)
{
    /* query_object_instance's rule (its toon_view omit_id) with a call's prefix */
    toonview_omit rule = {"datas", "_instance_id", "_instance_identity", "kn-ot-", 5, 12, 18, 6};
    const toonview_omit *omit = prefixed ? &rule : NULL;
    char err[200] = "";
    buf plain = BUF_INIT, json = BUF_INIT, rest = BUF_INIT, rest2 = BUF_INIT, mcp = BUF_INIT;
    int prc = toon_encode(&plain, v, NULL, err, sizeof err);
    json_write(&json, v, 0);
    int rc = toonview_render(&rest, v, json.data, json.len, 1, omit, err, sizeof err);
    if (prc == 0)
        fuzz_must(rc == 0 || !strcmp(err, "number exponent out of range"), T,
                  "the view encodes whenever the value does");
    if (rc == 0) {
        const char *s = rest.data ? rest.data : "";
        fuzz_must(json_utf8_valid(s, rest.len), T, "view output is valid UTF-8");
        fuzz_must(rest.len == 0 || s[rest.len - 1] != '\n', T, "no trailing newline");
        check_lines(s, rest.len, 2);
        fuzz_must(toonview_render(&rest2, v, json.data, json.len, 1, omit, err,
                                  sizeof err) == 0 &&
                      rest2.len == rest.len && !memcmp(rest2.data ? rest2.data : "", s, rest.len),
                  T, "the view is deterministic");
        fuzz_must(toonview_render(&mcp, v, json.data, json.len, 0, omit, err, sizeof err) ==
                      0,
                  T, "the MCP text renders");
        int is_view = mcp.len == rest.len && !memcmp(mcp.data ? mcp.data : "", s, rest.len);
        int is_json = mcp.len == json.len && !memcmp(mcp.data, json.data, json.len);
        fuzz_must(tokproxy_prefer(s, rest.len, json.data, json.len) ? is_view : is_json, T,
                  "MCP sends the view when it is the cheaper text in tokens, else the compact JSON");
        buf took = BUF_INIT;
        fuzz_must(toonview_render_take(&took, json_clone(v), json.data, json.len, 1, omit, err,
                                       sizeof err) == 0 &&
                      took.len == rest.len && !memcmp(took.data ? took.data : "", s, rest.len),
                  T, "the view made of the tree's own values is the same text");
        buf_free(&took);
    }
    buf_free(&plain);
    buf_free(&json);
    buf_free(&rest);
    buf_free(&rest2);
    buf_free(&mcp);
}

static void check_lines(const char *s, size_t len, int indent)
{
    size_t i = 0;
    while (i < len) {
        const char *nl = memchr(s + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - s) : len;
        size_t sp = 0;
        while (i + sp < end && s[i + sp] == ' ')
            sp++;
        fuzz_must(sp % (size_t)indent == 0, T, "indentation is a multiple of the indent");
        fuzz_must(end == i || s[end - 1] != ' ', T, "no line ends with a space");
        fuzz_must(end > i, T, "no empty line");
        i = end + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char DELIMS[4] = {0, ',', '\t', '|'};
    if (size < 2)
        return 0;
    toon_options o;
    toon_options_init(&o);
    int valid = 1;
    o.indent = data[0] & 31;
    if (o.indent > 16)
        valid = 0;
    o.delimiter = (data[0] & 128) ? ';' : DELIMS[(data[0] >> 5) & 3];
    if (data[0] & 128)
        valid = 0;
    o.key_folding = (data[1] & 1) ? TOON_FOLD_SAFE : TOON_FOLD_OFF;
    int fd = (data[1] >> 1) & 7;
    o.flatten_depth = fd ? fd - 1 : TOON_FLATTEN_ALL;
    o.max_depth = (size_t)((data[1] >> 4) & 7);

    char err[200];
    json_value *v = json_parse((const char *)data + 2, size - 2, NULL, err, sizeof err);
    if (!v)
        return 0;

    buf out = BUF_INIT;
    buf_puts(&out, "prefix\n"); /* toon_encode appends; an error must leave this alone */
    size_t pre = out.len;
    err[0] = '\0';
    int rc = toon_encode(&out, v, &o, err, sizeof err);
    /* docs/toon.md: exponents beyond 10^14 are refused (a documented limit, found by
     * this target: regress_huge_exponent); anything else must encode. */
    if (valid && o.max_depth == 0)
        fuzz_must(rc == 0 || !strcmp(err, "number exponent out of range"), T,
                  "valid options and the default depth always encode");
    if (!valid)
        fuzz_must(rc < 0, T, "invalid options are refused");
    if (rc < 0) {
        fuzz_must(out.len == pre && !memcmp(out.data, "prefix\n", pre), T,
                  "output restored on error");
        fuzz_must(err[0] != '\0', T, "an error says why");
    } else {
        const char *s = out.data + pre;
        size_t n = out.len - pre;
        fuzz_must(json_utf8_valid(s, n), T, "output is valid UTF-8");
        fuzz_must(memchr(s, '\0', n) == NULL, T, "no NUL in the output");
        fuzz_must(memchr(s, '\r', n) == NULL, T, "no CR in the output");
        fuzz_must(n == 0 || s[n - 1] != '\n', T, "no trailing newline");
        check_lines(s, n, o.indent ? o.indent : 2);

        buf again = BUF_INIT, cl = BUF_INIT;
        fuzz_must(toon_encode(&again, v, &o, err, sizeof err) == 0, T, "second encode succeeds");
        fuzz_must(again.len == n && !memcmp(again.data ? again.data : "", s, n), T,
                  "encoding is deterministic");
        json_value *c = json_clone(v);
        fuzz_must(toon_encode(&cl, c, &o, err, sizeof err) == 0, T, "clone encodes");
        fuzz_must(cl.len == n && !memcmp(cl.data ? cl.data : "", s, n), T,
                  "a clone encodes identically");
        json_free(c);
        buf_free(&again);
        buf_free(&cl);
    }
    buf_free(&out);
    check_view(v, data[1] >> 7);
    json_free(v);
    return 0;
}
