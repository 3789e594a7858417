/*
 * cfs-gateway's request decoding and response text, pure (gateway.h):
 * URLs, Range, If-None-Match, Accept, content types, and the escaping of
 * names into HTML, URLs and JSON. Everything here reads untrusted bytes;
 * nothing allocates more than its output, and nothing reads the clock.
 */
#define _GNU_SOURCE /* strcasestr */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cfs-fuse/gateway.h"
#include "sfsro-format/sfsro.h"

/* ------------------------------------------------------------ URLs */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decode the path part s into out ('/' first). Components "." and ".."
 * are refused rather than resolved: a browser resolves them before
 * asking, so one that arrives was written to step outside a directory. */
static int decode_path(const char *s, char out[static FS_GW_PATH_MAX + 1], const char **why)
{
	size_t n = 0, comp = 0; /* where the current component starts in out */

	out[n++] = '/';
	if (*s == '/')
		s++;
	for (;; s++) {
		char c = *s;
		if (c == '/' || c == 0) {
			size_t len = n - comp - 1;
			if ((len == 1 && out[comp + 1] == '.') ||
			    (len == 2 && out[comp + 1] == '.' && out[comp + 2] == '.')) {
				*why = "a path may not hold a \".\" or \"..\" component";
				return -EINVAL;
			}
			if (c == 0)
				break;
			if (n > 0 && out[n - 1] == '/') /* empty components collapse */
				continue;
			comp = n;
		} else if (c == '%') {
			int hi = hexval(s[1]), lo = hi < 0 ? -1 : hexval(s[2]);
			if (hi < 0 || lo < 0) {
				*why = "a '%' in a URL is followed by two hex digits";
				return -EINVAL;
			}
			c = (char)(hi * 16 + lo);
			if (c == 0) {
				*why = "a path may not hold NUL (%00)";
				return -EINVAL;
			}
			s += 2;
			if (c == '/') { /* an encoded '/' is a name byte no entry can have */
				*why = "a name may not hold '/' (%2F)";
				return -EINVAL;
			}
		}
		if (n >= FS_GW_PATH_MAX) {
			*why = "the path is too long";
			return -EINVAL;
		}
		out[n++] = c;
	}
	out[n] = 0;
	return 0;
}

int fs__gw_parse_url(const char *raw, struct fs_gw_url *ret, const char **ret_why)
{
	const char *why = "", *rest;
	size_t plen;

	memset(ret, 0, sizeof(*ret));
	if (!strncmp(raw, "/cfs-block/", 11)) {
		const char *k = raw + 11;
		size_t n = strlen(k);
		ret->kind = FS_GW_BLOCK;
		if (n == 64 && cfs_id_from_hex(&ret->key, k) == 0)
			return 0;
		if (n == CFS_NAME_LEN && cfs_name_decode(ret->key.b, k, &why) == 0)
			return 0;
		*ret_why = "a block key is 64 hex digits or 52 base32 characters";
		return -EINVAL;
	}
	if (!strncmp(raw, "/cfs-root/", 10)) {
		ret->kind = FS_GW_ROOT;
		plen = 10;
	} else if (!strncmp(raw, "/cfs/", 5)) {
		ret->kind = FS_GW_FILE;
		plen = 5;
	} else {
		*ret_why = "not a CFS URL: /cfs/VOLUME/path, /cfs-root/VOLUME or /cfs-block/KEY";
		return -ENOENT;
	}
	const char *spec = raw + plen;
	if (strlen(spec) > CFS_NAME_LEN + 21 + FS_GW_PATH_MAX * 3) {
		*ret_why = "the URL is too long";
		return -EINVAL;
	}
	if (cfs_volume_spec_parse(spec, ret->vol, &ret->seq, &rest, &why) < 0) {
		*ret_why = why;
		return -EINVAL;
	}
	ret->latest = spec[CFS_NAME_LEN] == '@' && ret->seq == 0;
	ret->rest = rest;
	if (ret->kind == FS_GW_ROOT) {
		if (*rest && strcmp(rest, "/")) {
			*ret_why = "a root URL names a volume only";
			return -EINVAL;
		}
		strcpy(ret->path, "/");
		return 0;
	}
	ret->bare = *rest == 0;
	ret->slash = *rest == 0 || rest[strlen(rest) - 1] == '/';
	if (decode_path(rest, ret->path, &why) < 0) {
		*ret_why = why;
		return -EINVAL;
	}
	return 0;
}

/* ------------------------------------------------------------ Range */

/* A decimal of at most 19 digits at *s, advancing s; -1 if none. */
static int64_t number(const char **s)
{
	const char *p = *s;
	int64_t v = 0;
	int n = 0;

	while (*p >= '0' && *p <= '9') {
		if (++n > 18)
			return -1;
		v = v * 10 + (*p++ - '0');
	}
	if (!n)
		return -1;
	*s = p;
	return v;
}

