/*
 * Links (common/link.h): what the transport keeps per peer to move
 * messages longer than one safe datagram, and the proof of address that
 * bounds what it sends to strangers. No I/O: datagrams, sends and the
 * time come in; datagrams to transmit, events and a deadline go out.
 *
 * A link holds the peer's congestion window (struct xfer_cc) and its
 * outgoing transfers. Pieces leave foreground first, then background,
 * each transfer lost pieces first; as many as the window, the pacing, the
 * process-wide bound on bytes in flight and (for answers to an address
 * not yet proven) the 3x budget allow, in batches of up to LINK_BATCH
 * for one sendmsg (UDP GSO where the kernel has it). Incoming pieces are
 * reassembled per (peer, request ID, direction), bounded per peer and in
 * total, dropped when stale; pieces of a reply are taken only for a
 * request we sent whose call has not ended. Acks leave at the end of
 * every read batch, and a completed message is acked again if its sender
 * shows it did not hear (recently completed ones are remembered).
 *
 * Serving a link hands its pieces out a batch at a time: the driver
 * sends each batch and says how many pieces the socket took before the
 * next is built, so that pieces the socket refused are taken out of the
 * window and the upload cap again, as if they had never been built, and
 * the link waits for the socket (cfs__links_writable). A service that
 * starts while the socket is full only sets the link's timer.
 *
 * Address validation follows QUIC (RFC 9000 8.1): bytes sent to an
 * address in answer are at most three times the bytes received from it
 * until it proves it receives at that address — by answering one of our
 * calls (our 64-bit request IDs are random) or by echoing a token we
 * gave it (a keyed hash of the address and a one-minute epoch). The state
 * is a fixed table indexed by a hash of the address: a collision forgets
 * an entry, which costs its owner one more token round trip and never
 * lets anyone past the 3x bound (bytes in and out are forgotten together).
 *
 * This file has the links themselves, their transfers, their service and
 * timers and the acks they are sent; the proof of address is in
 * link_valid.c, the reassembly and the acks we owe in link_reasm.c
 * (link_int.h is what the three share).
 */
#include "common/link_int.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define LINKS_MAX 4096
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
/* After a batch: serve the same transfer again, the next one, or stop. */
enum { SVC_SAME, SVC_NEXT, SVC_STOP };

static __thread uint8_t gbuf[LINK_BATCH * CFS_DGRAM_SAFE];

static uint64_t link_due_key(const void *p) { return ((const struct cfs__link *)p)->due_us; }
static void link_set_idx(void *p, size_t i) { ((struct cfs__link *)p)->heap_idx = i; }

void cfs__links_init(struct cfs__links *lk, const struct cfs_transport_config *cfg,
                     struct cfs_transport_stats *st)
{
	memset(lk, 0, sizeof(*lk));
	lk->cfg = *cfg;
	lk->st = st;
	cfs__upcap_init(&lk->up, cfg->upload_bytes_per_s);
	cfs_htab_init(&lk->links, sizeof(struct peer_key), sizeof(struct cfs__link *));
	cfs_htab_init(&lk->ins, sizeof(struct in_key), sizeof(struct xfer_in *));
	cfs_htab_init(&lk->awaited, sizeof(struct in_key), 0);
	lk->links_heap = (struct cfs__heap){ .key = link_due_key, .set_idx = link_set_idx };
	lk->vslots = xcalloc(cfg->validation_slots, sizeof(lk->vslots[0]));
	cfs_htab_init(&lk->done_map, sizeof(struct in_key), sizeof(struct done_in));
	lk->done_ring = xcalloc(DONE_MAX, sizeof(lk->done_ring[0]));
	randombytes_buf(lk->token_key, sizeof(lk->token_key));
	randombytes_buf(lk->vslot_key, sizeof(lk->vslot_key));
}

void cfs__link_in_key(struct in_key *k, const struct cfs_addr *a, uint64_t reqid, bool reply)
{
	memset(k, 0, sizeof(*k));
	cfs__peer_key(&k->peer, a);
	k->reqid = reqid;
	k->reply = reply;
}

