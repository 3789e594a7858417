/*
 * The UDP RPC transport (common/cfs.h): a thin libuv driver around two
 * machines that do no I/O.
 *
 *   common/rpc.c   the calls: the table keyed by request ID, the STP
 *                  window, RTOs and estimates, resends, late replies
 *   common/link.c  the links: per peer, messages as pieces, their windows
 *                  and reassembly; address validation
 *
 * This file alone touches the socket (common/udp.c, from a uv_poll_t),
 * the timers and the clock. It decodes datagrams and hands them to the
 * links (frames) or to the calls and the owner's callback (messages), and
 * moves what each machine yields to where it goes: the calls' sends and
 * tokens to the links, the links' reassembled messages, tokens asked of
 * us and progress on calls back up, the links' datagrams to the socket,
 * and a call's end to its caller. Neither machine calls the other, nor
 * this file.
 *
 * One event loop timer serves every deadline: the calls', their resends,
 * the links' timers and the datagrams the network model holds. An
 * overdue call expires only after a grace of socket polls (cfs__grace, common/rpc.h).
 * The messages themselves (encoding the owner's calls and replies,
 * decoding what came in, answering a hello) are in transport_msg.c.
 */
#include "common/transport_int.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TIMER_BATCH 4096 /* expirations handled per wake-up */
/* Room for a full window of datagrams: with the default 208 KiB the kernel
 * drops a burst long before the windows are full. */
#define SOCKET_BUF (8 << 20)
#define BACKLOG_MAX (8u << 20) /* bytes of whole datagrams held for a full socket */

static void on_timer(uv_timer_t *h);
static void on_poll(uv_poll_t *h, int status, int events);

/* ------------------------------------------------------------ socket */

static void poll_update(cfs_transport_t *t)
{
	int want = UV_READABLE;

	if (t->closing)
		return;
	if (t->backlog.head || t->sock_blocked)
		want |= UV_WRITABLE;
	if (want != t->poll_events) {
		t->poll_events = want;
		uv_poll_start(&t->poll, want, on_poll);
	}
}

static void send_now(cfs_transport_t *t, const struct cfs_addr *dst, const uint8_t *p, size_t len)
{
	ssize_t r = t->backlog.head ? -EAGAIN : cfs_udp_send(&t->sock, dst, p, len, 0);

	if (r == -EAGAIN) {
		if (!cfs__dgram_fifo_push(&t->backlog, dst, p, len))
			t->st.send_errors++;
		poll_update(t);
		return;
	}
	if (r < 0) {
		char a[CFS_ADDR_STRLEN];
		t->st.send_errors++;
		log_debug("send to %s failed: %s", cfs_addr_str(dst, a), strerror((int)-r));
		return;
	}
	t->st.bytes_out += len;
	t->st.datagrams_out++;
}

/* Send what the full socket refused; false while it still refuses. */
static bool flush_backlog(cfs_transport_t *t)
{
	struct cfs__dgram *b;

	while ((b = cfs__dgram_fifo_head(&t->backlog))) {
		ssize_t r = cfs_udp_send(&t->sock, &b->dst, b->data, b->len, 0);
		if (r == -EAGAIN)
			return false;
		if (r < 0) {
			t->st.send_errors++;
		} else {
			t->st.bytes_out += b->len;
			t->st.datagrams_out++;
		}
		cfs__dgram_fifo_pop(&t->backlog);
	}
	return true;
}

/* Every datagram leaves through here: the network model's one hook
 * (each piece meets it alone), then the socket. */
static void transmit(cfs_transport_t *t, const struct cfs_addr *dst, const uint8_t *p, size_t len,
                     uint64_t now)
{
	uint64_t delay = 0;

	if (t->has_model) {
		if (t->model.on_send(t->model.ctx, dst, len, &delay)) {
			t->st.model_dropped++;
			return;
		}
		if (delay > 0) {
			cfs__dgram_timed_push(&t->delayed, dst, p, len, now + delay);
			return;
		}
	}
	send_now(t, dst, p, len);
}

