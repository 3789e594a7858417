/*
 * The DHash server: STORE, FETCH, HAVE and REFRESH on the ring's socket,
 * the store underneath, replication of what clients put, and the lease
 * collector.
 *
 * A STORE is checked (dhash_verify; a root's sequence against the stored
 * one), written synchronously, and only then acknowledged. A client's
 * STORE (DHASH_STORE_F_PRIMARY) is then pushed to the next k-1 distinct
 * servers on the successor list of the virtual server responsible for the
 * key (only when this server is the key's successor in its own view);
 * those copies are plain STOREs and are not pushed further. A client's
 * content-hash STORE is answered once those pushes were acknowledged or
 * timed out, so that the client's HAVEs at the replicas (its quorum,
 * put_sm.c) find the copies there.
 *
 * Its status (the counters and their table) is in server_stat.c.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dhash/internal.h"
#include "sfsro-format/sfsro.h"

#define EXPIRE_BATCH 256
#define COMMIT_MAX 512        /* stores in one group commit */
/* A push a client's answer waits for: well within the client's own STORE
 * timeout, so that a dead replica delays the answer, never loses it. */
#define PUSH_ANSWER_TIMEOUT_MS (DHASH_STORE_TIMEOUT_MS / 2)

uint64_t dhash__wall_now(void)
{
	return cfs_wall_s();
}

/* A lease time `from` named, on our clock: a peer of the newer protocol
 * says what its clock reads, and its times move by the difference, so
 * that a wrong clock at either end shortens or lengthens no lease. */
uint64_t dhash__lease_from(const dhash_server_t *s, const struct cfs_addr *from, uint64_t lease)
{
	int64_t off = from ? cfs_transport_peer_clock_offset_s(chord_transport(s->chord), from) : 0;

	if (!lease || !off)
		return lease;
	if (off > 0 && (uint64_t)off >= lease)
		return 1; /* long past */
	return (uint64_t)((int64_t)lease - off);
}

/* The lease this server grants for a request of `asked` (0: the default),
 * read on from's clock (NULL: ours): never beyond now + max_lease_s,
 * whoever asks (a publisher, a replica's push, a sync fetch), so nobody
 * buys space for longer than the operator allows. */
uint64_t dhash__grant_lease(const dhash_server_t *s, uint64_t asked, const struct cfs_addr *from)
{
	/* a lease of 2^64-1 was never collected; 0 is the default cap, not
	 * "no cap" */
	uint64_t max = s->cfg.max_lease_s ? s->cfg.max_lease_s : DHASH_MAX_LEASE_DEFAULT_S;
	uint64_t now = dhash__wall_now(), cap = now + max;

	asked = dhash__lease_from(s, from, asked);
	if (!asked)
		asked = now + s->cfg.lease_s;
	return asked < cap ? asked : cap;
}

/* Which refusal counter a status belongs to. */
static int refusal_slot(int status)
{
	switch (status) {
	case -EBADMSG: return 0;
	case -EKEYREJECTED: return 1;
	case -ESTALE: return 2;
	case -EINVAL: return 3;
	case -ENOSPC: return 4;
	case -EIO: return 5;
	case -EDQUOT: return 6;
	case DHASH_DENIED: return 8;
	default: return 7;
	}
}

/* ------------------------------------------------------------ replication */

static void answer_store(dhash_server_t *s, const struct cfs_reply_to *from, int r, uint64_t lease);

/* A client's STORE whose answer waits for its replicas' copies (the
 * client then confirms with HAVEs at the replicas, and a "no" must
 * not be a copy still in flight). */
struct push_wait {
	dhash_server_t *s;
	struct cfs_fanin pushes;  /* out, with the replicating call's hold */
	bool answer;              /* a client waits for from */
	bool cancelled;           /* the transport is closing: s may be gone */
	struct cfs_reply_to from;
	uint64_t lease;
};