struct cfs__link_event *cfs__link_event_push(struct cfs__links *lk, enum cfs__link_event_type type,
                                             const struct cfs_addr *from, uint64_t reqid)
{
	struct cfs__link_event *e = cfs_actq_push(&lk->events, sizeof(*e));
	e->type = (uint8_t)type;
	if (from)
		e->from = *from;
	e->reqid = reqid;
	return e;
}

bool cfs__links_poll_event(struct cfs__links *lk, struct cfs__link_event *ret)
{
	return cfs_actq_pop(&lk->events, ret, sizeof(*ret));
}

/* A whole datagram to transmit, counted against the upload cap (whole
 * datagrams are sent regardless; pieces make up for them). */
void cfs__link_whole_push(struct cfs__links *lk, const struct cfs_addr *dst, const uint8_t *p,
                          size_t len, uint64_t now)
{
	struct link_dgram *d = cfs_actq_push(&lk->whole, sizeof(*d));

	cfs__upcap_charge(&lk->up, len, now);
	d->dst = *dst;
	d->len = len;
	memcpy(d->data, p, len);
}

void cfs__links_send_raw(struct cfs__links *lk, const struct cfs_addr *dst, const uint8_t *p,
                         size_t len, uint64_t now)
{
	cfs__link_whole_push(lk, dst, p, len, now);
}

static bool budget_take(struct cfs__links *lk, const struct cfs_addr *dst, size_t len, uint64_t now)
{
	return cfs__links_answer_take(lk, dst, len, 0, now);
}

/* ------------------------------------------------------------ links */

static bool link_idle(const struct cfs__link *l)
{
	return l->nout == 0 && l->nin == 0 && l->cc.in_flight == 0;
}

static bool keep_busy(void *ctx, const void *key, void *val)
{
	const struct cfs__links *lk = ctx;
	struct cfs__link *l = *(struct cfs__link **)val;

	(void)key;
	if (!link_idle(l) || l->heap_idx != SIZE_MAX || l->ready || lk->svc.l == l)
		return true;
	free(l->out);
	free(l);
	return false;
}

struct cfs__link *cfs__link_get(struct cfs__links *lk, const struct cfs_addr *a, bool create)
{
	struct peer_key k;
	bool added;

	cfs__peer_key(&k, a);
	struct cfs__link **lp = cfs_htab_get(&lk->links, &k);
	if (lp || !create)
		return lp ? *lp : NULL;
	if (cfs_htab_count(&lk->links) >= LINKS_MAX)
		cfs_htab_filter(&lk->links, keep_busy, lk);
	if (cfs_htab_count(&lk->links) >= LINKS_MAX)
		return NULL;
	struct cfs__link *l = xcalloc(1, sizeof(*l));
	l->addr = *a;
	l->heap_idx = SIZE_MAX;
	l->due_us = UINT64_MAX;
	cfs_xfer_cc_init(&l->cc, lk->cfg.ledbat_target_ms * 1000u);
	*(struct cfs__link **)cfs_htab_put(&lk->links, &k, &added) = l;
	return l;
}

/* After a window operation: the process-wide count follows the link's. */
static void inflight_sync(struct cfs__links *lk, const struct cfs__link *l, uint32_t before)
{
	lk->xfer_inflight = lk->xfer_inflight + l->cc.in_flight - before;
}

static void drop_out(struct cfs__links *lk, struct cfs__link *l, unsigned j)
{
	struct xfer_out *x = l->out[j];
	uint32_t before = l->cc.in_flight;

	cfs_xfer_cc_forget(&l->cc, cfs_xfer_out_counted(x), cfs_xfer_out_bg(x));
	inflight_sync(lk, l, before);
	lk->out_bytes -= x->len;
	if (x->flags & XF_REPLY) {
		l->reply_bytes -= x->len;
		l->nreply--;
	}
	cfs_xfer_out_free(x);
	memmove(&l->out[j], &l->out[j + 1], (l->nout - j - 1) * sizeof(l->out[0]));
	l->nout--;
}