/* A batch of pieces in one sendmsg (GSO); the number the socket took.
 * *ret_failed: a send error lost them all (they count as sent). */
static unsigned send_pieces(cfs_transport_t *t, const struct cfs__tx *tx, bool *ret_failed,
                            uint64_t now)
{
	*ret_failed = false;
	if (t->has_model) { /* evaluation: each piece meets the model alone */
		size_t o = 0;
		for (unsigned i = 0; i < tx->npieces; i++) {
			transmit(t, &tx->dst, tx->p + o, tx->lens[i], now);
			o += tx->lens[i];
		}
		return tx->npieces;
	}
	ssize_t r = cfs_udp_send(&t->sock, &tx->dst, tx->p, tx->len, tx->npieces > 1 ? CFS_DGRAM_SAFE : 0);
	if (r == -EAGAIN)
		return 0;
	if (r < 0) {
		t->st.send_errors++;
		*ret_failed = true;
		return tx->npieces;
	}
	unsigned segs = (size_t)r == tx->len ? tx->npieces : (unsigned)((size_t)r / CFS_DGRAM_SAFE);
	t->st.bytes_out += (uint64_t)r;
	t->st.datagrams_out += segs;
	if (segs > 1)
		t->st.gso_sends++;
	return segs;
}

/* ------------------------------------------------------------ the machines */

/* Transmit what the links hand out; a batch the socket did not take all
 * of waits for it to drain. */
static void flush_links(cfs_transport_t *t, uint64_t now)
{
	struct cfs__tx tx;
	bool failed;

	while (!t->closing && cfs__links_poll_transmit(&t->links, now, &tx)) {
		if (!tx.npieces) {
			transmit(t, &tx.dst, tx.p, tx.len, now);
			continue;
		}
		unsigned sent = send_pieces(t, &tx, &failed, now);
		cfs__links_transmitted(&t->links, sent, failed, now);
		if (sent < tx.npieces) {
			t->sock_blocked = true;
			poll_update(t);
		}
	}
}

/* One action of the calls. While closing, only the callers are told. */
static void rpc_act(cfs_transport_t *t, const struct cfs__rpc_act *a, uint64_t now)
{
	struct cfs__call *c = a->call;

	switch (a->type) {
	case CFS__RPC_DONE: {
		struct cfs_rpc_result res = { .rtt_us = a->rtt_us, .from = &c->dst };
		c->cb(c->arg, a->status, a->reply, &res);
		cfs__call_free(c);
		if (a->reply && !t->closing) /* a reply: the window has room again */
			cfs__rpc_pump(&t->rpc, now);
		return;
	}
	case CFS__RPC_SEND:
		if (t->closing)
			return;
		if (c->pad && c->pkt_len <= CFS_DGRAM_SAFE && !c->rexmits && !c->retries)
			(void)cfs__links_pad(&t->links, &c->dst, now);
		if (cfs__links_send(&t->links, &c->dst, c->pkt, c->pkt_len, c->reqid, false,
		                    c->low_priority, now) < 0)
			t->st.send_errors++;
		if (a->arm_resend)
			cfs__rpc_sent(&t->rpc, c, cfs__links_proven(&t->links, &c->dst, now), now);
		return;
	case CFS__RPC_VALIDATE:
		if (!t->closing)
			cfs__links_validate(&t->links, &c->dst, a->token, now);
		return;
	case CFS__RPC_ENDED:
		if (!t->closing)
			cfs__links_call_end(&t->links, &c->dst, c->reqid);
		return;
	}
}

/* Carry out the calls' actions now, even inside the drive: a reply's
 * caller is told while the bytes its message borrows are alive. */
void cfs__tr_rpc_run(cfs_transport_t *t, uint64_t now)
{
	struct cfs__rpc_act a;

	while (cfs__rpc_poll(&t->rpc, &a))
		rpc_act(t, &a, now);
}

