/*
 * One sync session as a state machine that does no I/O (sync_sm.h); sync.c
 * says why replicas are compared this way (CFS 5.2, DHash++ 4.4) and
 * carries out what the machine asks for.
 *
 * A session holds a stack of ranges still to compare. For the range on
 * top it asks how many keys we hold there (SCAN); a range with more than
 * LEAF_KEYS of them, or with a root not yet compared by digest, is split
 * by SYNC_DIGEST into 64 parts and the parts whose digests differ go back
 * on the stack, one level deeper (at most DEPTH_MAX); any other range is
 * listed with SYNC_KEYS, page by page, and the listing set against ours
 * (LOCAL): what only we hold is pushed, what only the peer holds fetched,
 * a root both hold in a part that differs fetched to compare sequences.
 * One comparison is under way at a time; transfers queue beside it, and
 * comparing pauses while BACKLOG of them wait. The first call that times
 * out ends the session: the peer is likely gone.
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/sync_sm.h"

#define REFUSED_CAP_MS (24ull * 3600 * 1000) /* a peer's denial believed at most a day, ... */
#define REFUSED_MAX 65536                     /* ... for at most this many (key, peer) pairs */

static struct dhash__sync_act *act_push(struct cfs_actq *q, enum dhash__sync_act_type type)
{
	struct dhash__sync_act *a = cfs_actq_push(q, sizeof(*a));

	a->type = type;
	return a;
}

static void push_range(struct dhash__sync_sm *m, const struct dhash__sync_range *r)
{
	if (m->nranges == m->cranges) {
		m->cranges = m->cranges ? 2 * m->cranges : 16;
		m->ranges = xrealloc(m->ranges, m->cranges * sizeof(*m->ranges));
	}
	m->ranges[m->nranges++] = *r;
}

static size_t xq_len(const struct cfs_actq *q)
{
	return q->n - q->head;
}

/* Queue a transfer. A drain fetches nothing; what is queued is debt (a
 * copy missing on one side), but for a root compared. */
static void add_xfer(struct dhash__sync_sm *m, const struct cfs_id *key, enum dhash__sync_act_type op)
{
	if (m->drain && op == DHASH_SYNC_FETCH)
		return; /* leaving: what the peer has that we lack stays with it */
	act_push(&m->xq, op)->key = *key;
	if (op != DHASH_SYNC_FETCH_ROOT)
		m->st->debt_round++;
}

static void step(struct dhash__sync_sm *m);

void dhash__sync_sm_init(struct dhash__sync_sm *m, const struct cfs_id *peer, const struct cfs_id *lo,
                         const struct cfs_id *hi, bool drain, struct dhash_sync_stats *st)
{
	memset(m, 0, sizeof(*m));
	m->peer = *peer;
	m->drain = drain;
	m->st = st;
	push_range(m, &(struct dhash__sync_range){ *lo, *hi, 0, false });
	step(m);
}

void dhash__sync_sm_fini(struct dhash__sync_sm *m)
{
	free(m->ranges);
	free(m->remote);
	cfs_actq_free(&m->q);
	cfs_actq_free(&m->xq);
	memset(m, 0, sizeof(*m));
}

/* The range's keys go uncompared (a call failed, or the store could not
 * be read). */
static void cut_short(struct dhash__sync_sm *m)
{
	m->n.cut_short = true;
}

/* A call timed out or the peer answered nonsense: the peer is likely
 * gone, so nothing more is compared or sent; what is in flight ends.
 * A drain counts the pushes it had queued and not sent. */
static void abandon(struct dhash__sync_sm *m)
{
	struct dhash__sync_act a;

	cut_short(m);
	while (cfs_actq_pop(&m->xq, &a, sizeof(a)))
		m->n.dropped += m->drain && a.type == DHASH_SYNC_PUSH;
	m->nranges = 0;
	m->nremote = 0;
}

/* After every event: the next range when nothing is being compared and
 * the transfers have caught up, or the end when all is done. */
