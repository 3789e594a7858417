/*
 * The transport's messages (common/cfs.h): the owner's side of the
 * driver in common/transport.c. A call, a reply or an error is encoded
 * here and handed to the calls or the links; a whole message that came
 * in (from one datagram or reassembled by the links) is decoded here and
 * goes to the calls (a reply), is answered here (a hello) or goes to the
 * owner's callback (a request). Replies to an address that has not proven
 * itself obey the links' 3x budget.
 */
#include "common/transport_int.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Scratch space shared by every transport on the thread: a message is
 * decoded and handed to its callback before the next one is, and an
 * encoded message is copied or sent before the call returns, so one set
 * suffices. This keeps a transport small (rings of thousands of nodes run
 * in one process) and the large message struct off the stack.
 */
static __thread uint8_t sbuf[CFS_MSG_MAX];
static __thread struct cfs_msg rmsg;
static __thread struct cfs_msg smsg; /* the answer to a hello */
static int send_reply(cfs_transport_t *t, const struct cfs_reply_to *to, struct cfs_msg *m,
                      uint64_t now)
{
	size_t len;
	int r;

	m->type = to->type;
	m->reqid = to->reqid;
	m->is_reply = true;
	if (to->has_to && (!m->has_from || !cfs_id_eq(&m->from_id, &to->to_id))) {
		/* the node the request was addressed to answers (cfs__rpc_reply) */
		m->from_vindex = m->has_from ? m->from_vindex : 0;
		m->has_from = true;
		m->from_id = to->to_id;
	}
	if (t->coord)
		m->coord = *t->coord;
	m->version = to->version ? to->version : CFS_PROTO_VERSION_MIN;
	m->clock_ms = m->version >= 5 ? cfs_wall_ms() : 0;
	if ((r = cfs_msg_encode(m, sbuf, sizeof(sbuf), &len)) < 0)
		return r;
	t->st.replies_out++;
	/* QUIC's anti-amplification rule (RFC 9000 8.1): an address that has
	 * not proven it is the asker's gets at most 3x what it sent us, and
	 * no answer in pieces; anything else waits for its token (it asks
	 * again) */
	if (cfs__links_proven(&t->links, &to->addr, now))
		return cfs__links_send(&t->links, &to->addr, sbuf, len, to->reqid, true, to->low_priority,
		                       now);
	/* pieces (and their resends) go only to a proven address */
	if (len > CFS_DGRAM_SAFE || !cfs__links_answer_take(&t->links, &to->addr, len, to->in_len, now))
		cfs__links_send_retry(&t->links, &to->addr, to->reqid, to->in_len, now);
	else
		cfs__links_send_raw(&t->links, &to->addr, sbuf, len, now);
	return 0;
}

static void handle_reply(cfs_transport_t *t, const struct cfs_addr *from, uint64_t now)
{
	int r = cfs__rpc_reply(&t->rpc, from, &rmsg, now);

	if (r == -ENOENT) {
		if (cfs__ver_probe_answer(t, from, rmsg.reqid))
			cfs__ver_heard(t, from, &rmsg, now, cfs_wall_ms()); /* our hello's answer */
		else
			cfs__rpc_stray(&t->rpc, from, &rmsg, now);
		return;
	}
	if (r == 1) { /* it echoed our random request ID: the address is its own */
		cfs__links_validated(&t->links, from, now);
		cfs__ver_heard(t, from, &rmsg, now, cfs_wall_ms());
		cfs__tr_rpc_run(t, now); /* its caller is told */
	}
}

