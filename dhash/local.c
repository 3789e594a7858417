/*
 * The DHash client through the local daemon: the same get / put / have /
 * refresh, sent as control requests (CFS_MSG_CTL_*) over the daemon's UNIX
 * socket and answered by the daemon's own DHash client.
 *
 * Requests live in a slot table; a request's ID is its slot index with a
 * generation in the high bits, so a late reply to a request that already
 * timed out never matches the slot's next tenant. Requests made while the
 * connection is being set up wait in the table and are sent once it is;
 * when the connection fails or ends, every request in the table fails with
 * that error and the next request connects again. A request the daemon
 * does not answer within the timeout fails with -ETIMEDOUT: a caller is
 * never left waiting on a daemon that hangs.
 *
 * Besides those typed requests, dhash_local_call sends any control request
 * as the caller built it (cfsctl's status, lookups, pins ...): it is encoded
 * once, into the slot's buffer, and its reply is handed back as decoded.
 * So there is one client of the control protocol, here.
 *
 * The same handle can instead be a plain client of the ring, with no
 * daemon (dhash_local_new_plain): its own UDP transport, a chord client
 * (chord_client_new) and a DHash client over it. The slot table and its
 * timeouts stay the same; a request is started on the DHash client instead
 * of being written to the socket: the operation the daemon runs for the
 * matching control request, so that a have of n keys (dhash_have_many)
 * answers the same bitmap and the same error either way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dhash/internal.h"

#define SWEEP_MS 250

struct lreq {
	uint64_t id;              /* generation << 32 | slot */
	uint8_t type;
	bool sent;
	bool raw;                 /* dhash_local_call: data is the encoded frame */
	bool root;                /* dhash_local_get_root */
	uint64_t deadline_ms;
	uint64_t started_us;
	struct cfs_id key;
	uint32_t kind;
	uint64_t lease_until;
	uint8_t *data;            /* put: the block; have/refresh: the keys */
	size_t len;
	uint32_t n_keys;
	dhash_get_cb get_cb;
	dhash_put_cb put_cb;
	dhash_bits_cb bits_cb;
	dhash_locate_cb locate_cb;
	dhash_ctl_cb ctl_cb;
	void *arg;
	int first_error;          /* plain client: why it could not start */
	uint64_t granted;         /* plain client: the lease a put was granted */
};

/* A DHash call made for request id (plain client). */
struct pcall {
	dhash_local_t *l;
	uint64_t id;
};

struct dhash_local {
	uv_loop_t *loop;
	char *sock;
	uint32_t timeout_ms;
	cfs_stream_t *s;
	bool connecting;
	int fail_status;          /* a synchronous connect failure, delivered by the timer */
	struct lreq **slot;
	uint32_t nslots, used;
	uint32_t *free_list;
	uint32_t nfree;
	uint32_t gen;
	uv_timer_t timer;
	bool closing, timer_closed;
	struct cfs_msg msg;
	/* plain client */
	cfs_transport_t *tr;
	chord_t *chord;
	char *contacts_path;      /* a plain client's saved contacts (NULL: none) */
	dhash_client_t *dc;
	uint32_t calls;           /* pcalls not yet back */
};

int dhash_default_data_dir(char *buf, size_t n)
{
	const char *env = getenv("CFS_DATA_DIR");
	int r;

	if (env && *env)
		return snprintf(buf, n, "%s", env) < (int)n ? 0 : -ENAMETOOLONG;
	r = cfs_user_dir(buf, n, DHASH_SYSTEM_DIR, "XDG_DATA_HOME", ".local/share");
	if (r == -ENOENT)
		r = snprintf(buf, n, "/tmp/cfs-%u", (unsigned)geteuid()) < (int)n ? 0 : -ENAMETOOLONG;
	return r;
}

/* ------------------------------------------------------------ slots */

static struct lreq *req_new(dhash_local_t *l, uint8_t type, void *arg)
{
	struct lreq *q = xcalloc(1, sizeof(*q));
	uint32_t i;

	if (l->nfree) {
		i = l->free_list[--l->nfree];
	} else {
		if (l->used == l->nslots) {
			l->nslots = l->nslots ? 2 * l->nslots : 64;
			l->slot = xrealloc(l->slot, l->nslots * sizeof(*l->slot));
			l->free_list = xrealloc(l->free_list, l->nslots * sizeof(*l->free_list));
		}
		i = l->used++;
	}
	q->id = (uint64_t)++l->gen << 32 | i;
	q->type = type;
	q->arg = arg;
	q->started_us = cfs_now_us();
	q->deadline_ms = cfs_now_ms() + l->timeout_ms;
	l->slot[i] = q;
	return q;
}

