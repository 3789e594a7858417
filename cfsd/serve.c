/*
 * cfsd's control socket: the requests of local tools (cfsctl, cfs-publish,
 * cfs-mount, cfs-cat, cfs-fsck), each answered on its connection. Status
 * and listings are answered at once; lookups, gets, puts, locates and
 * batches of haves / refreshes run on the daemon's DHash client and are
 * answered from its callbacks, so a connection outlives its stream while
 * any is still running. So is a denial of a volume, which walks the volume
 * first (cfsd/deny.h).
 */
#include <stdlib.h>
#include <string.h>

#include "cfsd/serve.h"

struct conn;

struct cfsd_serve {
	struct cfsd_serve_env env;
	struct cfs_msg reply;     /* a reply; large: not on the stack */
	uint64_t requests, malformed;
	bool closing;             /* cfsd_serve_close_all: the daemon's pieces are going */
	struct conn *conns;
};

cfsd_serve_t *cfsd_serve_new(const struct cfsd_serve_env *env)
{
	cfsd_serve_t *sv = xcalloc(1, sizeof(*sv));

	sv->env = *env;
	return sv;
}

void cfsd_serve_free(cfsd_serve_t *sv)
{
	if (!sv)
		return;
	cfsd_serve_close_all(sv);
	free(sv);
}

uint64_t cfsd_serve_requests(const cfsd_serve_t *sv, bool malformed)
{
	return malformed ? sv->malformed : sv->requests;
}

/* One control connection; it outlives its stream while lookups it asked
 * for are still running. */
struct conn {
	cfsd_serve_t *sv;
	cfs_stream_t *s;
	unsigned pending;
	bool closed;
	struct conn *next, **pprev;
};

/* A control request answered later (lookup, get, put, have, refresh). */
struct ctl_req {
	struct conn *k;
	uint64_t reqid;
	uint8_t type;             /* the reply's: the request's type */
};

static void conn_put(struct conn *k)
{
	if (k->closed && k->pending == 0)
		free(k);
}

static void conn_close(struct conn *k)
{
	if (k->closed)
		return;
	k->closed = true;
	if (k->next)
		k->next->pprev = k->pprev;
	*k->pprev = k->next;
	cfs_stream_close(k->s);
	conn_put(k);
}

static void ctl_reply_error_id(struct conn *k, enum cfs_msg_type type, uint64_t reqid, int status)
{
	cfsd_serve_t *sv = k->sv;

	cfs_msg_init(&sv->reply, type);
	sv->reply.is_reply = true;
	sv->reply.reqid = reqid;
	sv->reply.status = status;
	(void)cfs_stream_write_msg(k->s, &sv->reply);
}

static void ctl_reply_error(struct conn *k, const struct cfs_msg *req, int status)
{
	ctl_reply_error_id(k, (enum cfs_msg_type)req->type, req->reqid, status);
}

static void ctl_req_end(struct ctl_req *q)
{
	q->k->pending--;
	conn_put(q->k);
	free(q);
}

static void ctl_lookup_done(void *arg, const struct chord_lookup_result *r)
{
	struct ctl_req *q = arg;
	cfsd_serve_t *sv = q->k->sv;
	struct conn *k = q->k;

	if (!k->closed) {
		cfs_msg_init(&sv->reply, CFS_MSG_CTL_LOOKUP);
		sv->reply.is_reply = true;
		sv->reply.reqid = q->reqid;
		sv->reply.status = r->status;
		sv->reply.hops = r->hops;
		sv->reply.count = r->rpcs;
		sv->reply.timeouts = r->timeouts;
		sv->reply.n_nodes = r->n;
		memcpy(sv->reply.nodes, r->succ, r->n * sizeof(r->succ[0]));
		(void)cfs_stream_write_msg(k->s, &sv->reply);
	}
	ctl_req_end(q);
}

/* CTL_GET / CTL_PUT / CTL_LOCATE: the daemon's DHash client does the work. */

