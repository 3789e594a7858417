/*
 * Replica maintenance (CFS 5.2, DHash++ 4.4): the successor of a key keeps
 * k copies of it. Every sync period each local virtual server compares its
 * range (pred, self] with each of its replica servers (the first k-1
 * distinct servers of its successor list), Merkle-style:
 *
 *   - SYNC_DIGEST splits a range into 64 equal parts and answers one digest
 *     per part (BLAKE2b of the part's key count and sorted keys, each root's
 *     key followed by its sequence number; all zero for an empty part).
 *     Parts whose digests differ are compared again: split once more while
 *     this side holds more than 64 keys in them (at most 3 levels), else
 *     listed with SYNC_KEYS (1,024 keys a page). A range small enough to
 *     list at once is listed without a digest, unless it holds a root.
 *   - A key we hold and the peer lacks is pushed (a plain STORE with its
 *     lease); a key the peer holds and we lack is fetched, checked like any
 *     STORE and stored with the lease the peer reported.
 *   - A root both hold, in a part whose digests differ, is fetched from the
 *     peer: a higher sequence than ours replaces ours, a lower one is sent
 *     our root (a server that was down during a republish holds the older
 *     root under the same key; key sets alone would never show it).
 *   - What we push is read through dhash__scrub_read, which verifies it: a copy
 *     that rotted here is dropped instead of pushed, and fetched back from a
 *     peer in a later round.
 *   - A key the operator denied here (deny.c) is neither fetched nor pushed:
 *     the part holding it keeps differing from the peer's, which costs a
 *     listing of that part each round, never a transfer. A peer that
 *     refuses our push as denied there is not sent that key again for
 *     REFUSED_ROUNDS rounds, then twice as many after each refusal, up to a
 *     day: a denied volume does not travel to its denier every round, and
 *     a denial the peer's operator lifted is noticed within that time.
 *
 * So a range that agrees costs one 2 KiB digest exchange per replica, and
 * the rest of the traffic follows what differs: a server back after a short
 * absence receives what was put meanwhile, not its whole store. A new node
 * pulls the keys it became responsible for from its successors; when a
 * replica server dies, the responsible server pushes to the next one on
 * its list; when the responsible server dies, its successor takes the range
 * over (its predecessor changes) and does the same. Copies beyond k are left
 * to their leases. Nothing here is charged to a publisher's quota; our
 * pushes name the virtual server whose range they come from, and the peer
 * takes them only from a member near the key (server.c, admission).
 *
 * A round runs at most 4 sessions at once, each with at most 8 transfers in
 * flight, and a session ends at its first timeout (the peer is likely
 * gone): the transport's congestion window is shared with ring
 * maintenance, which a flood of calls to a dead server would starve.
 *
 * One session is sync_sm.c's machine, which does no I/O: it decides what
 * to compare, list, push and fetch. This file keeps the rounds, the
 * sessions at once and each session's window of transfers, reads the
 * store for the machine, makes the calls and stores what comes back.
 * A drain before leaving (dhash_server_drain) plans its sessions in
 * drain.c and runs them here.
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/sync_sm.h"

#define TRANSFERS 8      /* pushes and fetches in flight per session */
#define SESSIONS 4       /* sessions at once per server */
#define SYNC_TIMEOUT_MS 3000
#define SCAN_CHUNK 1024
#define REFUSED_ROUNDS 30        /* a peer's denial is first believed this many rounds (sync_sm.c) */

#define PARTS DHASH_SYNC_PARTS
#define PAGE_KEYS DHASH_SYNC_PAGE_KEYS
#define LEAF_KEYS DHASH_SYNC_LEAF_KEYS

/* Keys with their kinds and sequence numbers (scan_all). */
struct keyset {
	struct cfs_id *keys;
	uint8_t *kinds;
	uint64_t *seqs;
	size_t n;
};