static void push_wait_end(struct push_wait *w)
{
	if (!cfs_fanin_end(&w->pushes, 0))
		return;
	if (w->answer && !w->cancelled)
		answer_store(w->s, &w->from, 0, w->lease);
	free(w);
}

static void push_done(void *arg, int status, const struct cfs_msg *reply,
                      const struct cfs_rpc_result *res)
{
	struct push_wait *w = arg;

	if (status == -ECANCELED)
		w->cancelled = true;
	else if (status < 0)
		w->s->push_failed++;
	push_wait_end(w);
}

/* The local virtual server whose range (pred, self] holds key, else the
 * first local one at or after key; *ret_exact says which (true also when
 * some virtual server has no predecessor yet, so cannot tell). */
static uint32_t responsible_vnode(dhash_server_t *s, const struct cfs_id *key, bool *ret_exact)
{
	uint32_t n = chord_vnode_count(s->chord), best = 0;
	struct cfs_id bestd;

	*ret_exact = false;
	for (uint32_t i = 0; i < n; i++) {
		const struct cfs_node *self = chord_vnode_self(s->chord, i), *pred = chord_vnode_pred(s->chord, i);
		if (pred && cfs_id_in_oc(key, &pred->id, &self->id)) {
			*ret_exact = true;
			return i;
		}
		if (!pred)
			*ret_exact = true;
		struct cfs_id d;
		cfs_id_distance(&d, key, &self->id);
		if (i == 0 || cfs_id_cmp(&d, &bestd) < 0) {
			bestd = d;
			best = i;
		}
	}
	return best;
}

int dhash_replica_targets(chord_t *c, uint32_t vi, uint32_t k, const struct cfs_node **ret)
{
	const struct cfs_node *succs[CHORD_SUCC_MAX];
	const struct cfs_node *self = chord_vnode_self(c, vi);
	uint32_t ns = chord_vnode_succs(c, vi, succs), n = 0;

	for (uint32_t i = 0; i < ns && n + 1 < k; i++) {
		bool dup = cfs_addr_eq(&succs[i]->addr, &self->addr);
		for (uint32_t j = 0; j < n && !dup; j++)
			dup = cfs_addr_eq(&ret[j]->addr, &succs[i]->addr);
		if (!dup)
			ret[n++] = succs[i];
	}
	return (int)n;
}

/* Push plain copies of a client's STORE to the next k-1 servers (CFS
 * 5.1), and answer from (when not NULL) once each push was acknowledged
 * or timed out. Only the key's successor in this server's own view pushes:
 * a server a client STOREs to further down the list (the successor was
 * silent, or the client places copies itself after a "no") would push
 * beyond the key's k successors, uncharged copies nobody asked for. */
static void replicate_then_answer(dhash_server_t *s, const struct cfs_reply_to *from,
                                  const struct cfs_id *key, const struct dhash_rec *rec)
{
	const struct cfs_node *to[CHORD_SUCC_MAX];
	struct push_wait *w = xcalloc(1, sizeof(*w));
	bool exact;
	uint32_t vi = responsible_vnode(s, key, &exact);
	int n = exact ? dhash_replica_targets(s->chord, vi, s->cfg.replicas, to) : 0;

	*w = (struct push_wait){ .s = s, .answer = from != NULL, .lease = rec->lease_until };
	cfs_fanin_add(&w->pushes);
	if (from)
		w->from = *from;
	for (int i = 0; i < n; i++) {
		cfs_msg_init(&s->push, CFS_MSG_STORE);
		s->push.kind = rec->kind;
		s->push.key = *key;
		s->push.lease_until = rec->lease_until;
		s->push.data = (struct cfs_bytes){ rec->data, rec->len };
		s->push.has_to = true;
		s->push.to_id = to[i]->id;
		dhash__msg_from(s, vi, &s->push); /* the receiver admits a replica's copy by it */
		cfs_fanin_add(&w->pushes);
		if (chord_call(s->chord, to[i], &s->push, from ? PUSH_ANSWER_TIMEOUT_MS : DHASH_STORE_TIMEOUT_MS,
		               push_done, w) == 0) {
			s->pushed++;
		} else {
			s->push_failed++;
			push_wait_end(w);
		}
	}
	push_wait_end(w); /* no push out: answered now */
}

