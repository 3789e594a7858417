/*
 * Links: what the transport keeps per peer to move messages longer than
 * one safe datagram, and the proof of address that bounds what
 * it sends to strangers.
 *
 * A link holds the peer's congestion window (struct xfer_cc) and its
 * outgoing transfers. Pieces leave foreground first, then background,
 * each transfer lost pieces first; as many as the window, the pacing, the
 * process-wide bound on bytes in flight and (for answers to an address
 * not yet proven) the 3x budget allow, in one sendmsg per transfer (UDP
 * GSO where the kernel has it). Incoming pieces are reassembled per
 * (peer, request ID, direction), bounded per peer and in total, dropped
 * when stale; pieces of a reply are taken only for a call to that peer.
 * Acks leave at the end of every read batch, and a completed message is
 * acked again if its sender shows it did not hear (recently completed
 * ones are remembered).
 *
 * Address validation follows QUIC (RFC 9000 8.1): bytes sent to an
 * address in answer are at most three times the bytes received from it
 * until it proves it receives at that address — by answering one of our
 * calls (our 64-bit request IDs are random) or by echoing a token we
 * gave it (a keyed hash of the address and a one-minute epoch). The state
 * is a fixed table indexed by a hash of the address: a collision forgets
 * an entry, which costs its owner one more token round trip and never
 * lets anyone past the 3x bound (bytes in and out are forgotten together).
 */
#include "common/transport_int.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define LINKS_MAX 4096
#define DONE_MAX 4096         /* completed reassemblies remembered for re-acks */
#define REASM_COUNT_MAX 2048  /* requests being reassembled, every peer */
#define GSO_SEGS 64           /* pieces per sendmsg */
#define OUT_MAX (64u << 20)   /* bytes held by outgoing transfers, every peer */
/* Answers held for one peer: a reader with a deep window needs a few MiB;
 * a peer that asks for more than it acknowledges gets no more answers in
 * pieces until it does (its requests time out and are asked again). */
#define OUT_PEER_BYTES (8u << 20)
#define OUT_PEER_COUNT 256
/* A peer that acknowledges nothing for this many probe timeouts (and at
 * least SILENT_MIN_US) loses every answer queued for it. */
#define SILENT_PTOS 4
#define SILENT_MIN_US 1000000ull
#define VALID_US (600ull * 1000000) /* an address stays proven this long */
#define TOKEN_EPOCH_S 60

struct in_key {
	struct peer_key peer;
	uint64_t reqid;
	uint8_t reply;
	uint8_t pad[7];
};

struct ack_due {
	struct in_key key;
	struct cfs_addr from;
	uint32_t piece_len;  /* the datagram that made the ack due */
};

struct done_in {
	uint16_t npieces;
	uint32_t largest_pn;
};

static __thread uint8_t gbuf[GSO_SEGS * CFS_DGRAM_SAFE];

static uint64_t link_due_key(const void *p) { return ((const struct link *)p)->due_us; }
static void link_set_idx(void *p, size_t i) { ((struct link *)p)->heap_idx = i; }

int cfs__links_init(cfs_transport_t *t)
{
	cfs_htab_init(&t->links, sizeof(struct peer_key), sizeof(struct link *));
	cfs_htab_init(&t->ins, sizeof(struct in_key), sizeof(struct xfer_in *));
	t->links_heap = (struct heap){ .key = link_due_key, .set_idx = link_set_idx };
	t->vslots = xcalloc(t->cfg.validation_slots, sizeof(t->vslots[0]));
	cfs_htab_init(&t->done_map, sizeof(struct in_key), sizeof(struct done_in));
	t->done_ring = xcalloc(DONE_MAX, sizeof(t->done_ring[0]));
	randombytes_buf(t->token_key, sizeof(t->token_key));
	randombytes_buf(t->vslot_key, sizeof(t->vslot_key));
	return 0;
}

static void in_key_of(struct in_key *k, const struct cfs_addr *a, uint64_t reqid, bool reply)
{
	memset(k, 0, sizeof(*k));
	cfs__peer_key(&k->peer, a);
	k->reqid = reqid;
	k->reply = reply;
}

/* A reassembly completed: remembered (the oldest of DONE_MAX forgotten)
 * so that its sender, if it missed our last ack, hears it again. */
static void done_note(cfs_transport_t *t, const struct in_key *k, const struct xfer_in *x)
{
	struct in_key *slot = &t->done_ring[t->done_next];
	bool added;

	cfs_htab_del(&t->done_map, slot, NULL); /* an all-zero slot names nothing */
	*slot = *k;
	t->done_next = (t->done_next + 1) % DONE_MAX;
	struct done_in *d = cfs_htab_put(&t->done_map, k, &added);
	d->npieces = x->npieces;
	d->largest_pn = x->largest_pn;
}

