/*
 * The mount's block cache and fetcher.
 *
 * Blocks are cached by key, verified (a content-hash block whose bytes
 * hash to its key; client_get checks and we insist on the kind), in an
 * LRU bounded in bytes. Concurrent requests for one key share one fetch. A
 * fetch that fails is tried again after a short pause, at most `retries`
 * more times, unless only a prefetch wants it; then every waiter gets the
 * error. The bound on the time a reader can wait is therefore about
 * (retries + 1) · fetch_timeout plus the pauses.
 *
 * This is the one retry above the DHash get, and not the same one. A get
 * (dhash/get_sm.c) tries the block's replicas in turn, hedges and looks
 * the key up again, all within one fetch; client/ under us passes its
 * failure on untried. What is asked again here, after a pause, is a whole
 * fetch that failed, for what the get cannot see: the daemon's connection
 * gone (cfsd restarting: -ECONNRESET, then -ECONNREFUSED), the fetch's own
 * deadline (fetch_timeout), copies not yet repaired back after servers
 * left. How many times is the user's (cfs-mount --retries, and 0 turns it
 * off); a reader's EIO comes only after them.
 *
 * At most pipe.limit gets are outstanding at the local cfsd; the rest
 * wait in two FIFO queues, blocks a reader waits for ahead of prefetches
 * (a prefetch a reader joins moves to the first queue). More in flight
 * than the ring can serve only lengthens every fetch: on a 16-daemon
 * loopback ring, throughput peaks near 8–16 (make bench-read's sweep)
 * while the kernel's read-ahead alone asks for 128 blocks at once. So the
 * bound starts at max_fetches and grows (pipe.c) only while the rate
 * delivered grows with it: on long paths, the bandwidth-delay product.
 *
 * With a disk cache, a block missing from memory is looked for there
 * before the network (and checked again: a disk may rot), and every
 * fetched block is written there, so a remount starts warm.
 */
#include <stdlib.h>

#include "cfs-fuse/internal.h"

struct waiter {
	fs_blk_cb cb;
	void *arg;
	struct waiter *next;
};

struct ffetch {
	struct fs_blocks *bs;
	struct cfs_id key;
	struct waiter *waiters, **wtail;
	uint32_t tries;
	bool prefetch;            /* only a prefetch wants it: no retries */
	bool bg;                  /* only a directory's prefetch wants it (fs__blk_fetch_bg) */
	bool data;                /* a file's data block (fs__blk_fetch_data) */
	uint8_t code_m, code_n;   /* a coded volume's data block: its code (0: whole) */
	bool timer_live;
	bool queued;              /* waiting for a slot, in bs->q[fq(f)] */
	uv_timer_t timer;         /* the pause before a retry */
	struct ffetch *qnext;
};

struct fqueue {
	struct ffetch *head, **tail;
};

struct fs_blocks {
	uv_loop_t *loop;
	client_t *dh;
	struct fs_local *local;   /* when set, blocks come from it, not dh */
	size_t cap;
	uint32_t retries;
	struct cfs_htab tab;      /* cached blocks: cfs_id → struct fblk * */
	size_t bytes;
	struct fblk *lru_head, *lru_tail;
	struct cfs_htab ftab;     /* fetches in flight: cfs_id → struct ffetch * */
	uint32_t active;          /* gets outstanding at cfsd */
	struct fs_pipe pipe;      /* their bound (pipe.limit) */
	/* waiting for a slot: [0] wanted, [1] prefetches, [2] directories'
	 * prefetches, which take a slot only below the bound's start and are
	 * not part of its measure: a path's bandwidth-delay product is for
	 * bulk reads, and hundreds of small files' blocks in flight at once
	 * only delay the one a reader opens next */
	struct fqueue q[3];
	dhash_cache_t *disk;         /* or NULL */
	struct cfsfuse_stats st;
};

/* ------------------------------------------------------------ LRU */

static void lru_unlink(struct fs_blocks *bs, struct fblk *b)
{
	if (b->lprev)
		b->lprev->lnext = b->lnext;
	else
		bs->lru_head = b->lnext;
	if (b->lnext)
		b->lnext->lprev = b->lprev;
	else
		bs->lru_tail = b->lprev;
	b->lprev = b->lnext = NULL;
}

