/*
 * The handle every program holds to reach the ring, whichever backend
 * carries its requests: the table of requests in flight, their
 * deadlines, their one callback each, and the one place the backend is
 * chosen (open_backend).
 *
 * Requests live in a slot table; a request's ID is its slot index with a
 * generation in the high bits, so a late answer to a request that already
 * timed out never matches the slot's next tenant. A sweep timer fails
 * every request past its deadline with -ETIMEDOUT, so a caller is never
 * left waiting on a daemon that hangs or a ring that does not answer;
 * the same timer delivers the failures of requests that could not start
 * (client__fail_soon), so that no callback runs inside the call that
 * started it. The sweep keeps the loop alive only while something is
 * pending.
 *
 * Nothing here tries a request again: one request is one backend call
 * (a control message, or one DHash operation) with one deadline.
 */
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"

#define SWEEP_MS 250

/* ------------------------------------------------------------ slots */

static struct client__req *req_new(client_t *c, uint8_t type, void *arg)
{
	struct client__req *q = xcalloc(1, sizeof(*q));
	uint32_t i;

	if (c->nfree) {
		i = c->free_list[--c->nfree];
	} else {
		if (c->used == c->nslots) {
			c->nslots = c->nslots ? 2 * c->nslots : 64;
			c->slot = xrealloc(c->slot, c->nslots * sizeof(*c->slot));
			c->free_list = xrealloc(c->free_list, c->nslots * sizeof(*c->free_list));
		}
		i = c->used++;
	}
	q->id = (uint64_t)++c->gen << 32 | i;
	q->type = type;
	q->arg = arg;
	q->started_us = cfs_now_us();
	q->deadline_ms = cfs_now_ms() + c->timeout_ms;
	c->slot[i] = q;
	return q;
}

struct client__req *client__req_find(client_t *c, uint64_t id)
{
	uint32_t i = (uint32_t)id;

	if (i >= c->used || !c->slot[i] || c->slot[i]->id != id)
		return NULL;
	return c->slot[i];
}

struct client__req *client__req_next(client_t *c, uint32_t *pos)
{
	while (*pos < c->used) {
		struct client__req *q = c->slot[(*pos)++];
		if (q)
			return q;
	}
	return NULL;
}

/* Take q out of the table (its callback is the caller's to make). */
static void req_take(client_t *c, struct client__req *q)
{
	uint32_t i = (uint32_t)q->id;

	c->slot[i] = NULL;
	c->free_list[c->nfree++] = i;
}

static void req_free(struct client__req *q)
{
	free(q->data);
	free(q->nodes);
	free(q);
}

/* ------------------------------------------------------------ answers */

void client__fail(client_t *c, struct client__req *q, int status)
{
	req_take(c, q);
	if (c->closing)
		status = -ECANCELED;
	if (q->raw) {
		q->ctl_cb(q->arg, status, NULL);
		req_free(q);
		return;
	}
	switch (q->type) {
	case CFS_MSG_CTL_GET:
	case CFS_MSG_CTL_GET_CODED: {
		struct dhash_get_result r = { .status = status,
		                              .latency_us = cfs_now_us() - q->started_us };
		q->get_cb(q->arg, &r);
		break;
	}
	case CFS_MSG_CTL_PUT:
	case CFS_MSG_CTL_PUT_CODED:
	case CFS_MSG_CTL_REPAIR_CODED:
		q->put_cb(q->arg, status, &q->key, 0);
		break;
	case CFS_MSG_CTL_LOCATE:
	case CFS_MSG_CTL_LOCATE_CODED: {
		struct dhash_locate_result r = { .status = status };
		q->locate_cb(q->arg, &r);
		break;
	}
	default:
		q->bits_cb(q->arg, status, NULL, q->n_keys, 0);
		break;
	}
	req_free(q);
}

/* Take q out of the table to answer it; while the handle closes, cancel
 * it instead (false). */
static bool take_to_answer(client_t *c, struct client__req *q)
{
	if (c->closing) {
		client__fail(c, q, -ECANCELED);
		return false;
	}
	req_take(c, q);
	return true;
}