static struct lreq *req_find(dhash_local_t *l, uint64_t id)
{
	uint32_t i = (uint32_t)id;
	if (i >= l->used || !l->slot[i] || l->slot[i]->id != id)
		return NULL;
	return l->slot[i];
}

/* Take q out of the table (its callback is the caller's to make). */
static void req_take(dhash_local_t *l, struct lreq *q)
{
	uint32_t i = (uint32_t)q->id;

	l->slot[i] = NULL;
	l->free_list[l->nfree++] = i;
}

static void req_free(struct lreq *q)
{
	free(q->data);
	free(q);
}

/* Take q out of the table and call its callback with status (and reply m
 * when status is 0). */
static void req_finish(dhash_local_t *l, struct lreq *q, int status, const struct cfs_msg *m)
{
	req_take(l, q);
	if (l->closing)
		status = -ECANCELED;
	if (q->raw) {
		q->ctl_cb(q->arg, status, l->closing ? NULL : m);
		req_free(q);
		return;
	}
	switch (q->type) {
	case CFS_MSG_CTL_GET: {
		struct dhash_get_result r = { .status = status, .latency_us = cfs_now_us() - q->started_us };
		if (status == 0) {
			uint64_t seq;
			/* The daemon checked the bytes; a client checks again what
			 * crossed a socket, and the check is cheap beside the fetch. */
			if (dhash_verify(m->kind, &q->key, m->data.p, m->data.len, &seq) < 0) {
				r.status = -EBADMSG;
			} else {
				r.kind = m->kind;
				r.data = m->data.p;
				r.len = m->data.len;
			}
		}
		q->get_cb(q->arg, &r);
		break;
	}
	case CFS_MSG_CTL_PUT:
		q->put_cb(q->arg, status, &q->key, status < 0 ? 0 : m ? m->lease_until : q->granted);
		break;
	case CFS_MSG_CTL_LOCATE: {
		struct dhash_locate_result r = { .status = status };
		if (status == 0 && m && m->data.len != m->n_nodes)
			r.status = -EPROTO;
		for (uint32_t i = 0; r.status == 0 && m && i < m->n_nodes; i++) {
			r.nodes[i] = m->nodes[i];
			r.state[i] = (int8_t)m->data.p[i];
			r.good += r.state[i] == DHASH_COPY_GOOD;
			r.n++;
		}
		q->locate_cb(q->arg, &r);
		break;
	}
	default:
		if (status == 0 && m->data.len < (q->n_keys + 7) / 8)
			status = -EPROTO;
		q->bits_cb(q->arg, status, status == 0 ? m->data.p : NULL, q->n_keys,
		           status == 0 ? m->lease_until : 0);
		break;
	}
	req_free(q);
}

static void fail_all(dhash_local_t *l, int status)
{
	for (uint32_t i = 0; i < l->used; i++)
		if (l->slot[i])
			req_finish(l, l->slot[i], status, NULL);
}

/* No daemon at the socket. A typed request gets -ECONNREFUSED, not the
 * socket's errno: ENOENT would read as "no replica has the block" to
 * whoever asked for one (so the errno is logged here). A raw request's
 * caller speaks the control protocol and gets the errno itself. */
static void fail_connect(dhash_local_t *l, int status)
{
	bool typed = false;

	for (uint32_t i = 0; i < l->used; i++)
		typed |= l->slot[i] && !l->slot[i]->raw;
	if (typed && status == -EACCES)
		dhash_socket_denied(l->sock);
	else if (typed) /* the caller reports it, with what to do instead */
		log_debug("dhash: cannot connect to cfsd at %s: %s", l->sock, strerror(-status));
	for (uint32_t i = 0; i < l->used; i++)
		if (l->slot[i])
			req_finish(l, l->slot[i], l->slot[i]->raw ? status : -ECONNREFUSED, NULL);
}

/* ------------------------------------------------------------ connection */

static int req_send(dhash_local_t *l, struct lreq *q)
{
	struct cfs_msg *m = &l->msg;

	q->sent = true;
	if (q->raw)
		return cfs_stream_write(l->s, q->data, q->len);
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
	default:
		m->keys = (const struct cfs_id *)q->data;
		m->n_keys = q->n_keys;
		m->lease_until = q->lease_until;
		break;
	}
	return cfs_stream_write_msg(l->s, m);
}