static void link_rearm(struct cfs__links *lk, struct cfs__link *l, uint64_t pace_due)
{
	uint64_t due = pace_due ? pace_due : UINT64_MAX;

	for (unsigned j = 0; j < l->nout; j++) {
		uint64_t d = cfs_xfer_out_deadline(l->out[j], &l->cc);
		if (d < due)
			due = d;
	}
	if (l->heap_idx != SIZE_MAX)
		cfs__heap_remove(&lk->links_heap, l->heap_idx);
	l->due_us = due;
	if (due != UINT64_MAX)
		cfs__heap_push(&lk->links_heap, l);
}

/* l is to be served (what it may send goes, its timer is set) at the
 * next cfs__links_poll_transmit, in the order asked. */
static void link_ready(struct cfs__links *lk, struct cfs__link *l)
{
	if (l->ready)
		return;
	l->ready = true;
	l->ready_next = NULL;
	if (lk->ready_tail)
		lk->ready_tail->ready_next = l;
	else
		lk->ready_head = l;
	lk->ready_tail = l;
}

/* Every link with transfers is to be served (the socket drained, or the
 * process bound has room again). */
static void serve_all(struct cfs__links *lk)
{
	lk->bound_waiting = false;
	lk->all_active = true;
	lk->all_pos = 0;
}

void cfs__links_writable(struct cfs__links *lk)
{
	lk->sock_blocked = false;
	serve_all(lk);
}

int cfs__links_send(struct cfs__links *lk, const struct cfs_addr *dst, const uint8_t *p, size_t len,
                    uint64_t reqid, bool is_reply, bool low_priority, uint64_t now)
{
	if (!is_reply) { /* its reply's pieces are taken until the call ends */
		struct in_key k;
		cfs__link_in_key(&k, dst, reqid, true);
		cfs_htab_put(&lk->awaited, &k, NULL);
	}
	if (len <= CFS_DGRAM_SAFE) {
		if (low_priority && !is_reply && len < CFS_DGRAM_SAFE) {
			uint8_t b[CFS_DGRAM_SAFE];
			b[0] = XFER_BACKGROUND_PREFIX; /* the request and its answer */
			memcpy(b + 1, p, len);
			cfs__link_whole_push(lk, dst, b, len + 1, now);
			return 0;
		}
		if (is_reply && !budget_take(lk, dst, len, now))
			return 0; /* the driver asked for a token when it had to */
		cfs__link_whole_push(lk, dst, p, len, now);
		return 0;
	}
	if (len > CFS_MSG_MAX)
		return -EMSGSIZE;
	struct cfs__link *l = lk->out_bytes + len <= OUT_MAX ? cfs__link_get(lk, dst, true) : NULL;
	if (!l)
		return -ENOBUFS;
	uint8_t flags = (uint8_t)((is_reply ? XF_REPLY : 0) | (low_priority ? XF_BACKGROUND : 0));
	for (unsigned j = 0; j < l->nout; j++)
		if (l->out[j]->reqid == reqid && (l->out[j]->flags & XF_REPLY) == (flags & XF_REPLY)) {
			drop_out(lk, l, j); /* sent again (after a token): this copy replaces it */
			break;
		}
	if (is_reply && (l->reply_bytes + len > OUT_PEER_BYTES || l->nreply >= OUT_PEER_COUNT)) {
		lk->st->answers_refused++;
		return -ENOBUFS;
	}
	if (l->nout == l->cap_out) {
		l->cap_out = l->cap_out ? 2 * l->cap_out : 8;
		l->out = xrealloc(l->out, l->cap_out * sizeof(l->out[0]));
	}
	l->out[l->nout++] = cfs_xfer_out_new(reqid, flags, xmemdup(p, len), len, now);
	l->last_used_us = now;
	lk->out_bytes += len;
	if (is_reply) {
		l->reply_bytes += len;
		l->nreply++;
	}
	lk->st->xfers_out++;
	link_ready(lk, l);
	return 0;
}

