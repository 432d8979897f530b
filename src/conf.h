/* conf: the configuration file (etc/context-loader.conf) plus environment
 * overrides (SPEC §17). Read once at start; read-only afterwards.
 *
 * File format: one "key = value" per line; '#' starts a comment line; blank lines
 * ignored; values are taken verbatim after trimming. Every key has a default, a
 * type and an environment variable (CL_<KEY> with '.' -> '_', upper-cased, or the
 * seed's own name such as EXECUTE_SKILL_ENABLED). Environment wins over the file.
 * Unknown keys and malformed values fail the load with a message naming the key.
 *
 * Ownership: conf_load returns a conf the caller frees with conf_free; strings
 * returned by the getters live as long as the conf. */
#ifndef CL_CONF_H
#define CL_CONF_H

#include <stddef.h>

typedef struct conf conf;

/* path may be NULL (defaults + environment only). Returns NULL on error with a
 * message in err. */
conf *conf_load(const char *path, char *err, size_t errlen);
void conf_free(conf *c);

const char *conf_str(const conf *c, const char *key); /* never NULL ("" when empty) */
long conf_int(const conf *c, const char *key);
int conf_bool(const conf *c, const char *key);

/* Writes the documented table of keys (key, env, default, description) to stdout. */
void conf_print_reference(void);

#endif