static void lru_push(struct fs_blocks *bs, struct fblk *b)
{
	b->lprev = NULL;
	b->lnext = bs->lru_head;
	if (bs->lru_head)
		bs->lru_head->lprev = b;
	bs->lru_head = b;
	if (!bs->lru_tail)
		bs->lru_tail = b;
}

static void lru_touch(struct fs_blocks *bs, struct fblk *b)
{
	if (bs->lru_head != b) {
		lru_unlink(bs, b);
		lru_push(bs, b);
	}
}

static void evict(struct fs_blocks *bs, struct fblk *b)
{
	(void)cfs_htab_del(&bs->tab, &b->key, NULL);
	lru_unlink(bs, b);
	bs->bytes -= b->len;
	free(b->p);
	free(b);
}

/* A block already cached under key (content-hash keys name their bytes,
 * so these are the same) is kept, made young, and returned. */
static struct fblk *insert(struct fs_blocks *bs, const struct cfs_id *key, const uint8_t *p,
                           size_t len)
{
	bool added;
	struct fblk **slot = cfs_htab_put(&bs->tab, key, &added), *b;

	if (!added) {
		lru_touch(bs, *slot);
		return *slot;
	}
	b = *slot = xcalloc(1, sizeof(*b));
	b->key = *key;
	b->p = xmemdup(p, len ? len : 1);
	b->len = len;
	lru_push(bs, b);
	bs->bytes += len;
	while (bs->bytes > bs->cap && bs->lru_tail != b)
		evict(bs, bs->lru_tail);
	return b;
}

static const struct fblk *disk_peek(struct fs_blocks *bs, const struct cfs_id *key)
{
	uint8_t kind, *p;
	uint64_t seq;
	size_t len;
	char k[9];

	if (dhash_cache_get(bs->disk, key, &kind, &p, &len) < 0)
		return NULL;
	if (kind != DHASH_KIND_CHASH || dhash_verify(kind, key, p, len, &seq) < 0) {
		log_warn("block %s in the disk cache does not verify; fetching it again",
		         cfs_id_short(key, k));
		(void)dhash_cache_del(bs->disk, key); /* a put would keep the bad bytes */
		free(p);
		return NULL;
	}
	const struct fblk *b = insert(bs, key, p, len);
	free(p);
	bs->st.disk_hits++;
	return b;
}

const struct fblk *fs__blk_peek(struct fs_blocks *bs, const struct cfs_id *key)
{
	struct fblk **slot = cfs_htab_get(&bs->tab, key);

	if (slot) {
		lru_touch(bs, *slot);
		bs->st.hits++;
		return *slot;
	}
	return bs->disk ? disk_peek(bs, key) : NULL;
}

/* ------------------------------------------------------------ fetches */

static void fetch_start(struct ffetch *f);
static void fetch_issue(struct ffetch *f);

static void q_push(struct fqueue *q, struct ffetch *f)
{
	f->qnext = NULL;
	*q->tail = f;
	q->tail = &f->qnext;
}

/* The queue a waiting fetch is in. */
static unsigned fq(const struct ffetch *f)
{
	return f->bg ? 2 : f->prefetch ? 1 : 0;
}

static struct ffetch *q_pop(struct fqueue *q)
{
	struct ffetch *f = q->head;
	if (f && !(q->head = f->qnext))
		q->tail = &q->head;
	return f;
}

static void q_remove(struct fqueue *q, struct ffetch *f)
{
	struct ffetch **pp = &q->head;
	while (*pp != f)
		pp = &(*pp)->qnext;
	if (!(*pp = f->qnext))
		q->tail = pp;
}

/* A slot came free: the oldest wanted block, else the oldest prefetch. */
static void dispatch(struct fs_blocks *bs)
{
	while (bs->active < bs->pipe.limit) {
		struct ffetch *f = q_pop(&bs->q[0]);
		if (!f)
			f = q_pop(&bs->q[1]);
		if (!f && bs->active < bs->pipe.base)
			f = q_pop(&bs->q[2]);
		if (!f)
			return;
		f->queued = false;
		fetch_issue(f);
	}
}

static void on_timer_closed(uv_handle_t *h)
{
	free(h->data);
}