static void replicate(dhash_server_t *s, const struct cfs_id *key, const struct dhash_rec *rec)
{
	replicate_then_answer(s, NULL, key, rec);
}

/* ------------------------------------------------------------ requests */

static void answer_store(dhash_server_t *s, const struct cfs_reply_to *from, int r, uint64_t lease)
{
	if (r < 0) {
		s->refused[refusal_slot(r)]++;
		if (r == -EIO || r == -ENOSPC)
			s->store_errors++;
		(void)cfs_transport_reply_error(chord_transport(s->chord), from, r);
		return;
	}
	s->stores++;
	cfs_msg_init(&s->reply, CFS_MSG_STORE);
	s->reply.lease_until = lease; /* what was granted: the putter's root may not outlive it */
	(void)cfs_transport_reply(chord_transport(s->chord), from, &s->reply);
}

/* The group commit: one synchronous write for every STORE that arrived
 * since the last poll, then the answers; a client's STORE is answered
 * once its replicas' copies are acknowledged (replicate_then_answer). */
static void commit(dhash_server_t *s)
{
	size_t n = s->nq;
	struct cfs_id *keys = xmalloc((n ? n : 1) * sizeof(*keys));
	struct dhash_rec *recs = xmalloc((n ? n : 1) * sizeof(*recs));
	int *st = xmalloc((n ? n : 1) * sizeof(*st));

	size_t *at = xmalloc((n ? n : 1) * sizeof(*at)), m = 0;
	int *wst = xmalloc((n ? n : 1) * sizeof(*wst));
	uint64_t batch = 0;

	/* Capacity and quotas first: what they refuse is not written. */
	for (size_t i = 0; i < n; i++) {
		const struct dhash__pending *p = &s->q[i];
		uint64_t mine = 0;
		for (size_t j = 0; j < m; j++)
			if (!memcmp(recs[j].owner, p->rec.owner, 16))
				mine += recs[j].len;
		/* denied while it waited for this commit */
		st[i] = dhash_server_is_denied(s, &p->key) ? DHASH_DENIED
		        : dhash__quota_admit(s, &p->key, &p->rec, batch, mine);
		if (st[i] == 0) {
			keys[m] = p->key;
			recs[m] = p->rec;
			at[m++] = i;
			batch += p->rec.len;
		}
	}
	(void)dhash_store_put_many(s->store, keys, recs, m, wst);
	for (size_t j = 0; j < m; j++)
		st[at[j]] = wst[j];
	s->commits++;
	s->nq = 0;
	for (size_t i = 0; i < n; i++) {
		struct dhash__pending *p = &s->q[i];
		/* plain STOREs: nobody's charge; a fragment is this server's alone */
		if (st[i] == 0 && (p->flags & DHASH_STORE_F_PRIMARY) && p->rec.kind != DHASH_KIND_FRAG)
			replicate_then_answer(s, &p->from, &p->key, &p->rec);
		else
			answer_store(s, &p->from, st[i], p->rec.lease_until);
		free(p->rec.data);
	}
	free(keys);
	free(recs);
	free(st);
	free(wst);
	free(at);
}

static void on_commit(uv_check_t *h)
{
	dhash_server_t *s = h->data;

	uv_check_stop(&s->commit);
	if (s->nq)
		commit(s);
}

void dhash__msg_from(const dhash_server_t *s, uint32_t vi, struct cfs_msg *m)
{
	const struct cfs_node *self = chord_vnode_self(s->chord, vi);

	m->has_from = true;
	m->from_id = self->id;
	m->from_vindex = self->vindex;
}