/* One session: sync_sm.c's machine, and what carrying it out needs. */
struct sync_session {
	dhash_server_t *s;        /* NULL once the server is gone */
	struct sync_session *next;
	struct cfs_node peer;
	struct dhash__sync_sm sm;
	uint32_t calls;           /* RPCs in flight (at most one compare, TRANSFERS transfers) */
	uint32_t xfers;           /* transfers in flight: the window */
	bool finished;            /* the machine said FINISH */
	bool drain;               /* a drain's: push what the peer lacks, fetch nothing */
	struct cfs_id lo0, hi0;   /* the session's range, for its log line */
	struct cfs_id name;       /* the virtual server its requests name */
	struct cfs_msg msg;
};

struct xcall {
	struct sync_session *se;
	struct cfs_id key;
	enum dhash__sync_act_type op;
};

static void run(struct sync_session *se);

/* ------------------------------------------------------------ ranges */

/* Every stored key in (lo, hi], in circle order from lo, with kinds and
 * sequence numbers (malloc'd; keyset_free). */
static void scan_all(dhash_server_t *s, const struct dhash__sync_range *r, struct keyset *ks)
{
	struct cfs_id from = r->lo;
	size_t cap = 0;

	memset(ks, 0, sizeof(*ks));
	for (;;) {
		uint32_t got = 0;
		if (ks->n + SCAN_CHUNK > cap) {
			cap = cap ? 2 * cap : SCAN_CHUNK;
			ks->keys = xrealloc(ks->keys, cap * sizeof(*ks->keys));
			ks->kinds = xrealloc(ks->kinds, cap * sizeof(*ks->kinds));
			ks->seqs = xrealloc(ks->seqs, cap * sizeof(*ks->seqs));
		}
		if (dhash_store_scan_info(s->store, &from, &r->hi, ks->keys + ks->n, ks->kinds + ks->n,
		                          ks->seqs + ks->n, SCAN_CHUNK, &got) < 0)
			break;
		ks->n += got;
		if (got < SCAN_CHUNK)
			break;
		from = ks->keys[ks->n - 1];
		if (cfs_id_eq(&from, &r->hi))
			break;
	}
}

/* Leave out fragments (kind FRAG): every holder of a coded key keeps a
 * different one, so they are in no digest or listing a peer compares. */
static void keyset_drop_frags(struct keyset *ks)
{
	size_t m = 0;

	for (size_t i = 0; i < ks->n; i++) {
		if (ks->kinds[i] == DHASH_KIND_FRAG)
			continue;
		ks->keys[m] = ks->keys[i];
		ks->kinds[m] = ks->kinds[i];
		ks->seqs[m++] = ks->seqs[i];
	}
	ks->n = m;
}

static void keyset_free(struct keyset *ks)
{
	free(ks->keys);
	free(ks->kinds);
	free(ks->seqs);
}

/* One digest per part of r (zero for an empty part). A root's sequence
 * number follows its key, so that replicas holding different versions of
 * a root differ; a part without roots hashes as it always did. */
static void digests(dhash_server_t *s, const struct dhash__sync_range *r, struct cfs_id out[PARTS])
{
	size_t j = 0;
	struct keyset ks;

	scan_all(s, r, &ks);
	keyset_drop_frags(&ks);
	for (uint32_t i = 0; i < PARTS; i++) {
		struct cfs_id end;
		dhash__sync_part_end(r, i, &end);
		size_t start = j;
		/* keys run in circle order from lo: part i takes those up to its end */
		bool empty = i + 1 < PARTS && cfs_id_eq(&end, &r->lo);
		while (j < ks.n && !empty && (i + 1 == PARTS || cfs_id_in_oc(&ks.keys[j], &r->lo, &end)))
			j++;
		memset(&out[i], 0, sizeof(out[i]));
		if (j > start) {
			struct cfs_hasher h;
			uint8_t cnt[4];
			cfs_put_be32(cnt, (uint32_t)(j - start));
			cfs_hasher_init(&h);
			cfs_hasher_update(&h, cnt, sizeof(cnt));
			for (size_t k = start; k < j; k++) {
				cfs_hasher_update(&h, &ks.keys[k], sizeof(ks.keys[k]));
				if (ks.kinds[k] == DHASH_KIND_ROOT) {
					uint8_t seq[8];
					cfs_put_be64(seq, ks.seqs[k]);
					cfs_hasher_update(&h, seq, sizeof(seq));
				}
			}
			cfs_hasher_final(&h, &out[i]);
		}
	}
	keyset_free(&ks);
}