/* A whole message from a datagram or the links. */
void cfs__tr_on_message(cfs_transport_t *t, const struct cfs_addr *from, const uint8_t *p,
                        size_t len, bool low_priority, uint64_t now)
{
	const char *why = "";
	char a[CFS_ADDR_STRLEN];
	int r = cfs_msg_decode(p, len, &rmsg, &why);

	if (r < 0) {
		t->st.malformed++;
		log_debug("dropped malformed message (%zu bytes) from %s: %s", len,
		          cfs_addr_str(from, a), why);
		return;
	}
	if (rmsg.is_reply) {
		handle_reply(t, from, now);
		return;
	}
	if (rmsg.type == CFS_MSG_HELLO) { /* which version we speak: answered here */
		struct cfs_reply_to rt = { .addr = *from, .reqid = rmsg.reqid, .type = rmsg.type,
		                           .in_len = len, .version = rmsg.version };
		cfs_msg_init(&smsg, CFS_MSG_HELLO);
		t->st.hellos_in++;
		(void)send_reply(t, &rt, &smsg, now);
		return;
	}
	if (cfs__links_answering(&t->links, from, rmsg.reqid)) {
		t->st.dup_requests++;
		return;
	}
	t->st.requests_in++;
	if (t->on_request) {
		struct cfs_reply_to rt = { .addr = *from, .reqid = rmsg.reqid, .type = rmsg.type,
		                           .in_len = len, .version = rmsg.version,
		                           .has_to = rmsg.has_to, .to_id = rmsg.to_id,
		                           .low_priority = low_priority };
		t->on_request(t->arg, &rmsg, &rt);
	}
}

int cfs_transport_call(cfs_transport_t *t, const struct cfs_addr *dst, struct cfs_msg *req,
                       const struct cfs_call_opts *opts, cfs_reply_cb cb, void *arg)
{
	uint64_t now = cfs_now_us();
	bool probe;
	size_t len;
	int r;

	if (t->closing)
		return -ECANCELED;
	/* Sit and Morris 2002 §5 (and DNS's random query IDs): every call's
	 * ID is drawn afresh, so that a forged reply must guess 64 bits, not
	 * count; drawn again on the (unlikely) collision with one in flight */
	do
		randombytes_buf(&req->reqid, sizeof(req->reqid));
	while (cfs__rpc_has(&t->rpc, req->reqid));
	req->is_reply = false;
	req->status = 0;
	if (t->coord)
		req->coord = *t->coord;
	req->version = cfs__ver_for(t, dst, now, &probe);
	req->clock_ms = req->version >= 5 ? cfs_wall_ms() : 0;
	if ((r = cfs_msg_encode(req, sbuf, sizeof(sbuf), &len)) < 0)
		return r;
	if (probe)
		cfs__ver_probe(t, dst, now);
	struct cfs__call *c = xcalloc(1, sizeof(*c));
	*c = (struct cfs__call){ .reqid = req->reqid, .dst = *dst, .cb = cb, .arg = arg, .type = req->type,
	                    .has_to = req->has_to, .to_id = req->to_id,
	                    .pkt = xmemdup(sbuf, len), .pkt_len = len };
	if (opts) {
		c->fixed_timeout_ms = opts->timeout_ms;
		c->predicted_us = opts->predicted_rtt_us;
		c->background = opts->background;
		c->low_priority = opts->low_priority;
		c->pad = opts->pad;
	}
	cfs__rpc_start(&t->rpc, c, now);
	cfs__tr_drive_and_arm(t, now);
	return 0;
}

int cfs_transport_reply(cfs_transport_t *t, const struct cfs_reply_to *to, struct cfs_msg *reply)
{
	uint64_t now = cfs_now_us();

	if (t->closing)
		return -ECANCELED;
	reply->status = 0;
	int r = send_reply(t, to, reply, now);
	cfs__tr_drive_and_arm(t, now);
	return r;
}

int cfs_transport_reply_error(cfs_transport_t *t, const struct cfs_reply_to *to, int status)
{
	struct cfs_msg *m = xmalloc(sizeof(*m));
	uint64_t now = cfs_now_us();
	int r;

	if (t->closing || status >= 0 || status < -4095) {
		free(m);
		return t->closing ? -ECANCELED : -EINVAL;
	}
	cfs_msg_init(m, (enum cfs_msg_type)to->type);
	m->status = status;
	r = send_reply(t, to, m, now);
	free(m);
	cfs__tr_drive_and_arm(t, now);
	return r;
}
