/* framing: see framing.h. */
#include "framing.h"

#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static framing_rc bad(framing_error *err, int status, const char *reason)
{
    err->status = status;
    err->reason = reason;
    return FRAMING_BAD;
}

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* a (n bytes) equals the lower-case b of length bn, ignoring ASCII case */
static int ieqn(const char *a, size_t n, const char *b, size_t bn)
{
    if (bn != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)a[i]) != lower((unsigned char)b[i]))
            return 0;
    return 1;
}

static int ieq(const char *a, size_t n, const char *b)
{
    return ieqn(a, n, b, strlen(b));
}

/* RFC 9110 tchar. */
static int is_tchar_slow(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Every header name byte is tested: one table look-up instead of a strchr. */
static unsigned char tchar_table[256];

static int is_tchar(unsigned char c)
{
    return tchar_table[c];
}

static int is_hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int hex_val(unsigned char c)
{
    return c <= '9' ? c - '0' : lower(c) - 'a' + 10;
}

/* Characters of a request target besides '%' escapes: RFC 3986 unreserved,
 * sub-delims, ':', '@', '/', '?' (and '[' ']' for an IPv6 authority). */
static int is_target_char_slow(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return 1;
    return c && strchr("-._~!$&'()*+,;=:@/?[]", c) != NULL;
}

/* Every target byte is tested: one table look-up instead of a strchr. */
static unsigned char target_table[256];

static int is_target_char(unsigned char c)
{
    return target_table[c];
}

/* An absolute-form target's authority from target[i]: host [":" port] (no userinfo),
 * host a name, an IPv4 address or a bracketed IPv6 address, then the end, '/' or
 * '?'. Returns where it ends, or 0 when malformed (libevent would refuse it with an
 * HTML page). */
static size_t authority_end(const char *t, size_t n, size_t i)
{
    size_t h = i;
    if (i < n && t[i] == '[') {
        for (i++; i < n && (is_hex((unsigned char)t[i]) || t[i] == ':' || t[i] == '.'); i++)
            ;
        if (i == n || t[i] != ']' || i == h + 1)
            return 0;
        i++;
    } else {
        while (i < n && (is_hex((unsigned char)t[i]) || (t[i] >= 'g' && t[i] <= 'z') ||
                         (t[i] >= 'G' && t[i] <= 'Z') || t[i] == '-' || t[i] == '.'))
            i++;
        if (i == h)
            return 0;
    }
    if (i < n && t[i] == ':') {
        size_t p = ++i;
        unsigned long port = 0;
        while (i < n && t[i] >= '0' && t[i] <= '9' && i - p < 6)
            port = port * 10 + (unsigned long)(t[i++] - '0');
        if (i == p || i - p > 5 || port > 65535)
            return 0;
    }
    return i == n || t[i] == '/' || t[i] == '?' ? i : 0;
}

size_t framing_head_end(const char *buf, size_t len, size_t *scanned)
{
    size_t i = *scanned;
    for (; i < len; i++) {
        const char *nl = memchr(buf + i, '\n', len - i);
        if (!nl)
            break;
        i = (size_t)(nl - buf);
        /* an LF that ends an empty line: "\n\n" or "\n\r\n" */
        if (i >= 1 && buf[i - 1] == '\n')
            return i + 1;
        if (i >= 2 && buf[i - 1] == '\r' && buf[i - 2] == '\n')
            return i + 1;
    }
    /* resume two bytes back: the end may straddle the pieces */
    *scanned = len > 2 ? len - 2 : 0;
    return 0;
}

framing_rc framing_check_partial(const char *buf, size_t len, const framing_limits *lim,
                                 framing_error *err)
{
    if (len <= lim->max_head)
        return FRAMING_MORE;
    if (!memchr(buf, '\n', lim->max_head))
        return bad(err, 414, "request line exceeds limits.max_header_bytes");
    return bad(err, 413, "request header block exceeds limits.max_header_bytes");
}

static const char *const METHODS[] = {"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"};
static const unsigned char METHOD_LEN[] = {3, 4, 3, 6, 4, 7, 5};

static framing_rc check_request_line(const char *p, size_t n, int *http11, int *head_method,
                                     framing_error *err)
{
    const char *sp1 = memchr(p, ' ', n);
    if (!sp1 || sp1 == p)
        return bad(err, 400, "malformed request line");
    size_t mlen = (size_t)(sp1 - p);
    for (size_t i = 0; i < mlen; i++)
        if (!is_tchar((unsigned char)p[i]))
            return bad(err, 400, "malformed request method");
    const char *target = sp1 + 1, *end = p + n;
    const char *sp2 = memchr(target, ' ', (size_t)(end - target));
    if (!sp2)
        return bad(err, 400, "HTTP/0.9 request lines are not supported: give the HTTP version");
    size_t tlen = (size_t)(sp2 - target);
    const char *version = sp2 + 1;
    size_t vlen = (size_t)(end - version);
    if (tlen == 0 || memchr(version, ' ', vlen))
        return bad(err, 400,
                   "malformed request line (one space between method, target and "
                   "version)");
    if (vlen == 8 && !memcmp(version, "HTTP/1.1", 8))
        *http11 = 1;
    else if (vlen == 8 && !memcmp(version, "HTTP/1.0", 8))
        *http11 = 0;
    else if (vlen == 8 && !memcmp(version, "HTTP/", 5) && version[5] >= '0' && version[5] <= '9' &&
             version[6] == '.' && version[7] >= '0' && version[7] <= '9')
        return bad(err, 505, "HTTP version not supported (HTTP/1.1 or HTTP/1.0)");
    else
        return bad(err, 400, "malformed HTTP version");
    int known = 0;
    for (size_t i = 0; i < sizeof METHODS / sizeof METHODS[0]; i++)
        known |= METHOD_LEN[i] == mlen && !memcmp(METHODS[i], p, mlen);
    if (!known)
        return bad(err, 501, "request method not implemented");
    *head_method = mlen == 4 && !memcmp(p, "HEAD", 4);
    /* origin-form, absolute-form (http or https) or OPTIONS * */
    if (tlen == 1 && target[0] == '*') {
        if (!(mlen == 7 && !memcmp(p, "OPTIONS", 7)))
            return bad(err, 400, "malformed request target");
        return FRAMING_OK;
    }
    size_t i = 0;
    if (target[0] != '/') {
        if (tlen > 7 && ieq(target, 7, "http://"))
            i = 7;
        else if (tlen > 8 && ieq(target, 8, "https://"))
            i = 8;
        else
            return bad(err, 400, "malformed request target");
        i = authority_end(target, tlen, i);
        if (!i)
            return bad(err, 400, "malformed authority in the request target");
    }
    for (; i < tlen; i++) {
        unsigned char c = (unsigned char)target[i];
        if (c == '%') {
            if (i + 2 >= tlen || !is_hex((unsigned char)target[i + 1]) ||
                !is_hex((unsigned char)target[i + 2]))
                return bad(err, 400, "malformed percent-encoding in the request target");
            i += 2;
        } else if (!is_target_char(c)) {
            return bad(err, 400, "invalid character in the request target");
        }
    }
    return FRAMING_OK;
}

/* Header fields whose second copy would be ignored by libevent (the first wins) while
 * a proxy in front may read the last or join them. */
static const char *const SINGLE[] = {"host",
                                     "content-length",
                                     "transfer-encoding",
                                     "authorization",
                                     "x-authorization",
                                     "origin",
                                     "content-type",
                                     "expect",
                                     "mcp-session-id",
                                     "mcp-protocol-version",
                                     "mcp-method",
                                     "mcp-name"};
#define N_SINGLE (sizeof SINGLE / sizeof SINGLE[0])
static size_t single_len[N_SINGLE]; /* strlen of each, filled by tables_init */
/* The SINGLE names of each length (at most two share one), index + 1; 0 ends. A
 * header name is compared only with the names of its length. */
#define SINGLE_MAXLEN 20
static unsigned char single_by_len[SINGLE_MAXLEN + 1][3];

static void tables_init(void)
{
    static int ready;
    if (ready)
        return;
    for (unsigned i = 0; i < 256; i++) {
        tchar_table[i] = (unsigned char)is_tchar_slow((unsigned char)i);
        target_table[i] = (unsigned char)is_target_char_slow((unsigned char)i);
    }
    for (size_t i = 0; i < N_SINGLE; i++) {
        single_len[i] = strlen(SINGLE[i]);
        unsigned char *slot = single_by_len[single_len[i]];
        while (*slot)
            slot++;
        *slot = (unsigned char)(i + 1);
    }
    ready = 1;
}

static const char *const DUP_REASON[N_SINGLE] = {
    "more than one Host header",
    "more than one Content-Length header",
    "more than one Transfer-Encoding header",
    "more than one Authorization header",
    "more than one X-Authorization header",
    "more than one Origin header",
    "more than one Content-Type header",
    "more than one Expect header",
    "more than one Mcp-Session-Id header",
    "more than one Mcp-Protocol-Version header",
    "more than one Mcp-Method header",
    "more than one Mcp-Name header",
};

enum { H_HOST, H_CL, H_TE, H_EXPECT = 7 };

/* 1 when s[0..n) has no control byte (below 0x20, tab included, or 0x7f), the usual
 * header line: then it holds no bare CR and no invalid value byte, and those
 * byte-by-byte checks are skipped. Sixteen bytes at a time with SSE2, then eight (a
 * byte below 0x20, or 0x7f: a zero byte after xor with 0x7f, is flagged in the
 * word's high bits). */
static int plain_text(const char *s, size_t n)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    size_t i = 0;
#if defined(__SSE2__)
    if (n >= 16) {
        /* the last block overlaps the one before it when n is not a multiple of 16 */
        for (;; i += 16) {
            if (i + 16 > n)
                i = n - 16;
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
            __m128i ctl = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
            __m128i del = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f));
            if (_mm_movemask_epi8(_mm_or_si128(ctl, del)))
                return 0;
            if (i + 16 == n)
                return 1;
        }
    }