/* One event of the links. */
static void link_event(cfs_transport_t *t, struct cfs__link_event *e, uint64_t now)
{
	if (t->closing) {
		free(e->msg);
		return;
	}
	switch (e->type) {
	case CFS__LINK_MESSAGE:
		cfs__tr_on_message(t, &e->from, e->msg, e->len, e->low_priority, now);
		free(e->msg);
		return;
	case CFS__LINK_RETRY:
		cfs__rpc_retry(&t->rpc, &e->from, e->reqid, e->token, now);
		return;
	case CFS__LINK_ALIVE:
		cfs__rpc_touch(&t->rpc, e->reqid, e->by_peer, now);
		return;
	}
}

/*
 * Move everything the machines yield until both are quiet: the links'
 * datagrams first, then the calls' actions, then the links' events. A
 * callback run from here that starts calls or answers returns to this
 * loop, which carries out what it queued; it never runs inside another
 * (driving).
 */
static void drive(cfs_transport_t *t, uint64_t now)
{
	struct cfs__rpc_act a;
	struct cfs__link_event e;

	if (t->driving)
		return;
	t->driving = true;
	for (;;) {
		flush_links(t, now);
		if (cfs__rpc_poll(&t->rpc, &a))
			rpc_act(t, &a, now);
		else if (cfs__links_poll_event(&t->links, &e))
			link_event(t, &e, now);
		else
			break;
	}
	t->driving = false;
}

/* ------------------------------------------------------------ timers */

static void arm_timer(cfs_transport_t *t)
{
	uint64_t due = UINT64_MAX, l;

	if (t->closing || t->driving)
		return;
	if (t->grace.polls == 0) /* else on_check re-arms */
		due = cfs__rpc_call_due(&t->rpc);
	if ((l = cfs__dgram_timed_due(&t->delayed)) < due)
		due = l;
	if ((l = cfs__links_deadline(&t->links)) < due)
		due = l;
	if ((l = cfs__rpc_resend_due(&t->rpc)) < due)
		due = l;
	if (due == t->timer_due_us)
		return;
	t->timer_due_us = due;
	if (due == UINT64_MAX) {
		uv_timer_stop(&t->timer);
		return;
	}
	uint64_t now = cfs_now_us();
	uint64_t ms = due > now ? (due - now + 999) / 1000 : 0;
	uv_timer_start(&t->timer, on_timer, ms, 0);
}

/* The end of every entry point from outside: carry out what it queued,
 * then set the timer. */
void cfs__tr_drive_and_arm(cfs_transport_t *t, uint64_t now)
{
	drive(t, now);
	arm_timer(t);
}

/* Expire the overdue calls, each caller told before the next expires;
 * then waiting calls take the slots they freed. */
static void expire_overdue(cfs_transport_t *t)
{
	uint64_t now = cfs_now_us();

	for (unsigned done = 0; done < TIMER_BATCH && !t->closing; done++) {
		if (!cfs__rpc_expire(&t->rpc, t->grace.before_us))
			break;
		drive(t, now);
	}
	if (t->closing)
		return;
	cfs__rpc_pump(&t->rpc, now);
	cfs__tr_drive_and_arm(t, now);
}

static void on_check(uv_check_t *h)
{
	cfs_transport_t *t = container_of(h, cfs_transport_t, check);

	if (!cfs__grace_poll(&t->grace, t->st.bytes_in))
		return;
	uv_idle_stop(&t->idle);
	uv_check_stop(&t->check);
	t->timer_due_us = UINT64_MAX;
	expire_overdue(t);
}

static void on_idle(uv_idle_t *h)
{
	(void)h;
}