int dhash__admit_replica(dhash_server_t *s, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct cfs_node n = { .id = req->from_id, .addr = from->addr, .vindex = req->from_vindex };

	/* Sit and Morris 2002 §4.2; CFS 4.4: a replica's copy costs nobody's
	 * quota, so only a member placing its own key's copies may send one */
	if (!req->has_from || !chord_member_check(s->chord, &n)) {
		s->admit_stranger++;
		return -EPERM;
	}
	if (!chord_plausible_holder(s->chord, &req->from_id, &req->key, s->cfg.replicas)) {
		s->admit_far++;
		return -EPERM;
	}
	s->admit_ok++;
	return 0;
}

/* A copy for the cache (DHASH_STORE_F_CACHE): a content-hash block that
 * verifies, kept unless it is stored as a replica already. Roots are never
 * cached: a cached root could hide a newer one. */
static void handle_cache_store(dhash_server_t *s, const struct cfs_msg *req,
                               const struct cfs_reply_to *from)
{
	uint64_t seq;
	int r;

	if (!s->cache)
		r = -EOPNOTSUPP;
	else if (req->kind != DHASH_KIND_CHASH)
		r = -EINVAL;
	else
		r = dhash_verify(req->kind, &req->key, req->data.p, req->data.len, &seq);
	if (r == 0 && !dhash_store_has(s->store, &req->key)) {
		r = dhash__quota_cache_room(s, req->data.len) ? 0 : -ENOSPC;
		if (r == 0)
			r = dhash_cache_put(s->cache, &req->key, (uint8_t)req->kind, req->data.p, req->data.len);
		s->cache_stores += r == 0;
	}
	if (r < 0) {
		s->refused[refusal_slot(r)]++;
		(void)cfs_transport_reply_error(chord_transport(s->chord), from, r);
		return;
	}
	cfs_msg_init(&s->reply, CFS_MSG_STORE);
	(void)cfs_transport_reply(chord_transport(s->chord), from, &s->reply);
}

/* Does this process hold key's block, stored or cached? Asked at every
 * lookup hop (CFS_LOOKUP_F_CHECK_BLOCK): a hop that has it answers. */
static bool server_has_block(void *arg, const struct cfs_id *key)
{
	dhash_server_t *s = arg;
	struct dhash_rec rec;

	if (dhash_server_is_denied(s, key))
		return false;
	/* Not for roots: a hop holding an older version (a former replica)
	 * would end the lookup, and a root get must reach the replicas to
	 * find the newest. */
	if (dhash_store_get(s->store, key, &rec) == 0) {
		free(rec.data);
		/* Nor for fragments: a fragment is not the block. */
		return rec.kind != DHASH_KIND_ROOT && rec.kind != DHASH_KIND_FRAG;
	}
	if (s->cache && dhash_cache_has(s->cache, key)) {
		s->path_hits++;
		return true;
	}
	return false;
}

/* The block from the cache, when the store has no replica of it. */
static int fetch_cached(dhash_server_t *s, const struct cfs_id *key, struct dhash_rec *rec)
{
	uint8_t kind;

	if (!s->cache || dhash_cache_get(s->cache, key, &kind, &rec->data, &rec->len) < 0)
		return -ENOENT;
	rec->kind = kind;
	rec->lease_until = 0; /* a cached copy carries no lease: nobody stores it as a replica */
	s->cache_hits++;
	return 0;
}

/* A fragment of key held here already, stored or waiting for the commit:
 * each holder keeps the first it was sent (a second, perhaps another
 * index, would make two holders hold the same one). *ret_lease gets its
 * lease. */
static bool frag_held(dhash_server_t *s, const struct cfs_id *key, uint64_t *ret_lease)
{
	struct dhash_rec old;

	for (size_t i = 0; i < s->nq; i++)
		if (cfs_id_eq(&s->q[i].key, key)) {
			*ret_lease = s->q[i].rec.lease_until;
			return true;
		}
	if (dhash_store_get(s->store, key, &old) < 0)
		return false;
	free(old.data);
	*ret_lease = old.lease_until;
	return true;
}