#endif
    for (; i + 8 <= n; i += 8) {
        uint64_t w, d;
        memcpy(&w, s + i, 8);
        d = w ^ (0x7f * ones);
        if (((w - 0x20 * ones) & ~w & highs) || ((d - ones) & ~d & highs))
            return 0;
    }
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return 0;
    }
    return 1;
}

/* The end of a header line's name: the first byte that is not a tchar. line[n] is the
 * CR or LF that ends the line (not a tchar), so the scan needs no bound. Sixteen bytes
 * at a time while they are letters, digits and '-' (what names are made of), then
 * byte by byte with the table. */
static size_t name_end(const char *line, size_t n)
{
    size_t k = 0;
#if defined(__SSE2__)
    for (; k + 16 <= n; k += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(line + k));
        __m128i l = _mm_or_si128(v, _mm_set1_epi8(0x20)); /* a letter only from a letter */
        __m128i letter = _mm_and_si128(_mm_cmpgt_epi8(l, _mm_set1_epi8('a' - 1)),
                                       _mm_cmplt_epi8(l, _mm_set1_epi8('z' + 1)));
        __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('0' - 1)),
                                      _mm_cmplt_epi8(v, _mm_set1_epi8('9' + 1)));
        __m128i dash = _mm_cmpeq_epi8(v, _mm_set1_epi8('-'));
        unsigned ok = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(letter, digit), dash));
        if (ok != 0xffff) {
            k += (size_t)__builtin_ctz(~ok);
            break;
        }
    }
