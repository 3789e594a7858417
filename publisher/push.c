/*
 * Pushing a published volume from one store into another (cfs-publish
 * --from dir:PATH --to STORE VOLUME): an offline-published volume goes
 * into a ring later, sending only the blocks the ring lacks.
 *
 * The source is read synchronously (a dir: store's sfsro_source): every
 * block of the tree once (sfsro_blockset), each verified against its key
 * before it goes anywhere, so a store that rotted on disk is reported
 * here, by key, and not spread. Blocks go to the destination in batches as
 * a publish sends them: "which of these do you have" (which also renews
 * the leases of those it has), then a put of the others, with up to
 * BATCHES_IN_FLIGHT batches out while the walk reads on. The signed root
 * goes last, as it is stored — already signed, so no secret key is needed
 * and its sequence and validity stay what the publisher signed — and only
 * once every other block was taken: a failure leaves the destination's
 * previous root in place. Leases run until the root's valid-until.
 */
#include "publisher/internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PUSH_BATCH_BLOCKS 256
#define PUSH_BATCH_BYTES (4u << 20)
#define PUSH_BATCHES_IN_FLIGHT 4

struct push;

/* One batch: its blocks' bytes are owned until the destination answers. */
struct push_batch {
	struct push *p;
	struct pub_block blocks[PUSH_BATCH_BLOCKS];
	struct cfs_id keys[PUSH_BATCH_BLOCKS];
	bool have[PUSH_BATCH_BLOCKS];
	struct pub_block *send;
	size_t n, nsend, bytes;
};

struct push {
	uv_loop_t *loop;
	struct pub_sink *to;
	const struct sfsro_source *src;
	struct pub_push_stats *st;
	uint64_t lease_until;      /* the root's valid-until */
	struct push_batch *cur;
	unsigned in_flight;
	int error;                 /* the first batch that failed as a whole */
	int put_error;             /* the first block the destination refused: why */
	struct cfs_id put_failed;  /* and which */
	bool woke, done;
	int status;
};

static void push_batch_free(struct push_batch *b)
{
	for (size_t i = 0; i < b->n; i++)
		free((void *)b->blocks[i].p);
	free(b->send);
	free(b);
}

static void push_batch_end(struct push_batch *b, int r)
{
	struct push *p = b->p;

	for (size_t i = 0; r == 0 && i < b->nsend; i++) {
		if (b->send[i].status < 0) {
			p->st->blocks_failed++;
			if (!p->put_error) { /* named in the one line at the end */
				p->put_error = b->send[i].status;
				p->put_failed = b->send[i].key;
			}
			continue;
		}
		p->st->blocks_sent++;
		p->st->bytes_sent += b->send[i].len;
	}
	if (r < 0 && !p->error)
		p->error = r;
	p->in_flight--;
	p->woke = true;
	push_batch_free(b);
}

static void on_push_put(void *arg, int status)
{
	push_batch_end(arg, status < 0 ? log_error_errno(status, "the store could not take a batch") : 0);
}

static void on_push_have(void *arg, int status)
{
	struct push_batch *b = arg;
	struct push *p = b->p;

	if (status < 0) {
		push_batch_end(b, log_error_errno(status, "the store could not say which blocks it has"));
		return;
	}
	b->send = xmalloc(b->n * sizeof(*b->send));
	for (size_t i = 0; i < b->n; i++) {
		if (!b->have[i]) {
			b->send[b->nsend++] = b->blocks[i];
			continue;
		}
		p->st->blocks_present++;
		p->st->bytes_present += b->blocks[i].len;
	}
	if (b->nsend)
		p->to->ops->put(p->to->impl, b->send, b->nsend, p->lease_until, on_push_put, b);
	else
		push_batch_end(b, 0);
}

static int wait_woke(struct push *p)
{
	p->woke = false;
	return cfs_loop_run_until(p->loop, &p->woke);
}

/* Hand the batch being filled to the destination; wait only while too
 * many are out. */
