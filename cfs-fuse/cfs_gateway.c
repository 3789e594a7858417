/*
 * cfs-gateway — volumes over HTTP, verified: the mount's own reader (block
 * cache, verified walks, the file reader; cfs-fuse/internal.h) behind
 * libmicrohttpd, so that a browser or curl reads a volume with no client
 * of its own, and every byte it is sent was checked as a mount checks it.
 *
 *   GET /cfs/VOLUME[@latest|@SEQ]/path   files (Range, ETag) and directory listings
 *   GET /cfs-root/VOLUME[@latest|@SEQ]   the signed root, raw
 *   GET /cfs-block/KEY                   one content-hash block, raw
 *
 * One thread, one libuv loop: libmicrohttpd runs in its external mode on
 * its own epoll fd, which the loop polls (uv_poll) beside a timer for its
 * timeouts. A request that needs blocks suspends its connection; the
 * fetch callbacks resume it. A file body is a content-reader callback fed
 * from a window of verified reads, in order; a read that fails after the
 * headers went out closes the connection, so a client sees a short body,
 * never a wrong byte.
 *
 * Here: libmicrohttpd's driver, the requests, file bodies, options. The
 * open volumes are gwvol.c; what is decided from a request's bytes
 * (URLs, Range, ETags, listings) is gwhttp.c, pure.
 *
 * Why one file of over 800 lines: a request's life is one chain of
 * libmicrohttpd callbacks on one connection (start, suspend, fetch,
 * resume, stream the body, complete), over the state of the request and
 * its stream; the parts that need no connection are already out of it
 * (gwhttp.c decides from bytes, gwvol.c keeps the open volumes), and its
 * main() and options are a tenth of it.
 *
 * Why a program of its own and not part of cfsd: cfsd is a ring server
 * whose one TCP port (metrics) is for its operator; an HTTP front for
 * anyone is another trust boundary with limits of its own, and it runs
 * where readers are, through the local cfsd or as a plain ring client, as
 * cfs-mount does.
 */
#include <getopt.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cfs-fuse/gateway.h"
#include "cfs-fuse/gwvol.h"
#include "cfs-fuse/internal.h"

#define USAGE "usage: cfs-gateway [--listen ADDR:PORT [--allow-remote]] [--cfsd SOCKET | --data DIR | " \
              "--bootstrap H:P | --from dir:PATH] [options]"

/* Versioned URLs name bytes that never change: cached for 48 weeks. */
#define IMMUTABLE "public, max-age=29030400, immutable"
/* Entries on one page of a listing (?from=N for the next ones): a
 * listing is built whole before it is sent, so this bounds its memory
 * (names of at most 255 bytes: a few MiB). */
#define LIST_MAX 10000

struct gw_req;

struct gw {
	uv_loop_t *loop;
	struct MHD_Daemon *mhd;
	uv_poll_t poll;
	uv_timer_t timer;
	uv_signal_t sigterm, sigint;
	bool stop;
	struct cfsfuse_options o;   /* what every volume's reader is made with */
	client_t *dh;
	struct fs_local *local;
	struct fs_blocks *blocks;   /* one verified block cache for every volume */
	struct fs_gw_vols *vols;    /* open volumes and versions */
	uint32_t window;            /* reads in flight per response */
	uint64_t max_age_s;         /* the newest root's max-age, and its recheck */
	uint64_t held, max_held;    /* bytes of reads held by responses, and their bound */
	struct gw_conn *conns;      /* every connection open */
	uv_timer_t head_timer;      /* cuts connections slow to send a request head */
	uint64_t head_ms;           /* --timeout */
	char state_dir[4000];       /* the highest root sequence seen, per volume (as cfs-mount) */
};

/*
 * A connection, for the rule libmicrohttpd lacks: its idle timeout is
 * reset by every byte, so a client that sends a request head a byte a
 * second would hold its connection for hours. Each request head must be
 * whole within --timeout of the connection opening or of the previous
 * answer ending; a connection that fails is shut down (shutdown(2), which
 * libmicrohttpd sees as the client going: it still owns the descriptor).
 */
struct gw_conn {
	struct gw_conn *next, **pprev;
	int fd;
	uint64_t since_ms;          /* waiting for a head since */
	bool busy;                  /* a request's head is in: it is being answered */
	bool cut;
};
static struct gw_conn *conn_of(struct MHD_Connection *conn);

/* ------------------------------------------------------------ MHD driver */

static void on_timer(uv_timer_t *t);

/* Let libmicrohttpd do what its sockets and resumed connections need,
 * then wake again at its next timeout (a connection's idle limit). */
static void mhd_run(struct gw *gw)
{
	MHD_UNSIGNED_LONG_LONG ms;

	MHD_run(gw->mhd);
	if (MHD_get_timeout(gw->mhd, &ms) == MHD_YES)
		uv_timer_start(&gw->timer, on_timer, ms, 0);
	else
		uv_timer_stop(&gw->timer);
}

static void on_timer(uv_timer_t *t)
{
	mhd_run(t->data);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
	mhd_run(p->data);
}

/* A connection was resumed: run libmicrohttpd from the loop, soon. */
static void kick(struct gw *gw)
{
	uv_timer_start(&gw->timer, on_timer, 0, 0);
}

struct gw_stream;

