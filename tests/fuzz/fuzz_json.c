/* fuzz_json: libFuzzer target for the JSON codec. Properties checked on every
 * input: the parser never crashes; an error names a byte offset inside the input;
 * for accepted input, write -> parse -> write is a fixed point (stored order and
 * canonical order), clone writes identically, every string is valid UTF-8;
 * json_parse_keep accepts and refuses exactly what json_parse does (the same
 * message), and what it keeps is json_parse's tree cut to the kept members (a raw
 * member: text that parses to the same value).
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

static int same_text(const json_value *a, const json_value *b)
{
    buf x = BUF_INIT, y = BUF_INIT;
    json_write(&x, a, 0);
    json_write(&y, b, 0);
    int same = x.len == y.len && memcmp(x.data, y.data, x.len) == 0;
    buf_free(&x);
    buf_free(&y);
    return same;
}

static const json_keep *keep_entry(const json_keep *keep, const char *k, size_t klen)
{
    for (const json_keep *e = keep; e->key; e++)
        if (strlen(e->key) == klen && !memcmp(e->key, k, klen))
            return e;
    return NULL;
}

/* kept is full cut to keep: the kept members in order, each as the entry says. */
static void check_kept(const json_value *full, const json_value *kept, const json_keep *keep)
{
    if (json_typeof(full) != JSON_OBJECT) {
        must(same_text(full, kept), "a value kept whole is the parsed value");
        return;
    }
    must(json_typeof(kept) == JSON_OBJECT, "a kept object stays an object");
    size_t j = 0;
    for (size_t i = 0; i < json_count(full); i++) {
        size_t klen, kl2;
        const char *k = json_key_at(full, i, &klen);
        const json_keep *e = keep_entry(keep, k, klen);
        if (!e)
            continue;
        must(j < json_count(kept), "every kept member is there");
        const char *k2 = json_key_at(kept, j, &kl2);
        must(klen == kl2 && !memcmp(k, k2, klen), "kept members in order");
        const json_value *fv = json_val_at(full, i), *kv = json_val_at(kept, j);
        if (e->raw) {
            size_t n;
            must(json_typeof(kv) == JSON_STRING, "a raw member is a string");
            const char *t = json_get_str(kv, &n);
            json_value *again = json_parse(t, n, NULL, NULL, 0);
            must(again && same_text(again, fv), "a raw member's text is the value");
            json_free(again);
        } else if (e->keep) {
            check_kept(fv, kv, e->keep);
        } else {
            must(same_text(fv, kv), "a member kept whole is the parsed value");
        }
        j++;
    }
    must(j == json_count(kept), "nothing but the kept members");
}

static void check_keep(const uint8_t *data, size_t size, const json_value *full, const char *err)
{
    static const json_keep sub[] = {{"a", NULL, 0}, {"\u00e9", NULL, 1}, {NULL, NULL, 0}};
    static const json_keep keep[] = {
        {"a", NULL, 1}, {"b", sub, 0}, {"c", NULL, 0}, {"", NULL, 0}, {NULL, NULL, 0}};
    char kerr[160];
    json_value *k = json_parse_keep((const char *)data, size, NULL, keep, kerr, sizeof kerr);
    must((k != NULL) == (full != NULL), "keep accepts what parse accepts");
    if (!k) {
        must(strcmp(err, kerr) == 0, "keep refuses with parse's message");
        return;
    }
    check_kept(full, k, keep);
    json_free(k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[160];
    json_value *v = json_parse((const char *)data, size, NULL, err, sizeof err);
    check_keep(data, size, v, err);
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