bool cfs__links_answering(struct cfs__links *lk, const struct cfs_addr *from, uint64_t reqid)
{
	struct cfs__link *l = lk->links.n ? cfs__link_get(lk, from, false) : NULL;

	for (unsigned j = 0; l && j < l->nout; j++)
		if (l->out[j]->reqid == reqid && (l->out[j]->flags & XF_REPLY))
			return true;
	return false;
}

void cfs__links_call_end(struct cfs__links *lk, const struct cfs_addr *dst, uint64_t reqid)
{
	struct in_key k;

	cfs__link_in_key(&k, dst, reqid, true);
	cfs_htab_del(&lk->awaited, &k, NULL);
	struct cfs__link *l = lk->links.n ? cfs__link_get(lk, dst, false) : NULL;
	for (unsigned j = 0; l && j < l->nout; j++)
		if (l->out[j]->reqid == reqid && !(l->out[j]->flags & XF_REPLY)) {
			drop_out(lk, l, j);
			link_ready(lk, l);
			return;
		}
}

/* ------------------------------------------------------------ serving a link */

/*
 * Build the next batch of transfer x (up to LINK_BATCH pieces) into tx.
 * The window, the process bound and the upload cap are charged as pieces
 * are encoded (cfs__links_transmitted takes back what the socket then
 * refuses). 1: a batch is in tx; 0: x has nothing more to send; -1:
 * something held the link back (its window or pacing, the process bound,
 * the upload cap); -2: only x is held (by its answer's 3x budget: the
 * link's other transfers may go).
 */
static int batch_build(struct cfs__links *lk, struct cfs__link *l, struct xfer_out *x, uint64_t now,
                       struct cfs__tx *tx)
{
	struct link_svc *s = &lk->svc;
	bool bg = cfs_xfer_out_bg(x), answer = x->flags & XF_REPLY;
	unsigned n = cfs_xfer_out_peek(x, s->idx, LINK_BATCH), k = 0;
	uint32_t before = l->cc.in_flight;
	size_t off = 0;
	bool held = false;

	if (n == 0)
		return 0;
	while (k < n) {
		uint32_t b = cfs_xfer_out_piece_len(x, s->idx[k]);
		uint64_t wait;
		if (lk->xfer_inflight + (l->cc.in_flight - before) + b > lk->cfg.xfer_inflight_max &&
		    l->cc.in_flight > 0) {
			lk->bound_waiting = true;
			break;
		}
		if (!cfs_xfer_cc_can_send(&l->cc, b, bg, now, &wait)) {
			if (wait)
				s->pace = now + wait;
			break;
		}
		if (!cfs__upcap_take(&lk->up, b, bg, now, &wait, &s->debit[k])) {
			lk->st->upload_held++;
			lk->up_blocked = true;
			s->pace = now + wait;
			break;
		}
		if (answer && !budget_take(lk, &l->addr, b, now)) {
			cfs__upcap_give_back(&lk->up, &s->debit[k]);
			lk->st->budget_held++;
			held = true;
			break;
		}
		s->lens[k] = cfs_xfer_piece_encode(gbuf + off, x->flags, x->reqid, x->msg, x->len,
		                                   x->next_pn + k, s->idx[k]);
		off += s->lens[k];
		cfs_xfer_cc_sent(&l->cc, b, bg, now);
		k++;
	}
	inflight_sync(lk, l, before);
	if (k == 0)
		return held ? -2 : -1;
	s->x = x;
	s->n = n;
	s->k = k;
	s->held = held;
	*tx = (struct cfs__tx){ .dst = l->addr, .p = gbuf, .len = off, .npieces = k, .lens = s->lens };
	return 1;
}