static void drop_stream(dhash_local_t *l, int status)
{
	if (l->s)
		cfs_stream_close(l->s);
	l->s = NULL;
	l->connecting = false;
	fail_all(l, status);
}

static void on_frame(void *arg, cfs_stream_t *s, const uint8_t *f, size_t len)
{
	dhash_local_t *l = arg;
	const char *why = "a request, not a reply";
	struct lreq *q;

	if (cfs_msg_decode(f, len, &l->msg, &why) < 0 || !l->msg.is_reply) {
		log_error("dhash: malformed reply from cfsd (%s); reconnecting", why);
		drop_stream(l, -EPROTO);
		return;
	}
	if (!(q = req_find(l, l->msg.reqid)))
		return; /* it timed out already */
	if (l->msg.type != q->type) {
		log_error("dhash: cfsd answered a request with the wrong type; reconnecting");
		drop_stream(l, -EPROTO);
		return;
	}
	req_finish(l, q, l->msg.status, &l->msg);
}

static void on_end(void *arg, cfs_stream_t *s, int status)
{
	dhash_local_t *l = arg;
	drop_stream(l, status < 0 ? status : -ECONNRESET);
}

static void on_connect(void *arg, int status, cfs_stream_t *s)
{
	dhash_local_t *l = arg;

	l->connecting = false;
	if (status < 0) {
		fail_connect(l, status);
		return;
	}
	if (l->closing) {
		cfs_stream_close(s);
		return;
	}
	l->s = s;
	cfs_stream_start(s, on_frame, on_end, l);
	for (uint32_t i = 0; i < l->used && l->s; i++)
		if (l->slot[i] && !l->slot[i]->sent && req_send(l, l->slot[i]) < 0)
			drop_stream(l, -EIO);
}

static void on_timer(uv_timer_t *t)
{
	dhash_local_t *l = t->data;
	uint64_t now = cfs_now_ms();

	if (l->fail_status) {
		int st = l->fail_status;
		l->fail_status = 0;
		fail_all(l, st);
	}
	for (uint32_t i = 0; i < l->used; i++)
		if (l->slot[i] && l->slot[i]->deadline_ms <= now)
			req_finish(l, l->slot[i],
			           l->slot[i]->first_error ? l->slot[i]->first_error : -ETIMEDOUT, NULL);
	uv_timer_start(&l->timer, on_timer, SWEEP_MS, 0);
	if (l->used == l->nfree)
		uv_unref((uv_handle_t *)&l->timer);
}

/* ------------------------------------------------------------ plain client */

static void release(dhash_local_t *l)
{
	if (!l->timer_closed || l->calls > 0)
		return;
	free(l->slot);
	free(l->free_list);
	free(l->sock);
	free(l);
}

/* The request a DHash answer belongs to, or NULL (timed out, cancelled). */
static struct lreq *pcall_end(struct pcall *k)
{
	dhash_local_t *l = k->l;
	struct lreq *q = l->closing ? NULL : req_find(l, k->id);

	l->calls--;
	free(k);
	release(l);
	return q;
}

/* pcall_end, and the request out of the table: its callback is next. */
static struct lreq *pcall_take(struct pcall *k)
{
	dhash_local_t *l = k->l;
	struct lreq *q = pcall_end(k);

	if (q) /* not closing: l is still there */
		req_take(l, q);
	return q;
}

static void plain_got(void *arg, const struct dhash_get_result *r)
{
	struct lreq *q = pcall_take(arg);

	if (q) {
		q->get_cb(q->arg, r);
		req_free(q);
	}
}

static void plain_put(void *arg, int status, const struct cfs_id *key, uint64_t lease)
{
	struct pcall *k = arg;
	dhash_local_t *l = k->l;
	struct lreq *q = pcall_end(k);

	if (q) {
		q->granted = lease;
		req_finish(l, q, status, NULL);
	}
}

static void plain_located(void *arg, const struct dhash_locate_result *r)
{
	struct lreq *q = pcall_take(arg);

	if (q) {
		q->locate_cb(q->arg, r);
		req_free(q);
	}
}

static void plain_bits(void *arg, int status, const uint8_t *bits, uint32_t n, uint64_t lease)
{
	struct lreq *q = pcall_take(arg);

	if (q) {
		q->bits_cb(q->arg, status, bits, n, lease);
		req_free(q);
	}
}