/* ------------------------------------------------------------ serving */

static bool range_ok(const struct cfs_msg *req)
{
	return !cfs_id_eq(&req->key, &req->hi);
}

void dhash__sync_handle_digest(dhash_server_t *s, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct cfs_id out[PARTS];

	if (req->nsucc != PARTS || !range_ok(req)) {
		(void)cfs_transport_reply_error(chord_transport(s->chord), from, -EINVAL);
		return;
	}
	if (req->has_from) /* its pushes follow: authenticate it now, not then */
		(void)chord_member_check(s->chord, &(struct cfs_node){ .id = req->from_id, .addr = from->addr,
		                                                       .vindex = req->from_vindex });
	digests(s, &(struct dhash__sync_range){ req->key, req->hi, 0, false }, out);
	s->sync.served_digests++;
	cfs_msg_init(&s->reply, CFS_MSG_SYNC_DIGEST);
	s->reply.keys = out;
	s->reply.n_keys = PARTS;
	(void)cfs_transport_reply(chord_transport(s->chord), from, &s->reply);
}

void dhash__sync_handle_keys(dhash_server_t *s, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct cfs_id keys[PAGE_KEYS + 1];
	uint32_t n = 0, max = req->count;

	if (!range_ok(req) || max == 0) {
		(void)cfs_transport_reply_error(chord_transport(s->chord), from, -EINVAL);
		return;
	}
	if (max > PAGE_KEYS)
		max = PAGE_KEYS;
	/* One more than asked tells whether the page is the last; fragments
	 * are left out (keyset_drop_frags), a page at a time. */
	struct cfs_id probe[PAGE_KEYS + 1], after = req->key;
	uint8_t kinds[PAGE_KEYS + 1];
	for (;;) {
		uint32_t got = 0;
		if (dhash_store_scan_info(s->store, &after, &req->hi, probe, kinds, NULL, PAGE_KEYS + 1,
		                          &got) < 0) {
			(void)cfs_transport_reply_error(chord_transport(s->chord), from, -EIO);
			return;
		}
		for (uint32_t i = 0; i < got && n <= max; i++)
			if (kinds[i] != DHASH_KIND_FRAG)
				keys[n++] = probe[i];
		if (n > max || got < PAGE_KEYS + 1 || cfs_id_eq(&probe[got - 1], &req->hi))
			break;
		after = probe[got - 1];
	}
	bool more = n > max;
	if (more)
		n = max;
	if (req->has_from)
		(void)chord_member_check(s->chord, &(struct cfs_node){ .id = req->from_id, .addr = from->addr,
		                                                       .vindex = req->from_vindex });
	s->sync.served_listings++;
	cfs_msg_init(&s->reply, CFS_MSG_SYNC_KEYS);
	s->reply.flags = more ? 1u : 0u;
	s->reply.keys = keys;
	s->reply.n_keys = n;
	(void)cfs_transport_reply(chord_transport(s->chord), from, &s->reply);
}

/* ------------------------------------------------------------ sessions */

static void session_start(dhash_server_t *s, const struct sync_job *j);

static uint32_t session_count(const dhash_server_t *s)
{
	uint32_t n = 0;

	for (const struct sync_session *se = s->sessions; se; se = se->next)
		n++;
	return n;
}

/* The round's next sessions, up to SESSIONS at once. */
void dhash__sync_next_session(dhash_server_t *s)
{
	while (s->sync_next < s->sync_n && session_count(s) < SESSIONS) {
		session_start(s, &s->sync_jobs[s->sync_next++]);
	}
	if ((s->drain_waiting || s->draining) && !s->sessions && s->sync_next == s->sync_n)
		dhash__drain_next(s);
}