static void on_timer(uv_timer_t *h)
{
	cfs_transport_t *t = container_of(h, cfs_transport_t, timer);
	uint64_t now = cfs_now_us();
	unsigned done = 0;

	t->timer_due_us = UINT64_MAX;
	struct cfs__dgram *d;

	while (done < TIMER_BATCH && !t->closing && (d = cfs__dgram_timed_pop(&t->delayed, now))) {
		send_now(t, &d->dst, d->data, d->len);
		free(d);
		done++;
	}
	if (t->closing)
		return;
	cfs__rpc_resend(&t->rpc, now);
	drive(t, now);
	cfs__links_timeout(&t->links, now);
	drive(t, now);
	if (t->closing)
		return;
	if (done == TIMER_BATCH) { /* more may be due: come back after I/O */
		t->timer_due_us = 0;
		uv_timer_start(&t->timer, on_timer, 0, 0);
	}
	if (cfs__grace_start(&t->grace, &t->rpc, now, t->st.bytes_in)) {
		uv_idle_start(&t->idle, on_idle);
		uv_check_start(&t->check, on_check);
		if (done < TIMER_BATCH) /* the other deadlines; on_check sees to the calls' */
			arm_timer(t);
		return;
	}
	if (done < TIMER_BATCH)
		arm_timer(t);
}

/* ------------------------------------------------------------ messages */

/* A message from a socket of its own (cfs.h): here, with the sockets;
 * every other message is encoded and decoded in transport_msg.c. */
