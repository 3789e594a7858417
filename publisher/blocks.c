/*
 * The publisher's walks: the volume walker (sfsro-format) driven
 * synchronously over a sink's asynchronous gets. A step that needs a block
 * starts a get and steps on (a read or a visit asks for several at once,
 * up to WINDOW); when the walker waits, the loop runs at the top level
 * (cfs_loop_run_until) until a get lands and feeds it. The callers — the
 * refresh, cfs-fsck and its --replicas — are the top of their programs,
 * never a loop callback.
 */
#include <stdlib.h>

#include "publisher/internal.h"

#define WINDOW 32 /* gets in flight for one walk */

struct walk_get {
	struct pub_walk *pw;
	struct cfs_id key;
	unsigned flags;           /* SFSRO_FEED_VERIFIED: a coded get, checked by the ring's reader */
};

void pub__walk_init(struct pub_walk *pw, uv_loop_t *loop, struct pub_sink *sink)
{
	*pw = (struct pub_walk){ .loop = loop, .sink = sink, .w = sfsro_walker_new() };
}

static void walk_got(void *arg, int status, const uint8_t *p, size_t len)
{
	struct walk_get *g = arg;
	struct pub_walk *pw = g->pw;

	pw->inflight--;
	pw->woke = true;
	if (status < 0 && !pw->failed) {
		pw->failed = true;
		pw->failed_key = g->key;
	}
	(void)sfsro_walker_feed(pw->w, &g->key, status, p, len, g->flags); /* -ENOENT: a walk abandoned */
	free(g);
}

/* Run the loop until some get lands. */
static int wait_some(struct pub_walk *pw)
{
	pw->woke = false;
	return cfs_loop_run_until(pw->loop, &pw->woke);
}

/* A coded volume's data block is read as fragments: the coded key is no
 * hash of the block, so the ring's reader checks it (decoded against the
 * key) and the walker is told so. */
static void start_get(struct pub_walk *pw, const struct cfs_id *key, uint8_t btype)
{
	struct walk_get *g = xmalloc(sizeof(*g));
	bool coded = pw->code_m && btype == SFSRO_B_DATA;
	int r;

	*g = (struct walk_get){ pw, *key, coded ? SFSRO_FEED_VERIFIED : 0 };
	if (coded && !pw->sink->ops->get_coded)
		r = -EOPNOTSUPP;
	else if (coded)
		r = pw->sink->ops->get_coded(pw->sink->impl, key, pw->code_m, pw->code_n, walk_got, g);
	else
		r = pw->sink->ops->get(pw->sink->impl, key, walk_got, g);
	if (r < 0) {
		free(g);
		(void)sfsro_walker_feed(pw->w, key, r, NULL, 0, 0);
		return;
	}
	pw->inflight++;
}

void pub__walk_drain(struct pub_walk *pw)
{
	while (pw->inflight && wait_some(pw) == 0)
		;
}

int pub__walk_next(struct pub_walk *pw, struct sfsro_step *ret)
{
	int r;

	for (;;) {
		if (pw->inflight >= WINDOW && (r = wait_some(pw)) < 0)
			return r;
		r = sfsro_walker_step(pw->w, ret);
		if (r == SFSRO_WALK_NEED) {
			start_get(pw, &ret->key, ret->btype);
		} else if (r == SFSRO_WALK_WAIT) {
			if (!pw->inflight) /* a walker waits only for what it asked */
				return log_error_errno(-EIO, "the walk waits for nothing");
			if ((r = wait_some(pw)) < 0)
				return r;
		} else if (r != SFSRO_WALK_HINT) {
			if (r <= 0)
				pub__walk_drain(pw);
			return r;
		}
	}
}

void pub__walk_fini(struct pub_walk *pw)
{
	pub__walk_drain(pw);
	sfsro_walker_free(pw->w);
	pw->w = NULL;
}

int pub__read_root(uv_loop_t *loop, struct pub_sink *sink, const struct cfs_pubkey *pk, uint64_t seq,
                   struct sfsro_root *ret)
{
	struct pub_walk pw;
	struct sfsro_step s;
	int r;

	pub__walk_init(&pw, loop, sink);
	if (seq)
		sfsro_walker_root_version(pw.w, pk, seq, ret);
	else
		sfsro_walker_root(pw.w, pk, 0, 0, ret); /* any sequence, expired or not */
	r = pub__walk_next(&pw, &s);
	pub__walk_fini(&pw);
	return r;
}

int pub__walk_blocks(uv_loop_t *loop, struct pub_sink *sink, const struct cfs_id *root_dir,
                     pub_block_fn fn, void *arg)
{
	struct pub_walk pw;
	struct sfsro_step s;
	char h[65];
	int r;

	pub__walk_init(&pw, loop, sink);
	sfsro_walker_visit(pw.w, root_dir);
	while ((r = pub__walk_next(&pw, &s)) == SFSRO_WALK_BLOCK && (r = fn(arg, &s.key, s.btype)) == 0)
		;
	if (r < 0 && pw.failed)
		log_error_errno(r, "cannot read block %s", cfs_id_hex(&pw.failed_key, h));
	else if (r < 0)
		log_error_errno(r, "the walk of the volume's blocks stopped");
	pub__walk_fini(&pw);
	return r;
}

/* A single read, outside any walk. */
struct one_get {
	bool done;
	int status;
	uint8_t *p;
	size_t len;
};

static void one_got(void *arg, int status, const uint8_t *p, size_t len)
{
	struct one_get *g = arg;

	g->done = true;
	g->status = status;
	if (status == 0) {
		g->p = xmemdup(p, len ? len : 1);
		g->len = len;
	}
}

int pub__get_coded(uv_loop_t *loop, struct pub_sink *sink, const struct cfs_id *key, uint32_t m,
                   uint32_t n, uint8_t **ret, size_t *ret_len)
{
	struct one_get g = { 0 };
	int r;

	if (!sink->ops->get_coded)
		return -EOPNOTSUPP;
	if ((r = sink->ops->get_coded(sink->impl, key, m, n, one_got, &g)) < 0 ||
	    (r = cfs_loop_run_until(loop, &g.done)) < 0)
		return r;
	if (g.status < 0)
		return g.status;
	*ret = g.p;
	*ret_len = g.len;
	return 0;
}

int pub__get_block(uv_loop_t *loop, struct pub_sink *sink, const struct cfs_id *key, bool root,
                   uint8_t **ret, size_t *ret_len)
{
	struct one_get g = { 0 };
	struct sfsro_root rt;
	int r;

	if ((r = sink->ops->get(sink->impl, key, one_got, &g)) < 0 ||
	    (r = cfs_loop_run_until(loop, &g.done)) < 0)
		return r;
	if ((r = g.status) == 0)
		r = root ? sfsro_root_decode(g.p, g.len, &rt) : sfsro_verify_hash(key, g.p, g.len);
	if (r < 0) {
		free(g.p);
		return r;
	}
	*ret = g.p;
	*ret_len = g.len;
	return 0;
}