/* Check a STORE; a root is written at once (its sequence check reads the
 * store), a content-hash block joins the group commit. */
void dhash__handle_store(dhash_server_t *s, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct dhash_rec rec = { 0 }, old;
	uint64_t seq;
	int r;

	if (req->data.len > CFS_BLOCK_MAX) {
		answer_store(s, from, -EMSGSIZE, 0);
		return;
	}
	/* First: whoever sends it, in whatever role, a denied key is not
	 * taken, and the sender is told so (no challenge, no park first). */
	if (dhash_server_is_denied(s, &req->key) ||
	    dhash__deny_covers(s, req->kind, req->data.p, req->data.len)) {
		answer_store(s, from, DHASH_DENIED, 0);
		return;
	}
	if (req->flags & DHASH_STORE_F_CACHE) {
		handle_cache_store(s, req, from);
		return;
	}
	/* A client's put is charged to its address, once it proves it. */
	if ((req->flags & DHASH_STORE_F_PRIMARY) && s->cfg.quota_bytes) {
		if (!dhash__quota_confirmed(s, &from->addr, req->nonce)) {
			dhash__quota_challenge(s, from, CFS_MSG_STORE);
			return;
		}
		dhash__quota_owner(&from->addr, rec.owner);
	}
	if ((r = dhash_verify(req->kind, &req->key, req->data.p, req->data.len, &seq)) < 0) {
		answer_store(s, from, r, 0);
		return;
	}
	/* A replica's copy only from a member near the key (dhash__admit_replica);
	 * after the check of the bytes, whose error is the more specific. */
	if (!(req->flags & DHASH_STORE_F_PRIMARY) && (r = dhash__admit_replica(s, req, from)) < 0) {
		if (r == -EPERM && dhash__park(s, req, from)) {
			s->admit_stranger--; /* not yet: it waits for its check (park.c) */
			return;
		}
		answer_store(s, from, r, 0);
		return;
	}
	rec.kind = (uint8_t)req->kind;
	rec.seq = seq;
	rec.lease_until = dhash__grant_lease(s, req->lease_until, &from->addr);
	rec.len = req->data.len;
	if (req->kind == DHASH_KIND_ROOT) {
		r = dhash_store_get(s->store, &req->key, &old);
		if (r == 0) {
			bool same = old.len == req->data.len && !memcmp(old.data, req->data.p, old.len);
			bool stale = old.seq > seq || (old.seq == seq && !same);
			free(old.data);
			r = stale ? -ESTALE : 0;
		} else if (r == -ENOENT) {
			r = 0;
		}
		if (r == 0)
			r = dhash__quota_admit(s, &req->key, &rec, 0, 0);
		if (r == 0) {
			rec.data = (uint8_t *)req->data.p;
			r = dhash_store_put(s->store, &req->key, &rec);
		}
		answer_store(s, from, r, rec.lease_until);
		if (r == 0 && (req->flags & DHASH_STORE_F_PRIMARY))
			replicate(s, &req->key, &rec);
		return;
	}
	if (req->kind == DHASH_KIND_FRAG && frag_held(s, &req->key, &rec.lease_until)) {
		s->frag_kept++;
		answer_store(s, from, 0, rec.lease_until);
		return;
	}
	rec.data = xmalloc(rec.len ? rec.len : 1);
	memcpy(rec.data, req->data.p, rec.len);
	s->q = xrealloc(s->q, (s->nq + 1) * sizeof(*s->q));
	s->q[s->nq++] = (struct dhash__pending){ .from = *from, .key = req->key, .rec = rec, .flags = req->flags };
	if (s->nq >= COMMIT_MAX)
		commit(s);
	else
		uv_check_start(&s->commit, on_commit);
}

