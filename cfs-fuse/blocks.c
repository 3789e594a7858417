/*
 * The mount's block cache and fetcher.
 *
 * Blocks are cached by key, verified (a content-hash block whose bytes
 * hash to its key; dhash_local_get checks and we insist on the kind), in an
 * LRU bounded in bytes. Concurrent requests for one key share one fetch. A
 * fetch that fails is tried again after a short pause, at most `retries`
 * more times, unless only a prefetch wants it; then every waiter gets the
 * error. The bound on the time a reader can wait is therefore about
 * (retries + 1) · fetch_timeout plus the pauses.
 */
#include <stdlib.h>
#include <string.h>

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
	bool timer_live;
	uv_timer_t timer;         /* the pause before a retry */
	struct ffetch *hnext;
};

struct fs_blocks {
	uv_loop_t *loop;
	dhash_local_t *dh;
	size_t cap;
	uint32_t retries;
	struct fblk **tab;
	size_t nbuckets, count, bytes;
	struct fblk *lru_head, *lru_tail;
	struct ffetch **ftab;     /* fetches in flight, by key */
	size_t nfbuckets, nfetch;
	struct cfsfuse_stats st;
};

static size_t bucket(const struct cfs_id *k, size_t n)
{
	uint64_t h;
	memcpy(&h, k->b, sizeof(h));
	return (size_t)(h & (n - 1));
}

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

static void evict(struct fs_blocks *bs, struct fblk *b)
{
	for (struct fblk **pp = &bs->tab[bucket(&b->key, bs->nbuckets)]; *pp; pp = &(*pp)->hnext)
		if (*pp == b) {
			*pp = b->hnext;
			break;
		}
	lru_unlink(bs, b);
	bs->count--;
	bs->bytes -= b->len;
	free(b->p);
	free(b);
}

static void grow(struct fs_blocks *bs)
{
	size_t n = bs->nbuckets * 2;
	struct fblk **tab = xcalloc(n, sizeof(*tab));

	for (size_t i = 0; i < bs->nbuckets; i++)
		for (struct fblk *b = bs->tab[i], *next; b; b = next) {
			next = b->hnext;
			size_t j = bucket(&b->key, n);
			b->hnext = tab[j];
			tab[j] = b;
		}
	free(bs->tab);
	bs->tab = tab;
	bs->nbuckets = n;
}

static struct fblk *insert(struct fs_blocks *bs, const struct cfs_id *key, const uint8_t *p,
                           size_t len)
{
	struct fblk *b = xcalloc(1, sizeof(*b));

	b->key = *key;
	b->p = xmemdup(p, len ? len : 1);
	b->len = len;
	if (bs->count >= bs->nbuckets)
		grow(bs);
	size_t i = bucket(key, bs->nbuckets);
	b->hnext = bs->tab[i];
	bs->tab[i] = b;
	lru_push(bs, b);
	bs->count++;
	bs->bytes += len;
	while (bs->bytes > bs->cap && bs->lru_tail != b)
		evict(bs, bs->lru_tail);
	return b;
}

const struct fblk *fs__blk_peek(struct fs_blocks *bs, const struct cfs_id *key)
{
	for (struct fblk *b = bs->tab[bucket(key, bs->nbuckets)]; b; b = b->hnext)
		if (cfs_id_eq(&b->key, key)) {
			if (bs->lru_head != b) {
				lru_unlink(bs, b);
				lru_push(bs, b);
			}
			bs->st.hits++;
			return b;
		}
	return NULL;
}

/* ------------------------------------------------------------ fetches */

static struct ffetch **fetch_slot(struct fs_blocks *bs, const struct cfs_id *key)
{
	struct ffetch **pp = &bs->ftab[bucket(key, bs->nfbuckets)];
	while (*pp && !cfs_id_eq(&(*pp)->key, key))
		pp = &(*pp)->hnext;
	return pp;
}

static void fetch_start(struct ffetch *f);

static void on_timer_closed(uv_handle_t *h)
{
	free(h->data);
}