/* One line per session that moved blocks or was cut short; the others
 * only at debug level. */
static void session_log(const struct sync_session *se)
{
	char a[CFS_ADDR_STRLEN], l[9], h[9];
	const struct dhash__sync_counts *n = &se->sm.n;
	enum cfs_log_level lvl = n->pushed || n->fetched || n->cut_short ? CFS_LOG_INFO : CFS_LOG_DEBUG;

	cfs_log(lvl, "sync: (%s, %s] with %s: %u digests (%u parts differ), %u listings (%u keys), "
	        "%u pushed, %u fetched%s", cfs_id_short(&se->lo0, l), cfs_id_short(&se->hi0, h),
	        cfs_addr_str(&se->peer.addr, a), n->digests, n->parts_differ, n->listings, n->listed,
	        n->pushed, n->fetched, n->cut_short ? "; cut short by a failed call" : "");
}

/* The one place a session is freed: once it finished or was cancelled,
 * with no call in flight. A drain counts it cut short, and the pushes
 * it queued and never sent as failed. */
static void session_free(struct sync_session *se)
{
	dhash_server_t *s = se->s;

	if (s) {
		struct sync_session **p = &s->sessions;
		while (*p && *p != se)
			p = &(*p)->next;
		if (*p)
			*p = se->next;
		if (se->drain) {
			s->drain_cut += se->sm.n.cut_short;
			s->drain_dropped += se->sm.n.dropped;
		}
	}
	session_log(se);
	dhash__sync_sm_fini(&se->sm);
	free(se);
	if (s)
		dhash__sync_next_session(s);
}

/* A call came back: false when the session is over (and freed). */
static bool call_back(struct sync_session *se, int status)
{
	se->calls--;
	if (!se->s || status == -ECANCELED) {
		if (se->calls == 0)
			session_free(se);
		return false;
	}
	return true;
}

/* Every request of a session names its virtual server (the range's hi
 * end, or the drained one): the peer admits our pushes only from a member
 * near their keys (dhash__admit_replica), and authenticates us on the
 * first digest. */
static void name_sender(struct sync_session *se)
{
	chord_t *c = se->s->chord;

	for (uint32_t i = 0; i < chord_vnode_count(c); i++)
		if (cfs_id_eq(&chord_vnode_self(c, i)->id, &se->name)) {
			dhash__msg_from(se->s, i, &se->msg);
			return;
		}
}

static int call(struct sync_session *se, cfs_reply_cb cb, void *arg)
{
	se->msg.has_to = true;
	se->msg.to_id = se->peer.id;
	name_sender(se);
	int r = chord_call_low(se->s->chord, &se->peer, &se->msg, SYNC_TIMEOUT_MS, cb, arg);
	if (r == 0)
		se->calls++;
	return r;
}

/* --- transfers */

void dhash__sync_free(dhash_server_t *s)
{
	if (s->sync_refused_init)
		cfs_htab_free(&s->sync_refused);
	s->sync_refused_init = false;
}

static void push_back(void *arg, int status, const struct cfs_msg *reply,
                      const struct cfs_rpc_result *res)
{
	struct xcall *x = arg;
	struct sync_session *se = x->se;
	struct cfs_id key = x->key;

	free(x);
	if (!call_back(se, status))
		return;
	dhash_server_t *s = se->s;
	se->xfers--;
	if (status == DHASH_DENIED) {
		s->sync.push_denied++;
		if (!s->sync_refused_init) {
			dhash__sync_refused_init(&s->sync_refused);
			s->sync_refused_init = true;
		}
		dhash__sync_refuse(&s->sync_refused, &key, &se->peer.id, uv_now(s->loop),
		                   (uint64_t)REFUSED_ROUNDS * s->cfg.sync_ms);
	} else if (status < 0) {
		s->sync.push_failed++;
	} else if (se->drain) {
		s->drain_taken++;
	}
	dhash__sync_sm_on_xfer(&se->sm, DHASH_SYNC_PUSH, true, status);
	run(se);
}