static void handle_fetch(dhash_server_t *s, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct dhash_rec rec;
	int r;

	s->fetches++;
	/* A denied key is served as one this server holds no copy of. */
	if (dhash_server_is_denied(s, &req->key)) {
		s->fetch_denied++;
		s->fetch_misses++;
		(void)cfs_transport_reply_error(chord_transport(s->chord), from, -ENOENT);
		return;
	}
	r = dhash__scrub_read(s, &req->key, &rec, SCRUB_BY_FETCH); /* a bad copy is dropped: -ENOENT */
	if (r == -ENOENT)
		r = fetch_cached(s, &req->key, &rec);
	if (r == 0 && dhash__deny_covers(s, rec.kind, rec.data, rec.len)) {
		free(rec.data);
		s->fetch_denied++;
		r = -ENOENT;
	}
	if (r < 0) {
		if (r == -ENOENT)
			s->fetch_misses++;
		(void)cfs_transport_reply_error(chord_transport(s->chord), from, r);
		return;
	}
	if (s->cfg.corrupt_fetches && rec.len > 0)
		rec.data[rec.len / 2] ^= 0x20;
	cfs_msg_init(&s->reply, CFS_MSG_FETCH);
	s->reply.kind = rec.kind;
	s->reply.lease_until = rec.lease_until;
	s->reply.data = (struct cfs_bytes){ rec.data, rec.len };
	(void)cfs_transport_reply(chord_transport(s->chord), from, &s->reply);
	free(rec.data);
}

/* HAVE and REFRESH: one bit per key (bit i of byte i/8, LSB first).
 *
 * A REFRESH is a put of time (CFS 5.4, 5.5): with quotas on it needs the
 * nonce that proves the sender's address, like a client's STORE, and each
 * block it extends is charged to the refresher from then on (whoever put
 * it is refunded), as far as the refresher's quota goes; a key beyond it
 * is not extended and its bit stays clear. The lease is capped like any
 * other (dhash__grant_lease). */
static void handle_keys(dhash_server_t *s, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	uint8_t bits[CFS_MSG_MAX_KEYS / 8] = { 0 }, owner[16];
	uint32_t n = req->n_keys, over = 0;
	bool refresh = req->type == CFS_MSG_REFRESH, charged = refresh && s->cfg.quota_bytes;
	uint64_t lease = refresh ? dhash__grant_lease(s, req->lease_until, &from->addr) : 0;
	int err = 0;

	bool have[CFS_MSG_MAX_KEYS];

	if (charged) {
		if (!dhash__quota_confirmed(s, &from->addr, req->nonce)) {
			dhash__quota_challenge(s, from, CFS_MSG_REFRESH);
			return;
		}
		dhash__quota_owner(&from->addr, owner);
	}
	/* a REFRESH's extensions share one synchronous write: one sync per
	 * message, not per key (a publisher renews every block it references) */
	if (refresh)
		err = dhash_store_extend_charged(s->store, req->keys, n, lease, charged ? owner : NULL,
		                                 s->cfg.quota_bytes, have, &over);
	else
		for (uint32_t i = 0; i < n; i++)
			have[i] = dhash_store_has(s->store, &req->keys[i]);
	for (uint32_t i = 0; i < n; i++)
		if (have[i])
			bits[i / 8] |= (uint8_t)(1u << (i % 8));
	if (refresh)
		s->refreshes += n;
	else
		s->haves += n;
	s->refresh_over_quota += over;
	if (err < 0) {
		(void)cfs_transport_reply_error(chord_transport(s->chord), from, err);
		return;
	}
	cfs_msg_init(&s->reply, (enum cfs_msg_type)req->type);
	s->reply.data = (struct cfs_bytes){ bits, (n + 7) / 8 };
	s->reply.lease_until = lease; /* REFRESH: every key found holds at least this lease */
	(void)cfs_transport_reply(chord_transport(s->chord), from, &s->reply);
}