static void fetch_end(struct ffetch *f, int status, const struct fblk *b)
{
	struct fs_blocks *bs = f->bs;
	struct waiter *w = f->waiters;

	(void)cfs_htab_del(&bs->ftab, &f->key, NULL);
	if (f->queued) /* only when the mount is being torn down */
		q_remove(&bs->q[fq(f)], f);
	if (status < 0)
		bs->st.fetch_failures++;
	while (w) {
		struct waiter *next = w->next;
		w->cb(w->arg, status, status == 0 ? b : NULL);
		free(w);
		w = next;
	}
	if (f->timer_live) {
		f->timer.data = f;
		uv_close((uv_handle_t *)&f->timer, on_timer_closed);
	} else {
		free(f);
	}
}

static void on_retry(uv_timer_t *t)
{
	fetch_start(container_of(t, struct ffetch, timer));
}

/* A coded volume's data block: fetched as fragments, and named by a
 * coded key, which the disk cache's check (the hash of the bytes) cannot
 * confirm, so it is kept in memory only. */
static bool is_coded(const struct ffetch *f)
{
	return f->data && f->code_m;
}

static void on_got(void *arg, const struct dhash_get_result *r)
{
	struct ffetch *f = arg;
	struct fs_blocks *bs = f->bs;
	int status = r->status;

	bs->active--;
	if (!f->bg)
		fs__pipe_done(&bs->pipe, status == 0 ? r->len : 0, uv_hrtime() / 1000);
	dispatch(bs);
	if (status == 0 && r->kind != DHASH_KIND_CHASH)
		status = -EBADMSG; /* a root where a content block belongs */
	if (status == 0) {
		bs->st.bytes_fetched += r->len;
		if (bs->disk && !is_coded(f))
			(void)dhash_cache_put(bs->disk, &f->key, (uint8_t)r->kind, r->data, r->len);
		fetch_end(f, 0, insert(bs, &f->key, r->data, r->len));
		return;
	}
	if (status != -ECANCELED && !f->prefetch && f->tries <= bs->retries) {
		char k[9];
		log_warn("block %s: %s; trying again (%u of %u)", cfs_id_short(&f->key, k),
		         dhash_strerror(status), f->tries, bs->retries);
		bs->st.retries++;
		if (!f->timer_live) {
			uv_timer_init(bs->loop, &f->timer);
			f->timer_live = true;
		}
		uv_timer_start(&f->timer, on_retry, 200u * f->tries, 0);
		return;
	}
	fetch_end(f, status, NULL);
}

static void fetch_issue(struct ffetch *f)
{
	struct fs_blocks *bs = f->bs;
	int r;

	f->tries++;
	bs->st.fetches++;
	bs->active++;
	if (!f->bg)
		fs__pipe_start(&bs->pipe, bs->active);
	if (bs->local)
		r = fs__local_get(bs->local, &f->key, on_got, f);
	else if (is_coded(f))
		r = client_get_coded(bs->dh, &f->key, f->code_m, f->code_n, on_got, f);
	else
		r = client_get(bs->dh, &f->key, on_got, f);
	if (r < 0) {
		bs->active--;
		fetch_end(f, r, NULL); /* only while closing: nobody waits for an answer */
	}
}

static void fetch_start(struct ffetch *f)
{
	struct fs_blocks *bs = f->bs;

	if (bs->active < (f->bg ? bs->pipe.base : bs->pipe.limit)) { /* then its queue is empty */
		fetch_issue(f);
		return;
	}
	f->queued = true;
	q_push(&bs->q[fq(f)], f);
}

static void waiter_add(struct ffetch *f, fs_blk_cb cb, void *arg)
{
	struct waiter *w;

	if (!cb)
		return;
	w = xcalloc(1, sizeof(*w));
	w->cb = cb;
	w->arg = arg;
	*f->wtail = w;
	f->wtail = &w->next;
}

static void blk_fetch(struct fs_blocks *bs, const struct cfs_id *key, bool prefetch, bool bg,
                      const struct sfsro_root *data, fs_blk_cb cb, void *arg)
{
	struct ffetch **slot = cfs_htab_get(&bs->ftab, key), *f;

	if (!slot) {
		f = xcalloc(1, sizeof(*f));
		f->bs = bs;
		f->key = *key;
		f->wtail = &f->waiters;
		f->prefetch = prefetch;
		f->bg = bg;
		f->data = data != NULL;
		f->code_m = data ? data->code_m : 0;
		f->code_n = data ? data->code_n : 0;
		*(struct ffetch **)cfs_htab_put(&bs->ftab, key, NULL) = f;
		bs->st.misses += !prefetch;
		bs->st.prefetches += prefetch;
		waiter_add(f, cb, arg);
		fetch_start(f); /* may end f at once while closing */
		return;
	}
	f = *slot;
	/* wanted more now than before (a reader waits for it now, or a
	 * file's read-ahead joins a directory's): to that queue */
	unsigned was = fq(f);
	f->prefetch = f->prefetch && prefetch;
	f->bg = f->bg && bg;
	if (f->queued && fq(f) != was) {
		q_remove(&bs->q[was], f);
		q_push(&bs->q[fq(f)], f);
	}
	waiter_add(f, cb, arg);
}

