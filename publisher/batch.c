/*
 * Blocks to a sink in batches (publisher/internal.h, pub__batcher): the
 * one batcher of the publisher (publish.c) and of the push to another
 * store (push.c). A batch is first asked which blocks the sink holds
 * ("have", which renews their leases to lease_until), and only the
 * others are put. Up to max_in_flight batches are out at once while the
 * caller goes on reading; it waits, on the loop, only when that many are
 * out, and at the end.
 */
#include <stdlib.h>

#include "publisher/internal.h"

/* One batch on its way to the sink. It owns its blocks' bytes until the
 * sink answers. */
struct pub__batch {
	struct pub__batcher *bt;
	struct pub_block blocks[PUB__BATCH_BLOCKS];
	struct cfs_id keys[PUB__BATCH_BLOCKS];
	bool have[PUB__BATCH_BLOCKS];
	struct pub_block *send;
	size_t n, nsend, bytes;
	size_t nwhole;            /* blocks[0, nwhole) whole, the rest coded */
	struct cfs_fanin asked;   /* the have calls out (one per kind) */
	uint64_t tag_files, tag_bytes;  /* the caller's: given back to ended */
};

static void batch_free(struct pub__batch *b)
{
	for (size_t i = 0; i < b->n; i++)
		free((void *)b->blocks[i].p);
	free(b->send);
	free(b);
}

/* The sink has answered for the batch, with r < 0 if it failed. A block
 * the sink did not take (the sink logged it) is counted, and the first
 * one is kept to be named in one line at the end; the run goes on. */
static void batch_end(struct pub__batch *b, int r)
{
	struct pub__batcher *bt = b->bt;

	for (size_t i = 0; r == 0 && i < b->nsend; i++) {
		if (b->send[i].status < 0) {
			bt->blocks_failed++;
			if (!bt->put_error) {
				bt->put_error = b->send[i].status;
				bt->put_failed = b->send[i].key;
			}
			continue;
		}
		bt->blocks_sent++;
		bt->bytes_sent += b->send[i].len;
	}
	if (bt->ended)
		r = bt->ended(bt->arg, b->tag_files, b->tag_bytes, r);
	if (r < 0 && !bt->error)
		bt->error = r;
	bt->in_flight--;
	bt->woke = true;
	batch_free(b);
}

static void on_put(void *arg, int status)
{
	batch_end(arg, status < 0 ? log_error_errno(status, "the store could not take a batch") : 0);
}

static void on_have(void *arg, int status)
{
	struct pub__batch *b = arg;
	struct pub__batcher *bt = b->bt;

	if (!cfs_fanin_end(&b->asked, status))
		return;
	status = b->asked.status;
	if (status < 0) {
		batch_end(b, log_error_errno(status, "the store could not say which blocks it has"));
		return;
	}
	b->send = xmalloc(b->n * sizeof(*b->send));
	for (size_t i = 0; i < b->n; i++) {
		if (!b->have[i]) {
			b->send[b->nsend++] = b->blocks[i];
			continue;
		}
		bt->blocks_present++;
		bt->bytes_present += b->blocks[i].len;
	}
	if (b->nsend && !bt->dry_run)
		bt->sink->ops->put(bt->sink->impl, b->send, b->nsend, bt->lease_until, on_put, b);
	else
		batch_end(b, 0); /* a dry run counts what it would send */
}

static int wait_batch(struct pub__batcher *bt)
{
	bt->woke = false;
	return cfs_loop_run_until(bt->loop, &bt->woke);
}

static struct pub__batch *filling(struct pub__batcher *bt)
{
	if (!bt->cur) {
		bt->cur = xcalloc(1, sizeof(*bt->cur));
		bt->cur->bt = bt;
	}
	return bt->cur;
}

void pub__batch_tag(struct pub__batcher *bt, uint64_t files, uint64_t bytes)
{
	struct pub__batch *b = filling(bt);

	b->tag_files += files;
	b->tag_bytes += bytes;
}

int pub__batch_submit(struct pub__batcher *bt)
{
	struct pub__batch *b = bt->cur;

	bt->cur = NULL;
	if (b && b->n) {
		/* whole blocks first, then the coded ones (one code a volume):
		 * each kind is renewed on its own holders */
		struct pub_block tmp;
		for (size_t i = 0; i < b->n; i++)
			if (!b->blocks[i].code_m) {
				tmp = b->blocks[b->nwhole];
				b->blocks[b->nwhole++] = b->blocks[i];
				b->blocks[i] = tmp;
			}
		for (size_t i = 0; i < b->n; i++)
			b->keys[i] = b->blocks[i].key;
		bt->in_flight++;
		uint64_t lease = bt->dry_run ? 0 : bt->lease_until;
		const struct pub_block *last = &b->blocks[b->n - 1]; /* coded, if any are */
		size_t from[2] = { 0, b->nwhole }, len[2] = { b->nwhole, b->n - b->nwhole };
		cfs_fanin_add(&b->asked); /* our own hold: answers may come inline */
		for (int k = 0; k < 2; k++) {
			if (!len[k])
				continue;
			cfs_fanin_add(&b->asked);
			bt->sink->ops->have(bt->sink->impl, b->keys + from[k], len[k], k ? last->code_m : 0,
			                    k ? last->code_n : 0, lease, b->have + from[k], on_have, b);
		}
		on_have(b, 0);
	} else if (b) {
		bt->cur = b; /* a tag and no block yet: it goes with the next block */
	}
	cfs_loop_poll(bt->loop); /* answers that came while the caller read */
	while (bt->in_flight >= bt->max_in_flight && !bt->error)
		if (wait_batch(bt) < 0 && !bt->error)
			bt->error = -EIO;
	return bt->error;
}

int pub__batch_add(struct pub__batcher *bt, const struct pub_block *blk)
{
	struct pub__batch *b = filling(bt);

	b->blocks[b->n++] = *blk;
	b->bytes += blk->len;
	if (b->n == PUB__BATCH_BLOCKS || b->bytes >= PUB__BATCH_BYTES)
		return pub__batch_submit(bt);
	return bt->error;
}

int pub__batch_drain(struct pub__batcher *bt)
{
	int r = pub__batch_submit(bt);

	while (bt->in_flight && wait_batch(bt) == 0)
		;
	if (bt->cur) { /* a tag with no block */
		batch_free(bt->cur);
		bt->cur = NULL;
	}
	return r < 0 ? r : bt->error;
}

void pub__batch_abandon(struct pub__batcher *bt)
{
	if (bt->cur) {
		batch_free(bt->cur);
		bt->cur = NULL;
	}
	while (bt->in_flight && wait_batch(bt) == 0)
		;
}