/*
 * One request, from its headers to the response queued: parse the URL,
 * get the volume's root, look the path up, then a file (its inode and the
 * first read of its body, so that a block that does not verify is a 502
 * while no header has gone out) or a directory (a page of its listing,
 * built whole). Each step
 * is started by the one before it, from a callback; the connection is
 * suspended while one is out and resumed when the response is ready.
 */
struct gw_req {
	struct fs_gw_waiter wait;  /* for a volume's root */
	struct gw *gw;
	struct MHD_Connection *conn;
	char *raw;                 /* the URL as sent, without its query */
	bool head, json, suspended, ready;
	struct fs_gw_url url;
	struct fs_gw_vol *vol;
	struct sfsro_entry ent;    /* what the path names (its name not kept) */
	char etag[CFS_NAME_LEN + 40];
	uint64_t first, last;      /* the bytes to send */
	bool partial;
	struct gw_stream *st;
	struct fs_dir *dir;
	struct fs_gw_ent *ents;
	size_t nents, cap;
	uint64_t from;             /* the first entry listed (?from=N) */
	bool truncated;            /* more entries after this page */
	unsigned code;
	struct MHD_Response *resp;
};

/* ------------------------------------------------------------ requests */

static void req_done(struct gw_req *rq, unsigned code, struct MHD_Response *resp)
{
	rq->code = code;
	rq->resp = resp;
	rq->ready = true;
	if (rq->suspended) {
		rq->suspended = false;
		MHD_resume_connection(rq->conn);
		kick(rq->gw);
	}
}

static void add_header(struct MHD_Response *r, const char *name, const char *val)
{
	(void)MHD_add_response_header(r, name, val);
}

/* A short text answer: "404 Not Found: why". */
static void req_text(struct gw_req *rq, unsigned code, const char *why)
{
	char body[512];
	int n = snprintf(body, sizeof(body), "%u %s%s%s\n", code,
	                 code == 400 ? "Bad Request" : code == 404 ? "Not Found" : code == 405 ? "Method Not Allowed"
	                 : code == 502 ? "Bad Gateway" : code == 503 ? "Service Unavailable"
	                 : code == 504 ? "Gateway Timeout" : "Error",
	                 why ? ": " : "", why ? why : "");
	struct MHD_Response *r = MHD_create_response_from_buffer((size_t)n, body, MHD_RESPMEM_MUST_COPY);
	add_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	add_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (code == 405)
		add_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	req_done(rq, code, r);
}

/* What the ring's or the walk's error means to an HTTP client. */
static void req_error(struct gw_req *rq, int r)
{
	switch (r) {
	case -ENOENT: case -ENOTDIR: case -ENAMETOOLONG:
		req_text(rq, 404, rq->url.kind == FS_GW_BLOCK ? "no server has this block"
		         : !(rq->vol && rq->vol->ready) ? "no server has this volume (or this version of it)"
		         : "no such file or directory");
		return;
	case -ETIMEDOUT:
		req_text(rq, 504, "the ring did not answer in time");
		return;
	case -ECONNREFUSED: case -ECONNRESET: case -ENOTCONN: case -EHOSTUNREACH: case -EACCES:
	case -ECANCELED: case -ESHUTDOWN:
		req_text(rq, 503, "the ring cannot be reached");
		return;
	case -EKEYEXPIRED:
		req_text(rq, 502, "the volume's root has expired (its publisher has not refreshed it)");
		return;
	case -ESTALE:
		req_text(rq, 502, "the ring gave a root older than one already served");
		return;
	default: /* -EIO from a walk: a block that could not be had verified */
		req_text(rq, 502, "a block could not be fetched and verified");
	}
}

static void set_cache(struct gw_req *rq, struct MHD_Response *r)
{
	char cc[64];

	if (rq->url.seq) {
		add_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, IMMUTABLE);
	} else {
		snprintf(cc, sizeof(cc), "public, max-age=%lu", (unsigned long)rq->gw->max_age_s);
		add_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, cc);
	}
}

static void req_redirect(struct gw_req *rq, unsigned code, const char *location)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);

	add_header(r, MHD_HTTP_HEADER_LOCATION, location);
	set_cache(rq, r);
	req_done(rq, code, r);
}

static bool req_not_modified(struct gw_req *rq)
{
	const char *inm = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);

	if (!fs__gw_etag_match(inm, rq->etag))
		return false;
	struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	add_header(r, MHD_HTTP_HEADER_ETAG, rq->etag);
	set_cache(rq, r);
	req_done(rq, MHD_HTTP_NOT_MODIFIED, r);
	return true;
}

/* ------------------------------------------------------------ file bodies */

/* One read of the window: bytes [off, off + len) of the file. */
struct gw_chunk {
	struct gw_stream *st;
	uint8_t *p;
	size_t n, len;
	int status;
	bool done;
};

/*
 * A file body: reads of at most a block each, up to window of them in
 * flight or held, handed to libmicrohttpd in order by its content reader.
 * All responses together hold at most max_held bytes of reads, but each
 * may always have one: so a thousand slow readers cost a bounded amount
 * of memory, and none of them starves. The stream is freed when
 * libmicrohttpd lets the response go and no read is out.
 */