/* ------------------------------------------------------------ validation */

static bool vslot_valid(const struct vslot *v)
{
	return v->valid_until_us > cfs_now_us();
}

/*
 * An address's slot: one of two, placed by a keyed hash (SipHash), so
 * nobody can aim collisions at a chosen address. A newcomer takes a free
 * slot or the less recently heard unproven one, never a proven one: a
 * flood of strangers cannot make a proven peer ask for tokens again, nor
 * lift the bound for a stranger (no slot is no budget).
 */
static struct vslot *vslot_of(cfs_transport_t *t, const struct cfs_addr *a, bool create,
                              bool proven)
{
	struct peer_key k;
	uint8_t h[8];

	cfs__peer_key(&k, a);
	crypto_shorthash(h, (const uint8_t *)&k, sizeof(k), t->vslot_key);
	uint64_t x = cfs_get_be64(h);
	struct vslot *s1 = &t->vslots[x % t->cfg.validation_slots],
	            *s2 = &t->vslots[(x >> 32) % t->cfg.validation_slots];
	if (s1->used && memcmp(&s1->key, &k, sizeof(k)) == 0)
		return s1;
	if (s2->used && memcmp(&s2->key, &k, sizeof(k)) == 0)
		return s2;
	if (!create)
		return NULL;
	struct vslot *v = NULL;
	if (!s1->used || !s2->used)
		v = !s1->used ? s1 : s2;
	else if (!vslot_valid(s1) && (vslot_valid(s2) || s1->last_us <= s2->last_us))
		v = s1;
	else if (!vslot_valid(s2))
		v = s2;
	else if (proven) /* both proven: the one expiring first gives way */
		v = s1->valid_until_us <= s2->valid_until_us ? s1 : s2;
	if (!v)
		return NULL;
	memset(v, 0, sizeof(*v));
	v->key = k;
	v->used = true;
	return v;
}

void cfs__note_in(cfs_transport_t *t, const struct cfs_addr *from, size_t len)
{
	struct vslot *v = vslot_of(t, from, true, false);

	if (!v)
		return;
	v->last_us = cfs_now_us();
	if (!vslot_valid(v))
		v->in += len;
}

void cfs__validated(cfs_transport_t *t, const struct cfs_addr *a)
{
	struct vslot *v = vslot_of(t, a, true, true);

	v->valid_until_us = cfs_now_us() + VALID_US;
	v->in = v->out = 0;
}

bool cfs__proven(cfs_transport_t *t, const struct cfs_addr *a)
{
	struct vslot *v = vslot_of(t, a, false, false);
	return v && vslot_valid(v);
}

/*
 * May len more bytes go to dst in answer to something of in_len bytes (0:
 * to nothing in particular, e.g. an ack)? If so they are counted. An
 * address with no slot (both of its places held by proven peers) has no
 * running account: it may have 3x what it just sent, no more, so that a
 * peer who lost the draw still gets small answers and its token.
 */
bool cfs__answer_take(cfs_transport_t *t, const struct cfs_addr *dst, size_t len, size_t in_len)
{
	struct vslot *v = vslot_of(t, dst, false, false);

	if (v && vslot_valid(v))
		return true;
	if (!v)
		return len <= 3 * (uint64_t)in_len;
	if (v->out + len > 3 * v->in)
		return false;
	v->out += len;
	return true;
}

static bool budget_take(cfs_transport_t *t, const struct cfs_addr *dst, size_t len)
{
	return cfs__answer_take(t, dst, len, 0);
}

static void token_for(cfs_transport_t *t, const struct cfs_addr *a, uint64_t epoch,
                      uint8_t out[static XFER_TOKEN_BYTES])
{
	cfs_xfer_token(out, t->token_key, a, epoch);
}

void cfs__send_retry(cfs_transport_t *t, const struct cfs_addr *dst, uint64_t reqid, size_t in_len)
{
	uint8_t tok[XFER_TOKEN_BYTES], b[XFER_RETRY_LEN];

	if (!cfs__answer_take(t, dst, XFER_RETRY_LEN, in_len))
		return;
	token_for(t, dst, cfs_now_us() / 1000000 / TOKEN_EPOCH_S, tok);
	size_t n = cfs_xfer_retry_encode(b, reqid, tok);
	/* the request comes again, perhaps in pieces: take them afresh */
	struct in_key k;
	in_key_of(&k, dst, reqid, false);
	cfs_htab_del(&t->done_map, &k, NULL);
	t->st.retries_sent++;
	cfs__transmit(t, dst, b, n);
}