#endif
    while (is_tchar((unsigned char)line[k]))
        k++;
    return k;
}

/* A header name (k tchars) equals the SINGLE name nm (lower-case letters and '-') of
 * the same length, ignoring case: each byte or'ed with 0x20, eight at a time. Exact
 * for tchars: c | 0x20 is a lower-case letter only when c is that letter in either
 * case, and '-' only for '-' (the other byte, CR, is not a tchar). */
static int name_is(const char *line, size_t k, const char *nm)
{
    const uint64_t lows = 0x2020202020202020ull;
    size_t i = 0;
    for (; i + 8 <= k; i += 8) {
        uint64_t a, b;
        memcpy(&a, line + i, 8);
        memcpy(&b, nm + i, 8);
        if ((a | lows) != b)
            return 0;
    }
    for (; i < k; i++)
        if ((line[i] | 0x20) != nm[i])
            return 0;
    return 1;
}

framing_rc framing_check_head(const char *buf, size_t len, const framing_limits *lim,
                              framing_head *head, framing_error *err)
{
    memset(head, 0, sizeof *head);
    tables_init();
    if (len > lim->max_head)
        return bad(err, 413, "request header block exceeds limits.max_header_bytes");
    int http11 = 0, head_method = 0, seen[N_SINGLE] = {0};
    const char *vals[N_SINGLE] = {0};
    size_t vlens[N_SINGLE] = {0};
    size_t pos = 0, lineno = 0;
    while (pos < len) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        if (!nl)
            return bad(err, 400, "malformed header block");
        const char *line = buf + pos;
        size_t n = (size_t)(nl - line);
        pos += n + 1;
        if (n && line[n - 1] == '\r')
            n--;
        int plain = plain_text(line, n);
        if (!plain && memchr(line, '\r', n))
            return bad(err, 400, "bare CR in the header block");
        if (lineno++ == 0) {
            if (check_request_line(line, n, &http11, &head_method, err) != FRAMING_OK)
                return FRAMING_BAD;
            continue;
        }
        if (n == 0)
            break; /* the empty line */
        if (line[0] == ' ' || line[0] == '\t')
            return bad(err, 400, "obsolete line folding is not accepted");
        size_t k = name_end(line, n);
        if (k == 0 || k == n || line[k] != ':')
            return bad(err, 400,
                       line[k] == ' ' || line[k] == '\t'
                           ? "whitespace between a header name and the colon"
                           : "malformed header field name");
        /* trimmed as libevent trims: leading spaces, trailing spaces and tabs (a
         * leading tab stays part of the value, so "\tchunked" is not chunked) */
        size_t v = k + 1, e = n;
        while (v < e && line[v] == ' ')
            v++;
        while (e > v && (line[e - 1] == ' ' || line[e - 1] == '\t'))
            e--;
        for (size_t i = v; i < e && !plain; i++) {
            unsigned char c = (unsigned char)line[i];
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                return bad(err, 400, "invalid character in a header value");
        }
        for (const unsigned char *slot = k <= SINGLE_MAXLEN ? single_by_len[k] : single_by_len[0];
             *slot; slot++) {
            size_t s = (size_t)(*slot - 1);
            if (!name_is(line, k, SINGLE[s]))
                continue;
            if (seen[s]++)
                return bad(err, 400, DUP_REASON[s]);
            vals[s] = line + v;
            vlens[s] = e - v;
        }
    }
    head->head_len = len;
    if (http11 && !seen[H_HOST])
        return bad(err, 400, "an HTTP/1.1 request needs a Host header");
    if (seen[H_TE]) {
        if (seen[H_CL])
            return bad(err, 400, "both Transfer-Encoding and Content-Length");
        if (!http11)
            return bad(err, 400, "Transfer-Encoding in an HTTP/1.0 request");
        if (!ieq(vals[H_TE], vlens[H_TE], "chunked"))
            return bad(err, 501, "transfer coding not implemented (only chunked)");
        head->body = FRAMING_BODY_CHUNKED;
    } else if (seen[H_CL]) {
        const char *s = vals[H_CL];
        size_t sl = vlens[H_CL];
        uint64_t v = 0;
        if (sl == 0 || sl > 18)
            return bad(err, 400, "malformed Content-Length");
        for (size_t i = 0; i < sl; i++) {
            if (s[i] < '0' || s[i] > '9')
                return bad(err, 400, "malformed Content-Length");
            v = v * 10 + (uint64_t)(s[i] - '0');
        }
        if (v > lim->max_body)
            return bad(err, 413, "request body exceeds limits.max_body_bytes");
        if (v > 0) {
            head->body = FRAMING_BODY_LENGTH;
            head->length = v;
        }
    }
    if (head_method && head->body != FRAMING_BODY_NONE)
        return bad(err, 400, "a HEAD request cannot carry a body");
    if (seen[H_EXPECT] && http11) {
        if (!ieq(vals[H_EXPECT], vlens[H_EXPECT], "100-continue"))
            return bad(err, 417, "expectation not supported (only 100-continue)");
        head->expect_continue = 1;
    }
    return FRAMING_OK;
}