/* A root both hold came back from the peer (verified, sequence seq): the
 * machine says which of the two is newer; a newer one of the peer's
 * replaces ours. */
static void compare_root(struct sync_session *se, const struct cfs_id *key, const struct cfs_msg *reply,
                         uint64_t seq, const struct dhash_rec *mine)
{
	dhash_server_t *s = se->s;
	char hex[9], a[CFS_ADDR_STRLEN];
	int newer = dhash__sync_sm_on_root(&se->sm, key, mine->kind, mine->seq, (uint8_t)reply->kind, seq);

	if (newer < 0) {
		log_info("sync: %s holds root %s at sequence %lu, ours is %lu: sending ours",
		         cfs_addr_str(&se->peer.addr, a), cfs_id_short(key, hex), (unsigned long)seq,
		         (unsigned long)mine->seq);
		return;
	}
	if (newer == 0)
		return;
	struct dhash_rec rec = { .kind = DHASH_KIND_ROOT,
	                         .lease_until = dhash__grant_lease(s, reply->lease_until, &se->peer.addr),
	                         .seq = seq, .data = (uint8_t *)reply->data.p, .len = reply->data.len };
	if (dhash_store_put(s->store, key, &rec) == 0) {
		s->sync.roots_fetched++;
		s->sync.fetched_bytes += reply->data.len;
		log_info("sync: root %s at sequence %lu from %s replaces ours at %lu",
		         cfs_id_short(key, hex), (unsigned long)seq, cfs_addr_str(&se->peer.addr, a),
		         (unsigned long)mine->seq);
	} else {
		s->sync.fetch_failed++;
	}
}

static void fetch_back(void *arg, int status, const struct cfs_msg *reply,
                       const struct cfs_rpc_result *res)
{
	struct xcall *x = arg;
	struct sync_session *se = x->se;
	struct cfs_id key = x->key;
	enum dhash__sync_act_type op = x->op;

	free(x);
	if (!call_back(se, status))
		return;
	dhash_server_t *s = se->s;
	uint64_t seq;
	struct dhash_rec mine;
	int m;
	se->xfers--;
	if (status < 0) {
		s->sync.fetch_failed++;
	} else if (reply->kind == DHASH_KIND_FRAG) {
		s->sync.frag_skipped++; /* the peer's own fragment, not a replica */
	} else if (dhash_verify(reply->kind, &key, reply->data.p, reply->data.len, &seq) < 0) {
		s->sync.fetch_bad++;
		char hex[9], a[CFS_ADDR_STRLEN];
		log_warn("sync: %s sent bytes that do not verify for %s; skipped",
		         cfs_addr_str(&se->peer.addr, a), cfs_id_short(&key, hex));
	} else if (dhash__lease_from(s, &se->peer.addr, reply->lease_until) <= dhash__wall_now()) {
		/* expired there: left to the collectors */
	} else if (dhash_server_is_denied(s, &key)) {
		s->sync.denied_skipped++; /* denied since it was queued */
	} else if ((m = dhash__scrub_read(s, &key, &mine, SCRUB_BY_PUSH)) == 0) { /* maintenance's read */
		compare_root(se, &key, reply, seq, &mine); /* held here too: a root may be older */
		free(mine.data);
	} else if (m == -ENOENT) {
		struct dhash_rec rec = { .kind = (uint8_t)reply->kind,
		                         .lease_until = dhash__grant_lease(s, reply->lease_until, &se->peer.addr),
		                         .seq = seq, .data = (uint8_t *)reply->data.p,
		                         .len = reply->data.len };
		if (dhash_store_put(s->store, &key, &rec) == 0) {
			s->sync.fetched++;
			s->sync.fetched_bytes += reply->data.len;
		} else {
			s->sync.fetch_failed++;
		}
	}
	dhash__sync_sm_on_xfer(&se->sm, op, true, status);
	run(se);
}

/* Start one transfer the machine asked for; one that cannot start ends
 * at once (a key gone here since the comparison, a bad copy dropped, an
 * expired lease: left to the collectors, not spread). */