static void on_validate(cfs_transport_t *t, const struct cfs_addr *from, const uint8_t *p,
                        size_t len)
{
	uint8_t got[XFER_TOKEN_BYTES], want[XFER_TOKEN_BYTES];
	uint64_t epoch = cfs_now_us() / 1000000 / TOKEN_EPOCH_S;

	if (cfs_xfer_validate_decode(p, len, got) < 0) {
		t->st.malformed++;
		return;
	}
	for (uint64_t back = 0; back < 2 && back <= epoch; back++) { /* this epoch or the last */
		token_for(t, from, epoch - back, want);
		if (sodium_memcmp(got, want, sizeof(got)) == 0) {
			cfs__validated(t, from);
			t->st.validated++;
			return;
		}
	}
	t->st.bad_tokens++;
}

/* ------------------------------------------------------------ links */

static bool link_idle(const struct link *l)
{
	return l->nout == 0 && l->nin == 0 && l->cc.in_flight == 0;
}

static bool keep_busy(void *ctx, const void *key, void *val)
{
	struct link *l = *(struct link **)val;

	(void)ctx;
	(void)key;
	if (!link_idle(l) || l->heap_idx != SIZE_MAX)
		return true;
	free(l->out);
	free(l);
	return false;
}

static struct link *link_get(cfs_transport_t *t, const struct cfs_addr *a, bool create)
{
	struct peer_key k;
	bool added;

	cfs__peer_key(&k, a);
	struct link **lp = cfs_htab_get(&t->links, &k);
	if (lp || !create)
		return lp ? *lp : NULL;
	if (cfs_htab_count(&t->links) >= LINKS_MAX)
		cfs_htab_filter(&t->links, keep_busy, NULL);
	if (cfs_htab_count(&t->links) >= LINKS_MAX)
		return NULL;
	struct link *l = xcalloc(1, sizeof(*l));
	l->addr = *a;
	l->heap_idx = SIZE_MAX;
	l->due_us = UINT64_MAX;
	cfs_xfer_cc_init(&l->cc, t->cfg.ledbat_target_ms * 1000u);
	*(struct link **)cfs_htab_put(&t->links, &k, &added) = l;
	return l;
}

/* After a window operation: the process-wide count follows the link's. */
static void inflight_sync(cfs_transport_t *t, const struct link *l, uint32_t before)
{
	t->xfer_inflight = t->xfer_inflight + l->cc.in_flight - before;
}

static void drop_out(cfs_transport_t *t, struct link *l, unsigned j)
{
	struct xfer_out *x = l->out[j];
	uint32_t before = l->cc.in_flight;

	cfs_xfer_cc_forget(&l->cc, cfs_xfer_out_counted(x), cfs_xfer_out_bg(x));
	inflight_sync(t, l, before);
	t->out_bytes -= x->len;
	if (x->flags & XF_REPLY) {
		l->reply_bytes -= x->len;
		l->nreply--;
	}
	cfs_xfer_out_free(x);
	memmove(&l->out[j], &l->out[j + 1], (l->nout - j - 1) * sizeof(l->out[0]));
	l->nout--;
}

static void link_rearm(cfs_transport_t *t, struct link *l, uint64_t pace_due)
{
	uint64_t due = pace_due ? pace_due : UINT64_MAX;

	for (unsigned j = 0; j < l->nout; j++) {
		uint64_t d = cfs_xfer_out_deadline(l->out[j], &l->cc);
		if (d < due)
			due = d;
	}
	if (l->heap_idx != SIZE_MAX)
		cfs__heap_remove(&t->links_heap, l->heap_idx);
	l->due_us = due;
	if (due != UINT64_MAX)
		cfs__heap_push(&t->links_heap, l);
}

/* Hand k encoded pieces (off bytes) to the socket; the number it took.
 * *ret_failed: a send error lost them all (they count as sent, and are
 * resent as lost ones are). */
static unsigned send_pieces(cfs_transport_t *t, struct link *l, size_t off, unsigned k,
                            const size_t *lens, bool *ret_failed)
{
	*ret_failed = false;
	if (t->has_model) { /* evaluation: each piece meets the model alone */
		size_t o = 0;
		for (unsigned i = 0; i < k; i++) {
			cfs__transmit_piece(t, &l->addr, gbuf + o, lens[i]);
			o += lens[i];
		}
		return k;
	}
	ssize_t r = cfs_udp_send(&t->sock, &l->addr, gbuf, off, k > 1 ? CFS_DGRAM_SAFE : 0);
	if (r == -EAGAIN)
		return 0;
	if (r < 0) { /* counted as sent: the pieces are lost and resent */
		t->st.send_errors++;
		*ret_failed = true;
		return k;
	}
	unsigned segs = (size_t)r == off ? k : (unsigned)((size_t)r / CFS_DGRAM_SAFE);
	t->st.bytes_out += (uint64_t)r;
	t->st.datagrams_out += segs;
	if (segs > 1)
		t->st.gso_sends++;
	return segs;
}