struct gw_stream {
	struct gw *gw;
	struct fs_gw_vol *vol;        /* held */
	struct fhandle *h;
	struct MHD_Connection *conn;
	struct gw_req *rq;         /* waiting for the first read, else NULL */
	uint64_t first, end;       /* bytes [first, end) */
	uint32_t bsize, window;
	uint64_t nchunks, head, next; /* chunks: the oldest held, the next to start */
	size_t used;               /* bytes of the oldest chunk sent */
	uint32_t out;              /* reads in flight */
	bool suspended, dead, reading;
	struct gw_chunk *ring;
};

static uint64_t chunk_off(const struct gw_stream *st, uint64_t k)
{
	uint64_t b = (st->first / st->bsize + k) * st->bsize;
	return b > st->first ? b : st->first;
}

static uint64_t chunk_end(const struct gw_stream *st, uint64_t k)
{
	uint64_t e = (st->first / st->bsize + k + 1) * st->bsize;
	return e < st->end ? e : st->end;
}

static void chunk_drop(struct gw_stream *st, struct gw_chunk *c)
{
	free(c->p);
	st->gw->held -= c->len;
	memset(c, 0, sizeof(*c));
}

static void stream_free_now(struct gw_stream *st)
{
	for (uint32_t i = 0; i < st->window; i++)
		if (st->ring[i].len && st->ring[i].done)
			chunk_drop(st, &st->ring[i]);
	fs__fhandle_free(st->h);
	fs__gw_vol_unref(st->vol);
	free(st->ring);
	free(st);
}

static void req_first_read(struct gw_req *rq, int status);

static void chunk_read(cfsfuse_t *fs, void *arg, int status, const uint8_t *p, size_t n)
{
	struct gw_chunk *c = arg;
	struct gw_stream *st = c->st;

	st->out--;
	c->done = true;
	if (status == 0 && n != c->len)
		status = -EIO; /* the file is shorter than its inode says */
	c->status = status;
	if (status == 0)
		c->p = xmemdup(p, n ? n : 1), c->n = n;
	if (st->dead) {
		if (!st->out && !st->reading)
			stream_free_now(st);
		return;
	}
	if (st->rq && c == &st->ring[0] && st->head == 0) {
		struct gw_req *rq = st->rq;
		st->rq = NULL;
		req_first_read(rq, status);
	} else if (st->suspended && c == &st->ring[st->head % st->window]) {
		st->suspended = false;
		MHD_resume_connection(st->conn);
		kick(st->gw);
	}
}

/* Start reads up to the window, and past the first only within the
 * gateway's bound on bytes held. A read may end inside this call (its
 * blocks cached); chunk_read then only records it. */
static void stream_fill(struct gw_stream *st)
{
	struct gw *gw = st->gw;

	if (st->reading)
		return;
	st->reading = true;
	while (st->next < st->nchunks && st->next < st->head + st->window) {
		uint64_t off = chunk_off(st, st->next), len = chunk_end(st, st->next) - off;
		if (st->next > st->head && gw->held + len > gw->max_held)
			break;
		struct gw_chunk *c = &st->ring[st->next % st->window];
		*c = (struct gw_chunk){ .st = st, .len = (size_t)len };
		gw->held += len;
		st->out++;
		st->next++;
		fs__file_read(st->vol->fs, st->h, off, (size_t)len, chunk_read, c);
	}
	st->reading = false;
	if (st->dead && !st->out)
		stream_free_now(st); /* released by a read that ended in this call */
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct gw_stream *st = cls;

	if (st->head >= st->nchunks)
		return MHD_CONTENT_READER_END_OF_STREAM;
	struct gw_chunk *c = &st->ring[st->head % st->window];
	if (!c->done) {
		st->suspended = true;
		MHD_suspend_connection(st->conn);
		return 0;
	}
	if (c->status < 0) {
		char k[9];
		log_warn("volume %s, the file whose inode is %s: closing the connection at byte %lu: %s",
		         st->vol->fs->volname, cfs_id_short(&st->h->key, k), (unsigned long)(st->first + pos),
		         strerror(-c->status));
		return MHD_CONTENT_READER_END_WITH_ERROR; /* a short body, never a wrong byte */
	}
	size_t n = c->n - st->used < max ? c->n - st->used : max;
	memcpy(buf, c->p + st->used, n);
	st->used += n;
	if (st->used == c->n) {
		chunk_drop(st, c);
		st->used = 0;
		st->head++;
		stream_fill(st);
	}
	return (ssize_t)n;
}

static void stream_release(void *cls)
{
	struct gw_stream *st = cls;

	st->dead = true;
	if (!st->out && !st->reading)
		stream_free_now(st);
}

static struct gw_stream *stream_new(struct gw_req *rq, struct fhandle *h)
{
	struct gw_stream *st = xcalloc(1, sizeof(*st));

	st->gw = rq->gw;
	st->vol = rq->vol;
	st->vol->refs++;
	st->h = h;
	st->conn = rq->conn;
	st->first = rq->first;
	st->end = rq->last + 1;
	st->bsize = h->inode.bsize ? h->inode.bsize : SFSRO_BLOCK_SIZE_DEFAULT;
	st->window = rq->gw->window;
	st->nchunks = st->end > st->first ? (st->end - 1) / st->bsize - st->first / st->bsize + 1 : 0;
	st->ring = xcalloc(st->window, sizeof(*st->ring));
	return st;
}

