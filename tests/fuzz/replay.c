/* replay: the main() linked into every fuzz target when it is built without
 * libFuzzer (CL_FUZZ off). It feeds each file named on the command line, or each
 * file in each directory, to LLVMFuzzerTestOneInput once, so the corpora (and the
 * regression inputs of past crashes) run in every ordinary build. A property
 * violation aborts; no input at all is a failure too, so a misplaced corpus cannot
 * pass silently. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t cap = 4096, len = 0, n;
    unsigned char *data = malloc(cap);
    if (!data)
        abort();
    while ((n = fread(data + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            cap *= 2;
            data = realloc(data, cap);
            if (!data)
                abort();
        }
    }
    fclose(f);
    LLVMFuzzerTestOneInput(data, len);
    free(data);
    return 1;
}

int main(int argc, char **argv)
{
    int files = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0)
            continue;
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
    fprintf(stderr, "%s: replayed %d inputs\n", argv[0], files);
    return files > 0 ? 0 : 1;
}