static void start_xfer(struct sync_session *se, const struct dhash__sync_act *t)
{
	dhash_server_t *s = se->s;
	struct xcall *x = xcalloc(1, sizeof(*x));
	struct dhash_rec rec;

	*x = (struct xcall){ se, t->key, t->type };
	if (t->type == DHASH_SYNC_PUSH) {
		if (dhash_server_is_denied(s, &t->key) ||
		    dhash__scrub_read(s, &t->key, &rec, SCRUB_BY_PUSH) < 0) {
			free(x);
			dhash__sync_sm_on_xfer(&se->sm, t->type, false, 0);
			return;
		}
		if (rec.lease_until <= dhash__wall_now()) {
			free(rec.data);
			free(x);
			dhash__sync_sm_on_xfer(&se->sm, t->type, false, 0);
			return;
		}
		cfs_msg_init(&se->msg, CFS_MSG_STORE);
		se->msg.kind = rec.kind;
		se->msg.key = t->key;
		se->msg.lease_until = rec.lease_until;
		se->msg.data = (struct cfs_bytes){ rec.data, rec.len };
		if (call(se, push_back, x) == 0) {
			se->xfers++;
			s->sync.pushed++;
			s->sync.pushed_bytes += rec.len;
		} else {
			s->sync.push_failed++;
			free(x);
			dhash__sync_sm_on_xfer(&se->sm, t->type, false, 0);
		}
		free(rec.data);
		return;
	}
	cfs_msg_init(&se->msg, CFS_MSG_FETCH);
	se->msg.key = t->key;
	if (call(se, fetch_back, x) == 0) {
		se->xfers++;
	} else {
		s->sync.fetch_failed++;
		free(x);
		dhash__sync_sm_on_xfer(&se->sm, t->type, false, 0);
	}
}

/* --- comparing */

static void digest_back(void *arg, int status, const struct cfs_msg *reply,
                        const struct cfs_rpc_result *res)
{
	struct sync_session *se = arg;

	if (!call_back(se, status))
		return;
	if (status == 0 && reply->n_keys == PARTS) {
		struct cfs_id mine[PARTS];
		digests(se->s, &se->sm.cur, mine);
		dhash__sync_sm_on_digest(&se->sm, 0, reply->keys, reply->n_keys, mine);
	} else {
		dhash__sync_sm_on_digest(&se->sm, status < 0 ? status : -EPROTO, NULL, 0, NULL);
	}
	run(se);
}

static void keys_back(void *arg, int status, const struct cfs_msg *reply,
                      const struct cfs_rpc_result *res)
{
	struct sync_session *se = arg;

	if (!call_back(se, status))
		return;
	if (status < 0)
		dhash__sync_sm_on_keys(&se->sm, status, NULL, 0, false);
	else
		dhash__sync_sm_on_keys(&se->sm, 0, reply->keys, reply->n_keys, reply->flags & 1u);
	run(se);
}

/* SCAN: how many keys we hold in r (up to LEAF_KEYS + 1), and whether a
 * root is among them. */
static void scan_range(struct sync_session *se, const struct dhash__sync_range *r)
{
	struct cfs_id probe[LEAF_KEYS + 1];
	uint8_t kinds[LEAF_KEYS + 1];
	uint32_t n = 0;
	bool roots = false;
	int st = dhash_store_scan_info(se->s->store, &r->lo, &r->hi, probe, kinds, NULL, LEAF_KEYS + 1, &n);

	for (uint32_t i = 0; st >= 0 && i < n && !roots; i++)
		roots = kinds[i] == DHASH_KIND_ROOT;
	dhash__sync_sm_on_scan(&se->sm, st < 0 ? st : 0, n, roots);
}