/* ------------------------------------------------------------ files */

static void file_headers(struct gw_req *rq, struct MHD_Response *r, uint64_t size)
{
	char cr[96];

	add_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, fs__gw_content_type(rq->url.path));
	add_header(r, MHD_HTTP_HEADER_ETAG, rq->etag);
	add_header(r, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
	add_header(r, "X-Content-Type-Options", "nosniff");
	set_cache(rq, r);
	if (rq->partial) {
		snprintf(cr, sizeof(cr), "bytes %lu-%lu/%lu", (unsigned long)rq->first,
		         (unsigned long)rq->last, (unsigned long)size);
		add_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
	}
}

static void req_first_read(struct gw_req *rq, int status)
{
	struct gw_stream *st = rq->st;

	if (status < 0) { /* nothing sent yet: say so */
		rq->st = NULL;
		stream_release(st);
		req_error(rq, status == -ECANCELED ? status : -EIO);
		return;
	}
	struct MHD_Response *r = MHD_create_response_from_callback(st->end - st->first, 64 * 1024,
	                                                           stream_reader, st, stream_release);
	rq->st = NULL; /* the response owns it now */
	file_headers(rq, r, st->h->inode.size);
	req_done(rq, rq->partial ? MHD_HTTP_PARTIAL_CONTENT : MHD_HTTP_OK, r);
}

static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max)
{
	return MHD_CONTENT_READER_END_WITH_ERROR; /* HEAD: never asked */
}

static void file_opened(cfsfuse_t *fs, void *arg, int status, struct fhandle *h)
{
	struct gw_req *rq = arg;
	uint64_t size;

	if (status < 0) {
		req_error(rq, status);
		return;
	}
	size = h->inode.size;
	if (rq->head || size == 0 || rq->first > rq->last) {
		struct MHD_Response *r = rq->head
			? MHD_create_response_from_callback(size ? rq->last + 1 - rq->first : 0, 4096, no_body,
			                                    NULL, NULL)
			: MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
		file_headers(rq, r, size);
		fs__fhandle_free(h);
		req_done(rq, rq->partial ? MHD_HTTP_PARTIAL_CONTENT : MHD_HTTP_OK, r);
		return;
	}
	rq->st = stream_new(rq, h);
	rq->st->rq = rq;
	stream_fill(rq->st);
}

static void req_file(struct gw_req *rq)
{
	const struct sfsro_entry *e = &rq->ent;
	char name[CFS_NAME_LEN + 1];

	if (rq->url.slash)
		return req_text(rq, 404, "a file, not a directory");
	cfs_name_encode(name, e->key.b);
	snprintf(rq->etag, sizeof(rq->etag), "\"%s\"", name);
	if (req_not_modified(rq))
		return;
	rq->first = 0;
	rq->last = e->size ? e->size - 1 : 0;
	const char *range = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_RANGE);
	const char *if_range = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_RANGE);
	if (range && (!if_range || !strcmp(if_range, rq->etag))) {
		switch (fs__gw_parse_range(range, e->size, &rq->first, &rq->last)) {
		case FS_GW_RANGE_ONE:
			rq->partial = true;
			break;
		case FS_GW_RANGE_UNSAT: {
			char cr[48];
			struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
			snprintf(cr, sizeof(cr), "bytes */%lu", (unsigned long)e->size);
			add_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
			add_header(r, MHD_HTTP_HEADER_ETAG, rq->etag);
			req_done(rq, MHD_HTTP_RANGE_NOT_SATISFIABLE, r);
			return;
		}
		default:
			rq->first = 0;
		}
	}
	fs__file_open(rq->vol->fs, 0, &e->key, file_opened, rq);
}

/* ------------------------------------------------------------ directories */

static void dir_done(cfsfuse_t *fs, void *arg, int status, struct fs_dir *h)
{
	struct gw_req *rq = arg;
	struct fs_gw_buf b = { 0 };

	if (status < 0)
		return req_error(rq, status);
	struct fs_gw_listing l = { .volume = rq->vol->fs->volname, .seq = rq->vol->fs->root.seq,
	                           .path = rq->url.path, .ents = rq->ents, .n = rq->nents,
	                           .from = rq->from, .truncated = rq->truncated };
	if (rq->json)
		fs__gw_listing_json(&l, &b);
	else
		fs__gw_listing_html(&l, &b);
	struct MHD_Response *r = MHD_create_response_from_buffer(b.len, b.p, MHD_RESPMEM_MUST_FREE);
	add_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, rq->json ? "application/json" : "text/html; charset=utf-8");
	add_header(r, MHD_HTTP_HEADER_ETAG, rq->etag);
	add_header(r, MHD_HTTP_HEADER_VARY, "Accept");
	add_header(r, "X-Content-Type-Options", "nosniff");
	set_cache(rq, r);
	req_done(rq, MHD_HTTP_OK, r);
}

static bool dir_add(void *arg, const struct sfsro_entry *e, uint64_t index)
{
	struct gw_req *rq = arg;

	if (rq->nents >= LIST_MAX) {
		rq->truncated = true;
		return false;
	}
	if (rq->nents == rq->cap) {
		rq->cap = rq->cap ? rq->cap * 2 : 64;
		rq->ents = xrealloc(rq->ents, rq->cap * sizeof(*rq->ents));
	}
	rq->ents[rq->nents++] = (struct fs_gw_ent){ .name = xmemdup(e->name.p, e->name.len),
	                                         .name_len = e->name.len, .type = e->type,
	                                         .size = e->size, .mtime_s = e->mtime_s };
	return true;
}

