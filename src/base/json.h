/* json: the project's exact JSON codec (docs/json.md).
 *
 * A C document model (json_value) used by the core for JSON-RPC framing and tool
 * arguments, a writer over util.h's buf, and (json_lua.c) the Lua module "cljson"
 * that converts between JSON text / json_value and Lua values.
 *
 * Properties: integers that fit int64 are JSON_INT; other numbers are JSON_DOUBLE
 * when the double re-encodes (shortest round-trip digits) to the same decimal
 * value, else JSON_NUMTEXT keeping the original text; "[]" vs "{}" and object key
 * order preserved; duplicate keys: the last one wins in lookups but every member is
 * kept in order (the writer emits them as parsed); strict UTF-8 (invalid sequences,
 * overlong forms, surrogates in UTF-8, lone \u surrogates are errors); errors carry
 * the byte offset.
 *
 * Ownership: json_parse returns a tree owned by the caller (json_free). Accessors
 * return borrowed pointers valid while the root lives. Builders take ownership of
 * the values they are given. */
#ifndef CL_JSON_H
#define CL_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

typedef enum {
    JSON_NULL,
    JSON_FALSE,
    JSON_TRUE,
    JSON_INT,     /* fits int64 */
    JSON_DOUBLE,  /* finite double that round-trips */
    JSON_NUMTEXT, /* number kept as its original text (big integers, excess precision) */
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT
} json_type;

typedef struct json_value json_value;

typedef struct json_limits {
    size_t max_depth; /* 0 = default 512 */
    size_t max_size;  /* bytes of input; 0 = unlimited */
} json_limits;

/* Parses exactly one JSON text (surrounding whitespace allowed). On error returns
 * NULL and writes "message at byte N" into err (if errlen > 0). */
json_value *json_parse(const char *text, size_t len, const json_limits *lim, char *err,
                       size_t errlen);

/* Decode options of json_parse_keep: the members of an object to keep, a list ended
 * by a NULL key. keep: for an object value, the list of its own members to keep
 * (NULL: the whole value); raw: the value is kept as its text instead - a JSON_STRING
 * holding exactly the value's bytes of the input (valid JSON text). A list ended by
 * {NULL, NULL, JSON_KEEP_REST} keeps the members it does not name whole instead of
 * skipping them (so a list can name only the members it treats otherwise). */
#define JSON_KEEP_REST 1
typedef struct json_keep {
    const char *key;
    const struct json_keep *keep;
    int raw;
} json_keep;
/* json_parse keeping only the members of the top-level object that keep names (and
 * so on down, as each entry says). Every other member is checked as json_parse
 * checks it and skipped, nothing allocated for it: the same texts are accepted and
 * refused. A top-level value that is not an object is parsed whole. */
json_value *json_parse_keep(const char *text, size_t len, const json_limits *lim,
                            const json_keep *keep, char *err, size_t errlen);
void json_free(json_value *v);
json_value *json_clone(const json_value *v);

json_type json_typeof(const json_value *v);
int64_t json_get_int(const json_value *v);
double json_get_double(const json_value *v);                /* INT, DOUBLE, NUMTEXT (approx) */
const char *json_get_str(const json_value *v, size_t *len); /* STRING or NUMTEXT text */
size_t json_count(const json_value *v);                     /* members of ARRAY / OBJECT, else 0 */
const json_value *json_at(const json_value *arr, size_t i);
const char *json_key_at(const json_value *obj, size_t i, size_t *klen);
const json_value *json_val_at(const json_value *obj, size_t i);
const json_value *json_get(const json_value *obj, const char *key); /* NULL if absent */
/* The member named by klen bytes of key (the last one when duplicated), NULL if absent
 * or obj is not an object. */
const json_value *json_get_n(const json_value *obj, const char *key, size_t klen);
/* 1 when the i-th member of obj is named by klen bytes of key (its value into *val),
 * else 0 (also when obj is not an object or has no i-th member). */
int json_key_is(const json_value *obj, size_t i, const char *key, size_t klen,
                const json_value **val);
/* Takes the i-th element of an array, or the value of the i-th member of an object,
 * out of it: the caller owns it, NULL is left in its place (a container holding such
 * holes is only to be freed). NULL when there is none. */
json_value *json_take_at(json_value *v, size_t i);
/* String member or NULL (absent or not a string). */
const char *json_get_string(const json_value *obj, const char *key);

/* Builders (the result is owned by the caller; set/push take ownership of val). */
json_value *json_new_null(void);
json_value *json_new_bool(int b);
json_value *json_new_int(int64_t i);
json_value *json_new_double(double d);
json_value *json_new_numtext(const char *text, size_t len); /* text must be a valid JSON number */
json_value *json_new_str(const char *s, size_t len);
json_value *json_new_array(void);
json_value *json_new_object(void);
/* An object of n members named by keys[i] (klens[i] bytes, copied), valued vals[i]
 * (each owned from here), all in one block; the caller knows the keys unique. */
json_value *json_new_object_of(size_t n, const char *const *keys, const size_t *klens,
                               json_value *const *vals);
void json_push(json_value *arr, json_value *val);
void json_set(json_value *obj, const char *key, json_value *val); /* replaces or appends */
/* Appends a member without looking for an existing one (key may hold \0; it is
 * copied). Used by converters that know keys are unique. Takes ownership of val. */
void json_obj_append(json_value *obj, const char *key, size_t klen, json_value *val);
/* Replaces the value of the i-th member (freeing the old one); takes ownership of
 * val (freed when there is no such member). */
void json_obj_replace_at(json_value *obj, size_t i, json_value *val);
/* Removes a member (every duplicate of it); returns 1 if it was present. */
int json_remove(json_value *obj, const char *key);

/* Writer. canonical != 0: object keys sorted by bytes (memcmp, shorter first),
 * no whitespace; used for every hash. Otherwise members in stored order. */
void json_write(buf *out, const json_value *v, int canonical);
/* Appends s as a quoted JSON string with escapes (valid UTF-8 is copied as is;
 * control chars as \u00XX; '/' not escaped). */
void json_write_string(buf *out, const char *s, size_t len);
/* Appends the decimal text of i. */
void json_write_int(buf *out, int64_t i);
/* Appends the shortest round-trip text of a finite double ("1.0" style for
 * integral values so the float-ness survives; non-finite -> "null"). */
void json_write_double(buf *out, double d);

/* Validates UTF-8 (RFC 3629: no overlongs, surrogates or > U+10FFFF); returns 1 if valid. */
int json_utf8_valid(const char *s, size_t len);

/* Drops, in place, the bytes of the NUL-terminated s that do not form valid UTF-8.
 * Error messages quote caller text through %.Ns and fixed buffers, which can split
 * a character, and are then written into JSON verbatim (found by the guard and REST
 * fuzz targets). */
void json_utf8_scrub(char *s);
/* Returns 1 if s is exactly one RFC 8259 number token (no whitespace). */
int json_number_valid(const char *s, size_t len);

#endif