bool dhash_handle_request(dhash_server_t *s, const struct cfs_msg *req,
                          const struct cfs_reply_to *from)
{
	switch (req->type) {
	case CFS_MSG_STORE:
		dhash__handle_store(s, req, from);
		return true;
	case CFS_MSG_FETCH:
		handle_fetch(s, req, from);
		return true;
	case CFS_MSG_HAVE:
	case CFS_MSG_REFRESH:
		handle_keys(s, req, from);
		return true;
	case CFS_MSG_SYNC_DIGEST:
		dhash__sync_handle_digest(s, req, from);
		return true;
	case CFS_MSG_SYNC_KEYS:
		dhash__sync_handle_keys(s, req, from);
		return true;
	default:
		return false;
	}
}

/* ------------------------------------------------------------ leases */

/* Does our wall clock agree with the ring's (the median of the peers
 * heard lately, within max_skew_s)? A node whose clock runs ahead would
 * otherwise expire copies its peers hold leased, one behind keep what
 * they dropped: while it disagrees, nothing expires here. Said in the log
 * when it starts and when it ends. */
bool dhash__clock_ok(dhash_server_t *s)
{
	uint32_t bound = s->cfg.max_skew_s ? s->cfg.max_skew_s : DHASH_MAX_SKEW_DEFAULT_S;
	int64_t skew;
	uint32_t peers;
	if (cfs_transport_clock_skew(chord_transport(s->chord), &skew, &peers) < 0)
		return !s->clock_off; /* nobody heard lately: what we knew still holds */
	s->skew_ms = skew;
	s->skew_peers = peers;
	bool off = skew > (int64_t)bound * 1000 || skew < -(int64_t)bound * 1000;

	if (off && !s->clock_off)
		log_warn("this machine's clock is %+.0f s off the median of %u peers' (more than %u s): "
		         "lease expiry is suspended until it agrees; set the clock right (NTP)",
		         (double)s->skew_ms / 1000, s->skew_peers, bound);
	else if (!off && s->clock_off)
		log_info("this machine's clock agrees with its peers' again (%+.0f s): lease expiry resumes",
		         (double)s->skew_ms / 1000);
	s->clock_off = off;
	return !off;
}

void dhash_server_expire(dhash_server_t *s)
{
	uint32_t n;

	if (!dhash__clock_ok(s)) {
		s->expiry_skipped++;
		return;
	}
	do {
		if (dhash_store_expire(s->store, dhash__wall_now(), EXPIRE_BATCH, &n) < 0)
			return;
		s->expired += n;
	} while (n == EXPIRE_BATCH);
}

static void on_expire(uv_timer_t *h)
{
	dhash_server_expire(h->data);
}

/* ------------------------------------------------------------ compaction */

#define COMPACT_TICK_MS 100
#define COMPACT_IDLE_MS 1000

/* A slice of compaction each tick, a tenth of the second's budget, so that
 * the rewrite of a pack never holds the loop for long; when there is
 * nothing to reclaim, look again a second later. */
static void on_compact(uv_timer_t *h)
{
	dhash_server_t *s = h->data;
	uint64_t now = cfs_now_ms(), budget = s->cfg.compact_bytes_per_s / (1000 / COMPACT_TICK_MS);

	if (now < s->compact_idle_until)
		return;
	if (!dhash_store_compact(s->store, budget < 4096 ? 4096 : budget))
		s->compact_idle_until = now + COMPACT_IDLE_MS;
}

/* ------------------------------------------------------------ lifetime */