static int push_submit(struct push *p)
{
	struct push_batch *b = p->cur;

	p->cur = NULL;
	if (b && b->n) {
		for (size_t i = 0; i < b->n; i++)
			b->keys[i] = b->blocks[i].key;
		p->in_flight++;
		p->to->ops->have(p->to->impl, b->keys, b->n, p->lease_until, b->have, on_push_have, b);
	} else
		free(b);
	cfs_loop_poll(p->loop);
	while (p->in_flight >= PUSH_BATCHES_IN_FLIGHT && !p->error)
		if (wait_woke(p) < 0 && !p->error)
			p->error = -EIO;
	return p->error;
}

/* Queue a verified block, taking its bytes. */
static int push_emit(struct push *p, const struct cfs_id *key, uint8_t *bytes, size_t len)
{
	struct push_batch *b = p->cur;

	if (!b)
		b = p->cur = xcalloc(1, sizeof(*b));
	b->p = p;
	b->blocks[b->n++] = (struct pub_block){ .key = *key, .p = bytes, .len = len };
	b->bytes += len;
	p->st->blocks++;
	p->st->bytes += len;
	if (b->n == PUSH_BATCH_BLOCKS || b->bytes >= PUSH_BATCH_BYTES)
		return push_submit(p);
	return 0;
}

/* Every block under the root directory, each once, read from the source
 * and verified, then queued. A block the source lacks or that does not
 * verify stops the push (the volume in the source is not whole: cfs-fsck
 * says what else is wrong with it). */
static int push_tree(struct push *p, const struct cfs_id *root_dir)
{
	struct sfsro_blockset set = { 0 };
	struct sfsro_bitem it;
	char h[65];
	int r = 0;

	sfsro_blockset_push(&set, root_dir, SFSRO_B_DIR, 0);
	while (r == 0 && sfsro_blockset_pop(&set, &it)) {
		uint8_t *b = NULL;
		size_t len = 0;
		if ((r = p->src->get(p->src->ctx, &it.key, &b, &len)) == 0 &&
		    (r = sfsro_verify_hash(&it.key, b, len)) == 0)
			r = sfsro_blockset_expand(&set, &it, b, len);
		if (r < 0) {
			free(b);
			log_error_errno(r, "block %s of the volume cannot be read from the source store "
			                "(cfs-fsck --from it says what else is wrong)", cfs_id_hex(&it.key, h));
			break;
		}
		r = push_emit(p, &it.key, b, len);
	}
	sfsro_blockset_free(&set);
	if (r == 0)
		r = push_submit(p);
	while (p->in_flight && wait_woke(p) == 0)
		;
	if (p->cur) { /* an error left a batch unsent */
		push_batch_free(p->cur);
		p->cur = NULL;
	}
	return r < 0 ? r : p->error;
}

static void on_push_done(void *arg, int status)
{
	struct push *p = arg;
	p->status = status;
	p->done = true;
}

/* Where the destination stands: -ENOENT (no root of the volume), 0 when it
 * holds this very root already (*ret_same), or when it holds an older one;
 * -ESTALE (logged) when it holds a newer one or another of this sequence. */
static int dest_root(struct push *p, const struct sfsro_root *mine, bool *ret_same)
{
	struct sfsro_root got;
	int r = pub__read_root(p->loop, p->to, &mine->pk, 0, &got);

	*ret_same = false;
	if (r == -ENOENT)
		return 0;
	if (r < 0 && pub_sink_said_unreachable())
		return r;
	if (r < 0)
		return log_error_errno(r, "cannot read the volume's root from the destination");
	if (got.seq == mine->seq && cfs_id_eq(&got.root_dir, &mine->root_dir) &&
	    got.issued == mine->issued && got.valid_until == mine->valid_until) {
		*ret_same = true;
		return 0;
	}
	if (got.seq >= mine->seq)
		return log_error_errno(-ESTALE, "the destination holds %s root of this volume (sequence "
		                       "%lu; the source's is %lu): nothing to push",
		                       got.seq > mine->seq ? "a newer" : "another",
		                       (unsigned long)got.seq, (unsigned long)mine->seq);
	return 0;
}