static struct pcall *pcall_new(dhash_local_t *l, const struct lreq *q)
{
	struct pcall *k = xcalloc(1, sizeof(*k));
	k->l = l;
	k->id = q->id;
	l->calls++;
	return k;
}

/* Start q on the DHash client; a synchronous failure fails q from the timer. */
static void plain_start(dhash_local_t *l, struct lreq *q)
{
	const struct cfs_id *keys = (const struct cfs_id *)q->data;
	struct pcall *k = pcall_new(l, q);
	int r;

	switch (q->type) {
	case CFS_MSG_CTL_GET:
		r = (q->root ? dhash_get_root : dhash_get)(l->dc, &q->key, plain_got, k);
		break;
	case CFS_MSG_CTL_LOCATE:
		r = dhash_locate(l->dc, &q->key, plain_located, k);
		break;
	case CFS_MSG_CTL_PUT:
		r = dhash_put(l->dc, q->kind, q->data, q->len, q->lease_until, plain_put, k);
		break;
	case CFS_MSG_CTL_REFRESH:
		r = dhash_refresh_many(l->dc, keys, q->n_keys, q->lease_until, plain_bits, k);
		break;
	default:
		r = dhash_have_many(l->dc, keys, q->n_keys, plain_bits, k);
		break;
	}
	q->sent = true;
	if (r < 0) {
		l->calls--;
		free(k);
		q->deadline_ms = 0; /* the sweep fails it */
		q->first_error = r;
		uv_timer_start(&l->timer, on_timer, 0, 0);
	}
}

static void plain_request(void *arg, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	dhash_local_t *l = arg;

	if (!chord_handle_request(l->chord, req, from))
		(void)cfs_transport_reply_error(l->tr, from, -EOPNOTSUPP);
}

/* Send q now, or connect first (q waits in the table). */
static int req_start(dhash_local_t *l, struct lreq *q)
{
	int r;

	/* The sweep timer keeps the loop alive while anything is pending. */
	uv_ref((uv_handle_t *)&l->timer);
	if (l->dc) {
		plain_start(l, q);
		return 0;
	}
	if (l->s) {
		if ((r = req_send(l, q)) < 0) {
			cfs_stream_close(l->s);
			l->s = NULL;
			l->fail_status = r; /* never call back inside the call */
			uv_timer_start(&l->timer, on_timer, 0, 0);
		}
		return 0;
	}
	if (l->connecting || l->fail_status)
		return 0;
	if ((r = cfs_stream_connect(l->loop, l->sock, on_connect, l)) < 0) {
		l->fail_status = r;
		uv_timer_start(&l->timer, on_timer, 0, 0);
	} else {
		l->connecting = true;
	}
	return 0;
}

/* ------------------------------------------------------------ API */

int dhash_local_new(uv_loop_t *loop, const char *sock, uint32_t timeout_ms, dhash_local_t **ret)
{
	dhash_local_t *l = xcalloc(1, sizeof(*l));

	l->loop = loop;
	l->sock = xstrdup(sock);
	l->timeout_ms = timeout_ms ? timeout_ms : DHASH_LOCAL_TIMEOUT_MS;
	uv_timer_init(loop, &l->timer);
	l->timer.data = l;
	uv_timer_start(&l->timer, on_timer, SWEEP_MS, 0);
	uv_unref((uv_handle_t *)&l->timer);
	*ret = l;
	return 0;
}

/*
 * A plain client keeps the ring members it met for its next run, so that
 * its first lookups start near their keys instead of at a bootstrap
 * server: $XDG_CACHE_HOME/cfs/contacts-H (as root without that variable,
 * /var/cache/cfs), H a hash of the bootstrap addresses, so that two rings
 * never share a file. CFS_CONTACTS=off keeps nothing.
 */