static void ctl_locate_done(void *arg, const struct dhash_locate_result *r)
{
	struct ctl_req *q = arg;
	cfsd_serve_t *sv = q->k->sv;
	uint8_t states[CFS_MSG_MAX_NODES];

	if (!q->k->closed) {
		cfs_msg_init(&sv->reply, (enum cfs_msg_type)q->type); /* CTL_LOCATE or _CODED */
		sv->reply.is_reply = true;
		sv->reply.reqid = q->reqid;
		sv->reply.status = r->status;
		if (r->status == 0) {
			for (uint32_t i = 0; i < r->n; i++)
				states[i] = (uint8_t)r->state[i];
			sv->reply.n_nodes = r->n;
			memcpy(sv->reply.nodes, r->nodes, r->n * sizeof(r->nodes[0]));
			sv->reply.data = (struct cfs_bytes){ states, r->n };
		}
		(void)cfs_stream_write_msg(q->k->s, &sv->reply);
	}
	ctl_req_end(q);
}


static void ctl_get_done(void *arg, const struct dhash_get_result *r)
{
	struct ctl_req *q = arg;
	cfsd_serve_t *sv = q->k->sv;

	if (!q->k->closed) {
		/* CTL_GET, CTL_GET_CODED or CTL_GET_ROOT (flags 0: the final reply) */
		cfs_msg_init(&sv->reply, (enum cfs_msg_type)q->type);
		sv->reply.is_reply = true;
		sv->reply.reqid = q->reqid;
		sv->reply.status = r->status;
		if (r->status == 0) {
			sv->reply.kind = r->kind;
			sv->reply.data = (struct cfs_bytes){ r->data, r->len };
		}
		(void)cfs_stream_write_msg(q->k->s, &sv->reply);
	}
	ctl_req_end(q);
}

/* CTL_GET_ROOT with EARLY: the first root that verifies, as an interim
 * reply on the request's ID; ctl_get_done sends the final one. */
static void ctl_get_early(void *arg, const struct dhash_get_result *r)
{
	struct ctl_req *q = arg;
	cfsd_serve_t *sv = q->k->sv;

	if (q->k->closed || r->status != 0)
		return;
	cfs_msg_init(&sv->reply, CFS_MSG_CTL_GET_ROOT);
	sv->reply.is_reply = true;
	sv->reply.reqid = q->reqid;
	sv->reply.flags = CFS_GET_ROOT_R_INTERIM;
	sv->reply.kind = r->kind;
	sv->reply.data = (struct cfs_bytes){ r->data, r->len };
	(void)cfs_stream_write_msg(q->k->s, &sv->reply);
}

static void ctl_put_done(void *arg, int status, const struct cfs_id *key, uint64_t lease)
{
	struct ctl_req *q = arg;
	cfsd_serve_t *sv = q->k->sv;

	if (!q->k->closed) {
		cfs_msg_init(&sv->reply, (enum cfs_msg_type)q->type); /* CTL_PUT or CTL_*_CODED */
		sv->reply.is_reply = true;
		sv->reply.reqid = q->reqid;
		sv->reply.status = status;
		if (status == 0) {
			sv->reply.key = *key;
			sv->reply.lease_until = lease;
		}
		(void)cfs_stream_write_msg(q->k->s, &sv->reply);
	}
	ctl_req_end(q);
}