static void step(struct dhash__sync_sm *m)
{
	if (m->state != DHASH_SYNC_IDLE)
		return;
	if (m->nranges > 0 && xq_len(&m->xq) < DHASH_SYNC_BACKLOG) {
		m->cur = m->ranges[--m->nranges];
		act_push(&m->q, DHASH_SYNC_SCAN)->range = m->cur;
		m->state = DHASH_SYNC_SCANNING;
		return;
	}
	if (m->nranges == 0 && xq_len(&m->xq) == 0 && m->xout == 0) {
		struct dhash__sync_act *a = act_push(&m->q, DHASH_SYNC_FINISH);
		a->counts = m->n;
		m->state = DHASH_SYNC_DONE;
	}
}

bool dhash__sync_sm_next(struct dhash__sync_sm *m, struct dhash__sync_act *ret)
{
	return cfs_actq_pop(&m->q, ret, sizeof(*ret));
}

bool dhash__sync_sm_take_xfer(struct dhash__sync_sm *m, struct dhash__sync_act *ret)
{
	if (!cfs_actq_pop(&m->xq, ret, sizeof(*ret)))
		return false;
	m->xout++;
	if (ret->type == DHASH_SYNC_FETCH)
		m->n.fetched++;
	else if (ret->type == DHASH_SYNC_FETCH_ROOT)
		m->st->roots_checked++;
	step(m); /* the backlog shrank: comparing may go on */
	return true;
}

static void list_page(struct dhash__sync_sm *m, const struct cfs_id *from)
{
	struct dhash__sync_act *a = act_push(&m->q, DHASH_SYNC_KEYS);

	a->range = m->cur;
	a->key = *from;
	m->state = DHASH_SYNC_LISTING;
	m->st->listings++;
	m->n.listings++;
}

void dhash__sync_sm_on_scan(struct dhash__sync_sm *m, int status, uint32_t n, bool roots)
{
	if (m->state != DHASH_SYNC_SCANNING)
		return;
	m->state = DHASH_SYNC_IDLE;
	if (status < 0) {
		cut_short(m); /* this part goes uncompared */
	} else if (dhash__sync_splits(&m->cur, n, roots)) {
		act_push(&m->q, DHASH_SYNC_DIGEST)->range = m->cur;
		m->state = DHASH_SYNC_DIGESTING;
		m->st->digests++;
		m->n.digests++;
	} else {
		m->nremote = 0;
		list_page(m, &m->cur.lo);
	}
	step(m);
}

void dhash__sync_sm_on_unsent(struct dhash__sync_sm *m)
{
	if (m->state == DHASH_SYNC_DIGESTING) { /* a call never made is not counted */
		m->st->digests--;
		m->n.digests--;
	} else if (m->state == DHASH_SYNC_LISTING) {
		m->st->listings--;
		m->n.listings--;
	} else {
		return;
	}
	m->state = DHASH_SYNC_IDLE;
	cut_short(m);
	m->nranges = 0;
	m->nremote = 0;
	step(m);
}

/* The parts whose digests differ are compared again, one level down. */
void dhash__sync_sm_on_digest(struct dhash__sync_sm *m, int status, const struct cfs_id *theirs,
                              uint32_t n, const struct cfs_id *mine)
{
	if (m->state != DHASH_SYNC_DIGESTING)
		return;
	m->state = DHASH_SYNC_IDLE;
	if (status == 0 && n == DHASH_SYNC_PARTS && mine) {
		struct dhash__sync_range r = m->cur;
		struct cfs_id start = r.lo;
		for (uint32_t i = 0; i < DHASH_SYNC_PARTS; i++) {
			struct cfs_id end;
			dhash__sync_part_end(&r, i, &end);
			if (!cfs_id_eq(&mine[i], &theirs[i]) && !cfs_id_eq(&start, &end)) {
				push_range(m, &(struct dhash__sync_range){ start, end, r.depth + 1, true });
				m->n.parts_differ++;
			}
			start = end;
		}
	} else {
		abandon(m); /* the peer is gone or confused: next round */
	}
	step(m);
}