void fs__blk_fetch(struct fs_blocks *bs, const struct cfs_id *key, bool prefetch, fs_blk_cb cb,
                   void *arg)
{
	blk_fetch(bs, key, prefetch, false, NULL, cb, arg);
}

void fs__blk_fetch_data(struct fs_blocks *bs, const struct sfsro_root *root, const struct cfs_id *key,
                        bool prefetch, fs_blk_cb cb, void *arg)
{
	blk_fetch(bs, key, prefetch, false, root, cb, arg);
}

void fs__blk_fetch_data_bg(struct fs_blocks *bs, const struct sfsro_root *root,
                           const struct cfs_id *key, fs_blk_cb cb, void *arg)
{
	blk_fetch(bs, key, true, true, root, cb, arg);
}

void fs__blk_fetch_bg(struct fs_blocks *bs, const struct cfs_id *key, fs_blk_cb cb, void *arg)
{
	blk_fetch(bs, key, true, true, NULL, cb, arg);
}

void fs__blk_seed(struct fs_blocks *bs, const struct cfs_id *key, const uint8_t *p, size_t len)
{
	(void)insert(bs, key, p, len);
}

void fs__blocks_stats(const struct fs_blocks *bs, struct cfsfuse_stats *st)
{
	st->hits = bs->st.hits;
	st->misses = bs->st.misses;
	st->fetches = bs->st.fetches;
	st->fetch_failures = bs->st.fetch_failures;
	st->retries = bs->st.retries;
	st->fetch_limit = bs->pipe.limit;
	st->prefetches = bs->st.prefetches;
	st->bytes_fetched = bs->st.bytes_fetched;
	st->cached_bytes = bs->bytes;
	st->cached_blocks = cfs_htab_count(&bs->tab);
	st->disk_hits = bs->st.disk_hits;
	if (bs->disk) {
		uint64_t evicted;
		dhash_cache_totals(bs->disk, &st->disk_blocks, &st->disk_bytes, &evicted);
	}
}

double fs__blocks_pipe_scale(const struct fs_blocks *bs)
{
	return (double)bs->pipe.limit / (double)bs->pipe.base;
}

struct fs_blocks *fs__blocks_new(uv_loop_t *loop, client_t *dh, struct fs_local *local,
                                 const struct cfsfuse_options *o, dhash_cache_t *disk)
{
	struct fs_blocks *bs = xcalloc(1, sizeof(*bs));

	bs->local = local;
	bs->disk = disk;
	bs->loop = loop;
	bs->dh = dh;
	bs->cap = o->cache_bytes;
	bs->retries = o->retries;
	/* a local store is a disk, not a path to measure: its bound stays */
	fs__pipe_init(&bs->pipe, o->max_fetches ? o->max_fetches : 1, local ? 0 : bs->cap / 4);
	for (int i = 0; i < 3; i++)
		bs->q[i].tail = &bs->q[i].head;
	cfs_htab_init(&bs->tab, sizeof(struct cfs_id), sizeof(struct fblk *));
	cfs_htab_init(&bs->ftab, sizeof(struct cfs_id), sizeof(struct ffetch *));
	return bs;
}

/* After the DHash client was freed: fetches still in the table wait for a
 * retry; they end here with -ECANCELED. Each walk starts again from the
 * first slot, since fetch_end deletes (and a waiter may add) entries. */
void fs__blocks_free(struct fs_blocks *bs)
{
	size_t pos;
	void *v;

	if (!bs)
		return;
	while (pos = 0, cfs_htab_next(&bs->ftab, &pos, NULL, &v))
		fetch_end(*(struct ffetch **)v, -ECANCELED, NULL);
	while (bs->lru_tail)
		evict(bs, bs->lru_tail);
	dhash_cache_close(bs->disk);
	cfs_htab_free(&bs->tab);
	cfs_htab_free(&bs->ftab);
	free(bs);
}