static void dir_opened(cfsfuse_t *fs, void *arg, int status, struct fs_dir *h)
{
	struct gw_req *rq = arg;

	if (status < 0) {
		fs__dir_free(h);
		return req_error(rq, status);
	}
	rq->dir = h;
	fs__dir_read(fs, h, rq->from, dir_add, dir_done, rq);
}

static void req_dir(struct gw_req *rq)
{
	char name[CFS_NAME_LEN + 1];

	if (!rq->url.slash) { /* relative links in the listing need the slash */
		const char *q = rq->json ? "?format=json" : "";
		size_t n = strlen(rq->raw) + 16;
		char *loc = xmalloc(n);
		snprintf(loc, n, "%s/%s", rq->raw, q);
		req_redirect(rq, rq->url.seq ? MHD_HTTP_MOVED_PERMANENTLY : MHD_HTTP_FOUND, loc);
		free(loc);
		return;
	}
	cfs_name_encode(name, rq->ent.key.b);
	snprintf(rq->etag, sizeof(rq->etag), "\"%s.%s.%lu\"", name, rq->json ? "json" : "html",
	         (unsigned long)rq->from);
	if (req_not_modified(rq))
		return;
	fs__dir_open(rq->vol->fs, 0, &rq->ent.key, dir_opened, rq);
}

/* ------------------------------------------------------------ the steps */

static void looked_up(cfsfuse_t *fs, void *arg, int status, const struct sfsro_entry *e)
{
	struct gw_req *rq = arg;

	if (status < 0)
		return req_error(rq, status);
	rq->ent = *e;
	rq->ent.name = (struct cfs_bytes){ 0 }; /* not kept */
	rq->ent.target = (struct cfs_bytes){ 0 };
	switch (e->type) {
	case SFSRO_T_DIR: return req_dir(rq);
	case SFSRO_T_FILE: return req_file(rq);
	default: return req_text(rq, 404, "a symbolic link (the gateway does not follow them)");
	}
}

static void req_vol_ready(struct gw_req *rq, int status)
{
	struct fs_gw_vol *v = rq->vol;
	char loc[CFS_NAME_LEN + 64];

	if (status < 0)
		return req_error(rq, status);
	if (rq->url.kind == FS_GW_ROOT) {
		struct MHD_Response *r = MHD_create_response_from_buffer(v->raw_len, v->raw, MHD_RESPMEM_MUST_COPY);
		snprintf(loc, sizeof(loc), "%lu", (unsigned long)v->fs->root.seq);
		add_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/vnd.cfs.root");
		add_header(r, "CFS-Seq", loc);
		set_cache(rq, r);
		return req_done(rq, MHD_HTTP_OK, r);
	}
	if (!rq->url.seq && !rq->url.latest) {
		/* VOLUME/path: to the version that is the newest now, whose URL
		 * can be cached for good */
		const char *q = rq->json ? "?format=json" : "";
		size_t n = strlen(rq->url.rest) + sizeof(loc) + 16;
		char *l = xmalloc(n);
		snprintf(l, n, "/cfs/%s@%lu%s%s", v->fs->volname, (unsigned long)v->fs->root.seq,
		         rq->url.bare ? "/" : rq->url.rest, q);
		req_redirect(rq, MHD_HTTP_FOUND, l);
		free(l);
		return;
	}
	if (!strcmp(rq->url.path, "/")) {
		struct sfsro_entry e = { .type = SFSRO_T_DIR, .key = v->fs->root.root_dir,
		                         .mtime_s = v->fs->root.mtime_s };
		return looked_up(v->fs, rq, 0, &e);
	}
	fs__path_lookup(v->fs, rq->url.path, looked_up, rq);
}

static void vol_waited(struct fs_gw_waiter *w, int status)
{
	req_vol_ready(container_of(w, struct gw_req, wait), status);
}

static void block_got(void *arg, int status, const struct fblk *b)
{
	struct gw_req *rq = arg;
	char hex[65];

	if (status < 0)
		return req_error(rq, status);
	struct MHD_Response *r = MHD_create_response_from_buffer(b->len, b->p, MHD_RESPMEM_MUST_COPY);
	snprintf(rq->etag, sizeof(rq->etag), "\"%.64s\"", cfs_id_hex(&b->key, hex));
	add_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/vnd.cfs.block");
	add_header(r, MHD_HTTP_HEADER_ETAG, rq->etag);
	add_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, IMMUTABLE);
	req_done(rq, MHD_HTTP_OK, r);
}

