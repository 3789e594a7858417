/*
 * The links' reassembly (common/link.h): pieces of a message put back
 * together per (peer, request ID, direction), bounded per peer and in
 * total (the least advanced request gives way), dropped when stale; the
 * acks owed at the end of a read batch; completed messages remembered so
 * that a sender that missed our last ack hears it again. Pieces of a
 * reply are taken only for a request we sent whose call has not ended.
 * No I/O.
 */
#include "common/link_int.h"

#include <stdlib.h>
#include <string.h>

#define REASM_COUNT_MAX 2048  /* requests being reassembled, every peer */

/* A reassembly completed: remembered (the oldest of DONE_MAX forgotten)
 * so that its sender, if it missed our last ack, hears it again. */
static void done_note(struct cfs__links *lk, const struct in_key *k, const struct xfer_in *x)
{
	struct in_key *slot = &lk->done_ring[lk->done_next];
	bool added;

	cfs_htab_del(&lk->done_map, slot, NULL); /* an all-zero slot names nothing */
	*slot = *k;
	lk->done_next = (lk->done_next + 1) % DONE_MAX;
	struct done_in *d = cfs_htab_put(&lk->done_map, k, &added);
	d->npieces = x->npieces;
	d->largest_pn = x->largest_pn;
}

/* Acks count against an unproven sender's 3x budget too: a piece can be
 * shorter than the ack it draws. piece_len: the piece it answers (a sender
 * with no account may have 3x that). */
static void send_ack(struct cfs__links *lk, const struct cfs_addr *to, const struct xfer_ack *a,
                     size_t piece_len, uint64_t now)
{
	uint8_t b[XFER_ACK_HDR + XFER_ACK_BITMAP_MAX];
	size_t n = cfs_xfer_ack_encode(b, a);

	if (!cfs__links_answer_take(lk, to, n, piece_len, now)) {
		lk->st->budget_held++;
		return;
	}
	lk->st->acks_out++;
	cfs__link_whole_push(lk, to, b, n, now);
}

static void ack_due_add(struct cfs__links *lk, const struct in_key *k, const struct cfs_addr *from,
                        size_t piece_len)
{
	if (lk->nack_due == lk->cap_ack_due) {
		lk->cap_ack_due = lk->cap_ack_due ? 2 * lk->cap_ack_due : 64;
		lk->ack_due = xrealloc(lk->ack_due, lk->cap_ack_due * sizeof(lk->ack_due[0]));
	}
	lk->ack_due[lk->nack_due++] = (struct ack_due){ .key = *k, .from = *from,
	                                                .piece_len = (uint32_t)piece_len };
}

/* x (under k) no longer counts against the reassembly bounds. A reply's
 * reassembly counts apart: our own calls bound it, and strangers' pieces
 * must not crowd it out. */
static void in_uncount(struct cfs__links *lk, const struct in_key *k, const struct xfer_in *x)
{
	if (k->reply) {
		lk->in_reply_bytes -= x->len;
		return;
	}
	struct cfs__link **lp = cfs_htab_get(&lk->links, &k->peer);
	if (lp) {
		(*lp)->nin--;
		(*lp)->in_bytes -= x->len;
	}
	lk->in_bytes -= x->len;
	lk->nin_requests--;
}

static void in_forget(struct cfs__links *lk, const struct in_key *k, struct xfer_in *x)
{
	in_uncount(lk, k, x);
	cfs_htab_del(&lk->ins, k, NULL);
}

/* Drop the request reassembly that has made the least progress (the
 * stalest of those), to make room: a stranger's lone pieces claiming
 * long messages give way to transfers that are arriving. False when
 * there is none. */
static bool evict_one(struct cfs__links *lk)
{
	size_t pos = 0;
	const void *key;
	void *val;
	struct xfer_in *best = NULL;
	struct in_key bk;

	while (cfs_htab_next(&lk->ins, &pos, &key, &val)) {
		const struct in_key *k = key;
		struct xfer_in *x = *(struct xfer_in **)val;
		if (k->reply)
			continue;
		if (!best || x->nheld < best->nheld ||
		    (x->nheld == best->nheld && x->last_rx_us < best->last_rx_us)) {
			best = x;
			bk = *k;
		}
	}
	if (!best)
		return false;
	in_forget(lk, &bk, best);
	cfs_xfer_in_free(best);
	lk->st->reasm_evicted++;
	return true;
}

/* A new reassembly, if the bounds allow it and (for a reply) our request
 * to that peer awaits it. */