/*
 * Send what may go of one transfer now, in batches of up to GSO_SEGS
 * pieces. The window and the upload cap are charged as pieces are
 * encoded; pieces the socket then refuses are taken out of both again and
 * wait for it to drain (a send error gives the cap's bytes back too; the
 * pieces count as sent, and lost). Returns 0
 * when x has nothing more to send, -1 when something held it back (the
 * link's window or pacing, the process bound, the socket), -2 when only
 * x is held (by its answer's 3x budget: the link's other transfers may go).
 * Pieces of an answer the socket refused stay charged to the budget.
 */
static int pump_one(cfs_transport_t *t, struct link *l, struct xfer_out *x, uint64_t now,
                    uint64_t *pace_due)
{
	uint16_t idx[GSO_SEGS];
	size_t lens[GSO_SEGS];
	struct cfs__up_debit debit[GSO_SEGS]; /* what each piece took of the upload cap */
	bool bg = cfs_xfer_out_bg(x), answer = x->flags & XF_REPLY;

	for (;;) {
		unsigned n = cfs_xfer_out_peek(x, idx, GSO_SEGS), k = 0;
		size_t off = 0;
		bool held = false;
		uint32_t before = l->cc.in_flight;
		if (n == 0)
			return 0;
		while (k < n) {
			uint32_t b = cfs_xfer_out_piece_len(x, idx[k]);
			uint64_t wait;
			if (t->xfer_inflight + (l->cc.in_flight - before) + b > t->cfg.xfer_inflight_max &&
			    l->cc.in_flight > 0) {
				t->bound_waiting = true;
				break;
			}
			if (!cfs_xfer_cc_can_send(&l->cc, b, bg, now, &wait)) {
				if (wait)
					*pace_due = now + wait;
				break;
			}
			if (!cfs__up_take(t, b, bg, now, &wait, &debit[k])) {
				*pace_due = now + wait;
				break;
			}
			if (answer && !budget_take(t, &l->addr, b)) {
				cfs__up_give_back(t, &debit[k]);
				t->st.budget_held++;
				held = true;
				break;
			}
			lens[k] = cfs_xfer_piece_encode(gbuf + off, x->flags, x->reqid, x->msg, x->len,
			                            x->next_pn + k, idx[k]);
			off += lens[k];
			cfs_xfer_cc_sent(&l->cc, b, bg, now);
			k++;
		}
		inflight_sync(t, l, before);
		if (k == 0)
			return held ? -2 : -1;
		bool failed;
		unsigned sent = send_pieces(t, l, off, k, lens, &failed);
		/* what did not leave the host gives its upload cap bytes back */
		for (unsigned i = failed ? 0 : sent; i < k; i++)
			cfs__up_give_back(t, &debit[i]);
		for (unsigned i = 0; i < sent; i++) {
			if (x->slot[idx[i]].state == XP_LOST)
				t->st.pieces_resent++;
			cfs_xfer_out_sent(x, idx[i], now);
		}
		t->st.pieces_out += sent;
		if (sent && !l->owed_since_us)
			l->owed_since_us = now;
		if (sent < k) {
			uint32_t unsent = 0, b2 = l->cc.in_flight;
			for (unsigned i = sent; i < k; i++)
				unsent += (uint32_t)lens[i];
			cfs_xfer_cc_forget(&l->cc, unsent, bg);
			inflight_sync(t, l, b2);
			cfs__want_writable(t);
			return -1;
		}
		if (k < n)
			return held ? -2 : -1;
	}
}

/* Send what l may send now, foreground before background; then set its
 * timer. */
static void link_service(cfs_transport_t *t, struct link *l)
{
	uint64_t now = cfs_now_us(), pace = 0;

	t->up_blocked = false;
	for (int pass = 0; pass < 2 && !t->sock_blocked; pass++)
		for (unsigned j = 0; j < l->nout; j++)
			if (cfs_xfer_out_bg(l->out[j]) == (pass == 1) &&
			    pump_one(t, l, l->out[j], now, &pace) == -1)
				goto done;
done:
	/* Held by our own upload cap, not by the peer: the link's transfers
	 * that wait for it alone are not stalled, and their calls are alive
	 * (up to their longest life). One with pieces in flight, or whose
	 * peer has stopped acknowledging, waits on the peer: its stall clock
	 * runs, so a dead peer's transfers go after XFER_STALL_US as ever. */
	if (t->up_blocked)
		for (unsigned j = 0; j < l->nout; j++) {
			struct xfer_out *x = l->out[j];
			if (!cfs_xfer_out_waits_on_us(x, l->owed_since_us, now))
				continue;
			x->last_ack_us = now;
			if (!(x->flags & XF_REPLY))
				cfs__call_touch(t, x->reqid);
		}
	link_rearm(t, l, pace);
	cfs__arm_timer(t);
}

