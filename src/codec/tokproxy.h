/* tokproxy: a cheap estimate of what a text costs a model in tokens (o200k-like
 * BPE), to choose the cheaper of two texts of one result without a tokenizer.
 *
 * The estimate walks the UTF-8 bytes once: a run of ASCII letters and underscores is
 * one token per started 6 bytes beyond the first, a run of digits one per started 3,
 * a single space before a word or number is part of it (another run of spaces is
 * one), a run of line breaks or tabs is one, a run of other ASCII punctuation one per
 * started 3 beyond the first, and every non-ASCII code point (CJK) one. On the demo
 * results its ratio of a TOON text to the compact JSON of the same value stays
 * within 0.08 of the o200k ratio (tests/unit/test_tokproxy.c checks it on fixtures
 * counted with the real tokenizer).
 *
 * Nothing is kept; the texts are borrowed. */
#ifndef CL_TOKPROXY_H
#define CL_TOKPROXY_H

#include <stddef.h>

/* The estimated token count of s (len bytes). */
size_t tokproxy_count(const char *s, size_t len);

/* 1 when text is the cheaper text to send instead of json: its estimate is at most
 * TOKPROXY_PERCENT % of json's (the margin covers the estimate's error, so the text
 * chosen never costs more real tokens than the JSON). */
#define TOKPROXY_PERCENT 93
int tokproxy_prefer(const char *text, size_t text_len, const char *json, size_t json_len);

#endif