void cfs__links_transmitted(struct cfs__links *lk, unsigned sent, bool failed, uint64_t now)
{
	struct link_svc *s = &lk->svc;
	struct cfs__link *l = s->l;
	struct xfer_out *x = s->x;
	bool bg = cfs_xfer_out_bg(x);

	/* what did not leave the host gives its upload cap bytes back */
	for (unsigned i = failed ? 0 : sent; i < s->k; i++)
		cfs__upcap_give_back(&lk->up, &s->debit[i]);
	for (unsigned i = 0; i < sent; i++) {
		if (x->slot[s->idx[i]].state == XP_LOST)
			lk->st->pieces_resent++;
		cfs_xfer_out_sent(x, s->idx[i], now);
	}
	lk->st->pieces_out += sent;
	if (sent && !l->owed_since_us)
		l->owed_since_us = now;
	if (sent < s->k) { /* the socket is full: the rest waits for it */
		uint32_t unsent = 0, b2 = l->cc.in_flight;
		for (unsigned i = sent; i < s->k; i++)
			unsent += (uint32_t)s->lens[i];
		cfs_xfer_cc_forget(&l->cc, unsent, bg);
		inflight_sync(lk, l, b2);
		lk->sock_blocked = true;
		s->next = SVC_STOP;
		return;
	}
	s->next = s->k < s->n ? (s->held ? SVC_NEXT : SVC_STOP) : SVC_SAME;
}

/* The end of a link's service. Held by our own upload cap, not by the
 * peer: the link's transfers that wait for it alone are not stalled, and
 * their calls are alive (up to their longest life). One with pieces in
 * flight, or whose peer has stopped acknowledging, waits on the peer: its
 * stall clock runs, so a dead peer's transfers go after XFER_STALL_US as
 * ever. Then the link's timer is set. */
static void service_end(struct cfs__links *lk, struct cfs__link *l, uint64_t now)
{
	if (lk->up_blocked)
		for (unsigned j = 0; j < l->nout; j++) {
			struct xfer_out *x = l->out[j];
			if (!cfs_xfer_out_waits_on_us(x, l->owed_since_us, now))
				continue;
			x->last_ack_us = now;
			if (!(x->flags & XF_REPLY))
				cfs__link_event_push(lk, CFS__LINK_ALIVE, &l->addr, x->reqid);
		}
	link_rearm(lk, l, lk->svc.pace);
	lk->svc.l = NULL;
}

/* The next batch of the link being served, foreground transfers before
 * background ones; false when its service has ended. */
static bool service_step(struct cfs__links *lk, uint64_t now, struct cfs__tx *tx)
{
	struct link_svc *s = &lk->svc;
	struct cfs__link *l = s->l;

	if (s->next == SVC_STOP) {
		service_end(lk, l, now);
		return false;
	}
	if (s->next == SVC_NEXT)
		s->j++;
	s->next = SVC_SAME;
	while (s->pass < 2 && !lk->sock_blocked) {
		if (s->j >= l->nout) {
			s->pass++;
			s->j = 0;
			continue;
		}
		struct xfer_out *x = l->out[s->j];
		if (cfs_xfer_out_bg(x) != (s->pass == 1)) {
			s->j++;
			continue;
		}
		int r = batch_build(lk, l, x, now, tx);
		if (r == 1)
			return true;
		if (r == -1)
			break;
		s->j++;
	}
	service_end(lk, l, now);
	return false;
}

static void service_start(struct cfs__links *lk, struct cfs__link *l)
{
	lk->svc.l = l;
	lk->svc.pass = 0;
	lk->svc.j = 0;
	lk->svc.next = SVC_SAME;
	lk->svc.pace = 0;
	lk->up_blocked = false;
}

/* ------------------------------------------------------------ timers */

/* A peer that has acknowledged nothing for SILENT_PTOS probe timeouts
 * since its oldest answer began loses every answer queued for it: a
 * reader that stopped reading (or never meant to) holds no memory here. */
static void drop_silent(struct cfs__links *lk, struct cfs__link *l, uint64_t now)
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
			lk->st->answers_dropped_silent++;
			drop_out(lk, l, j);
		} else {
			j++;
		}
}

/* l's timer is due: silent peers, losses and probe timeouts, transfers
 * abandoned. Its service follows. */