static void req_start(struct gw_req *rq, const char *url)
{
	const char *why = NULL, *fmt, *accept;
	int r;

	rq->raw = xstrdup(url);
	if ((r = fs__gw_parse_url(url, &rq->url, &why)) < 0)
		return req_text(rq, r == -ENOENT ? 404 : 400, why);
	fmt = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "format");
	accept = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
	rq->json = fmt ? !strcmp(fmt, "json") : fs__gw_wants_json(accept);
	const char *from = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "from");
	if (from) {
		char *end;
		unsigned long long v = strtoull(from, &end, 10);
		if (!*from || *end || v > UINT32_MAX)
			return req_text(rq, 400, "?from= wants an entry number");
		rq->from = v;
	}
	if (rq->url.kind == FS_GW_BLOCK) {
		const struct fblk *b = fs__blk_peek(rq->gw->blocks, &rq->url.key);
		if (b)
			return block_got(rq, 0, b);
		fs__blk_fetch(rq->gw->blocks, &rq->url.key, false, block_got, rq);
		return;
	}
	rq->wait.cb = vol_waited;
	rq->vol = fs__gw_vol_get(rq->gw->vols, rq->url.vol, rq->url.seq, &rq->wait);
	if (rq->vol->ready)
		return req_vol_ready(rq, 0);
	if (!rq->vol->fetching) /* failed at once */
		return req_vol_ready(rq, rq->vol->err);
}

/* libmicrohttpd's access handler: called when the headers are in, again
 * for each piece of a request body (ignored), once the request is whole,
 * and again after a resume. A response is queued only once the request is
 * whole: libmicrohttpd closes a connection whose response came earlier. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
	struct gw *gw = cls;
	struct gw_req *rq = *con_cls;

	if (!rq) {
		struct gw_conn *c = conn_of(conn);
		if (c)
			c->busy = true;
		rq = *con_cls = xcalloc(1, sizeof(*rq));
		rq->gw = gw;
		rq->conn = conn;
		rq->head = !strcmp(method, MHD_HTTP_METHOD_HEAD);
		if (!rq->head && strcmp(method, MHD_HTTP_METHOD_GET))
			req_text(rq, 405, "the gateway serves GET and HEAD");
		else
			req_start(rq, url);
		return MHD_YES; /* a response queued now would close the connection (read no body) */
	}
	if (*upload_size) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (rq->ready) {
		enum MHD_Result ret = MHD_queue_response(conn, rq->code, rq->resp);
		MHD_destroy_response(rq->resp);
		rq->resp = NULL;
		return ret;
	}
	if (!rq->suspended) {
		rq->suspended = true;
		MHD_suspend_connection(conn);
	}
	return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode why)
{
	struct gw_req *rq = *con_cls;
	struct gw_conn *c = conn_of(conn);

	if (c) { /* the next request's head is due within --timeout */
		c->busy = false;
		c->since_ms = uv_now(((struct gw *)cls)->loop);
	}
	if (!rq)
		return;
	if (rq->resp)
		MHD_destroy_response(rq->resp);
	if (rq->st)
		stream_release(rq->st);
	for (size_t i = 0; i < rq->nents; i++)
		free(rq->ents[i].name);
	free(rq->ents);
	fs__dir_free(rq->dir);
	fs__gw_vol_unref(rq->vol);
	free(rq->raw);
	free(rq);
	*con_cls = NULL;
}

/* The URL as sent: no %XX decoding by libmicrohttpd, whose decoder would
 * turn %00 into the end of the string; fs__gw_parse_url decodes. */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s)
{
	return strlen(s);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];

	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = 0;
	log_debug("http: %s", line);
}

/* ------------------------------------------------------------ connections */

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
	struct gw *gw = cls;
	struct gw_conn *c = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		c = *socket_context = xcalloc(1, sizeof(*c));
		c->fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD)->connect_fd;
		c->since_ms = uv_now(gw->loop);
		if ((c->next = gw->conns))
			gw->conns->pprev = &c->next;
		c->pprev = &gw->conns;
		gw->conns = c;
	} else if (c) {
		if ((*c->pprev = c->next))
			c->next->pprev = c->pprev;
		free(c);
		*socket_context = NULL;
	}
}

static struct gw_conn *conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *i = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return i ? i->socket_context : NULL;
}

static void on_head_timer(uv_timer_t *t)
{
	struct gw *gw = t->data;
	uint64_t now = uv_now(gw->loop);
	bool any = false;

	for (struct gw_conn *c = gw->conns; c; c = c->next)
		if (!c->busy && !c->cut && now - c->since_ms > gw->head_ms) {
			(void)shutdown(c->fd, SHUT_RDWR);
			c->cut = any = true;
		}
	if (any)
		mhd_run(gw);
}

/* ------------------------------------------------------------ main */

struct gw_args {
	struct client_target tgt;
	const char *listen;
	bool allow_remote;
	unsigned long max_conns, timeout_s, window, cache_mb, max_age_s, roots;
	const char *state_dir;
};

static unsigned long num_arg(const char *opt, const char *val, unsigned long lo, unsigned long hi)
{
	char *end;
	unsigned long v = strtoul(val, &end, 10);

	if (!*val || *end || v < lo || v > hi)
		cfs_usage_error(USAGE, "%s wants %lu..%lu, not '%s'", opt, lo, hi, val);
	return v;
}