static void ctl_block(struct conn *k, const struct cfs_msg *req)
{
	cfsd_serve_t *sv = k->sv;
	struct ctl_req *q = xcalloc(1, sizeof(*q));
	int r;

	q->k = k;
	q->reqid = req->reqid;
	q->type = (uint8_t)req->type;
	if (req->type == CFS_MSG_CTL_GET)
		r = dhash_get(sv->env.client, &req->key, ctl_get_done, q);
	else if (req->type == CFS_MSG_CTL_GET_ROOT && (req->flags & CFS_GET_ROOT_F_EARLY))
		r = dhash_get_root_early(sv->env.client, &req->key, ctl_get_early, ctl_get_done, q);
	else if (req->type == CFS_MSG_CTL_GET_ROOT)
		r = dhash_get_root(sv->env.client, &req->key, ctl_get_done, q);
	else if (req->type == CFS_MSG_CTL_GET_CODED)
		r = dhash_get_coded(sv->env.client, &req->key, req->count >> 8, req->count & 0xff,
		                    ctl_get_done, q);
	else if (req->type == CFS_MSG_CTL_PUT_CODED)
		r = dhash_put_coded(sv->env.client, req->count >> 8, req->count & 0xff, req->data.p,
		                    req->data.len, req->lease_until, ctl_put_done, q);
	else if (req->type == CFS_MSG_CTL_LOCATE)
		r = dhash_locate(sv->env.client, &req->key, ctl_locate_done, q);
	else if (req->type == CFS_MSG_CTL_REPAIR_CODED)
		r = dhash_repair_coded(sv->env.client, &req->key, req->count >> 8, req->count & 0xff,
		                       req->data.p, req->data.len, req->nodes, req->n_nodes, req->flags,
		                       req->lease_until, ctl_put_done, q);
	else if (req->type == CFS_MSG_CTL_LOCATE_CODED)
		r = dhash_locate_coded(sv->env.client, &req->key, req->count >> 8, req->count & 0xff,
		                       ctl_locate_done, q);
	else
		r = dhash_put(sv->env.client, req->kind, req->data.p, req->data.len, req->lease_until,
		              ctl_put_done, q);
	if (r < 0) {
		ctl_reply_error(k, req, r);
		free(q);
		return;
	}
	k->pending++;
}

/* CTL_HAVE, CTL_REFRESH and CTL_REFRESH_CODED: the whole batch at once on the daemon's DHash
 * client, one reply with a bitmap. A have is dhash_have_many, a refresh
 * dhash_refresh_many (one REFRESH per server, the publisher's pass over
 * every block): the two a plain ring client runs too, so a program gets
 * the same answer and the same error through the daemon or without it. */
static void ctl_bits_done(void *arg, int status, const uint8_t *bits, uint32_t n, uint64_t lease)
{
	struct ctl_req *q = arg;
	cfsd_serve_t *sv = q->k->sv;

	if (!q->k->closed) {
		cfs_msg_init(&sv->reply, (enum cfs_msg_type)q->type);
		sv->reply.is_reply = true;
		sv->reply.reqid = q->reqid;
		sv->reply.status = status;
		if (status == 0) {
			sv->reply.data = (struct cfs_bytes){ bits, (n + 7) / 8 };
			sv->reply.lease_until = lease;
		}
		(void)cfs_stream_write_msg(q->k->s, &sv->reply);
	}
	ctl_req_end(q);
}

static void ctl_keys(struct conn *k, const struct cfs_msg *req)
{
	cfsd_serve_t *sv = k->sv;
	struct ctl_req *q = xcalloc(1, sizeof(*q));
	int r;

	q->k = k;
	q->reqid = req->reqid;
	q->type = req->type;
	k->pending++;
	if (req->type == CFS_MSG_CTL_HAVE)
		r = dhash_have_many(sv->env.client, req->keys, req->n_keys, ctl_bits_done, q);
	else if (req->type == CFS_MSG_CTL_REFRESH_CODED)
		r = dhash_refresh_coded_many(sv->env.client, req->keys, req->n_keys, req->count >> 8,
		                             req->count & 0xff, req->lease_until, ctl_bits_done, q);
	else
		r = dhash_refresh_many(sv->env.client, req->keys, req->n_keys, req->lease_until,
		                       ctl_bits_done, q);
	if (r < 0) {
		ctl_reply_error(k, req, r);
		ctl_req_end(q);
	}
}