static const char *skip_ws(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

int fs__gw_parse_range(const char *hdr, uint64_t size, uint64_t *ret_first, uint64_t *ret_last)
{
	int64_t a = -1, b = -1;

	if (!hdr)
		return FS_GW_RANGE_NONE;
	const char *s = skip_ws(hdr);
	if (strncasecmp(s, "bytes", 5))
		return FS_GW_RANGE_NONE;
	s = skip_ws(s + 5);
	if (*s++ != '=')
		return FS_GW_RANGE_NONE;
	s = skip_ws(s);
	if (*s == '-') { /* a suffix: the last N bytes */
		s++;
		if ((b = number(&s)) < 0)
			return FS_GW_RANGE_NONE;
	} else {
		if ((a = number(&s)) < 0 || *s++ != '-')
			return FS_GW_RANGE_NONE;
		if (*s >= '0' && *s <= '9' && (b = number(&s)) < 0)
			return FS_GW_RANGE_NONE;
		if (b >= 0 && b < a)
			return FS_GW_RANGE_NONE; /* invalid, so ignored (RFC 9110 14.1.1) */
	}
	if (*skip_ws(s)) /* a list of ranges, or trailing junk: all of it */
		return FS_GW_RANGE_NONE;
	if (a < 0) {
		if (b == 0 || size == 0)
			return FS_GW_RANGE_UNSAT;
		*ret_first = (uint64_t)b >= size ? 0 : size - (uint64_t)b;
		*ret_last = size - 1;
		return FS_GW_RANGE_ONE;
	}
	if ((uint64_t)a >= size)
		return FS_GW_RANGE_UNSAT;
	*ret_first = (uint64_t)a;
	*ret_last = b < 0 || (uint64_t)b >= size ? size - 1 : (uint64_t)b;
	return FS_GW_RANGE_ONE;
}

/* ------------------------------------------------------------ ETags */

bool fs__gw_etag_match(const char *inm, const char *etag)
{
	size_t elen = strlen(etag);

	if (!inm)
		return false;
	for (const char *s = inm;;) {
		s = skip_ws(s);
		while (*s == ',')
			s = skip_ws(s + 1);
		if (!*s)
			return false;
		if (*s == '*')
			return true;
		if (s[0] == 'W' && s[1] == '/')
			s += 2;
		if (*s != '"')
			return false; /* malformed: matches nothing */
		const char *end = strchr(s + 1, '"');
		if (!end)
			return false;
		if ((size_t)(end + 1 - s) == elen && !memcmp(s, etag, elen))
			return true;
		s = end + 1;
	}
}

/* ------------------------------------------------------------ types */

static const struct {
	const char *ext, *type;
} types[] = {
	{ "html", "text/html; charset=utf-8" },
	{ "htm", "text/html; charset=utf-8" },
	{ "txt", "text/plain; charset=utf-8" },
	{ "css", "text/css; charset=utf-8" },
	{ "js", "text/javascript; charset=utf-8" },
	{ "json", "application/json" },
	{ "png", "image/png" },
	{ "jpg", "image/jpeg" },
	{ "jpeg", "image/jpeg" },
	{ "svg", "image/svg+xml" },
	{ "pdf", "application/pdf" },
};

const char *fs__gw_content_type(const char *name)
{
	const char *base = strrchr(name, '/'), *dot;

	base = base ? base + 1 : name;
	if ((dot = strrchr(base, '.')) && dot != base)
		for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
			if (!strcasecmp(dot + 1, types[i].ext))
				return types[i].type;
	return "application/octet-stream";
}

bool fs__gw_wants_json(const char *accept)
{
	return accept && strcasestr(accept, "application/json") && !strcasestr(accept, "text/html");
}

bool fs__gw_is_loopback(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
	if (a->sa_family == AF_INET6) {
		const struct in6_addr *v6 = &((const struct sockaddr_in6 *)a)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(v6))
			return true;
		return IN6_IS_ADDR_V4MAPPED(v6) && v6->s6_addr[12] == 127;
	}
	return false;
}

/* ------------------------------------------------------------ text */

void fs__gw_buf_add(struct fs_gw_buf *b, const void *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->p = xrealloc(b->p, b->cap);
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = 0;
}

void fs__gw_buf_printf(struct fs_gw_buf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(tmp)) {
		fs__gw_buf_add(b, tmp, (size_t)n);
		return;
	}
	char *big = xmalloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	fs__gw_buf_add(b, big, (size_t)n);
	free(big);
}

void fs__gw_buf_html(struct fs_gw_buf *b, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		switch (p[i]) {
		case '&': fs__gw_buf_add(b, "&amp;", 5); break;
		case '<': fs__gw_buf_add(b, "&lt;", 4); break;
		case '>': fs__gw_buf_add(b, "&gt;", 4); break;
		case '"': fs__gw_buf_add(b, "&quot;", 6); break;
		case '\'': fs__gw_buf_add(b, "&#39;", 5); break;
		default: fs__gw_buf_add(b, &p[i], 1);
		}
	}
}