void client__answer_get(client_t *c, struct client__req *q, const struct dhash_get_result *r)
{
	if (take_to_answer(c, q)) {
		q->get_cb(q->arg, r);
		req_free(q);
	}
}

void client__answer_locate(client_t *c, struct client__req *q,
                           const struct dhash_locate_result *r)
{
	if (take_to_answer(c, q)) {
		q->locate_cb(q->arg, r);
		req_free(q);
	}
}

void client__answer_put(client_t *c, struct client__req *q, int status, uint64_t lease)
{
	if (status < 0) {
		client__fail(c, q, status);
	} else if (take_to_answer(c, q)) {
		q->put_cb(q->arg, 0, &q->key, lease);
		req_free(q);
	}
}

void client__answer_bits(client_t *c, struct client__req *q, int status, const uint8_t *bits,
                         uint64_t lease)
{
	if (status < 0) {
		client__fail(c, q, status);
	} else if (take_to_answer(c, q)) {
		q->bits_cb(q->arg, 0, bits, q->n_keys, lease);
		req_free(q);
	}
}

void client__answer_raw(client_t *c, struct client__req *q, const struct cfs_msg *reply)
{
	if (take_to_answer(c, q)) {
		q->ctl_cb(q->arg, reply->status, reply);
		req_free(q);
	}
}

void client__fail_all(client_t *c, int raw_status, int typed_status)
{
	struct client__req *q;
	uint32_t pos = 0;

	while ((q = client__req_next(c, &pos)))
		client__fail(c, q, q->raw ? raw_status : typed_status);
}

/* ------------------------------------------------------------ the sweep */

static void on_timer(uv_timer_t *t)
{
	client_t *c = t->data;
	uint64_t now = cfs_now_ms();
	struct client__req *q;
	uint32_t pos = 0;

	while ((q = client__req_next(c, &pos)))
		if (q->deadline_ms <= now)
			client__fail(c, q, q->error ? q->error : -ETIMEDOUT);
	uv_timer_start(&c->timer, on_timer, SWEEP_MS, 0);
	if (c->used == c->nfree)
		uv_unref((uv_handle_t *)&c->timer);
}

void client__fail_soon(client_t *c, struct client__req *q, int status)
{
	q->sent = true;
	q->error = status;
	q->deadline_ms = 0;
	uv_ref((uv_handle_t *)&c->timer);
	uv_timer_start(&c->timer, on_timer, 0, 0);
}

/* ------------------------------------------------------------ lifetime */

static void maybe_free(client_t *c)
{
	if (!c->timer_closed || c->holds > 0)
		return;
	c->be->release(c);
	free(c->slot);
	free(c->free_list);
	free(c);
}

void client__hold(client_t *c)
{
	c->holds++;
}

void client__release(client_t *c)
{
	c->holds--;
	maybe_free(c);
}

static void on_timer_closed(uv_handle_t *h)
{
	client_t *c = h->data;

	c->timer_closed = true;
	maybe_free(c);
}

void client_free(client_t *c)
{
	if (!c || c->closing)
		return;
	c->closing = true;
	client__fail_all(c, -ECANCELED, -ECANCELED);
	c->be->close(c);
	uv_close((uv_handle_t *)&c->timer, on_timer_closed);
}

/* The one place a backend is chosen: bootstrap addresses make a plain
 * ring client, else the daemon at sock. */