static struct xfer_in *in_start(struct cfs__links *lk, const struct cfs_addr *from,
                                const struct in_key *k, const struct xfer_piece *p, uint64_t now)
{
	struct cfs__link *l;

	if (p->flags & XF_REPLY) {
		if (!cfs_htab_get(&lk->awaited, k))
			return NULL;
		/* it echoed our random request ID: it has our request, so the
		 * address is its own (our acks to it need no budget) */
		cfs__links_validated(lk, from, now);
		if (lk->in_reply_bytes + p->msg_len > lk->cfg.reasm_total_max)
			return NULL;
		lk->in_reply_bytes += p->msg_len;
	} else {
		while ((lk->in_bytes + p->msg_len > lk->cfg.reasm_total_max ||
		        lk->nin_requests >= REASM_COUNT_MAX) && evict_one(lk))
			;
		if (!(l = cfs__link_get(lk, from, true)) && evict_one(lk))
			l = cfs__link_get(lk, from, true);
		if (!l || l->in_bytes + p->msg_len > lk->cfg.reasm_peer_max ||
		    lk->in_bytes + p->msg_len > lk->cfg.reasm_total_max)
			return NULL;
		l->nin++;
		l->in_bytes += p->msg_len;
		lk->in_bytes += p->msg_len;
		lk->nin_requests++;
	}
	struct xfer_in *x = cfs_xfer_in_new(p, now);
	*(struct xfer_in **)cfs_htab_put(&lk->ins, k, NULL) = x;
	if (!lk->in_sweep_us)
		lk->in_sweep_us = now + (uint64_t)lk->cfg.reasm_idle_ms * 500;
	return x;
}

/* The reassembly of a piece that is not a duplicate of a completed
 * message (whose sender then hears our final ack again), or NULL. */
static struct xfer_in *in_find(struct cfs__links *lk, const struct cfs_addr *from,
                               const struct in_key *k, const struct xfer_piece *p, size_t len,
                               uint64_t now)
{
	struct xfer_in **xp = cfs_htab_get(&lk->ins, k), *x;

	if (xp)
		return *xp;
	struct done_in *d = cfs_htab_get(&lk->done_map, k);
	if (d) { /* our final ack was lost: say it again */
		lk->st->pieces_dup++;
		struct xfer_ack a = { .flags = (uint8_t)(k->reply | XF_COMPLETE), .reqid = p->reqid,
		                      .largest_pn = p->pn > d->largest_pn ? p->pn : d->largest_pn,
		                      .first_missing = d->npieces };
		send_ack(lk, from, &a, len, now);
		return NULL;
	}
	if (!(x = in_start(lk, from, k, p, now)))
		lk->st->reasm_dropped++;
	return x;
}

void cfs__link_on_piece(struct cfs__links *lk, const struct cfs_addr *from, const uint8_t *b,
                        size_t len, uint64_t now)
{
	struct xfer_piece p;
	struct xfer_ack a;
	struct in_key k;
	const char *why;
	struct xfer_in *x;

	if (cfs_xfer_piece_decode(b, len, &p, &why) < 0) {
		lk->st->malformed++;
		return;
	}
	lk->st->pieces_in++;
	cfs__link_in_key(&k, from, p.reqid, p.flags & XF_REPLY);
	if (!(x = in_find(lk, from, &k, &p, len, now)))
		return;
	bool was_pending = x->ack_pending;
	int r = cfs_xfer_in_piece(x, &p, now);
	if (r < 0) {
		lk->st->malformed++;
		return;
	}
	if (r == 1)
		lk->st->pieces_dup++;
	if (r == 0 && (p.flags & XF_REPLY)) /* only news keeps a call alive */
		cfs__link_event_push(lk, CFS__LINK_ALIVE, from, p.reqid)->by_peer = true;
	if (!cfs_xfer_in_complete(x)) {
		if (!was_pending)
			ack_due_add(lk, &k, from, len);
		return;
	}
	cfs_xfer_in_ack(x, now, &a);
	send_ack(lk, from, &a, len, now);
	done_note(lk, &k, x);
	in_forget(lk, &k, x);
	lk->st->xfers_in++;
	struct cfs__link_event *e = cfs__link_event_push(lk, CFS__LINK_MESSAGE, from, p.reqid);
	e->low_priority = p.flags & XF_BACKGROUND;
	e->msg = x->buf;
	e->len = x->len;
	x->buf = NULL; /* the event's now */
	cfs_xfer_in_free(x);
}

void cfs__links_flush_acks(struct cfs__links *lk, uint64_t now)
{
	struct xfer_ack a;

	for (unsigned i = 0; i < lk->nack_due; i++) {
		struct xfer_in **xp = cfs_htab_get(&lk->ins, &lk->ack_due[i].key);
		if (!xp || !(*xp)->ack_pending)
			continue;
		cfs_xfer_in_ack(*xp, now, &a);
		send_ack(lk, &lk->ack_due[i].from, &a, lk->ack_due[i].piece_len, now);
	}
	lk->nack_due = 0;
}

struct sweep {
	struct cfs__links *lk;
	uint64_t now;
};

static bool keep_fresh(void *ctx, const void *key, void *val)
{
	const struct sweep *sw = ctx;
	struct xfer_in *x = *(struct xfer_in **)val;

	if (x->last_rx_us + (uint64_t)sw->lk->cfg.reasm_idle_ms * 1000 > sw->now)
		return true;
	in_uncount(sw->lk, key, x);
	sw->lk->st->reasm_expired++;
	cfs_xfer_in_free(x);
	return false;
}

void cfs__link_sweep_stale(struct cfs__links *lk, uint64_t now)
{
	if (!lk->in_sweep_us || now < lk->in_sweep_us)
		return;
	cfs_htab_filter(&lk->ins, keep_fresh, &(struct sweep){ .lk = lk, .now = now });
	lk->in_sweep_us = cfs_htab_count(&lk->ins) ? now + (uint64_t)lk->cfg.reasm_idle_ms * 500 : 0;
}