static void usage_full(void)
{
	puts(USAGE "\n\n"
	     "Serve volumes over HTTP, every byte verified as cfs-mount verifies it:\n"
	     "  /cfs/VOLUME[@SEQ]/PATH   files (Range, ETag) and directory listings (HTML or JSON)\n"
	     "  /cfs-root/VOLUME[@SEQ]   the signed root, raw\n"
	     "  /cfs-block/KEY           one content-hash block, raw\n"
	     "\n"
	     "      --listen ADDR:PORT    address to serve on (default 127.0.0.1:8080)\n"
	     "      --allow-remote        serve on an address that is not a loopback one\n"
	     "      --cfsd SOCKET         the local cfsd's control socket\n"
	     "  -d, --data DIR            ... or the data directory of that cfsd (default\n"
	     "                            $CFS_DATA_DIR, /var/lib/cfs for root)\n"
	     "      --bootstrap H:P       read as a plain ring client, no local cfsd (repeatable;\n"
	     "                            default: the local cfsd when one runs, else\n"
	     "                            $CFS_BOOTSTRAP, else ~/.config/cfs/client.conf)\n"
	     "      --from dir:PATH       read from the dir: store at PATH (no ring)\n"
	     "      --max-connections N   connections at once, 1..65536 (default 256)\n"
	     "      --timeout S           close a connection idle this long, or slower to send a\n"
	     "                            request head, 1..3600 s (default 30)\n"
	     "  -w, --window N            reads in flight per response, 1..1024 blocks (default 24,\n"
	     "                            as cfs-cat)\n"
	     "      --cache-mb N          verified blocks kept in memory, 1..65536 MiB (default 64)\n"
	     "      --max-age S           the newest version's max-age and recheck, 1..86400 s\n"
	     "                            (default 60)\n"
	     "      --roots N             volumes and versions kept open, 1..4096 (default 16)\n"
	     "      --state-dir DIR       where the highest root sequence seen is kept, as by\n"
	     "                            cfs-mount (default /var/lib/cfs/mounts for root, else\n"
	     "                            $XDG_STATE_HOME/cfs)\n"
	     "  -V, --version             show the version\n"
	     "  -h, --help                show this help");
	exit(0);
}

/* The options, as cfs-cat's where they mean the same (the ring to use,
 * --from, -w); the rest are the gateway's bounds. Short options only where
 * their letter means the same in every tool (-d, -w, -h, -V). No
 * arguments: the volumes are named by the URLs. */
