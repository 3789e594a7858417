/*
 * The backend through the local daemon: each request is a control
 * message (CFS_MSG_CTL_*) on cfsd's UNIX socket, answered by the daemon's
 * own DHash client (cfsd/serve.c). client_call's requests (cfsctl's
 * status, lookups, pins ...) travel the same way, encoded by the caller,
 * so this is the control protocol's one client.
 *
 * The socket is connected on first use. Requests made while it is being
 * set up wait in the table and are written once it is; when the
 * connection fails or ends, every request in the table fails with that
 * error and the next request connects again. Nothing is sent twice: a
 * request whose connection ended is the caller's to make again.
 *
 * What the daemon returns is checked as what crossed a socket: a reply
 * of the wrong type or that does not decode ends the connection
 * (-EPROTO), a get's bytes are verified again under the key.
 *
 * client_get_root_early is a ctl_get_root with an interim reply, once the
 * connection's ping said the daemon speaks it (rootget_sm.c; until then
 * the get waits in the table, unsent); an older daemon gets a ctl_get.
 */
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"

struct client__daemon {
	char *sock;
	cfs_stream_t *s;
	bool connecting;
	enum client__speaks speaks; /* does the daemon speak ctl_get_root? per connection */
	struct cfs_msg msg;       /* a request being written, or a reply decoded */
};

/* The ping's request ID: never a table entry's (generation << 32 | slot,
 * slots far below 2^32 - 1). */
#define PROBE_REQID UINT64_MAX

/* No daemon at the socket. A typed request gets -ECONNREFUSED, not the
 * socket's errno: ENOENT would read as "no replica has the block" to
 * whoever asked for one (so the errno is logged here). A raw request's
 * caller speaks the control protocol and gets the errno itself. */
static void fail_connect(client_t *c, int status)
{
	struct client__req *q;
	uint32_t pos = 0;
	bool typed = false;

	while ((q = client__req_next(c, &pos)))
		typed |= !q->raw;
	if (typed && status == -EACCES)
		client_socket_denied(c->daemon->sock);
	else if (typed) /* the caller reports it, with what to do instead */
		log_debug("client: cannot connect to cfsd at %s: %s", c->daemon->sock,
		          strerror(-status));
	client__fail_all(c, status, -ECONNREFUSED);
}

static bool early_get(const struct client__req *q)
{
	return q->type == CFS_MSG_CTL_GET && q->root && q->early_cb;
}

/* The type q's replies come with. */
static uint8_t wire_type(const struct client__req *q)
{
	return early_get(q) ? client__rg_wire(&q->rg) : q->type;
}

/* Does the daemon speak ctl_get_root? A ping: every daemon decodes one
 * (a type it could not decode would end the connection), and one that
 * predates ctl_get_root answers it on the control socket with
 * -EOPNOTSUPP. */
static int probe_send(client_t *c)
{
	struct client__daemon *d = c->daemon;

	cfs_msg_init(&d->msg, CFS_MSG_PING);
	d->msg.reqid = PROBE_REQID;
	d->speaks = CLIENT_SPEAKS_ASKING;
	return cfs_stream_write_msg(d->s, &d->msg);
}

/* An early root get: as the connection's answer says, or ask it first
 * (q stays unsent; probe_got sends it). */
static int early_send(client_t *c, struct client__req *q)
{
	struct client__daemon *d = c->daemon;
	struct cfs_msg *m = &d->msg;

	switch (client__rg_start(&q->rg, d->speaks)) {
	case CLIENT_RG_ASK:
		return probe_send(c);
	case CLIENT_RG_SEND_ROOT:
		q->sent = true;
		cfs_msg_init(m, CFS_MSG_CTL_GET_ROOT);
		m->reqid = q->id;
		m->key = q->key;
		m->flags = CFS_GET_ROOT_F_EARLY;
		return cfs_stream_write_msg(d->s, m);
	case CLIENT_RG_SEND_GET:
		q->sent = true;
		cfs_msg_init(m, CFS_MSG_CTL_GET);
		m->reqid = q->id;
		m->key = q->key;
		return cfs_stream_write_msg(d->s, m);
	default:
		return 0; /* the ping is out */
	}
}

