/* toon-encode: JSON text on stdin -> TOON text on stdout, options as JSON in the
 * environment variable TOON_OPTIONS (spec spelling: indent, delimiter, keyFolding,
 * flattenDepth). The ENCODER_CMD of the official fixture runner
 * (run-encode-fixtures.mjs) and of tests/toon/roundtrip.mjs. Exit 1 on any error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "toon.h"
#include "util.h"

int main(void)
{
    int rc = 1;
    buf in = BUF_INIT, out = BUF_INIT;
    json_value *v = NULL, *ov = NULL;
    char err[256] = "";
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
        buf_append(&in, chunk, n);
    if (ferror(stdin)) {
        fprintf(stderr, "toon-encode: cannot read stdin\n");
        goto done;
    }
    toon_options opts;
    toon_options_init(&opts);
    const char *os = getenv("TOON_OPTIONS");
    if (os && *os) {
        ov = json_parse(os, strlen(os), NULL, err, sizeof err);
        if (!ov || toon_options_from_json(ov, &opts, err, sizeof err) < 0) {
            fprintf(stderr, "toon-encode: TOON_OPTIONS: %s\n", err);
            goto done;
        }
    }
    v = json_parse(in.data ? in.data : "", in.len, NULL, err, sizeof err);
    if (!v) {
        fprintf(stderr, "toon-encode: input: %s\n", err);
        goto done;
    }
    if (toon_encode(&out, v, &opts, err, sizeof err) < 0) {
        fprintf(stderr, "toon-encode: %s\n", err);
        goto done;
    }
    if (out.len && fwrite(out.data, 1, out.len, stdout) != out.len) {
        fprintf(stderr, "toon-encode: cannot write stdout\n");
        goto done;
    }
    rc = 0;
done:
    json_free(v);
    json_free(ov);
    buf_free(&in);
    buf_free(&out);
    return rc;
}