int dhash_server_new(uv_loop_t *loop, chord_t *c, const char *dir,
                     const struct dhash_config *cfg, dhash_server_t **ret)
{
	dhash_server_t *s = xcalloc(1, sizeof(*s));
	int r;

	s->loop = loop;
	s->chord = c;
	s->cfg = *cfg;
	if ((r = dhash_store_open(dir, cfg->compact_live_pct, &s->store)) < 0) {
		free(s);
		return r;
	}
	if (cfg->cache_dir && cfg->cache_bytes &&
	    (r = dhash_cache_open(cfg->cache_dir, cfg->cache_bytes, &s->cache)) < 0) {
		log_error_errno(r, "cannot open the block cache %s", cfg->cache_dir);
		dhash_store_close(s->store);
		free(s);
		return r;
	}
	chord_set_has_block(c, server_has_block, s);
	dhash__quota_init(s);
	uv_timer_init(loop, &s->expire_timer);
	s->expire_timer.data = s;
	uv_check_init(loop, &s->commit);
	s->commit.data = s;
	dhash__park_init(s);
	uv_timer_start(&s->expire_timer, on_expire, cfg->expire_ms, cfg->expire_ms);
	uv_timer_init(loop, &s->compact_timer);
	s->compact_timer.data = s;
	if (cfg->compact_bytes_per_s)
		uv_timer_start(&s->compact_timer, on_compact, COMPACT_TICK_MS, COMPACT_TICK_MS);
	dhash_server_expire(s);
	dhash__sync_start(s);
	dhash__scrub_start(s);
	*ret = s;
	return 0;
}

static void handle_closed(uv_handle_t *h)
{
	dhash_server_t *s = h->data;

	/* libuv runs close callbacks in no promised order: the last frees. */
	if (--s->closing_handles > 0)
		return;
	dhash_store_close(s->store);
	dhash_cache_close(s->cache);
	dhash__deny_free(s);
	dhash__sync_free(s);
	free(s->q);
	free(s);
}

void dhash_server_free(dhash_server_t *s)
{
	if (!s)
		return;
	if (s->nq)
		commit(s); /* what was acknowledged nowhere yet is still written */
	chord_set_has_block(s->chord, NULL, NULL);
	dhash__sync_stop(s);
	dhash__scrub_stop(s);
	s->closing_handles = 6;
	dhash__park_close(s, handle_closed);
	uv_close((uv_handle_t *)&s->expire_timer, handle_closed);
	uv_close((uv_handle_t *)&s->compact_timer, handle_closed);
	uv_close((uv_handle_t *)&s->sync_timer, handle_closed);
	uv_close((uv_handle_t *)&s->scrub.timer, handle_closed);
	uv_close((uv_handle_t *)&s->commit, handle_closed);
}

uint32_t dhash_server_keys(dhash_server_t *s, const struct cfs_id *after, struct cfs_id *keys,
                           uint32_t max, bool *ret_more)
{
	return dhash_store_list(s->store, after, keys, max, ret_more);
}

uint32_t dhash_server_frags(dhash_server_t *s, const struct cfs_id *after, uint32_t scan,
                            struct dhash_frag_ref *out, uint32_t max, struct cfs_id *ret_last,
                            bool *ret_more)
{
	struct cfs_id keys[256], at = after ? *after : (struct cfs_id){ { 0 } };
	struct bstore_meta metas[256];
	uint32_t got = 0, seen = 0;
	bool more = true, first = !after;

	while (more && got < max && seen < scan) {
		uint32_t page = scan - seen < 256 ? scan - seen : 256;
		uint32_t k = dhash_store_list_meta(s->store, first ? NULL : &at, keys, metas, page, &more);
		first = false;
		for (uint32_t i = 0; i < k; i++) {
			struct dhash_rec rec;
			struct sfsro_frag f;
			seen++;
			at = keys[i];
			if (metas[i].kind != DHASH_KIND_FRAG || dhash_store_get(s->store, &keys[i], &rec) < 0)
				continue;
			if (sfsro_frag_parse(rec.data, rec.len, &f) == 0)
				out[got++] = (struct dhash_frag_ref){ keys[i], (uint8_t)f.m, (uint8_t)f.n,
				                                      (uint8_t)f.index, rec.lease_until };
			free(rec.data);
			if (got == max) {
				more = more || i + 1 < k;
				break;
			}
		}
		if (k == 0)
			more = false;
	}
	*ret_last = at;
	*ret_more = more;
	return got;
}