/* Every link with something to send (the socket drained, or the process
 * bound has room again). */
static void service_all(cfs_transport_t *t)
{
	size_t pos = 0;
	void *v;

	t->bound_waiting = false;
	while (!t->sock_blocked && cfs_htab_next(&t->links, &pos, NULL, &v)) {
		struct link *l = *(struct link **)v;
		if (l->nout)
			link_service(t, l);
	}
}

void cfs__on_writable(cfs_transport_t *t)
{
	service_all(t);
}

int cfs__send_msg(cfs_transport_t *t, const struct cfs_addr *dst, const uint8_t *p, size_t len,
                 uint64_t reqid, bool is_reply, bool low_priority)
{
	if (len <= CFS_DGRAM_SAFE) {
		if (low_priority && !is_reply && len < CFS_DGRAM_SAFE) {
			uint8_t b[CFS_DGRAM_SAFE];
			b[0] = XFER_BACKGROUND_PREFIX; /* the request and its answer */
			memcpy(b + 1, p, len);
			cfs__transmit(t, dst, b, len + 1);
			return 0;
		}
		if (is_reply && !budget_take(t, dst, len))
			return 0; /* send_reply asked for a token when it had to */
		cfs__transmit(t, dst, p, len);
		return 0;
	}
	if (len > CFS_MSG_MAX)
		return -EMSGSIZE;
	struct link *l = t->out_bytes + len <= OUT_MAX ? link_get(t, dst, true) : NULL;
	if (!l)
		return -ENOBUFS;
	uint8_t flags = (uint8_t)((is_reply ? XF_REPLY : 0) | (low_priority ? XF_BACKGROUND : 0));
	for (unsigned j = 0; j < l->nout; j++)
		if (l->out[j]->reqid == reqid && (l->out[j]->flags & XF_REPLY) == (flags & XF_REPLY)) {
			drop_out(t, l, j); /* sent again (after a token): this copy replaces it */
			break;
		}
	if (is_reply && (l->reply_bytes + len > OUT_PEER_BYTES || l->nreply >= OUT_PEER_COUNT)) {
		t->st.answers_refused++;
		return -ENOBUFS;
	}
	if (l->nout == l->cap_out) {
		l->cap_out = l->cap_out ? 2 * l->cap_out : 8;
		l->out = xrealloc(l->out, l->cap_out * sizeof(l->out[0]));
	}
	l->out[l->nout++] = cfs_xfer_out_new(reqid, flags, xmemdup(p, len), len, cfs_now_us());
	l->last_used_us = cfs_now_us();
	t->out_bytes += len;
	if (is_reply) {
		l->reply_bytes += len;
		l->nreply++;
	}
	t->st.xfers_out++;
	link_service(t, l);
	return 0;
}

bool cfs__answering(cfs_transport_t *t, const struct cfs_addr *from, uint64_t reqid)
{
	struct link *l = t->links.n ? link_get(t, from, false) : NULL;

	for (unsigned j = 0; l && j < l->nout; j++)
		if (l->out[j]->reqid == reqid && (l->out[j]->flags & XF_REPLY))
			return true;
	return false;
}

void cfs__cancel_send(cfs_transport_t *t, const struct cfs_addr *dst, uint64_t reqid)
{
	struct link *l = link_get(t, dst, false);

	for (unsigned j = 0; l && j < l->nout; j++)
		if (l->out[j]->reqid == reqid && !(l->out[j]->flags & XF_REPLY)) {
			drop_out(t, l, j);
			link_service(t, l);
			return;
		}
}

/* ------------------------------------------------------------ receiving */

/* Acks count against an unproven sender's 3x budget too: a piece can be
 * shorter than the ack it draws. piece_len: the piece it answers (a sender
 * with no account may have 3x that). */
static void send_ack(cfs_transport_t *t, const struct cfs_addr *to, const struct xfer_ack *a,
                     size_t piece_len)
{
	uint8_t b[XFER_ACK_HDR + XFER_ACK_BITMAP_MAX];
	size_t n = cfs_xfer_ack_encode(b, a);

	if (!cfs__answer_take(t, to, n, piece_len)) {
		t->st.budget_held++;
		return;
	}
	t->st.acks_out++;
	cfs__transmit(t, to, b, n);
}

