/* accept: content negotiation for every route - the one Accept parser (media
 * ranges with q-values) and the one Accept-Language parser.
 *
 * q-values follow RFC 9110: a range with q=0 (or a malformed q) is "not
 * acceptable"; the most specific matching range decides (type/subtype over type/any
 * over any). */
#ifndef CL_ACCEPT_H
#define CL_ACCEPT_H

#include "tools.h"

/* q of the most specific media range of an Accept header that matches type
 * ("application/json"); -1 when no range matches (or no header). */
double accept_q(const char *accept, const char *type);
/* 1 when the header admits type: no or an empty header admits everything;
 * otherwise the most specific matching range must have q > 0. */
int accept_admits(const char *accept, const char *type);

/* The language of an Accept-Language header (see accept.c), dflt when nothing
 * supported is acceptable. */
lang_id lang_from_accept(const char *accept_language, lang_id dflt);

#endif