static int req_send(client_t *c, struct client__req *q)
{
	struct client__daemon *d = c->daemon;
	struct cfs_msg *m = &d->msg;

	if (early_get(q))
		return early_send(c, q);
	q->sent = true;
	if (q->raw)
		return cfs_stream_write(d->s, q->data, q->len);
	cfs_msg_init(m, (enum cfs_msg_type)q->type);
	m->reqid = q->id;
	switch (q->type) {
	case CFS_MSG_CTL_GET:
	case CFS_MSG_CTL_LOCATE:
		m->key = q->key;
		break;
	case CFS_MSG_CTL_PUT:
		m->kind = q->kind;
		m->lease_until = q->lease_until;
		m->data = (struct cfs_bytes){ q->data, q->len };
		break;
	case CFS_MSG_CTL_GET_CODED:
	case CFS_MSG_CTL_LOCATE_CODED:
		m->key = q->key;
		m->count = (uint32_t)q->code_m << 8 | q->code_n;
		break;
	case CFS_MSG_CTL_REPAIR_CODED:
		m->key = q->key;
		m->count = (uint32_t)q->code_m << 8 | q->code_n;
		m->flags = q->mask;
		m->lease_until = q->lease_until;
		m->n_nodes = q->n_nodes;
		memcpy(m->nodes, q->nodes, q->n_nodes * sizeof(*q->nodes));
		m->data = (struct cfs_bytes){ q->data, q->len };
		break;
	case CFS_MSG_CTL_PUT_CODED:
		m->count = (uint32_t)q->code_m << 8 | q->code_n;
		m->lease_until = q->lease_until;
		m->data = (struct cfs_bytes){ q->data, q->len };
		break;
	default: /* CTL_HAVE, CTL_REFRESH, CTL_REFRESH_CODED */
		m->keys = (const struct cfs_id *)q->data;
		m->n_keys = q->n_keys;
		m->lease_until = q->lease_until;
		m->count = (uint32_t)q->code_m << 8 | q->code_n;
		break;
	}
	return cfs_stream_write_msg(d->s, m);
}

static void drop_stream(client_t *c, int status)
{
	struct client__daemon *d = c->daemon;

	if (d->s)
		cfs_stream_close(d->s);
	d->s = NULL;
	d->connecting = false;
	d->speaks = CLIENT_SPEAKS_UNKNOWN; /* the next daemon may be another */
	client__fail_all(c, status, status);
}

/* A coded get's or put's reply. The get's block: cfsd decoded the
 * fragments and checked the block against the key's H(block), and the
 * block alone cannot be checked again here. The put's key must be the one
 * we computed. */
static void answer_coded(client_t *c, struct client__req *q, const struct cfs_msg *m)
{
	if (q->type == CFS_MSG_CTL_PUT_CODED || q->type == CFS_MSG_CTL_REPAIR_CODED) {
		if (!cfs_id_eq(&m->key, &q->key))
			client__fail(c, q, -EPROTO);
		else
			client__answer_put(c, q, 0, m->lease_until);
		return;
	}
	struct dhash_get_result r = { .latency_us = cfs_now_us() - q->started_us, .kind = m->kind,
	                              .data = m->data.p, .len = m->data.len };
	if (m->kind != DHASH_KIND_CHASH || m->data.len == 0 || m->data.len > CFS_BLOCK_MAX)
		client__fail(c, q, -EPROTO);
	else
		client__answer_get(c, q, &r);
}

/* A reply to an early root get: the interim root goes to early (q waits
 * on for the final reply), the final one to cb. */
static void answer_early_get(client_t *c, struct client__req *q, const struct cfs_msg *m)
{
	struct dhash_get_result r = { .latency_us = cfs_now_us() - q->started_us,
	                              .kind = m->kind, .data = m->data.p, .len = m->data.len };
	uint64_t seq;
	bool ok = m->status < 0 || dhash_verify(m->kind, &q->key, m->data.p, m->data.len, &seq) == 0;

	switch (client__rg_reply(&q->rg, m->type, m->status, m->flags, ok)) {
	case CLIENT_RG_EARLY: /* at most once: a second interim reply fails q */
		q->early_cb(q->arg, &r);
		return;
	case CLIENT_RG_ANSWER:
		client__answer_get(c, q, &r);
		return;
	case CLIENT_RG_FAIL:
		client__fail(c, q, q->rg.status);
		return;
	default:
		return;
	}
}

/* The connection's ping answered: the early gets waiting for it go. */
static void probe_got(client_t *c, const struct cfs_msg *m)
{
	struct client__daemon *d = c->daemon;
	struct client__req *q;
	uint32_t pos = 0;

	if (d->speaks != CLIENT_SPEAKS_ASKING)
		return;
	d->speaks = client__speaks_of(m->status);
	log_debug("client: cfsd %s interim roots", d->speaks == CLIENT_SPEAKS_YES ? "sends" : "does not send");
	while (d->s && (q = client__req_next(c, &pos)))
		if (!q->sent && req_send(c, q) < 0)
			drop_stream(c, -EIO);
}

/* The daemon's reply m to q, in the form the caller asked for: one case
 * per kind of request, each turning the reply's fields back into the
 * result dhash would have given a plain client. */