static void on_ack(cfs_transport_t *t, const struct cfs_addr *from, const uint8_t *p, size_t len)
{
	struct xfer_ack a;
	struct xfer_ack_result r;
	const char *why;
	struct link *l;

	if (cfs_xfer_ack_decode(p, len, &a, &why) < 0) {
		t->st.malformed++;
		return;
	}
	t->st.acks_in++;
	if (!(l = link_get(t, from, false)))
		return;
	l->acked_us = cfs_now_us();
	/* it answers: what it owes now is what is still in flight after this */
	l->owed_since_us = l->cc.in_flight ? l->acked_us : 0;
	for (unsigned j = 0; j < l->nout; j++) {
		struct xfer_out *x = l->out[j];
		if (x->reqid != a.reqid || (x->flags & XF_REPLY) != (a.flags & XF_REPLY))
			continue;
		uint32_t before = l->cc.in_flight;
		cfs_xfer_out_on_ack(x, &a, cfs_now_us(), &l->cc, &r);
		inflight_sync(t, l, before);
		l->owed_since_us = l->cc.in_flight ? l->acked_us : 0;
		if (r.progress && !(x->flags & XF_REPLY)) {
			/* our random request ID came back: the address is proven,
			 * and the call is alive while its request moves */
			cfs__validated(t, from);
			cfs__call_touch(t, x->reqid);
		}
		if (r.complete)
			drop_out(t, l, j);
		link_service(t, l);
		break;
	}
	if (t->bound_waiting && t->xfer_inflight < t->cfg.xfer_inflight_max / 2)
		service_all(t);
}

static void ack_due_add(cfs_transport_t *t, const struct in_key *k, const struct cfs_addr *from,
                        size_t piece_len)
{
	if (t->nack_due == t->cap_ack_due) {
		t->cap_ack_due = t->cap_ack_due ? 2 * t->cap_ack_due : 64;
		t->ack_due = xrealloc(t->ack_due, t->cap_ack_due * sizeof(t->ack_due[0]));
	}
	t->ack_due[t->nack_due++] = (struct ack_due){ .key = *k, .from = *from,
	                                                    .piece_len = (uint32_t)piece_len };
}

/* x (under k) no longer counts against the reassembly bounds. A reply's
 * reassembly counts apart: our own calls bound it, and strangers' pieces
 * must not crowd it out. */
static void in_uncount(cfs_transport_t *t, const struct in_key *k, const struct xfer_in *x)
{
	if (k->reply) {
		t->in_reply_bytes -= x->len;
		return;
	}
	struct link **lp = cfs_htab_get(&t->links, &k->peer);
	if (lp) {
		(*lp)->nin--;
		(*lp)->in_bytes -= x->len;
	}
	t->in_bytes -= x->len;
	t->nin_requests--;
}

static void in_forget(cfs_transport_t *t, const struct in_key *k, struct xfer_in *x)
{
	in_uncount(t, k, x);
	cfs_htab_del(&t->ins, k, NULL);
}

/* Drop the request reassembly that has made the least progress (the
 * stalest of those), to make room: a stranger's lone pieces claiming
 * long messages give way to transfers that are arriving. False when
 * there is none. */