/* CTL_KEYS: one page of the stored keys (cfsctl keys asks page after page). */
static void ctl_list(struct conn *k, const struct cfs_msg *req)
{
	cfsd_serve_t *sv = k->sv;
	struct cfs_id *keys = xmalloc(CFS_MSG_MAX_KEYS * sizeof(*keys));
	bool more;
	uint32_t n = dhash_server_keys(sv->env.dhash, (req->flags & CFS_KEYS_F_AFTER) ? &req->key : NULL,
	                               keys, CFS_MSG_MAX_KEYS, &more);
	int r;

	cfs_msg_init(&sv->reply, CFS_MSG_CTL_KEYS);
	sv->reply.is_reply = true;
	sv->reply.reqid = req->reqid;
	sv->reply.flags = more ? CFS_KEYS_F_MORE : 0;
	sv->reply.keys = keys;
	sv->reply.n_keys = n;
	if ((r = cfs_stream_write_msg(k->s, &sv->reply)) < 0)
		log_warn_errno(r, "control: cannot send a page of keys");
	free(keys);
}

/* CTL_PIN / CTL_UNPIN / CTL_PINS: the pinner (cfsd/pin.c) answers at once. */
static void ctl_pin(struct conn *k, const struct cfs_msg *req)
{
	cfsd_serve_t *sv = k->sv;
	struct cfs_pubkey pk;
	struct cfs_sbuf b = { 0 };
	int r = 0;

	memcpy(pk.b, req->key.b, sizeof(pk.b));
	if (req->type == CFS_MSG_CTL_PIN)
		r = cfsd_pinner_add(sv->env.pinner, &pk, 1);
	else if (req->type == CFS_MSG_CTL_PIN_VERSIONS)
		r = cfsd_pinner_add(sv->env.pinner, &pk, req->count);
	else if (req->type == CFS_MSG_CTL_UNPIN)
		r = cfsd_pinner_remove(sv->env.pinner, &pk);
	else
		cfsd_pinner_report(sv->env.pinner, &b, req->flags & CFS_STATUS_F_JSON);
	if (r < 0) {
		ctl_reply_error(k, req, r);
		return;
	}
	cfs_msg_init(&sv->reply, (enum cfs_msg_type)req->type);
	sv->reply.is_reply = true;
	sv->reply.reqid = req->reqid;
	sv->reply.data = (struct cfs_bytes){ (const uint8_t *)b.p, b.len };
	if ((r = cfs_stream_write_msg(k->s, &sv->reply)) < 0)
		log_warn_errno(r, "control: cannot answer %s", cfs_msg_type_name(req->type));
	free(b.p);
}

/* CTL_LEAVE: answer, then leave the ring (cfsd); with DRAIN, push every
 * held block to its holders-to-be first (dhash_server_drain). */
static void ctl_leave_answer(struct conn *k, uint64_t reqid, uint32_t flags, const char *text)
{
	cfsd_serve_t *sv = k->sv;
	if (k->closed)
		return;
	cfs_msg_init(&sv->reply, CFS_MSG_CTL_LEAVE);
	sv->reply.is_reply = true;
	sv->reply.reqid = reqid;
	sv->reply.flags = flags;
	sv->reply.data = (struct cfs_bytes){ (const uint8_t *)text, strlen(text) };
	(void)cfs_stream_write_msg(k->s, &sv->reply);
}

static void ctl_drained(void *arg, const struct dhash_drain_result *d)
{
	struct ctl_req *q = arg;
	cfsd_serve_t *sv = q->k->sv;
	char text[300], cut[100] = "";

	if (d->status < 0) { /* the daemon is closing: it leaves anyway */
		if (!q->k->closed)
			ctl_reply_error_id(q->k, CFS_MSG_CTL_LEAVE, q->reqid, d->status);
		ctl_req_end(q);
		return;
	}
	if (d->cut_short)
		snprintf(cut, sizeof(cut), ", %u of %u comparisons cut short (a server stopped answering)",
		         d->cut_short, d->comparisons);
	snprintf(text, sizeof(text), "drained: %llu cop%s pushed to the %u server%s that hold them next, "
	         "%llu failed%s; leaving the ring\n", (unsigned long long)d->pushed,
	         d->pushed == 1 ? "y" : "ies", d->servers, d->servers == 1 ? "" : "s",
	         (unsigned long long)d->failed, cut);
	ctl_leave_answer(q->k, q->reqid, d->failed || d->cut_short ? CFS_CTL_LEAVE_F_INCOMPLETE : 0, text);
	ctl_req_end(q);
	sv->env.leave(sv->env.arg);
}