static void parse_args(int argc, char **argv, struct gw_args *a, struct gw *gw)
{
	enum { O_LISTEN = CFSFUSE_O_NEXT, O_REMOTE, O_CONNS, O_TIMEOUT, O_CACHE, O_MAXAGE, O_ROOTS,
	       O_STATE };
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "allow-remote", no_argument, NULL, O_REMOTE },
		{ "cfsd", required_argument, NULL, CFSFUSE_O_CFSD },
		{ "data", required_argument, NULL, 'd' },
		{ "bootstrap", required_argument, NULL, CFSFUSE_O_BOOTSTRAP },
		{ "from", required_argument, NULL, CFSFUSE_O_FROM },
		{ "max-connections", required_argument, NULL, O_CONNS },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "window", required_argument, NULL, 'w' },
		{ "cache-mb", required_argument, NULL, O_CACHE },
		{ "max-age", required_argument, NULL, O_MAXAGE },
		{ "roots", required_argument, NULL, O_ROOTS },
		{ "state-dir", required_argument, NULL, O_STATE },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int opt;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":d:w:hV", opts, NULL)) != -1) {
		if (cfsfuse_reader_opt(opt, optarg, USAGE, &a->tgt, &gw->o))
			continue;
		switch (opt) {
		case O_LISTEN: a->listen = optarg; break;
		case O_REMOTE: a->allow_remote = true; break;
		case O_CONNS: a->max_conns = num_arg("--max-connections", optarg, 1, 65536); break;
		case O_TIMEOUT: a->timeout_s = num_arg("--timeout", optarg, 1, 3600); break;
		case 'w': a->window = num_arg("--window", optarg, 1, 1024); break;
		case O_CACHE: a->cache_mb = num_arg("--cache-mb", optarg, 1, 65536); break;
		case O_MAXAGE: a->max_age_s = num_arg("--max-age", optarg, 1, 86400); break;
		case O_ROOTS: a->roots = num_arg("--roots", optarg, 1, 4096); break;
		case O_STATE: a->state_dir = optarg; break;
		case 'V':
			printf("cfs-gateway %s\n", CFS_VERSION);
			exit(0);
		case 'h':
			usage_full();
			break;
		case ':':
			cfs_usage_error(USAGE, "option '%s' needs a value", argv[optind - 1]);
		default:
			cfs_usage_error(USAGE, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind != argc)
		cfs_usage_error(USAGE, "no arguments besides the options: '%s'", argv[optind]);
	if (gw->o.from_dir && (a->tgt.sock[0] || a->tgt.nboot))
		cfs_usage_error(USAGE, "--from reads a local store: no --cfsd, --data or --bootstrap");
}

static void on_signal(uv_signal_t *s, int signum)
{
	struct gw *gw = s->data;

	log_info("%s: stopping", strsignal(signum));
	gw->stop = true;
}

/* Listen where asked: a loopback address unless the operator said
 * --allow-remote (as cfsd refuses to found a ring on a public address
 * without --first), since anyone who can connect reads every volume the
 * ring holds through this machine's bandwidth. */
static struct MHD_Daemon *serve(struct gw *gw, const struct gw_args *a)
{
	struct cfs_addr addr;
	unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;

	if (cfs_addr_parse(&addr, a->listen) < 0 || cfs_addr_port(&addr) == 0)
		cfs_usage_error(USAGE, "--listen wants IP:PORT ([IPv6]:PORT), not '%s'", a->listen);
	if (!fs__gw_is_loopback(&addr.sa) && !a->allow_remote)
		cfs_usage_error(USAGE, "--listen %s is not a loopback address: give --allow-remote too, "
		                "to serve other machines", a->listen);
	if (addr.sa.sa_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	return MHD_start_daemon(flags, cfs_addr_port(&addr), NULL, NULL, on_request, gw,
	                        MHD_OPTION_SOCK_ADDR, &addr.sa,
	                        MHD_OPTION_CONNECTION_LIMIT, (unsigned)a->max_conns,
	                        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)a->timeout_s,
	                        MHD_OPTION_NOTIFY_COMPLETED, on_completed, gw,
	                        MHD_OPTION_NOTIFY_CONNECTION, on_connection, gw,
	                        MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, gw,
	                        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, gw,
	                        MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
	                        MHD_OPTION_END);
}

/* --state-dir, else cfs-mount's default: the same files, so a mount and
 * the gateway of one user refuse the same rollbacks. */
static int state_dir_init(struct gw *gw, const char *given)
{
	int r = 0;

	if (given)
		snprintf(gw->state_dir, sizeof(gw->state_dir), "%s", given);
	else if ((r = cfs_user_dir(gw->state_dir, sizeof(gw->state_dir), "/var/lib/cfs/mounts",
	                           "XDG_STATE_HOME", ".local/state")) == -ENOENT)
		r = snprintf(gw->state_dir, sizeof(gw->state_dir), "/tmp/cfs-state-%u", (unsigned)geteuid()) <
		    (int)sizeof(gw->state_dir) ? 0 : -ENAMETOOLONG;
	if (r < 0)
		return log_error_errno(r, "state directory");
	(void)cfs_mkdir_p(gw->state_dir, 0700); /* a failure shows when a sequence is written */
	return 0;
}

int main(int argc, char **argv)
{
	static struct gw gw;
	static struct gw_args a = { .listen = "127.0.0.1:8080", .max_conns = 256, .timeout_s = 30,
	                         .window = 24, .cache_mb = 64, .max_age_s = 60, .roots = 16 };

	cfs_log_init(argv[0], CFS_LOG_INFO);
	cfsfuse_options_default(&gw.o);
	parse_args(argc, argv, &a, &gw);
	if (cfs_crypto_init() < 0)
		return 1;
	gw.loop = uv_default_loop();
	gw.o.target = &a.tgt;
	gw.o.cache_bytes = (size_t)a.cache_mb << 20;
	gw.window = (uint32_t)a.window;
	gw.max_age_s = a.max_age_s;
	gw.max_held = gw.o.cache_bytes; /* reads held by responses: as much as the cache */
	if (state_dir_init(&gw, a.state_dir) < 0)
		return 1;
	if (gw.o.from_dir) {
		if (fs__local_open(gw.loop, gw.o.from_dir, &gw.local) < 0)
			return 1;
	} else if (client_target_resolve(&a.tgt) < 0 ||
	           client_target_open(gw.loop, &a.tgt, gw.o.fetch_timeout_ms, &gw.dh) < 0) {
		return 1;
	}
	gw.blocks = fs__blocks_new(gw.loop, gw.dh, gw.local, &gw.o, NULL);
	struct fs_gw_vols_config vc = { .loop = gw.loop, .o = &gw.o, .dh = gw.dh, .local = gw.local,
	                                .blocks = gw.blocks, .max = (uint32_t)a.roots,
	                                .max_age_ms = a.max_age_s * 1000, .state_dir = gw.state_dir };
	gw.vols = fs__gw_vols_new(&vc);
	if (!(gw.mhd = serve(&gw, &a)))
		return log_error_errno(-EADDRNOTAVAIL, "cannot serve HTTP on %s (in use, or not an address "
		                       "of this machine)", a.listen), 1;
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(gw.mhd, MHD_DAEMON_INFO_EPOLL_FD);
	uv_poll_init(gw.loop, &gw.poll, info->epoll_fd);
	uv_timer_init(gw.loop, &gw.timer);
	uv_timer_init(gw.loop, &gw.head_timer);
	gw.head_timer.data = &gw;
	gw.head_ms = a.timeout_s * 1000;
	uv_timer_start(&gw.head_timer, on_head_timer, 1000, 1000);
	uv_signal_init(gw.loop, &gw.sigterm);
	uv_signal_init(gw.loop, &gw.sigint);
	gw.poll.data = gw.timer.data = gw.sigterm.data = gw.sigint.data = &gw;
	uv_poll_start(&gw.poll, UV_READABLE, on_poll);
	uv_signal_start(&gw.sigterm, on_signal, SIGTERM);
	uv_signal_start(&gw.sigint, on_signal, SIGINT);
	mhd_run(&gw);
	char name[256];
	log_info("serving http://%s/cfs/ from %s", a.listen,
	         gw.local ? gw.o.from_dir : client_target_name(&a.tgt, name, sizeof(name)));
	(void)cfs_loop_run_until(gw.loop, &gw.stop);
	/* Connections in flight end with the process: a suspended one cannot
	 * be handed back to libmicrohttpd's stop. */
	if (gw.dh)
		client_keep_contacts(gw.dh);
	return 0;
}