static void load_contacts(dhash_local_t *l, const struct cfs_addr *boot, size_t n)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *env = getenv("CFS_CONTACTS");
	char dir[PATH_MAX - 32], a[CFS_ADDR_STRLEN];
	struct cfs_hasher h;
	struct cfs_id id;
	int r;

	if (env && !strcmp(env, "off"))
		return;
	if (cfs_user_dir(dir, sizeof(dir), xdg && *xdg ? NULL : "/var/cache/cfs", "XDG_CACHE_HOME",
	                 ".cache") < 0)
		return;
	cfs_hasher_init(&h);
	for (size_t i = 0; i < n; i++) {
		cfs_addr_str(&boot[i], a);
		cfs_hasher_update(&h, a, strlen(a) + 1);
	}
	cfs_hasher_final(&h, &id);
	struct cfs_sbuf p = { 0 };
	cfs_sb_printf(&p, "%s/contacts-%02x%02x%02x%02x", dir, id.b[0], id.b[1], id.b[2], id.b[3]);
	l->contacts_path = p.p;
	if ((r = chord_client_load(l->chord, l->contacts_path)) >= 0)
		log_debug("dhash: %d ring contacts from %s", r, l->contacts_path);
	else if (r != -ENOENT)
		log_debug("dhash: cannot read %s: %s", l->contacts_path, strerror(-r));
}

void dhash_local_keep_contacts(dhash_local_t *l)
{
	char dir[PATH_MAX];
	int r;

	if (!l->contacts_path || !l->chord || !chord_is_client(l->chord))
		return;
	snprintf(dir, sizeof(dir), "%s", l->contacts_path);
	*strrchr(dir, '/') = 0;
	if ((r = cfs_mkdir_p(dir, 0755)) < 0 || (r = chord_client_save(l->chord, l->contacts_path)) < 0)
		log_debug("dhash: cannot keep the ring contacts in %s: %s", l->contacts_path, strerror(-r));
}

int dhash_local_new_plain(uv_loop_t *loop, const struct cfs_addr *boot, size_t n,
                          uint32_t timeout_ms, uint64_t cache_push_bytes_per_s,
                          dhash_local_t **ret)
{
	struct cfs_transport_config tc;
	struct dhash_config dc;
	dhash_local_t *l;
	int r;

	cfs_transport_config_default(&tc);
	dhash_config_default(&dc);
	dc.cache_push_bytes_per_s = cache_push_bytes_per_s;
	/* The daemons' default lookup mode; a plain client's lookups take its
	 * next-hop rule and ask one server at a time (chord/client.c). Its
	 * first hop is one of its contacts, anywhere on the globe, and
	 * OpenDHT's delay-aware rule (progress over a latency penalty) asks a
	 * near one that covers the key rather than the far one that precedes
	 * it most closely. A plain client in eu read a file spread over four
	 * continents at 6.1 MB/s with it, 1.9 with greedy hops. */
	if ((r = dhash_local_new(loop, "", timeout_ms, &l)) < 0)
		return r;
	if ((r = cfs_transport_new(loop, &tc, plain_request, l, &l->tr)) < 0) {
		log_error("dhash: cannot open a UDP socket: %s", strerror(-r));
		goto fail;
	}
	if ((r = chord_client_new(loop, l->tr, boot, n, &l->chord)) < 0 ||
	    (r = dhash_client_new(l->chord, &dc, &l->dc)) < 0)
		goto fail;
	load_contacts(l, boot, n);
	*ret = l;
	return 0;
fail:
	dhash_local_free(l);
	return r;
}

static void on_timer_closed(uv_handle_t *h)
{
	dhash_local_t *l = h->data;

	l->timer_closed = true;
	release(l);
}

void dhash_local_free(dhash_local_t *l)
{
	if (!l)
		return;
	l->closing = true;
	if (l->s)
		cfs_stream_close(l->s);
	l->s = NULL;
	fail_all(l, -ECANCELED);
	/* The DHash calls end with -ECANCELED as the transport closes;
	 * l stays until the last of them is back. */
	dhash_local_keep_contacts(l);
	free(l->contacts_path);
	l->contacts_path = NULL;
	dhash_client_free(l->dc);
	chord_free(l->chord);
	if (l->tr)
		cfs_transport_close(l->tr);
	uv_close((uv_handle_t *)&l->timer, on_timer_closed);
}

uint32_t dhash_local_pending(const dhash_local_t *l)
{
	return l->used - l->nfree;
}

static int local_get(dhash_local_t *l, const struct cfs_id *key, bool root, dhash_get_cb cb,
                     void *arg)
{
	if (l->closing)
		return -ECANCELED;
	struct lreq *q = req_new(l, CFS_MSG_CTL_GET, arg);
	q->key = *key;
	q->root = root;
	q->get_cb = cb;
	return req_start(l, q);
}

int dhash_local_get(dhash_local_t *l, const struct cfs_id *key, dhash_get_cb cb, void *arg)
{
	return local_get(l, key, false, cb, arg);
}