int cfs_transport_send_fresh(cfs_transport_t *t, const struct cfs_addr *dst, struct cfs_msg *m)
{
	uint8_t buf[CFS_DGRAM_SAFE];
	size_t len;
	int fd, r;

	if (t->closing)
		return -ECANCELED;
	m->version = CFS_PROTO_VERSION;
	m->clock_ms = cfs_wall_ms();
	m->is_reply = false;
	randombytes_buf(&m->reqid, sizeof(m->reqid));
	if (t->coord)
		m->coord = *t->coord;
	if ((r = cfs_msg_encode(m, buf, sizeof(buf), &len)) < 0)
		return r;
	if ((fd = socket(dst->sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
		return -errno;
	r = sendto(fd, buf, len, 0, &dst->sa, cfs_addr_len(dst)) < 0 ? -errno : 0;
	close(fd);
	if (r == 0)
		t->st.bytes_out += len;
	return r;
}

/* ------------------------------------------------------------ receiving */

static void on_dgram(void *arg, const struct cfs_addr *from, const uint8_t *p, size_t len,
                     bool trunc)
{
	cfs_transport_t *t = arg;
	uint64_t now = cfs_now_us();
	char a[CFS_ADDR_STRLEN];

	if (t->closing)
		return;
	t->st.bytes_in += len;
	cfs__links_note_in(&t->links, from, len, now);
	if (trunc || len == 0 || len > CFS_DGRAM_SAFE) {
		t->st.malformed++;
		log_debug("dropped a %s datagram from %s", trunc || len ? "too large" : "empty",
		          cfs_addr_str(from, a));
		return;
	}
	enum xfer_kind kind = cfs_xfer_kind(p, len);
	if (kind == XFER_KIND_MESSAGE)
		cfs__tr_on_message(t, from, p, len, false, now);
	else if (kind == XFER_KIND_MESSAGE_BG)
		cfs__tr_on_message(t, from, p + 1, len - 1, true, now);
	else if (kind == XFER_KIND_MALFORMED)
		t->st.malformed++;
	else if (kind == XFER_KIND_PADDING)
		t->st.padding_in++;
	else
		cfs__links_datagram(&t->links, from, kind, p, len, now);
	drive(t, now);
}

/* Read until the socket is empty (bounded), then send the acks the batch
 * owes; a full socket that drained sends what waited. */
static void on_poll(uv_poll_t *h, int status, int events)
{
	cfs_transport_t *t = container_of(h, cfs_transport_t, poll);

	if (t->closing)
		return;
	if (status < 0) {
		log_debug("udp poll error: %s", uv_strerror(status));
		return;
	}
	if (events & UV_WRITABLE) {
		if (flush_backlog(t)) {
			t->sock_blocked = false;
			cfs__links_writable(&t->links);
			drive(t, cfs_now_us());
		}
		poll_update(t);
	}
	if (events & UV_READABLE) {
		int r = cfs_udp_drain(&t->sock, 32, on_dgram, t);
		if (r < 0 && r != -EAGAIN)
			log_debug("udp receive error: %s", strerror(-r));
		if (!t->closing) {
			uint64_t now = cfs_now_us();
			cfs__links_flush_acks(&t->links, now);
			drive(t, now);
		}
	}
	arm_timer(t);
}

/* ------------------------------------------------------------ lifetime */

int cfs_transport_new(uv_loop_t *loop, const struct cfs_transport_config *c,
                      cfs_request_cb on_request, void *arg, cfs_transport_t **ret)
{
	cfs_transport_t *t = xcalloc(1, sizeof(*t));
	int r;

	t->loop = loop;
	t->cfg = *c;
	cfs__config_fill(&t->cfg);
	t->on_request = on_request;
	t->arg = arg;
	cfs__dgram_timed_init(&t->delayed);
	cfs__dgram_fifo_init(&t->backlog, BACKLOG_MAX);
	t->timer_due_us = UINT64_MAX;
	if ((r = cfs_udp_open(&t->sock, c->host, c->port, SOCKET_BUF)) < 0) {
		free(t);
		return r;
	}
	cfs__rpc_init(&t->rpc, &t->cfg, &t->st);
	cfs__links_init(&t->links, &t->cfg, &t->st);
	cfs__ver_init(t);
	uv_poll_init(loop, &t->poll, t->sock.fd);
	uv_timer_init(loop, &t->timer);
	uv_idle_init(loop, &t->idle);
	uv_check_init(loop, &t->check);
	t->handles_open = 4;
	t->poll_events = UV_READABLE;
	if ((r = uv_poll_start(&t->poll, UV_READABLE, on_poll)) < 0) {
		cfs_transport_close(t);
		return r;
	}
	*ret = t;
	return 0;
}

static void on_handle_closed(uv_handle_t *h)
{
	cfs_transport_t *t = h->data;
	if (--t->handles_open > 0)
		return;
	cfs_udp_close(&t->sock);
	cfs__links_free(&t->links);
	cfs__dgram_timed_free(&t->delayed); /* anything queued while closing */
	cfs__dgram_fifo_free(&t->backlog);
	cfs__rpc_free(&t->rpc);
	cfs__ver_free(t);
	free(t);
}

void cfs_transport_close(cfs_transport_t *t)
{
	if (!t || t->closing)
		return;
	t->closing = true;
	uv_poll_stop(&t->poll);
	uv_timer_stop(&t->timer);
	/* Cancel every call, sent or waiting, and tell every caller now, even
	 * from inside a callback; callbacks may not start new calls
	 * (cfs_transport_call refuses while closing). */
	cfs__rpc_cancel_all(&t->rpc);
	cfs__tr_rpc_run(t, 0);
	cfs__dgram_timed_free(&t->delayed);
	cfs__dgram_fifo_free(&t->backlog);
	cfs__links_close(&t->links);
	uv_handle_t *hs[] = { (uv_handle_t *)&t->poll, (uv_handle_t *)&t->timer,
	                      (uv_handle_t *)&t->idle, (uv_handle_t *)&t->check };
	for (size_t i = 0; i < CFS_ARRAY_SIZE(hs); i++) {
		hs[i]->data = t;
		uv_close(hs[i], on_handle_closed);
	}
}

int cfs_transport_local_addr(cfs_transport_t *t, struct cfs_addr *ret)
{
	return cfs_udp_local_addr(&t->sock, ret);
}

void cfs_transport_get_stats(cfs_transport_t *t, struct cfs_transport_stats *ret)
{
	*ret = t->st;
	cfs__links_stats(&t->links, ret);
}

uint64_t cfs_transport_peer_srtt_us(const cfs_transport_t *t, const struct cfs_addr *a)
{
	return cfs__rpc_peer_srtt(&t->rpc, a);
}

void cfs_transport_set_coord(cfs_transport_t *t, const struct cfs_coord *coord)
{
	t->coord = coord;
}

void cfs_transport_set_model(cfs_transport_t *t, const struct cfs_netmodel *m)
{
	t->has_model = m && m->on_send;
	if (t->has_model)
		t->model = *m;
}

uv_loop_t *cfs_transport_loop(const cfs_transport_t *t)
{
	return t->loop;
}