static void fetch_end(struct ffetch *f, int status, const struct fblk *b)
{
	struct fs_blocks *bs = f->bs;
	struct waiter *w = f->waiters;

	*fetch_slot(bs, &f->key) = f->hnext;
	bs->nfetch--;
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

static void on_got(void *arg, const struct dhash_get_result *r)
{
	struct ffetch *f = arg;
	struct fs_blocks *bs = f->bs;
	int status = r->status;

	if (status == 0 && r->kind != DHASH_KIND_CHASH)
		status = -EBADMSG; /* a root where a content block belongs */
	if (status == 0) {
		bs->st.bytes_fetched += r->len;
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

static void fetch_start(struct ffetch *f)
{
	struct fs_blocks *bs = f->bs;
	int r;

	f->tries++;
	bs->st.fetches++;
	if ((r = dhash_local_get(bs->dh, &f->key, on_got, f)) < 0)
		fetch_end(f, r, NULL); /* only while closing: nobody waits for an answer */
}

void fs__blk_fetch(struct fs_blocks *bs, const struct cfs_id *key, bool prefetch, fs_blk_cb cb,
                   void *arg)
{
	struct ffetch **pp = fetch_slot(bs, key), *f = *pp;
	struct waiter *w = NULL;

	if (cb) {
		w = xcalloc(1, sizeof(*w));
		w->cb = cb;
		w->arg = arg;
	}
	if (!f) {
		if (bs->nfetch >= bs->nfbuckets) {
			/* rehash the fetch table */
			size_t n = bs->nfbuckets * 2;
			struct ffetch **tab = xcalloc(n, sizeof(*tab));
			for (size_t i = 0; i < bs->nfbuckets; i++)
				for (struct ffetch *x = bs->ftab[i], *next; x; x = next) {
					next = x->hnext;
					size_t j = bucket(&x->key, n);
					x->hnext = tab[j];
					tab[j] = x;
				}
			free(bs->ftab);
			bs->ftab = tab;
			bs->nfbuckets = n;
			pp = fetch_slot(bs, key);
		}
		f = xcalloc(1, sizeof(*f));
		f->bs = bs;
		f->key = *key;
		f->wtail = &f->waiters;
		f->prefetch = prefetch;
		*pp = f;
		bs->nfetch++;
		bs->st.misses += !prefetch;
		bs->st.prefetches += prefetch;
		if (w) {
			*f->wtail = w;
			f->wtail = &w->next;
		}
		fetch_start(f);
		return;
	}
	if (!prefetch)
		f->prefetch = false;
	if (w) {
		*f->wtail = w;
		f->wtail = &w->next;
	}
}

uint32_t fs__blk_inflight(const struct fs_blocks *bs)
{
	return (uint32_t)bs->nfetch;
}

void fs__blocks_stats(const struct fs_blocks *bs, struct cfsfuse_stats *st)
{
	st->hits = bs->st.hits;
	st->misses = bs->st.misses;
	st->fetches = bs->st.fetches;
	st->fetch_failures = bs->st.fetch_failures;
	st->retries = bs->st.retries;
	st->prefetches = bs->st.prefetches;
	st->bytes_fetched = bs->st.bytes_fetched;
	st->cached_bytes = bs->bytes;
	st->cached_blocks = bs->count;
}

struct fs_blocks *fs__blocks_new(uv_loop_t *loop, dhash_local_t *dh, const struct cfsfuse_options *o)
{
	struct fs_blocks *bs = xcalloc(1, sizeof(*bs));

	bs->loop = loop;
	bs->dh = dh;
	bs->cap = o->cache_bytes;
	bs->retries = o->retries;
	bs->nbuckets = 1024;
	bs->tab = xcalloc(bs->nbuckets, sizeof(*bs->tab));
	bs->nfbuckets = 256;
	bs->ftab = xcalloc(bs->nfbuckets, sizeof(*bs->ftab));
	return bs;
}

/* After the DHash client was freed: fetches still in the table wait for a
 * retry; they end here with -ECANCELED. */
void fs__blocks_free(struct fs_blocks *bs)
{
	if (!bs)
		return;
	for (size_t i = 0; i < bs->nfbuckets; i++)
		while (bs->ftab[i])
			fetch_end(bs->ftab[i], -ECANCELED, NULL);
	while (bs->lru_tail)
		evict(bs, bs->lru_tail);
	free(bs->tab);
	free(bs->ftab);
	free(bs);
}