void fs__gw_buf_pct(struct fs_gw_buf *b, const uint8_t *p, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";

	for (size_t i = 0; i < n; i++) {
		uint8_t c = p[i];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~') {
			fs__gw_buf_add(b, &c, 1);
		} else {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };
			fs__gw_buf_add(b, e, 3);
		}
	}
}

/* The length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t utf8_len(const uint8_t *p, size_t n)
{
	size_t len;
	uint32_t cp;

	if (p[0] < 0x80)
		return 1;
	if ((p[0] & 0xe0) == 0xc0)
		len = 2, cp = p[0] & 0x1f;
	else if ((p[0] & 0xf0) == 0xe0)
		len = 3, cp = p[0] & 0x0f;
	else if ((p[0] & 0xf8) == 0xf0)
		len = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	/* overlong forms, surrogates and code points past U+10FFFF are invalid */
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

void fs__gw_buf_json(struct fs_gw_buf *b, const uint8_t *p, size_t n)
{
	fs__gw_buf_add(b, "\"", 1);
	for (size_t i = 0; i < n;) {
		uint8_t c = p[i];
		size_t len = utf8_len(p + i, n - i);
		if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };
			fs__gw_buf_add(b, e, 2);
			i++;
		} else if (c < 0x20 || c == 0x7f || len == 0) {
			fs__gw_buf_printf(b, "\\u%04x", c);
			i++;
		} else {
			fs__gw_buf_add(b, p + i, len);
			i += len;
		}
	}
	fs__gw_buf_add(b, "\"", 1);
}

/* ------------------------------------------------------------ listings */

/* Append a string literal. */
#define BUF_LIT(b, s) fs__gw_buf_add((b), (s), sizeof(s) - 1)

static const char *type_name(uint8_t t)
{
	return t == SFSRO_T_DIR ? "dir" : t == SFSRO_T_SYMLINK ? "symlink" : "file";
}

void fs__gw_listing_json(const struct fs_gw_listing *l, struct fs_gw_buf *b)
{
	fs__gw_buf_printf(b, "{\"volume\":\"%s\",\"seq\":%lu,\"path\":", l->volume,
	                  (unsigned long)l->seq);
	fs__gw_buf_json(b, (const uint8_t *)l->path, strlen(l->path));
	BUF_LIT(b, ",\"entries\":[");
	for (size_t i = 0; i < l->n; i++) {
		const struct fs_gw_ent *e = &l->ents[i];
		if (i)
			BUF_LIT(b, ",");
		BUF_LIT(b, "{\"name\":");
		fs__gw_buf_json(b, e->name, e->name_len);
		fs__gw_buf_printf(b, ",\"type\":\"%s\",\"size\":%lu,\"mtime\":%ld}", type_name(e->type),
		                  (unsigned long)e->size, (long)e->mtime_s);
	}
	if (l->truncated)
		fs__gw_buf_printf(b, "],\"truncated\":true,\"next\":%lu}\n", (unsigned long)(l->from + l->n));
	else
		BUF_LIT(b, "],\"truncated\":false}\n");
}

void fs__gw_listing_html(const struct fs_gw_listing *l, struct fs_gw_buf *b)
{
	const char *path = l->path;
	char when[32];

	BUF_LIT(b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>");
	fs__gw_buf_html(b, (const uint8_t *)path, strlen(path));
	fs__gw_buf_printf(b, "</title><style>body{font-family:sans-serif;margin:2em}td{padding:0 1em}"
	                  "td.n{text-align:right}</style></head><body>\n<h1>");
	fs__gw_buf_html(b, (const uint8_t *)path, strlen(path));
	fs__gw_buf_printf(b, "</h1>\n<p>volume %s, version %lu</p>\n<table>\n"
	                  "<tr><th>name</th><th>size</th><th>modified (UTC)</th></tr>\n",
	                  l->volume, (unsigned long)l->seq);
	if (strcmp(path, "/"))
		BUF_LIT(b, "<tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n");
	for (size_t i = 0; i < l->n; i++) {
		const struct fs_gw_ent *e = &l->ents[i];
		bool dir = e->type == SFSRO_T_DIR;
		time_t t = (time_t)e->mtime_s;
		struct tm tm;
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M", gmtime_r(&t, &tm));
		BUF_LIT(b, "<tr><td><a href=\"./");
		fs__gw_buf_pct(b, e->name, e->name_len);
		if (dir)
			BUF_LIT(b, "/");
		BUF_LIT(b, "\">");
		fs__gw_buf_html(b, e->name, e->name_len);
		fs__gw_buf_printf(b, "%s</a></td><td class=\"n\">%lu</td><td>%s</td></tr>\n", dir ? "/" : "",
		                  (unsigned long)e->size, when);
	}
	if (l->truncated)
		fs__gw_buf_printf(b, "<tr><td><a href=\"./?from=%lu\">more...</a></td></tr>\n",
		                  (unsigned long)(l->from + l->n));
	BUF_LIT(b, "</table>\n</body></html>\n");
}
