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
 * four batches out while the walk reads on (the publisher's batcher,
 * batch.c). The signed root
 * goes last, as it is stored — already signed, so no secret key is needed
 * and its sequence and validity stay what the publisher signed — and only
 * once every other block was taken: a failure leaves the destination's
 * previous root in place. Leases run until the root's valid-until.
 */
#include "publisher/internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PUSH_BATCHES_IN_FLIGHT 4

struct push {
	uv_loop_t *loop;
	struct pub_sink *to;
	const struct sfsro_source *src;
	struct pub_push_stats *st;
	uint64_t lease_until;      /* the root's valid-until */
	struct pub__batcher bt;
	bool done;
	int status;
};

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
		p->st->blocks++;
		p->st->bytes += len;
		r = pub__batch_add(&p->bt, &(struct pub_block){ .key = it.key, .p = b, .len = len });
	}
	sfsro_blockset_free(&set);
	if (r == 0)
		r = pub__batch_drain(&p->bt);
	pub__batch_abandon(&p->bt); /* an error left a batch unsent, or some out */
	p->st->blocks_sent = p->bt.blocks_sent;
	p->st->bytes_sent = p->bt.bytes_sent;
	p->st->blocks_present = p->bt.blocks_present;
	p->st->bytes_present = p->bt.bytes_present;
	p->st->blocks_failed = p->bt.blocks_failed;
	return r < 0 ? r : p->bt.error;
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
	p.bt = (struct pub__batcher){ .loop = loop, .sink = to, .lease_until = p.lease_until,
	                              .max_in_flight = PUSH_BATCHES_IN_FLIGHT };
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
		          cfs_id_hex(&p.bt.put_failed, h), dhash_strerror(p.bt.put_error));
		r = p.bt.put_error;
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