static void ctl_leave(struct conn *k, const struct cfs_msg *req)
{
	cfsd_serve_t *sv = k->sv;
	int r;

	if (!(req->flags & CFS_CTL_LEAVE_F_DRAIN)) {
		ctl_leave_answer(k, req->reqid, 0, "leaving the ring\n");
		sv->env.leave(sv->env.arg);
		return;
	}
	struct ctl_req *q = xcalloc(1, sizeof(*q));
	q->k = k;
	q->reqid = req->reqid;
	k->pending++;
	if ((r = dhash_server_drain(sv->env.dhash, ctl_drained, q)) < 0) {
		ctl_reply_error(k, req, r);
		ctl_req_end(q);
	}
}

/* CTL_DENY: the operator's denylist (cfsd/deny.h). The list is changed
 * (and written) first, then the server is told; a key is denied in the
 * server only once the list on disk says so, so that a restart denies
 * what the operator was told is denied. A volume is walked before its
 * keys are denied: the walk reads the volume's blocks from the ring,
 * this daemon's copies among them. */
struct deny_req {
	struct conn *k;
	uint64_t reqid;
	struct cfs_pubkey pk;
	char name[CFS_NAME_LEN + 1];
};

static void deny_answer(struct conn *k, uint64_t reqid, int status, uint32_t flags,
                        const struct cfs_sbuf *b)
{
	cfsd_serve_t *sv = k->sv;
	int r;

	if (k->closed)
		return;
	cfs_msg_init(&sv->reply, CFS_MSG_CTL_DENY);
	sv->reply.is_reply = true;
	sv->reply.reqid = reqid;
	sv->reply.status = status;
	if (status == 0) {
		sv->reply.flags = flags;
		sv->reply.data = (struct cfs_bytes){ (const uint8_t *)b->p, b->len };
	}
	if ((r = cfs_stream_write_msg(k->s, &sv->reply)) < 0)
		log_warn_errno(r, "control: cannot answer ctl_deny");
}

/* Add the keys to the list and deny them in the server: 0, -ENOSPC, -EIO. */
static int deny_keys(cfsd_serve_t *sv, const struct cfs_id *keys, uint32_t n, const struct cfs_pubkey *volume,
                     uint32_t *ret_new, uint32_t *ret_deleted)
{
	int r = cfsd_denylist_add(sv->env.deny, keys, n, volume, ret_new);

	if (r == -ENOSPC)
		log_warn("denylist: %u more keys do not fit (%u entries of at most %u); nothing denied",
		         n, cfsd_denylist_entries(sv->env.deny), cfsd_denylist_max(sv->env.deny));
	if (r < 0)
		return r;
	*ret_deleted = dhash_server_deny(sv->env.dhash, keys, n);
	return 0;
}