int dhash_local_get_root(dhash_local_t *l, const struct cfs_id *key, dhash_get_cb cb, void *arg)
{
	return local_get(l, key, true, cb, arg);
}

int dhash_local_locate(dhash_local_t *l, const struct cfs_id *key, dhash_locate_cb cb, void *arg)
{
	if (l->closing)
		return -ECANCELED;
	struct lreq *q = req_new(l, CFS_MSG_CTL_LOCATE, arg);
	q->key = *key;
	q->locate_cb = cb;
	return req_start(l, q);
}

int dhash_local_put(dhash_local_t *l, uint32_t kind, const uint8_t *p, size_t len,
                    uint64_t lease_until, dhash_put_cb cb, void *arg)
{
	struct cfs_id key;
	int r;

	if (l->closing)
		return -ECANCELED;
	if (len > CFS_BLOCK_MAX)
		return -EMSGSIZE;
	if ((r = dhash_block_key(kind, p, len, &key)) < 0)
		return r;
	struct lreq *q = req_new(l, CFS_MSG_CTL_PUT, arg);
	q->key = key;
	q->kind = kind;
	q->lease_until = lease_until;
	q->data = xmemdup(p, len ? len : 1);
	q->len = len;
	q->put_cb = cb;
	return req_start(l, q);
}

int dhash_local_call(dhash_local_t *l, const struct cfs_msg *req, dhash_ctl_cb cb, void *arg)
{
	size_t cap = CFS_DGRAM_MAX, len;
	int r;

	if (l->closing)
		return -ECANCELED;
	if (l->dc)
		return -EOPNOTSUPP;
	struct lreq *q = req_new(l, req->type, arg);
	struct cfs_msg *m = xmalloc(sizeof(*m));
	*m = *req;
	m->reqid = q->id;
	m->is_reply = false;
	/* Most requests fit a datagram's size; a large one takes a frame's. */
	for (;;) {
		q->data = xmalloc(cap);
		r = cfs_msg_encode(m, q->data, cap, &len);
		if (r != -EMSGSIZE || cap == CFS_FRAME_MAX)
			break;
		free(q->data);
		cap = CFS_FRAME_MAX;
	}
	free(m);
	if (r < 0) {
		req_take(l, q);
		req_free(q);
		return r;
	}
	q->data = xrealloc(q->data, len ? len : 1);
	q->len = len;
	q->raw = true;
	q->ctl_cb = cb;
	return req_start(l, q);
}

static int keys_start(dhash_local_t *l, uint8_t type, const struct cfs_id *keys, uint32_t n,
                      uint64_t lease_until, dhash_bits_cb cb, void *arg)
{
	if (l->closing)
		return -ECANCELED;
	if (n == 0 || n > CFS_MSG_MAX_KEYS)
		return -EINVAL;
	struct lreq *q = req_new(l, type, arg);
	q->data = xmemdup(keys, n * sizeof(*keys));
	q->n_keys = n;
	q->lease_until = lease_until;
	q->bits_cb = cb;
	return req_start(l, q);
}

int dhash_local_have(dhash_local_t *l, const struct cfs_id *keys, uint32_t n, dhash_bits_cb cb,
                     void *arg)
{
	return keys_start(l, CFS_MSG_CTL_HAVE, keys, n, 0, cb, arg);
}

int dhash_local_refresh(dhash_local_t *l, const struct cfs_id *keys, uint32_t n,
                        uint64_t lease_until, dhash_bits_cb cb, void *arg)
{
	return keys_start(l, CFS_MSG_CTL_REFRESH, keys, n, lease_until, cb, arg);
}

bool dhash_local_is_plain(const dhash_local_t *l)
{
	return l->dc != NULL;
}

const struct dhash_client_stats *dhash_local_client_stats(const dhash_local_t *l)
{
	return l->dc ? dhash_client_stats(l->dc) : NULL;
}

uint64_t dhash_local_lookups_remembered(const dhash_local_t *l)
{
	return l->chord ? chord_lookups_remembered(l->chord) : 0;
}

int dhash_local_clock_skew(dhash_local_t *l, int64_t *ret_skew_ms, uint32_t *ret_servers)
{
	*ret_skew_ms = 0;
	*ret_servers = 0;
	return l->tr ? cfs_transport_clock_skew(l->tr, ret_skew_ms, ret_servers) : -ENODATA;
}