static void answer(client_t *c, struct client__req *q, const struct cfs_msg *m)
{
	if (q->raw) {
		client__answer_raw(c, q, m);
		return;
	}
	if (early_get(q)) {
		answer_early_get(c, q, m);
		return;
	}
	if (m->status < 0) {
		client__fail(c, q, m->status);
		return;
	}
	switch (q->type) {
	case CFS_MSG_CTL_GET: {
		struct dhash_get_result r = { .latency_us = cfs_now_us() - q->started_us };
		uint64_t seq;
		/* The daemon checked the bytes; a client checks again what
		 * crossed a socket, and the check is cheap beside the fetch. */
		if (dhash_verify(m->kind, &q->key, m->data.p, m->data.len, &seq) < 0) {
			client__fail(c, q, -EBADMSG);
			return;
		}
		r.kind = m->kind;
		r.data = m->data.p;
		r.len = m->data.len;
		client__answer_get(c, q, &r);
		return;
	}
	case CFS_MSG_CTL_PUT:
		client__answer_put(c, q, 0, m->lease_until);
		return;
	case CFS_MSG_CTL_GET_CODED:
	case CFS_MSG_CTL_PUT_CODED:
	case CFS_MSG_CTL_REPAIR_CODED:
		answer_coded(c, q, m);
		return;
	case CFS_MSG_CTL_LOCATE:
	case CFS_MSG_CTL_LOCATE_CODED: {
		struct dhash_locate_result r = { 0 };
		if (m->data.len != m->n_nodes) {
			client__fail(c, q, -EPROTO);
			return;
		}
		for (uint32_t i = 0; i < m->n_nodes; i++) {
			r.nodes[i] = m->nodes[i];
			r.state[i] = (int8_t)m->data.p[i];
			r.good += r.state[i] == DHASH_COPY_GOOD;
			r.n++;
		}
		if (q->type == CFS_MSG_CTL_LOCATE_CODED) /* distinct fragment indices */
			r.good = dhash_locate_coded_good(&r);
		client__answer_locate(c, q, &r);
		return;
	}
	default:
		if (m->data.len < (q->n_keys + 7) / 8)
			client__fail(c, q, -EPROTO);
		else
			client__answer_bits(c, q, 0, m->data.p, m->lease_until);
		return;
	}
}

static void on_frame(void *arg, cfs_stream_t *s, const uint8_t *f, size_t len)
{
	client_t *c = arg;
	struct client__daemon *d = c->daemon;
	const char *why = "a request, not a reply";
	struct client__req *q;

	if (cfs_msg_decode(f, len, &d->msg, &why) < 0 || !d->msg.is_reply) {
		log_error("client: malformed reply from cfsd (%s); reconnecting", why);
		drop_stream(c, -EPROTO);
		return;
	}
	if (d->msg.reqid == PROBE_REQID && d->msg.type == CFS_MSG_PING) {
		probe_got(c, &d->msg);
		return;
	}
	if (!(q = client__req_find(c, d->msg.reqid)))
		return; /* it timed out already */
	if (d->msg.type != wire_type(q)) {
		log_error("client: cfsd answered a request with the wrong type; reconnecting");
		drop_stream(c, -EPROTO);
		return;
	}
	answer(c, q, &d->msg);
}

static void on_end(void *arg, cfs_stream_t *s, int status)
{
	drop_stream(arg, status < 0 ? status : -ECONNRESET);
}

/* The connect began in daemon_start holds the handle until here. */
static void on_connect(void *arg, int status, cfs_stream_t *s)
{
	client_t *c = arg;
	struct client__daemon *d = c->daemon;
	struct client__req *q;
	uint32_t pos = 0;

	d->connecting = false;
	if (c->closing) {
		if (status == 0)
			cfs_stream_close(s);
	} else if (status < 0) {
		fail_connect(c, status);
	} else {
		d->s = s;
		cfs_stream_start(s, on_frame, on_end, c);
		while (d->s && (q = client__req_next(c, &pos)))
			if (!q->sent && req_send(c, q) < 0)
				drop_stream(c, -EIO);
	}
	client__release(c);
}

/* Write q now, or connect first (q waits in the table). */
static void daemon_start(client_t *c, struct client__req *q)
{
	struct client__daemon *d = c->daemon;
	int r;

	if (d->s) {
		if ((r = req_send(c, q)) < 0) {
			/* The stream is unusable: everything on it fails, later. */
			uint32_t pos = 0;
			cfs_stream_close(d->s);
			d->s = NULL;
			while ((q = client__req_next(c, &pos)))
				client__fail_soon(c, q, r);
		}
		return;
	}
	if (d->connecting)
		return;
	if ((r = cfs_stream_connect(c->loop, d->sock, on_connect, c)) < 0) {
		client__fail_soon(c, q, r);
		return;
	}
	d->connecting = true;
	client__hold(c);
}

static void daemon_close(client_t *c)
{
	struct client__daemon *d = c->daemon;

	if (d && d->s)
		cfs_stream_close(d->s);
	if (d)
		d->s = NULL;
}

static void daemon_release(client_t *c)
{
	if (c->daemon)
		free(c->daemon->sock);
	free(c->daemon);
}

const struct client__backend client__daemon_backend = {
	.start = daemon_start,
	.close = daemon_close,
	.release = daemon_release,
	.raw_calls = true,
};

int client__daemon_open(client_t *c, const char *sock)
{
	c->daemon = xcalloc(1, sizeof(*c->daemon));
	c->daemon->sock = xstrdup(sock);
	return 0;
}