static void deny_walked(void *arg, int status, const struct sfsro_root *root,
                        const struct cfs_id *keys, uint32_t n)
{
	struct deny_req *q = arg;
	struct conn *k = q->k;
	cfsd_serve_t *sv = k->sv;
	struct cfs_sbuf b = { 0 };
	uint32_t fresh = 0, deleted = 0;
	int r;

	k->pending--;
	/* The daemon is stopping: its list and server may be gone already
	 * (the client's gets end after them). */
	if (status == -ECANCELED || sv->closing) {
		conn_put(k);
		free(q);
		return;
	}
	struct cfs_id rk;
	sfsro_root_key(&q->pk, &rk);
	if (n == 0) { /* no root: its key is denied all the same */
		keys = &rk;
		n = 1;
	}
	r = deny_keys(sv, keys, n, &q->pk, &fresh, &deleted);
	if (r < 0) {
		deny_answer(k, q->reqid, r, 0, NULL);
	} else if (status == 0) {
		cfs_sb_printf(&b, "%s denied: root %lu and %u blocks under it (%u newly denied); "
		              "%u copies deleted here\n", q->name, (unsigned long)root->seq, n - 1, fresh,
		              deleted);
		log_info("denylist: volume %s denied: root %lu, %u keys, %u copies deleted", q->name,
		         (unsigned long)root->seq, n, deleted);
		deny_answer(k, q->reqid, 0, 0, &b);
	} else if (!root) {
		cfs_sb_printf(&b, "%s: its root key is denied, but the walk could not run: the root "
		              "could not be read (%s)\n", q->name, dhash_strerror(status));
		log_warn("denylist: volume %s: root key denied; no root read (%s), no block walked",
		         q->name, dhash_strerror(status));
		deny_answer(k, q->reqid, 0, CFS_DENY_R_PARTIAL, &b);
	} else {
		cfs_sb_printf(&b, "%s: root %lu and %u blocks denied, but the walk stopped early (%s): "
		              "blocks below the one it could not read are not denied\n", q->name,
		              (unsigned long)root->seq, n - 1, dhash_strerror(status));
		log_warn("denylist: volume %s: %u keys denied; the walk stopped early (%s)", q->name, n,
		         dhash_strerror(status));
		deny_answer(k, q->reqid, 0, CFS_DENY_R_PARTIAL, &b);
	}
	free(b.p);
	conn_put(k);
	free(q);
}

static void ctl_deny(struct conn *k, const struct cfs_msg *req)
{
	cfsd_serve_t *sv = k->sv;
	struct cfs_sbuf b = { 0 };
	bool volume = req->flags & CFS_DENY_F_VOLUME;
	char name[CFS_NAME_LEN + 1], hex[65];
	struct cfs_pubkey pk;
	uint32_t fresh = 0, deleted = 0;
	int r = 0;

	memcpy(pk.b, req->key.b, sizeof(pk.b));
	if (volume)
		cfs_name_encode(name, pk.b);
	else
		cfs_id_hex(&req->key, hex);
	if (req->flags & CFS_DENY_F_LIST) {
		cfsd_denylist_report(sv->env.deny, &b);
	} else if (req->flags & CFS_DENY_F_REMOVE) {
		struct cfs_id *freed;
		uint32_t nfreed;
		r = cfsd_denylist_remove(sv->env.deny, volume ? NULL : &req->key, volume ? &pk : NULL,
		                         &freed, &nfreed);
		if (r == 0) {
			for (uint32_t i = 0; i < nfreed; i++)
				dhash_server_allow(sv->env.dhash, &freed[i]);
			free(freed);
			cfs_sb_printf(&b, "%s lifted: %u key%s no longer denied (their blocks come back "
			              "by replication)\n", volume ? name : hex, nfreed, nfreed == 1 ? "" : "s");
			log_info("denylist: %s lifted, %u keys", volume ? name : hex, nfreed);
		}
	} else if (volume) {
		struct deny_req *q = xcalloc(1, sizeof(*q));
		q->k = k;
		q->reqid = req->reqid;
		q->pk = pk;
		memcpy(q->name, name, sizeof(name));
		k->pending++;
		if ((r = cfsd_deny_walk(sv->env.client, &pk, deny_walked, q)) < 0)
			deny_walked(q, r, NULL, NULL, 0); /* cannot start: the root key alone, now */
		return;
	} else {
		r = deny_keys(k->sv, &req->key, 1, NULL, &fresh, &deleted);
		if (r == 0) {
			cfs_sb_printf(&b, "%s denied%s; %u cop%s deleted here\n", hex,
			              fresh ? "" : " (it was denied already)", deleted,
			              deleted == 1 ? "y" : "ies");
			log_info("denylist: key %s denied, %u copies deleted", hex, deleted);
		}
	}
	deny_answer(k, req->reqid, r, 0, &b);
	free(b.p);
}