enum {
    CS_SIZE,     /* hex digits of a size line */
    CS_SIZE_LF,  /* CR seen after the size */
    CS_DATA,     /* chunk data */
    CS_DATA_END, /* CRLF after the data */
    CS_DATA_LF,  /* CR seen after the data */
    CS_LAST,     /* after the last-chunk line: the empty line (no trailer fields) */
    CS_LAST_LF,  /* CR seen there */
    CS_DONE
};

void framing_chunks_init(framing_chunks *st)
{
    memset(st, 0, sizeof *st);
    st->state = CS_SIZE;
}

/* The size line ended. */
static framing_rc size_line_done(framing_chunks *st, const framing_limits *lim, framing_error *err)
{
    if (st->digits == 0)
        return bad(err, 400, "malformed chunk size");
    if (st->size > lim->max_body || st->total + st->size > lim->max_body)
        return bad(err, 413, "request body exceeds limits.max_body_bytes");
    st->total += st->size;
    st->remaining = st->size;
    st->digits = 0;
    st->state = st->size ? CS_DATA : CS_LAST;
    st->size = 0;
    return FRAMING_MORE;
}

size_t framing_chunks_feed(framing_chunks *st, const char *p, size_t n, const framing_limits *lim,
                           framing_rc *rc, framing_error *err)
{
    size_t i = 0;
    *rc = FRAMING_MORE;
    while (i < n) {
        unsigned char c = (unsigned char)p[i];
        switch (st->state) {
        case CS_SIZE:
            if (is_hex(c)) {
                if (++st->digits > 15) {
                    *rc = bad(err, 413, "request body exceeds limits.max_body_bytes");
                    return i;
                }
                st->size = st->size * 16 + (uint64_t)hex_val(c);
                i++;
                break;
            }
            if (c == '\r') {
                st->state = CS_SIZE_LF;
                i++;
                break;
            }
            if (c == '\n') {
                i++;
                if ((*rc = size_line_done(st, lim, err)) == FRAMING_BAD)
                    return i;
                break;
            }
            *rc = bad(err, 400,
                      c == ';' || c == ' ' || c == '\t' ? "chunk extensions are not accepted"
                                                        : "malformed chunk size");
            return i;
        case CS_SIZE_LF:
            if (c != '\n') {
                *rc = bad(err, 400, "bare CR in a chunk size line");
                return i;
            }
            i++;
            if ((*rc = size_line_done(st, lim, err)) == FRAMING_BAD)
                return i;
            break;
        case CS_DATA: {
            size_t take = n - i;
            if ((uint64_t)take > st->remaining)
                take = (size_t)st->remaining;
            st->remaining -= take;
            i += take;
            if (!st->remaining)
                st->state = CS_DATA_END;
            break;
        }
        case CS_DATA_END:
        case CS_LAST:
            if (c == '\r' || c == '\n') {
                int last = st->state == CS_LAST;
                i++;
                st->state =
                    c == '\r' ? (last ? CS_LAST_LF : CS_DATA_LF) : (last ? CS_DONE : CS_SIZE);
                break;
            }
            *rc = bad(err, 400,
                      st->state == CS_LAST ? "trailer fields are not accepted"
                                           : "chunk data not followed by CRLF");
            return i;
        case CS_DATA_LF:
        case CS_LAST_LF:
            if (c != '\n') {
                *rc = bad(err, 400, "bare CR after chunk data");
                return i;
            }
            i++;
            st->state = st->state == CS_LAST_LF ? CS_DONE : CS_SIZE;
            break;
        default:
            break;
        }
        if (st->state == CS_DONE) {
            *rc = FRAMING_OK;
            return i;
        }
    }
    return i;
}
