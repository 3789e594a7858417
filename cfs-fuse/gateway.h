/*
 * cfs-gateway's pure pieces (gwhttp.c): what the gateway decides from the
 * bytes of a request, with no I/O, so that unit tests and a fuzzer reach
 * them. URLs, Range headers and If-None-Match lists come from anyone who
 * can connect: every function here takes them as untrusted text, bounded.
 *
 * Internal to cfs-fuse/ (cfs_gateway.c and the tests).
 */
#ifndef CFS_CFSFUSE_GATEWAY_H
#define CFS_CFSFUSE_GATEWAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/cfs.h"

/* The longest path inside a volume the gateway accepts, decoded. */
#define FS_GW_PATH_MAX 4096

enum fs_gw_kind {
	FS_GW_FILE = 1,           /* /cfs/VOLUME[@latest|@SEQ][/path] */
	FS_GW_ROOT,               /* /cfs-root/VOLUME[@latest|@SEQ] */
	FS_GW_BLOCK,              /* /cfs-block/KEY (64 hex digits or 52 base32 characters) */
};

struct fs_gw_url {
	enum fs_gw_kind kind;
	uint8_t vol[32];          /* FS_GW_FILE, FS_GW_ROOT */
	uint64_t seq;             /* the version asked for; 0: the newest */
	bool latest;              /* "@latest" was written (not a bare VOLUME) */
	struct cfs_id key;        /* FS_GW_BLOCK */
	char path[FS_GW_PATH_MAX + 1]; /* decoded, starting with '/' ("/" for the top) */
	bool slash;               /* the URL ended with '/' after the volume (or had no path) */
	bool bare;                /* no '/' at all after the volume: /cfs/VOLUME */
	const char *rest;         /* into the raw URL: what followed the volume spec, undecoded */
};

/* Parse a raw (still percent-encoded) request path, without its query.
 * 0; -ENOENT for a path outside /cfs/, /cfs-root/ and /cfs-block/; -EINVAL
 * with *ret_why (static) for a malformed volume, version, key or path (a
 * bad %XX, %00, a "." or ".." component, a path over FS_GW_PATH_MAX). */
int fs__gw_parse_url(const char *raw, struct fs_gw_url *ret, const char **ret_why) CFS_WUR;

enum { FS_GW_RANGE_NONE, FS_GW_RANGE_ONE, FS_GW_RANGE_UNSAT };
/* A Range header against a representation of size bytes: FS_GW_RANGE_ONE
 * with the inclusive [*ret_first, *ret_last]; FS_GW_RANGE_UNSAT (416) for a
 * single byte range that selects nothing; FS_GW_RANGE_NONE (serve it all)
 * for no header, one that is not "bytes=" with one valid range, and any
 * list of several (RFC 9110 14.2: a server may ignore Range). */
int fs__gw_parse_range(const char *hdr, uint64_t size, uint64_t *ret_first, uint64_t *ret_last);

/* Does an If-None-Match value (a list of entity tags, "W/" allowed, or
 * "*") name etag (quoted, as sent)? Weak comparison (RFC 9110 13.1.2). */
bool fs__gw_etag_match(const char *if_none_match, const char *etag);

/* The Content-Type for a file name, by its extension (a small table;
 * application/octet-stream otherwise). */
const char *fs__gw_content_type(const char *name);

/* Does the Accept header prefer JSON over HTML (application/json named,
 * text/html not)? */
bool fs__gw_wants_json(const char *accept);

/* Is a an address of this machine only (127/8, ::1, ::ffff:127/104)? */
bool fs__gw_is_loopback(const struct sockaddr *a);

/* A growing byte buffer for listings (memory from the xmalloc family). */
struct fs_gw_buf {
	char *p;
	size_t len, cap;
};
void fs__gw_buf_add(struct fs_gw_buf *b, const void *p, size_t n);
void fs__gw_buf_printf(struct fs_gw_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Bytes as HTML text or an attribute value (&<>"' escaped). */
void fs__gw_buf_html(struct fs_gw_buf *b, const uint8_t *p, size_t n);
/* Bytes as one URL path segment, percent-encoded but for unreserved ones. */
void fs__gw_buf_pct(struct fs_gw_buf *b, const uint8_t *p, size_t n);
/* Bytes as a JSON string, quotes included: valid UTF-8 as it is, control
 * characters escaped, each byte of invalid UTF-8 as \u00XX. */
void fs__gw_buf_json(struct fs_gw_buf *b, const uint8_t *p, size_t n);


/* A directory's page of entries, as the gateway lists it. */
struct fs_gw_ent {
	uint8_t *name;            /* raw bytes, not NUL-terminated */
	size_t name_len;
	uint8_t type;             /* SFSRO_T_FILE, SFSRO_T_DIR, SFSRO_T_SYMLINK */
	uint64_t size;
	int64_t mtime_s;
};
struct fs_gw_listing {
	const char *volume;       /* its name */
	uint64_t seq;
	const char *path;         /* decoded, ending with '/' */
	const struct fs_gw_ent *ents;
	size_t n;
	uint64_t from;            /* the index of ents[0] in the directory */
	bool truncated;           /* entries follow ents[n - 1]: the next page is from + n */
};
/* {"volume", "seq", "path", "entries": [{"name", "type", "size",
 * "mtime"}], "truncated", and "next" when truncated}. */
void fs__gw_listing_json(const struct fs_gw_listing *l, struct fs_gw_buf *b);
/* An HTML page: each name a relative link (directories with a trailing
 * '/'), sizes, UTC times, "../" below the top, "more..." when truncated. */
void fs__gw_listing_html(const struct fs_gw_listing *l, struct fs_gw_buf *b);

#endif