void dhash__sync_sm_on_keys(struct dhash__sync_sm *m, int status, const struct cfs_id *keys,
                            uint32_t n, bool more)
{
	if (m->state != DHASH_SYNC_LISTING)
		return;
	m->state = DHASH_SYNC_IDLE;
	if (status < 0) {
		abandon(m);
		step(m);
		return;
	}
	m->st->listed_keys += n;
	m->n.listed += n;
	for (uint32_t i = 0; i < n; i++) {
		if (!cfs_id_in_oc(&keys[i], &m->cur.lo, &m->cur.hi))
			continue; /* not asked for: ignored */
		if (m->nremote == m->cremote) {
			m->cremote = m->cremote ? 2 * m->cremote : 256;
			m->remote = xrealloc(m->remote, m->cremote * sizeof(*m->remote));
		}
		m->remote[m->nremote++] = keys[i];
	}
	const struct cfs_id *last = n ? &keys[n - 1] : NULL;
	if (more && last && cfs_id_in_oc(last, &m->cur.lo, &m->cur.hi) && !cfs_id_eq(last, &m->cur.hi)) {
		list_page(m, last);
		return;
	}
	act_push(&m->q, DHASH_SYNC_LOCAL)->range = m->cur;
	m->state = DHASH_SYNC_DIFFING;
}

static int id_cmp(const void *a, const void *b)
{
	return cfs_id_cmp(a, b);
}

static const struct cfs_id *sort_keys; /* ix_cmp's keys: qsort has no argument */

static int ix_cmp(const void *a, const void *b)
{
	return cfs_id_cmp(&sort_keys[*(const size_t *)a], &sort_keys[*(const size_t *)b]);
}

static bool is_denied(const struct dhash__sync_view *v, const struct cfs_id *key)
{
	return v && v->deny && v->deny->n && cfs_htab_get(v->deny, key) != NULL;
}

/*
 * The listing of cur is complete: set it against ours, both in key order
 * (a range that wraps the circle is scanned in circle order; indices, so
 * kinds keep their keys). CFS 5.2: a key only we hold is pushed, one only
 * the peer holds fetched. A key denied here is neither fetched nor
 * pushed (our copy was dropped when it was denied; one the peer lists is
 * skipped); a key the peer refused as denied there is not pushed while
 * its refusal holds. A fragment we hold (kind FRAG) is neither pushed nor
 * compared: it is ours alone, and the peer's under the same key differs.
 */
void dhash__sync_sm_on_local(struct dhash__sync_sm *m, const struct cfs_id *keys, const uint8_t *kinds,
                             size_t n, const struct dhash__sync_view *v)
{
	size_t i = 0, j = 0;
	struct dhash_sync_stats *st = m->st;

	if (m->state != DHASH_SYNC_DIFFING)
		return;
	m->state = DHASH_SYNC_IDLE;
	size_t *ix = xmalloc((n ? n : 1) * sizeof(*ix));
	for (size_t k = 0; k < n; k++)
		ix[k] = k;
	sort_keys = keys;
	if (n) /* qsort must not see NULL, even for nothing */
		qsort(ix, n, sizeof(*ix), ix_cmp);
	if (m->nremote)
		qsort(m->remote, m->nremote, sizeof(*m->remote), id_cmp);
	while (i < n || j < m->nremote) {
		const struct cfs_id *mk = i < n ? &keys[ix[i]] : NULL;
		int c = i == n ? 1 : j == m->nremote ? -1 : cfs_id_cmp(mk, &m->remote[j]);
		if (c <= 0 && kinds[ix[i]] == DHASH_KIND_FRAG) {
			st->frag_skipped++;
			i++;
			j += c == 0;
		} else if (c < 0) {
			if (v && dhash__sync_is_refused(v->refused, mk, &m->peer, v->now_ms))
				st->push_denied_skipped++;
			else
				add_xfer(m, mk, DHASH_SYNC_PUSH);
			i++;
		} else if (c > 0) {
			if (is_denied(v, &m->remote[j]))
				st->denied_skipped++;
			else
				add_xfer(m, &m->remote[j], DHASH_SYNC_FETCH);
			j++;
		} else {
			if (m->cur.differs && kinds[ix[i]] == DHASH_KIND_ROOT)
				add_xfer(m, mk, DHASH_SYNC_FETCH_ROOT);
			i++, j++;
		}
	}
	free(ix);
	m->nremote = 0;
	step(m);
}

int dhash__sync_sm_on_root(struct dhash__sync_sm *m, const struct cfs_id *key, uint8_t mine_kind,
                            uint64_t mine_seq, uint8_t their_kind, uint64_t their_seq)
{
	int newer = dhash__sync_root_cmp(mine_kind, mine_seq, their_kind, their_seq);

	if (newer < 0) {
		add_xfer(m, key, DHASH_SYNC_PUSH);
		m->st->roots_pushed++;
	}
	return newer;
}