static bool evict_one(cfs_transport_t *t)
{
	size_t pos = 0;
	const void *key;
	void *val;
	struct xfer_in *best = NULL;
	struct in_key bk;

	while (cfs_htab_next(&t->ins, &pos, &key, &val)) {
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
	in_forget(t, &bk, best);
	cfs_xfer_in_free(best);
	t->st.reasm_evicted++;
	return true;
}

/* A new reassembly, if the bounds allow it and (for a reply) a call to
 * that peer waits for it. */
static struct xfer_in *in_start(cfs_transport_t *t, const struct cfs_addr *from,
                                const struct in_key *k, const struct xfer_piece *p)
{
	struct link *l;

	if (p->flags & XF_REPLY) {
		if (!cfs__call_awaits(t, from, p->reqid))
			return NULL;
		/* it echoed our random request ID: it has our request, so the
		 * address is its own (our acks to it need no budget) */
		cfs__validated(t, from);
		if (t->in_reply_bytes + p->msg_len > t->cfg.reasm_total_max)
			return NULL;
		t->in_reply_bytes += p->msg_len;
	} else {
		while ((t->in_bytes + p->msg_len > t->cfg.reasm_total_max ||
		        t->nin_requests >= REASM_COUNT_MAX) && evict_one(t))
			;
		if (!(l = link_get(t, from, true)) && evict_one(t))
			l = link_get(t, from, true);
		if (!l || l->in_bytes + p->msg_len > t->cfg.reasm_peer_max ||
		    t->in_bytes + p->msg_len > t->cfg.reasm_total_max)
			return NULL;
		l->nin++;
		l->in_bytes += p->msg_len;
		t->in_bytes += p->msg_len;
		t->nin_requests++;
	}
	struct xfer_in *x = cfs_xfer_in_new(p, cfs_now_us());
	*(struct xfer_in **)cfs_htab_put(&t->ins, k, NULL) = x;
	if (!t->in_sweep_us)
		t->in_sweep_us = cfs_now_us() + (uint64_t)t->cfg.reasm_idle_ms * 500;
	return x;
}

static void on_piece(cfs_transport_t *t, const struct cfs_addr *from, const uint8_t *b, size_t len)
{
	struct xfer_piece p;
	struct xfer_ack a;
	struct in_key k;
	const char *why;
	uint64_t now = cfs_now_us();

	if (cfs_xfer_piece_decode(b, len, &p, &why) < 0) {
		t->st.malformed++;
		return;
	}
	t->st.pieces_in++;
	in_key_of(&k, from, p.reqid, p.flags & XF_REPLY);
	struct xfer_in **xp = cfs_htab_get(&t->ins, &k), *x;
	if (!xp) {
		struct done_in *d = cfs_htab_get(&t->done_map, &k);
		if (d) { /* our final ack was lost: say it again */
			t->st.pieces_dup++;
			a = (struct xfer_ack){ .flags = (uint8_t)(k.reply | XF_COMPLETE), .reqid = p.reqid,
			                       .largest_pn = p.pn > d->largest_pn ? p.pn : d->largest_pn,
			                       .first_missing = d->npieces };
			send_ack(t, from, &a, len);
			return;
		}
		if (!(x = in_start(t, from, &k, &p))) {
			t->st.reasm_dropped++;
			return;
		}
	} else {
		x = *xp;
	}
	bool was_pending = x->ack_pending;
	int r = cfs_xfer_in_piece(x, &p, now);
	if (r < 0) {
		t->st.malformed++;
		return;
	}
	if (r == 1)
		t->st.pieces_dup++;
	if (r == 0 && (p.flags & XF_REPLY)) { /* only news keeps a call alive */
		cfs__call_touch(t, p.reqid);
	}
	if (!cfs_xfer_in_complete(x)) {
		if (!was_pending)
			ack_due_add(t, &k, from, len);
		return;
	}
	cfs_xfer_in_ack(x, now, &a);
	send_ack(t, from, &a, len);
	done_note(t, &k, x);
	in_forget(t, &k, x);
	t->st.xfers_in++;
	cfs__on_message(t, from, x->buf, x->len, p.flags & XF_BACKGROUND);
	cfs_xfer_in_free(x);
}

void cfs__flush_acks(cfs_transport_t *t)
{
	struct xfer_ack a;

	for (unsigned i = 0; i < t->nack_due && !t->closing; i++) {
		struct xfer_in **xp = cfs_htab_get(&t->ins, &t->ack_due[i].key);
		if (!xp || !(*xp)->ack_pending)
			continue;
		cfs_xfer_in_ack(*xp, cfs_now_us(), &a);
		send_ack(t, &t->ack_due[i].from, &a, t->ack_due[i].piece_len);
	}
	t->nack_due = 0;
}

void cfs__on_frame(cfs_transport_t *t, const struct cfs_addr *from, enum xfer_kind kind,
                   const uint8_t *p, size_t len)
{
	uint8_t tok[XFER_TOKEN_BYTES];
	uint64_t reqid;

	switch (kind) {
	case XFER_KIND_PIECE:
		on_piece(t, from, p, len);
		return;
	case XFER_KIND_ACK:
		on_ack(t, from, p, len);
		return;
	case XFER_KIND_VALIDATE:
		on_validate(t, from, p, len);
		return;
	case XFER_KIND_RETRY:
		if (cfs_xfer_retry_decode(p, len, &reqid, tok) == 0) {
			cfs__on_retry(t, from, reqid, tok);
			return;
		}
		break;
	default:
		break;
	}
	t->st.malformed++;
}

/* ------------------------------------------------------------ timers */

static bool keep_fresh(void *ctx, const void *key, void *val)
{
	cfs_transport_t *t = ctx;
	struct xfer_in *x = *(struct xfer_in **)val;

	if (x->last_rx_us + (uint64_t)t->cfg.reasm_idle_ms * 1000 > cfs_now_us())
		return true;
	in_uncount(t, key, x);
	t->st.reasm_expired++;
	cfs_xfer_in_free(x);
	return false;
}

uint64_t cfs__links_due(const cfs_transport_t *t)
{
	uint64_t due = t->in_sweep_us ? t->in_sweep_us : UINT64_MAX;

	if (cfs__heap_min(&t->links_heap) < due)
		due = cfs__heap_min(&t->links_heap);
	return due;
}

/* A peer that has acknowledged nothing for SILENT_PTOS probe timeouts
 * since its oldest answer began loses every answer queued for it: a
 * reader that stopped reading (or never meant to) holds no memory here. */
static void drop_silent(cfs_transport_t *t, struct link *l, uint64_t now)
{
	uint64_t oldest = UINT64_MAX, wait = SILENT_PTOS * cfs_xfer_cc_pto_us(&l->cc);

	if (!l->nreply)
		return;
	for (unsigned j = 0; j < l->nout; j++) /* answers it has had pieces of */
		if ((l->out[j]->flags & XF_REPLY) && l->out[j]->next_new > 0 && l->out[j]->created_us < oldest)
			oldest = l->out[j]->created_us;
	if (oldest == UINT64_MAX)
		return;
	uint64_t since = l->acked_us > oldest ? l->acked_us : oldest;
	if (now < since + (wait > SILENT_MIN_US ? wait : SILENT_MIN_US))
		return;
	for (unsigned j = 0; j < l->nout;)
		if (l->out[j]->flags & XF_REPLY) {
			t->st.answers_dropped_silent++;
			drop_out(t, l, j);
		} else {
			j++;
		}
}

void cfs__links_timer(cfs_transport_t *t, uint64_t now)
{
	struct xfer_ack_result r;

	while (t->links_heap.n && !t->closing) {
		struct link *l = t->links_heap.v[0];
		if (l->due_us > now)
			break;
		cfs__heap_remove(&t->links_heap, 0);
		l->due_us = UINT64_MAX;
		drop_silent(t, l, now);
		for (unsigned j = 0; j < l->nout;) {
			uint32_t before = l->cc.in_flight;
			int rc = cfs_xfer_out_on_timer(l->out[j], now, &l->cc, &r);
			inflight_sync(t, l, before);
			if (rc == -ETIMEDOUT) {
				t->st.xfers_abandoned++;
				drop_out(t, l, j);
				continue;
			}
			j++;
		}
		link_service(t, l);
	}
	if (t->in_sweep_us && now >= t->in_sweep_us) {
		cfs_htab_filter(&t->ins, keep_fresh, t);
		t->in_sweep_us = cfs_htab_count(&t->ins) ? now + (uint64_t)t->cfg.reasm_idle_ms * 500 : 0;
	}
	if (t->bound_waiting && t->xfer_inflight < t->cfg.xfer_inflight_max / 2)
		service_all(t);
}

/* ------------------------------------------------------------ lifetime */

static bool drop_in(void *ctx, const void *key, void *val)
{
	(void)ctx;
	(void)key;
	cfs_xfer_in_free(*(struct xfer_in **)val);
	return false;
}

static bool drop_link(void *ctx, const void *key, void *val)
{
	struct link *l = *(struct link **)val;

	(void)ctx;
	(void)key;
	for (unsigned j = 0; j < l->nout; j++)
		cfs_xfer_out_free(l->out[j]);
	free(l->out);
	free(l);
	return false;
}

void cfs__links_close(cfs_transport_t *t)
{
	cfs_htab_filter(&t->ins, drop_in, NULL);
	t->links_heap.n = 0;
	cfs_htab_filter(&t->links, drop_link, NULL);
	t->in_bytes = t->in_reply_bytes = t->out_bytes = t->xfer_inflight = 0;
	t->nin_requests = 0;
	t->nack_due = 0;
}

void cfs__links_free(cfs_transport_t *t)
{
	cfs__links_close(t);
	cfs_htab_free(&t->ins);
	cfs_htab_free(&t->links);
	cfs__heap_free(&t->links_heap);
	free(t->vslots);
	cfs_htab_free(&t->done_map);
	free(t->done_ring);
	free(t->ack_due);
}

void cfs__links_stats(const cfs_transport_t *t, struct cfs_transport_stats *st)
{
	size_t pos = 0;
	void *v;

	st->cwnd_bytes = 0;
	st->links = (uint32_t)cfs_htab_count(&t->links);
	while (cfs_htab_next(&t->links, &pos, NULL, &v))
		st->cwnd_bytes += (*(struct link **)v)->cc.cwnd;
}