/* LOCAL: our keys of r, set by the machine against the peer's listing. */
static void diff_local(struct sync_session *se, const struct dhash__sync_range *r)
{
	dhash_server_t *s = se->s;
	struct keyset ks;
	struct dhash__sync_view v = { .deny = s->deny_init ? &s->deny : NULL,
	                              .refused = s->sync_refused_init ? &s->sync_refused : NULL,
	                              .now_ms = uv_now(s->loop) };

	scan_all(s, r, &ks);
	dhash__sync_sm_on_local(&se->sm, ks.keys, ks.kinds, ks.n, &v);
	keyset_free(&ks);
}

/* Carry out the machine's actions: transfers while the window has room,
 * then the comparison's steps; free the session once it finished and
 * nothing is in flight. */
static void run(struct sync_session *se)
{
	struct dhash__sync_act a;

	for (;;) {
		while (se->xfers < TRANSFERS && dhash__sync_sm_take_xfer(&se->sm, &a))
			start_xfer(se, &a);
		if (!dhash__sync_sm_next(&se->sm, &a))
			break;
		switch (a.type) {
		case DHASH_SYNC_SCAN:
			scan_range(se, &a.range);
			break;
		case DHASH_SYNC_DIGEST:
			cfs_msg_init(&se->msg, CFS_MSG_SYNC_DIGEST);
			se->msg.key = a.range.lo;
			se->msg.hi = a.range.hi;
			se->msg.nsucc = PARTS;
			if (call(se, digest_back, se) < 0)
				dhash__sync_sm_on_unsent(&se->sm);
			break;
		case DHASH_SYNC_KEYS:
			cfs_msg_init(&se->msg, CFS_MSG_SYNC_KEYS);
			se->msg.key = a.key;
			se->msg.hi = a.range.hi;
			se->msg.count = PAGE_KEYS;
			if (call(se, keys_back, se) < 0)
				dhash__sync_sm_on_unsent(&se->sm);
			break;
		case DHASH_SYNC_LOCAL:
			diff_local(se, &a.range);
			break;
		case DHASH_SYNC_FINISH:
			se->finished = true;
			break;
		default:
			break;
		}
	}
	if (se->finished && se->calls == 0)
		session_free(se);
}

static void session_start(dhash_server_t *s, const struct sync_job *j)
{
	struct sync_session *se = xcalloc(1, sizeof(*se));

	se->s = s;
	se->drain = j->drain;
	se->peer = j->peer;
	se->next = s->sessions;
	s->sessions = se;
	s->sync.sessions++;
	se->lo0 = j->lo;
	se->hi0 = j->hi;
	se->name = j->name;
	dhash__sync_sm_init(&se->sm, &j->peer.id, &j->lo, &j->hi, j->drain, &s->sync);
	run(se);
}

/* ------------------------------------------------------------ rounds */

void dhash__sync_round(dhash_server_t *s)
{
	uint32_t nv = chord_vnode_count(s->chord);

	if (s->sessions || s->sync_next < s->sync_n || s->drain_waiting || s->draining)
		return; /* the last round (or a drain) is still at work */
	if (chord_is_client(s->chord))
		return; /* not a member (unreachable): no range is ours to keep */
	if (s->sync.rounds > 0)
		s->sync.debt_last = s->sync.debt_round;
	s->sync.debt_round = 0;
	s->sync.rounds++;
	s->sync_n = s->sync_next = 0;
	for (uint32_t i = 0; i < nv; i++) {
		const struct cfs_node *self = chord_vnode_self(s->chord, i);
		const struct cfs_node *pred = chord_vnode_pred(s->chord, i);
		if (!chord_vnode_joined(s->chord, i) || !pred || cfs_id_eq(&pred->id, &self->id))
			continue;
		const struct cfs_node *to[CHORD_SUCC_MAX];
		int n = dhash_replica_targets(s->chord, i, s->cfg.replicas, to);
		for (int j = 0; j < n; j++) {
			if (s->sync_n == s->sync_cap) {
				s->sync_cap = s->sync_cap ? 2 * s->sync_cap : 16;
				s->sync_jobs = xrealloc(s->sync_jobs, s->sync_cap * sizeof(*s->sync_jobs));
			}
			s->sync_jobs[s->sync_n++] = (struct sync_job){ *to[j], pred->id, self->id, self->id, false };
		}
	}
	dhash__sync_next_session(s);
}