void dhash__sync_sm_on_xfer(struct dhash__sync_sm *m, enum dhash__sync_act_type op, bool sent, int status)
{
	if (m->xout == 0)
		return;
	m->xout--;
	if (sent && op == DHASH_SYNC_PUSH)
		m->n.pushed++;
	if (sent && status == -ETIMEDOUT)
		abandon(m);
	step(m);
}

/* ------------------------------------------------------------ rules */

void dhash__sync_part_end(const struct dhash__sync_range *r, uint32_t i, struct cfs_id *ret)
{
	struct cfs_id width, step_;

	if (i + 1 == DHASH_SYNC_PARTS) {
		*ret = r->hi;
		return;
	}
	cfs_id_sub(&width, &r->hi, &r->lo);
	if (cfs_id_is_zero(&width)) /* the whole circle */
		cfs_id_add_pow2(&step_, &(struct cfs_id){ { 0 } }, CFS_ID_BITS - DHASH_SYNC_PART_BITS);
	else
		cfs_id_shr(&step_, &width, DHASH_SYNC_PART_BITS);
	*ret = r->lo;
	for (uint32_t k = 0; k <= i; k++)
		cfs_id_add(ret, ret, &step_);
}

/* DHash++ 4.4: a range with few keys here is listed at once, unless it
 * holds a root not yet compared by digest (a listing alone cannot tell
 * root versions apart); a larger one is split by digest, down to
 * DEPTH_MAX levels. */
bool dhash__sync_splits(const struct dhash__sync_range *r, uint32_t n, bool roots)
{
	return (n > DHASH_SYNC_LEAF_KEYS || (roots && !r->differs)) && r->depth < DHASH_SYNC_DEPTH_MAX;
}

/* A server that was down during a republish holds the older root under
 * the same key: the newer of the two is kept on both sides (the peer
 * accepts a higher sequence, handle_store). */
int dhash__sync_root_cmp(uint8_t mine_kind, uint64_t mine_seq, uint8_t their_kind, uint64_t their_seq)
{
	if (mine_kind != DHASH_KIND_ROOT || their_kind != DHASH_KIND_ROOT || their_seq == mine_seq)
		return 0;
	return their_seq < mine_seq ? -1 : 1;
}

/* ------------------------------------------------------------ refusals */

struct refused_key {
	struct cfs_id key, peer;
};
struct refused_val {
	uint64_t until_ms;        /* not pushed before */
	uint64_t interval_ms;     /* the last wait; the next refusal doubles it */
};

void dhash__sync_refused_init(struct cfs_htab *t)
{
	cfs_htab_init(t, sizeof(struct refused_key), sizeof(struct refused_val));
}

/* cfs_htab_filter: keep an entry while its backoff may still matter. */
static bool refused_live(void *ctx, const void *key, void *val)
{
	const struct refused_val *v = val;

	return v->until_ms + v->interval_ms > *(uint64_t *)ctx;
}

void dhash__sync_refuse(struct cfs_htab *t, const struct cfs_id *key, const struct cfs_id *peer,
                        uint64_t now_ms, uint64_t first_ms)
{
	struct refused_key rk = { *key, *peer };
	struct refused_val *v;
	bool added;

	if (cfs_htab_count(t) >= REFUSED_MAX && cfs_htab_filter(t, refused_live, &now_ms) == 0)
		cfs_htab_clear(t); /* all live: start again, pushes cost a round */
	v = cfs_htab_put(t, &rk, &added);
	if (added || v->until_ms + v->interval_ms <= now_ms)
		v->interval_ms = first_ms;
	else if (v->interval_ms < REFUSED_CAP_MS / 2)
		v->interval_ms *= 2;
	else
		v->interval_ms = REFUSED_CAP_MS;
	v->until_ms = now_ms + v->interval_ms;
}

bool dhash__sync_is_refused(const struct cfs_htab *t, const struct cfs_id *key, const struct cfs_id *peer,
                            uint64_t now_ms)
{
	struct refused_key rk = { *key, *peer };
	struct refused_val *v;

	if (!t || !(v = cfs_htab_get(t, &rk)))
		return false;
	return v->until_ms > now_ms;
}