static void link_expire(struct cfs__links *lk, struct cfs__link *l, uint64_t now)
{
	struct xfer_ack_result r;

	l->due_us = UINT64_MAX;
	drop_silent(lk, l, now);
	for (unsigned j = 0; j < l->nout;) {
		uint32_t before = l->cc.in_flight;
		int rc = cfs_xfer_out_on_timer(l->out[j], now, &l->cc, &r);
		inflight_sync(lk, l, before);
		if (rc == -ETIMEDOUT) {
			lk->st->xfers_abandoned++;
			drop_out(lk, l, j);
			continue;
		}
		j++;
	}
}

void cfs__links_timeout(struct cfs__links *lk, uint64_t now)
{
	lk->timer_pending = true;
	lk->timer_now = now;
}

uint64_t cfs__links_deadline(const struct cfs__links *lk)
{
	uint64_t due = lk->in_sweep_us ? lk->in_sweep_us : UINT64_MAX;

	if (cfs__heap_min(&lk->links_heap) < due)
		due = cfs__heap_min(&lk->links_heap);
	return due;
}

/* ------------------------------------------------------------ output */

/*
 * The next link to serve, in the order the work was asked for: links made
 * ready by sends, acks and cancels; then a timeout's due links one at a
 * time (each expired, then served), its stale reassemblies, and a look at
 * the process bound; then, when the socket drained or the bound has room
 * again, every link with transfers. NULL when there is none.
 */
static struct cfs__link *next_link(struct cfs__links *lk)
{
	struct cfs__link *l;
	void *v;

	for (;;) {
		if ((l = lk->ready_head)) {
			lk->ready_head = l->ready_next;
			if (!lk->ready_head)
				lk->ready_tail = NULL;
			l->ready = false;
			return l;
		}
		if (lk->timer_pending) {
			if (cfs__heap_min(&lk->links_heap) <= lk->timer_now) {
				l = lk->links_heap.v[0];
				cfs__heap_remove(&lk->links_heap, 0);
				link_expire(lk, l, lk->timer_now);
				return l;
			}
			lk->timer_pending = false;
			cfs__link_sweep_stale(lk, lk->timer_now);
			lk->check_bound = true;
			continue;
		}
		if (lk->check_bound) {
			lk->check_bound = false;
			if (lk->bound_waiting && lk->xfer_inflight < lk->cfg.xfer_inflight_max / 2)
				serve_all(lk);
			continue;
		}
		while (lk->all_active && !lk->sock_blocked && cfs_htab_next(&lk->links, &lk->all_pos, NULL, &v))
			if ((*(struct cfs__link **)v)->nout)
				return *(struct cfs__link **)v;
		lk->all_active = false;
		return NULL;
	}
}

bool cfs__links_poll_transmit(struct cfs__links *lk, uint64_t now, struct cfs__tx *ret)
{
	struct cfs__link *l;

	if (cfs_actq_pop(&lk->whole, &lk->tx, sizeof(lk->tx))) {
		*ret = (struct cfs__tx){ .dst = lk->tx.dst, .p = lk->tx.data, .len = lk->tx.len };
		return true;
	}
	for (;;) {
		if (lk->svc.l && service_step(lk, now, ret))
			return true;
		if (!(l = next_link(lk)))
			return false;
		service_start(lk, l);
	}
}