static void on_sync(uv_timer_t *t)
{
	dhash__note_ring_size(t->data);
	dhash__sync_round(t->data);
}

void dhash__sync_start(dhash_server_t *s)
{
	uv_timer_init(s->loop, &s->sync_timer);
	s->sync_timer.data = s;
	if (s->cfg.sync_ms)
		uv_timer_start(&s->sync_timer, on_sync, s->cfg.sync_ms, s->cfg.sync_ms);
}

void dhash__sync_stop(dhash_server_t *s)
{
	uv_timer_stop(&s->sync_timer);
	if (s->drain_waiting || s->draining)
		dhash__drain_end(s, -ECANCELED);
	free(s->sync_jobs);
	s->sync_jobs = NULL;
	s->sync_n = s->sync_next = s->sync_cap = 0;
	while (s->sessions) {
		struct sync_session *se = s->sessions;
		s->sessions = se->next;
		se->s = NULL;
		if (se->calls == 0)
			session_free(se);
	}
}

/* The sync's counters, described once (cfs_stat). */
struct sync_snap {
	uint32_t period_ms, active;
	struct dhash_sync_stats y;
};

#define S(kind, field, name, label, unit) CFS_STAT(kind, struct sync_snap, field, name, label, unit)
static const struct cfs_stat sync_stats[] = {
	CFS_STAT_BEGIN("sync", "sync"),
	S(U32, period_ms, "period_ms", "every", "ms"),
	S(U32, active, "active", "sessions active", NULL),
	S(U64, y.rounds, "rounds", "rounds", NULL),
	S(U64, y.sessions, "sessions", "sessions", NULL),
	S(U64, y.digests, "digests", "digests", NULL),
	S(U64, y.listings, "listings", "listings", NULL),
	S(U64, y.listed_keys, "listed_keys", "keys listed", NULL),
	S(U64, y.served_digests, "served_digests", "digests served", NULL),
	S(U64, y.served_listings, "served_listings", "listings served", NULL),
	CFS_STAT_BEGIN(NULL, "sync copies"),
	S(U64, y.pushed, "pushed", "pushed", NULL),
	S(U64, y.pushed_bytes, "pushed_bytes", "pushed", "bytes"),
	S(U64, y.push_failed, "push_failed", "push failed", NULL),
	S(U64, y.fetched, "fetched", "fetched", NULL),
	S(U64, y.fetched_bytes, "fetched_bytes", "fetched", "bytes"),
	S(U64, y.fetch_failed, "fetch_failed", "fetch failed", NULL),
	S(U64, y.fetch_bad, "fetch_bad", "bad", NULL),
	S(U64, y.denied_skipped, "denied_skipped", "denied here: not fetched", NULL),
	S(U64, y.push_denied, "push_denied", "refused as denied there", NULL),
	S(U64, y.push_denied_skipped, "push_denied_skipped", "not sent again", NULL),
	S(U64, y.frag_skipped, "frag_skipped", "fragments: not moved", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN(NULL, "repl. debt"),
	S(U64, y.debt_last, "debt_last_round", "copies missing in the last whole round", NULL),
	S(U64, y.debt_round, "debt_this_round", "in this one", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN(NULL, "roots"),
	S(U64, y.roots_checked, "roots_checked", "compared with a replica's", NULL),
	S(U64, y.roots_fetched, "roots_fetched", "newer taken", NULL),
	S(U64, y.roots_pushed, "roots_pushed", "newer sent", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_CLOSE,
};
#undef S

void dhash__sync_status(dhash_server_t *s, struct cfs_sbuf *b, bool json)
{
	struct sync_snap n = { .period_ms = s->cfg.sync_ms, .active = session_count(s), .y = s->sync };
	bool first = false; /* JSON: after the server's own members */

	cfs_stat_render(b, json, sync_stats, CFS_ARRAY_SIZE(sync_stats), &n, &first);
}