static void ctl_frame(void *arg, cfs_stream_t *s, const uint8_t *f, size_t len)
{
	struct conn *k = arg;
	cfsd_serve_t *sv = k->sv;
	struct cfs_msg *req = xmalloc(sizeof(*req));
	const char *why = "";
	int r = cfs_msg_decode(f, len, req, &why);

	if (r < 0 || req->is_reply) {
		sv->malformed++;
		log_debug("control: dropping a malformed request (%s)", r < 0 ? why : "a reply");
		conn_close(k);
		free(req);
		return;
	}
	sv->requests++;
	if (req->type == CFS_MSG_CTL_STATUS) {
		struct cfs_sbuf b = { 0 };
		sv->env.status(sv->env.arg, &b, req->flags);
		cfs_msg_init(&sv->reply, CFS_MSG_CTL_STATUS);
		sv->reply.is_reply = true;
		sv->reply.reqid = req->reqid;
		sv->reply.data = (struct cfs_bytes){ (const uint8_t *)b.p, b.len };
		if ((r = cfs_stream_write_msg(s, &sv->reply)) < 0)
			log_warn_errno(r, "control: cannot send status");
		free(b.p);
	} else if (req->type == CFS_MSG_CTL_LOOKUP) {
		struct chord_lookup_opts o = { .mode = req->mode, .nsucc = req->nsucc,
		                               .flags = req->flags & CFS_LOOKUP_F_VERIFY };
		struct ctl_req *q = xcalloc(1, sizeof(*q));
		q->k = k;
		q->reqid = req->reqid;
		if (!chord_mode_ok(o.mode)) {
			ctl_reply_error(k, req, -EINVAL);
			free(q);
		} else if ((r = chord_lookup(sv->env.chord, &req->key, &o, ctl_lookup_done, q)) < 0) {
			ctl_reply_error(k, req, r);
			free(q);
		} else {
			k->pending++;
		}
	} else if (req->type == CFS_MSG_PING) {
		/* A client asks whether ctl_get_root, with its interim reply,
		 * is spoken here: yes (an older daemon answers -EOPNOTSUPP). */
		ctl_reply_error(k, req, 0);
	} else if (req->type == CFS_MSG_CTL_GET || req->type == CFS_MSG_CTL_PUT ||
	           req->type == CFS_MSG_CTL_LOCATE || req->type == CFS_MSG_CTL_GET_CODED ||
	           req->type == CFS_MSG_CTL_PUT_CODED || req->type == CFS_MSG_CTL_LOCATE_CODED ||
	           req->type == CFS_MSG_CTL_REPAIR_CODED || req->type == CFS_MSG_CTL_GET_ROOT) {
		ctl_block(k, req);
	} else if (req->type == CFS_MSG_CTL_HAVE || req->type == CFS_MSG_CTL_REFRESH ||
	           req->type == CFS_MSG_CTL_REFRESH_CODED) {
		ctl_keys(k, req);
	} else if (req->type == CFS_MSG_CTL_KEYS) {
		ctl_list(k, req);
	} else if ((req->type >= CFS_MSG_CTL_PIN && req->type <= CFS_MSG_CTL_PINS) ||
	           req->type == CFS_MSG_CTL_PIN_VERSIONS) {
		ctl_pin(k, req);
	} else if (req->type == CFS_MSG_CTL_LEAVE) {
		ctl_leave(k, req);
	} else if (req->type == CFS_MSG_CTL_DENY) {
		ctl_deny(k, req);
	} else {
		ctl_reply_error(k, req, -EOPNOTSUPP);
	}
	free(req);
}

static void ctl_end(void *arg, cfs_stream_t *s, int status)
{
	conn_close(arg);
}

void cfsd_serve_accept(void *arg, cfs_stream_t *s)
{
	cfsd_serve_t *sv = arg;
	struct conn *k = xcalloc(1, sizeof(*k));

	k->sv = sv;
	k->s = s;
	k->next = sv->conns;
	if (sv->conns)
		sv->conns->pprev = &k->next;
	k->pprev = &sv->conns;
	sv->conns = k;
	cfs_stream_start(s, ctl_frame, ctl_end, k);
}

void cfsd_serve_close_all(cfsd_serve_t *sv)
{
	sv->closing = true;
	while (sv->conns)
		conn_close(sv->conns);
}