/* ------------------------------------------------------------ receiving */
static void on_ack(struct cfs__links *lk, const struct cfs_addr *from, const uint8_t *p, size_t len,
                   uint64_t now)
{
	struct xfer_ack a;
	struct xfer_ack_result r;
	const char *why;
	struct cfs__link *l;

	if (cfs_xfer_ack_decode(p, len, &a, &why) < 0) {
		lk->st->malformed++;
		return;
	}
	lk->st->acks_in++;
	if (!(l = cfs__link_get(lk, from, false)))
		return;
	l->acked_us = now;
	/* it answers: what it owes now is what is still in flight after this */
	l->owed_since_us = l->cc.in_flight ? l->acked_us : 0;
	for (unsigned j = 0; j < l->nout; j++) {
		struct xfer_out *x = l->out[j];
		if (x->reqid != a.reqid || (x->flags & XF_REPLY) != (a.flags & XF_REPLY))
			continue;
		uint32_t before = l->cc.in_flight;
		cfs_xfer_out_on_ack(x, &a, now, &l->cc, &r);
		inflight_sync(lk, l, before);
		l->owed_since_us = l->cc.in_flight ? l->acked_us : 0;
		if (r.progress && !(x->flags & XF_REPLY)) {
			/* our random request ID came back: the address is proven,
			 * and the call is alive while its request moves */
			cfs__links_validated(lk, from, now);
			cfs__link_event_push(lk, CFS__LINK_ALIVE, from, x->reqid)->by_peer = true;
		}
		if (r.complete)
			drop_out(lk, l, j);
		link_ready(lk, l);
		break;
	}
	lk->check_bound = true;
}

void cfs__links_datagram(struct cfs__links *lk, const struct cfs_addr *from, enum xfer_kind kind,
                         const uint8_t *p, size_t len, uint64_t now)
{
	uint8_t tok[XFER_TOKEN_BYTES];
	uint64_t reqid;

	switch (kind) {
	case XFER_KIND_PIECE:
		cfs__link_on_piece(lk, from, p, len, now);
		return;
	case XFER_KIND_ACK:
		on_ack(lk, from, p, len, now);
		return;
	case XFER_KIND_VALIDATE:
		cfs__link_on_validate(lk, from, p, len, now);
		return;
	case XFER_KIND_RETRY:
		if (cfs_xfer_retry_decode(p, len, &reqid, tok) == 0) {
			memcpy(cfs__link_event_push(lk, CFS__LINK_RETRY, from, reqid)->token, tok, sizeof(tok));
			return;
		}
		break;
	default:
		break;
	}
	lk->st->malformed++;
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
	struct cfs__link *l = *(struct cfs__link **)val;

	(void)ctx;
	(void)key;
	for (unsigned j = 0; j < l->nout; j++)
		cfs_xfer_out_free(l->out[j]);
	free(l->out);
	free(l);
	return false;
}

void cfs__links_close(struct cfs__links *lk)
{
	struct cfs__link_event e;

	cfs_htab_filter(&lk->ins, drop_in, NULL);
	lk->links_heap.n = 0;
	cfs_htab_filter(&lk->links, drop_link, NULL);
	cfs_htab_clear(&lk->awaited);
	lk->in_bytes = lk->in_reply_bytes = lk->out_bytes = lk->xfer_inflight = 0;
	lk->nin_requests = 0;
	lk->nack_due = 0;
	lk->ready_head = lk->ready_tail = NULL;
	lk->svc.l = NULL;
	lk->timer_pending = lk->check_bound = lk->all_active = false;
	while (cfs_actq_pop(&lk->whole, &lk->tx, sizeof(lk->tx)))
		;
	while (cfs__links_poll_event(lk, &e))
		free(e.msg);
}

void cfs__links_free(struct cfs__links *lk)
{
	cfs__links_close(lk);
	cfs_htab_free(&lk->ins);
	cfs_htab_free(&lk->links);
	cfs_htab_free(&lk->awaited);
	cfs__heap_free(&lk->links_heap);
	free(lk->vslots);
	cfs_htab_free(&lk->done_map);
	free(lk->done_ring);
	free(lk->ack_due);
	cfs_actq_free(&lk->whole);
	cfs_actq_free(&lk->events);
}

void cfs__links_stats(const struct cfs__links *lk, struct cfs_transport_stats *st)
{
	size_t pos = 0;
	void *v;

	st->cwnd_bytes = 0;
	st->links = (uint32_t)cfs_htab_count(&lk->links);
	while (cfs_htab_next(&lk->links, &pos, NULL, &v))
		st->cwnd_bytes += (*(struct cfs__link **)v)->cc.cwnd;
}
