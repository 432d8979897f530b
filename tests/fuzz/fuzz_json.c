/* fuzz_json: libFuzzer target for the JSON codec. Properties checked on every
 * input: the parser never crashes; an error names a byte offset inside the input;
 * for accepted input, write -> parse -> write is a fixed point (stored order and
 * canonical order), clone writes identically, every string is valid UTF-8.
 * Built with CL_FUZZ_DRIVER, a main() replays files and directories instead. */
#include "json.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_json: property violated: %s\n", what);
        abort();
    }
}

static void check_strings(const json_value *v)
{
    size_t len;
    const char *s;
    switch (json_typeof(v)) {
    case JSON_STRING:
        s = json_get_str(v, &len);
        must(json_utf8_valid(s, len), "decoded string is valid UTF-8");
        break;
    case JSON_NUMTEXT:
        s = json_get_str(v, &len);
        must(json_number_valid(s, len), "numtext is a JSON number");
        break;
    case JSON_ARRAY:
        for (size_t i = 0; i < json_count(v); i++)
            check_strings(json_at(v, i));
        break;
    case JSON_OBJECT:
        for (size_t i = 0; i < json_count(v); i++) {
            s = json_key_at(v, i, &len);
            must(json_utf8_valid(s, len), "decoded key is valid UTF-8");
            check_strings(json_val_at(v, i));
        }
        break;
    default:
        break;
    }
}

static void fixed_point(const json_value *v, int canonical)
{
    buf a = BUF_INIT, b = BUF_INIT;
    char err[160];
    json_write(&a, v, canonical);
    json_value *v2 = json_parse(a.data, a.len, NULL, err, sizeof err);
    must(v2 != NULL, "written text parses again");
    json_write(&b, v2, canonical);
    must(a.len == b.len && memcmp(a.data, b.data, a.len) == 0, "write is a fixed point");
    json_free(v2);
    buf_free(&a);
    buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[160];
    json_value *v = json_parse((const char *)data, size, NULL, err, sizeof err);
    if (!v) {
        const char *at = strstr(err, " at byte ");
        must(at != NULL, "error names a byte offset");
        must(strtoull(at + 9, NULL, 10) <= size, "error offset inside the input");
        return 0;
    }
    check_strings(v);
    fixed_point(v, 0);
    fixed_point(v, 1);
    buf a = BUF_INIT, b = BUF_INIT;
    json_value *c = json_clone(v);
    json_write(&a, v, 0);
    json_write(&b, c, 0);
    must(a.len == b.len && memcmp(a.data, b.data, a.len) == 0, "clone writes identically");
    buf_free(&a);
    buf_free(&b);
    json_free(c);
    json_free(v);
    return 0;
}

#ifdef CL_FUZZ_DRIVER
#include <dirent.h>
#include <sys/stat.h>

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    buf b = BUF_INIT;
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        buf_append(&b, chunk, n);
    fclose(f);
    LLVMFuzzerTestOneInput((const uint8_t *)(b.data ? b.data : ""), b.len);
    buf_free(&b);
    return 1;
}

int main(int argc, char **argv)
{
    int files = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0)
            continue; /* optional corpora (the public suite) may be absent */
        if (!S_ISDIR(st.st_mode)) {
            files += run_file(argv[i]);
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d)
            continue;
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], de->d_name);
            files += run_file(path);
        }
        closedir(d);
    }
    fprintf(stderr, "fuzz_json: replayed %d inputs\n", files);
    return files > 0 ? 0 : 1;
}
#endif