static void warn_short_leases(struct push *p)
{
	uint64_t granted = p->to->ops->lease_granted(p->to->impl);
	char when[64];
	time_t t = (time_t)granted;

	if (granted >= p->lease_until || p->lease_until - granted <= 60)
		return;
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
	log_warn("the servers granted leases only until %s, %.1f days before the root expires: "
	         "keep the volume alive with cfs-publish --refresh or cfsctl pin", when,
	         (double)(p->lease_until - granted) / 86400);
}

/* The steps in the order that keeps the destination consistent: the
 * source's root first (nothing is sent for a volume that cannot be pushed:
 * absent, not verifying, expired), then the destination's (nothing is sent
 * under a newer root), then every block, and the root only once all of
 * them were taken. */
int pub_push(uv_loop_t *loop, struct pub_sink *from, struct pub_sink *to,
             const struct cfs_pubkey *pk, struct pub_push_stats *ret)
{
	const struct sfsro_source *src = from->ops->source ? from->ops->source(from->impl) : NULL;
	struct push p = { .loop = loop, .to = to, .src = src, .st = ret };
	struct sfsro_root root;
	struct cfs_id rkey;
	uint64_t start = cfs_now_us();
	uint8_t *rp = NULL;
	size_t rlen = 0;
	bool same;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (!src)
		return log_error_errno(-EOPNOTSUPP, "pushing reads from a local store: give --from dir:PATH");
	sfsro_root_key(pk, &rkey);
	if ((r = src->get(src->ctx, &rkey, &rp, &rlen)) < 0) {
		log_error_errno(r, r == -ENOENT ? "the source store holds no root of this volume"
		                : "cannot read the volume's root from the source store");
		goto out;
	}
	if ((r = sfsro_root_decode(rp, rlen, &root)) < 0 || (r = sfsro_root_check(&root, pk, 0, 0)) < 0) {
		log_error_errno(r, "the source store's root of this volume does not verify");
		goto out;
	}
	ret->seq = root.seq;
	ret->valid_until = root.valid_until;
	if (root.valid_until <= cfs_wall_s()) {
		r = log_error_errno(-EKEYEXPIRED, "the volume's root (sequence %lu) has expired: re-sign it "
		                    "in the source store first (cfs-publish --to dir:PATH --refresh VOLUME)",
		                    (unsigned long)root.seq);
		goto out;
	}
	p.lease_until = root.valid_until;
	if ((r = dest_root(&p, &root, &same)) < 0)
		goto out;
	if ((r = push_tree(&p, &root.root_dir)) < 0)
		goto out;
	if (ret->blocks_failed) {
		char h[65];
		log_error("%lu of %lu blocks sent could not be stored (the first, %.16s: %s); the root "
		          "was not pushed, the destination's previous one (if any) stands",
		          (unsigned long)ret->blocks_failed,
		          (unsigned long)(ret->blocks_failed + ret->blocks_sent),
		          cfs_id_hex(&p.put_failed, h), dhash_strerror(p.put_error));
		r = p.put_error;
		ret->reported = true;
		goto out;
	}
	if (!same) {
		to->ops->put_root(to->impl, &rkey, rp, rlen, root.valid_until, on_push_done, &p);
		if ((r = cfs_loop_run_until(loop, &p.done)) == 0)
			r = p.status;
		if (r < 0) {
			log_error_errno(r, "storing the signed root failed");
			goto out;
		}
		ret->root_sent = true;
		p.done = false;
		to->ops->put_version(to->impl, rp, rlen, root.valid_until, on_push_done, &p);
		if ((r = cfs_loop_run_until(loop, &p.done)) == 0)
			r = p.status;
		if (r < 0)
			log_warn_errno(r, "version %lu could not be kept under its own key (it stays "
			               "readable while it is the newest)", (unsigned long)root.seq);
		r = 0;
	}
	warn_short_leases(&p);
out:
	free(rp);
	ret->seconds = (double)(cfs_now_us() - start) / 1e6;
	return r;
}