static int open_backend(uv_loop_t *loop, uint32_t timeout_ms, const char *sock,
                        const struct cfs_addr *boot, size_t nboot, uint64_t cache_push_bytes_per_s,
                        client_t **ret)
{
	client_t *c = xcalloc(1, sizeof(*c));
	int r;

	c->loop = loop;
	c->timeout_ms = timeout_ms ? timeout_ms : CLIENT_TIMEOUT_MS;
	uv_timer_init(loop, &c->timer);
	c->timer.data = c;
	uv_timer_start(&c->timer, on_timer, SWEEP_MS, 0);
	uv_unref((uv_handle_t *)&c->timer);
	if (nboot > 0) {
		c->be = &client__plain_backend;
		r = client__plain_open(c, boot, nboot, cache_push_bytes_per_s);
	} else {
		c->be = &client__daemon_backend;
		r = client__daemon_open(c, sock);
	}
	if (r < 0) {
		client_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

int client_target_open(uv_loop_t *loop, const struct client_target *t, uint32_t timeout_ms,
                       client_t **ret)
{
	return open_backend(loop, timeout_ms, t->sock, t->boot, t->nboot, t->cache_push_bytes_per_s,
	                    ret);
}

int client_new(uv_loop_t *loop, const char *sock, uint32_t timeout_ms, client_t **ret)
{
	return open_backend(loop, timeout_ms, sock, NULL, 0, 0, ret);
}

bool client_is_plain(const client_t *c)
{
	return c->plain != NULL;
}

uint32_t client_pending(const client_t *c)
{
	return c->used - c->nfree;
}

/* ------------------------------------------------------------ requests */

static int req_start(client_t *c, struct client__req *q)
{
	/* The sweep keeps the loop alive while anything is pending. */
	uv_ref((uv_handle_t *)&c->timer);
	c->be->start(c, q);
	return 0;
}

static int get_start(client_t *c, const struct cfs_id *key, bool root, dhash_get_cb early,
                     dhash_get_cb cb, void *arg)
{
	if (c->closing)
		return -ECANCELED;
	struct client__req *q = req_new(c, CFS_MSG_CTL_GET, arg);
	q->key = *key;
	q->root = root;
	q->early_cb = early;
	q->get_cb = cb;
	return req_start(c, q);
}

int client_get(client_t *c, const struct cfs_id *key, dhash_get_cb cb, void *arg)
{
	return get_start(c, key, false, NULL, cb, arg);
}

int client_get_root(client_t *c, const struct cfs_id *key, dhash_get_cb cb, void *arg)
{
	return get_start(c, key, true, NULL, cb, arg);
}

int client_get_root_early(client_t *c, const struct cfs_id *key, dhash_get_cb early,
                          dhash_get_cb cb, void *arg)
{
	return get_start(c, key, true, early, cb, arg);
}

int client_locate(client_t *c, const struct cfs_id *key, dhash_locate_cb cb, void *arg)
{
	if (c->closing)
		return -ECANCELED;
	struct client__req *q = req_new(c, CFS_MSG_CTL_LOCATE, arg);
	q->key = *key;
	q->locate_cb = cb;
	return req_start(c, q);
}

int client_locate_coded(client_t *c, const struct cfs_id *key, uint32_t m, uint32_t n,
                        dhash_locate_cb cb, void *arg)
{
	if (c->closing)
		return -ECANCELED;
	if (!dhash_code_valid(m, n))
		return -EINVAL;
	struct client__req *q = req_new(c, CFS_MSG_CTL_LOCATE_CODED, arg);
	q->key = *key;
	q->code_m = (uint8_t)m;
	q->code_n = (uint8_t)n;
	q->locate_cb = cb;
	return req_start(c, q);
}

int client_put(client_t *c, uint32_t kind, const uint8_t *p, size_t len, uint64_t lease_until,
               dhash_put_cb cb, void *arg)
{
	struct cfs_id key;
	int r;

	if (c->closing)
		return -ECANCELED;
	if (len > CFS_BLOCK_MAX)
		return -EMSGSIZE;
	if ((r = dhash_block_key(kind, p, len, &key)) < 0)
		return r;
	struct client__req *q = req_new(c, CFS_MSG_CTL_PUT, arg);
	q->key = key;
	q->kind = kind;
	q->lease_until = lease_until;
	q->data = xmemdup(p, len ? len : 1);
	q->len = len;
	q->put_cb = cb;
	return req_start(c, q);
}

int client_get_coded(client_t *c, const struct cfs_id *key, uint32_t m, uint32_t n, dhash_get_cb cb,
                     void *arg)
{
	if (c->closing)
		return -ECANCELED;
	if (!dhash_code_valid(m, n))
		return -EINVAL;
	struct client__req *q = req_new(c, CFS_MSG_CTL_GET_CODED, arg);
	q->key = *key;
	q->code_m = (uint8_t)m;
	q->code_n = (uint8_t)n;
	q->get_cb = cb;
	return req_start(c, q);
}

int client_put_coded(client_t *c, uint32_t m, uint32_t n, const uint8_t *p, size_t len,
                     uint64_t lease_until, dhash_put_cb cb, void *arg)
{
	struct cfs_id key;
	int r;

	if (c->closing)
		return -ECANCELED;
	if ((r = dhash_coded_key(p, len, m, n, &key)) < 0)
		return r;
	struct client__req *q = req_new(c, CFS_MSG_CTL_PUT_CODED, arg);
	q->key = key;
	q->code_m = (uint8_t)m;
	q->code_n = (uint8_t)n;
	q->lease_until = lease_until;
	q->data = xmemdup(p, len);
	q->len = len;
	q->put_cb = cb;
	return req_start(c, q);
}

int client_repair_coded(client_t *c, const struct cfs_id *key, uint32_t m, uint32_t n,
                        const uint8_t *p, size_t len, const struct cfs_node *holders,
                        uint32_t nholders, uint32_t mask, uint64_t lease_until, dhash_put_cb cb,
                        void *arg)
{
	if (c->closing)
		return -ECANCELED;
	if (!dhash_code_valid(m, n) || len == 0 || len > CFS_BLOCK_MAX || nholders > n || !mask)
		return -EINVAL;
	struct client__req *q = req_new(c, CFS_MSG_CTL_REPAIR_CODED, arg);
	q->key = *key;
	q->code_m = (uint8_t)m;
	q->code_n = (uint8_t)n;
	q->nodes = nholders ? xmemdup(holders, nholders * sizeof(*holders)) : NULL;
	q->n_nodes = nholders;
	q->mask = mask;
	q->lease_until = lease_until;
	q->data = xmemdup(p, len);
	q->len = len;
	q->put_cb = cb;
	return req_start(c, q);
}

/* A batch of keys; code_m, code_n: the code of CTL_REFRESH_CODED's keys. */
static int keys_start(client_t *c, uint8_t type, const struct cfs_id *keys, uint32_t n,
                      uint32_t code_m, uint32_t code_n, uint64_t lease_until, dhash_bits_cb cb,
                      void *arg)
{
	if (c->closing)
		return -ECANCELED;
	if (n == 0 || n > CFS_MSG_MAX_KEYS)
		return -EINVAL;
	struct client__req *q = req_new(c, type, arg);
	q->data = xmemdup(keys, n * sizeof(*keys));
	q->n_keys = n;
	q->code_m = (uint8_t)code_m;
	q->code_n = (uint8_t)code_n;
	q->lease_until = lease_until;
	q->bits_cb = cb;
	return req_start(c, q);
}

int client_have(client_t *c, const struct cfs_id *keys, uint32_t n, dhash_bits_cb cb, void *arg)
{
	return keys_start(c, CFS_MSG_CTL_HAVE, keys, n, 0, 0, 0, cb, arg);
}

int client_refresh(client_t *c, const struct cfs_id *keys, uint32_t n, uint64_t lease_until,
                   dhash_bits_cb cb, void *arg)
{
	return keys_start(c, CFS_MSG_CTL_REFRESH, keys, n, 0, 0, lease_until, cb, arg);
}

int client_refresh_coded(client_t *c, const struct cfs_id *keys, uint32_t n, uint32_t m,
                         uint32_t code_n, uint64_t lease_until, dhash_bits_cb cb, void *arg)
{
	if (!dhash_code_valid(m, code_n))
		return -EINVAL;
	return keys_start(c, CFS_MSG_CTL_REFRESH_CODED, keys, n, m, code_n, lease_until, cb, arg);
}

int client_call(client_t *c, const struct cfs_msg *req, client_ctl_cb cb, void *arg)
{
	size_t cap = CFS_DGRAM_MAX, len;
	int r;

	if (c->closing)
		return -ECANCELED;
	if (!c->be->raw_calls)
		return -EOPNOTSUPP;
	struct client__req *q = req_new(c, req->type, arg);
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
		req_take(c, q);
		req_free(q);
		return r;
	}
	q->data = xrealloc(q->data, len ? len : 1);
	q->len = len;
	q->raw = true;
	q->ctl_cb = cb;
	return req_start(c, q);
}
