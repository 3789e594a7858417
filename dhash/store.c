/*
 * The block store: a server's replicas, on the storage engine
 * (blockstore/blockstore.h: bytes in packs, LevelDB as their index).
 *
 * What this file adds is the server's policy: a put never shortens a lease
 * and leaves a block charged to whoever stored it first; a put of what is
 * stored already writes no bytes (only a longer lease); the bytes charged
 * to each owner IP are counted at open and kept up to date (quotas). The
 * engine makes every batch one durable group commit, so an acknowledged
 * block survives kill -9, and refuses writes after a failed index write
 * until its index reopens (dhash_store_failed).
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/internal.h"


struct dhash_store {
	bstore_t *bs;
	struct cfs_htab owners;   /* owner IP (16 bytes) -> uint64_t bytes charged (quotas) */
};

static bool owner_none(const uint8_t ip[16])
{
	static const uint8_t zero[16];
	return !memcmp(ip, zero, 16);
}

/* Charge (add) or refund (subtract) len bytes to ip; an owner is dropped
 * once it is charged nothing. */
static void owner_charge(dhash_store_t *s, const uint8_t ip[16], uint64_t len, bool add)
{
	if (owner_none(ip))
		return;
	uint64_t *bytes = add ? cfs_htab_put(&s->owners, ip, NULL) : cfs_htab_get(&s->owners, ip);
	if (!bytes)
		return;
	if (add) {
		*bytes += len;
	} else {
		*bytes -= len < *bytes ? len : *bytes;
		if (*bytes == 0)
			cfs_htab_del(&s->owners, ip, NULL);
	}
}

uint64_t dhash_store_usage(const dhash_store_t *s, const uint8_t owner[16])
{
	const uint64_t *bytes = cfs_htab_get(&s->owners, owner);
	return bytes ? *bytes : 0;
}

static bool count_owner(void *arg, const struct cfs_id *key, const struct bstore_meta *m)
{
	owner_charge(arg, m->owner, m->len, true);
	return true;
}

static void count_owners(dhash_store_t *s)
{
	bstore_each(s->bs, count_owner, s);
}

int dhash_store_open(const char *dir, uint32_t compact_live_pct, dhash_store_t **ret)
{
	dhash_store_t *s = xcalloc(1, sizeof(*s));
	struct bstore_config cfg = { .mode = BSTORE_DURABLE, .what = "block store",
		                     .compact_live_pct = compact_live_pct };
	int r = bstore_open(dir, &cfg, &s->bs);

	if (r < 0) {
		free(s);
		return r;
	}
	cfs_htab_init(&s->owners, 16, sizeof(uint64_t));
	count_owners(s);
	*ret = s;
	return 0;
}

void dhash_store_close(dhash_store_t *s)
{
	if (!s)
		return;
	bstore_close(s->bs);
	cfs_htab_free(&s->owners);
	free(s);
}

bool dhash_store_failed(dhash_store_t *s, uint64_t *ret_recoveries)
{
	struct bstore_stats st;

	bstore_stats(s->bs, &st);
	if (ret_recoveries)
		*ret_recoveries = st.recoveries;
	return st.failed;
}

static void rec_of_meta(struct dhash_rec *rec, const struct bstore_meta *m, uint8_t *data)
{
	memset(rec, 0, sizeof(*rec));
	rec->kind = m->kind;
	rec->lease_until = m->lease_until;
	rec->seq = m->seq;
	memcpy(rec->owner, m->owner, 16);
	rec->len = m->len;
	rec->data = data;
}

static struct bstore_meta meta_of_rec(const struct dhash_rec *rec)
{
	struct bstore_meta m = { .kind = rec->kind, .seq = rec->seq, .lease_until = rec->lease_until,
		                 .len = (uint32_t)rec->len };
	memcpy(m.owner, rec->owner, 16);
	return m;
}

int dhash_store_get(dhash_store_t *s, const struct cfs_id *key, struct dhash_rec *ret)
{
	struct bstore_meta m;
	uint8_t *data = NULL;
	int r = bstore_get(s->bs, key, &m, &data);

	if (r < 0)
		return r; /* -EUCLEAN: damaged, not a passing read error: only this may be dropped */
	rec_of_meta(ret, &m, data);
	return 0;
}

bool dhash_store_has(dhash_store_t *s, const struct cfs_id *key)
{
	return bstore_has(s->bs, key);
}

/* What a put of rec must do: 0 with *op set (a PUT, or a SET when the
 * bytes are stored already), 1 when nothing changes, or an error. *old
 * (when *has_old) is what it replaces, its data freed. */
static int plan_put(dhash_store_t *s, const struct cfs_id *key, const struct dhash_rec *rec,
                    struct bstore_op *op, struct dhash_rec *old, bool *has_old)
{
	int r = dhash_store_get(s, key, old);
	struct dhash_rec nr = *rec;

	*has_old = r == 0;
	if (r < 0 && r != -ENOENT && r != -EUCLEAN)
		return r;
	op->type = BSTORE_PUT;
	op->key = *key;
	op->data = rec->data;
	if (r == 0) {
		if (old->lease_until > nr.lease_until)
			nr.lease_until = old->lease_until; /* a put never shortens a lease */
		memcpy(nr.owner, old->owner, 16); /* the space was charged once, to the first */
		bool same = old->kind == nr.kind && old->seq == nr.seq && old->len == nr.len &&
		            !memcmp(old->data, nr.data, nr.len);
		free(old->data);
		old->data = NULL;
		if (same && old->lease_until == nr.lease_until)
			return 1;
		if (same)
			op->type = BSTORE_SET; /* the bytes are there: only the lease moves */
	}
	op->meta = meta_of_rec(&nr);
	return 0;
}

static void account(dhash_store_t *s, const struct bstore_op *op, const struct dhash_rec *old)
{
	if (old)
		owner_charge(s, old->owner, old->len, false);
	owner_charge(s, op->meta.owner, op->meta.len, true);
}

int dhash_store_put(dhash_store_t *s, const struct cfs_id *key, const struct dhash_rec *rec)
{
	int st;
	(void)dhash_store_put_many(s, key, rec, 1, &st); /* a batch error is st too */
	return st;
}

int dhash_store_put_many(dhash_store_t *s, const struct cfs_id *keys, const struct dhash_rec *recs,
                         size_t n, int *status)
{
	struct bstore_op *ops = xcalloc(n ? n : 1, sizeof(*ops));
	struct dhash_rec *old = xcalloc(n ? n : 1, sizeof(*old));
	bool *has_old = xcalloc(n ? n : 1, sizeof(*has_old));
	size_t *at = xcalloc(n ? n : 1, sizeof(*at)), m = 0;
	int r = 0;

	for (size_t i = 0; i < n; i++) {
		bool dup = false;
		for (size_t j = 0; j < m && !dup; j++) /* the same key twice: the first one counts */
			dup = cfs_id_eq(&ops[j].key, &keys[i]);
		status[i] = 0;
		if (dup)
			continue;
		int pr = plan_put(s, &keys[i], &recs[i], &ops[m], &old[m], &has_old[m]);
		if (pr < 0)
			status[i] = pr;
		if (pr == 0)
			at[m++] = i;
	}
	if (m)
		r = bstore_apply(s->bs, ops, m);
	for (size_t j = 0; j < m; j++) {
		status[at[j]] = ops[j].status;
		if (ops[j].status == 0)
			account(s, &ops[j], has_old[j] ? &old[j] : NULL);
	}
	free(ops);
	free(old);
	free(has_old);
	free(at);
	return r;
}

int dhash_store_extend_many(dhash_store_t *s, const struct cfs_id *keys, uint32_t n,
                            uint64_t lease_until, bool *found)
{
	return dhash_store_extend_charged(s, keys, n, lease_until, NULL, 0, found, NULL);
}

/* May an extension move old's charge to owner (NULL: no charge)? It
 * stays where it is when owner holds it already. */
static bool charge_fits(const dhash_store_t *s, const uint8_t *owner, uint64_t quota,
                        const struct bstore_meta *old, uint64_t *batch)
{
	if (!owner || !memcmp(old->owner, owner, 16))
		return true;
	if (quota && dhash_store_usage(s, owner) + *batch + old->len > quota)
		return false;
	*batch += old->len;
	return true;
}

/* The one write of a REFRESH: every key found whose lease is shorter gets
 * lease_until and, when owner is given, is charged to owner from now on
 * (the former owner refunded) if owner's quota holds it; a key that does
 * not fit is left alone and reported absent (*ret_over counts them). */
int dhash_store_extend_charged(dhash_store_t *s, const struct cfs_id *keys, uint32_t n,
                               uint64_t lease_until, const uint8_t *owner, uint64_t quota,
                               bool *found, uint32_t *ret_over)
{
	struct bstore_op *ops = xcalloc(n ? n : 1, sizeof(*ops));
	struct bstore_meta *old = xcalloc(n ? n : 1, sizeof(*old));
	uint64_t batch = 0;
	uint32_t over = 0, m = 0;
	int r = 0;

	for (uint32_t i = 0; i < n && r == 0; i++) {
		uint32_t j = 0;
		while (j < i && !cfs_id_eq(&keys[j], &keys[i]))
			j++;
		if (j < i) { /* the same key twice: the first one counts */
			found[i] = found[j];
			continue;
		}
		struct bstore_meta cur;
		int g = bstore_get(s->bs, &keys[i], &cur, NULL);
		found[i] = g == 0;
		if (g < 0 && g != -ENOENT && g != -EUCLEAN)
			r = g;
		if (g < 0 || cur.lease_until >= lease_until)
			continue;
		if (!charge_fits(s, owner, quota, &cur, &batch)) {
			found[i] = false;
			over++;
			continue;
		}
		old[m] = cur;
		ops[m] = (struct bstore_op){ .type = BSTORE_SET, .key = keys[i], .meta = cur };
		ops[m].meta.lease_until = lease_until;
		if (owner)
			memcpy(ops[m].meta.owner, owner, 16);
		m++;
	}
	if (r == 0 && m)
		r = bstore_apply(s->bs, ops, m);
	for (uint32_t i = 0; i < m && r == 0; i++)
		if (ops[i].status == 0) {
			owner_charge(s, old[i].owner, old[i].len, false);
			owner_charge(s, ops[i].meta.owner, old[i].len, true);
		}
	free(ops);
	free(old);
	if (ret_over)
		*ret_over = over;
	return r;
}

int dhash_store_extend(dhash_store_t *s, const struct cfs_id *key, uint64_t lease_until)
{
	bool found;
	int r = dhash_store_extend_many(s, key, 1, lease_until, &found);

	return r < 0 ? r : found ? 0 : -ENOENT;
}

/* Forget keys (their bytes become dead, for the compactor), refunding
 * their owners; metas NULL: read them first. */
static int drop_many(dhash_store_t *s, const struct cfs_id *keys, const struct bstore_meta *metas,
                     uint32_t n)
{
	struct bstore_op *ops = xcalloc(n ? n : 1, sizeof(*ops));

	for (uint32_t i = 0; i < n; i++)
		ops[i] = (struct bstore_op){ .type = BSTORE_DEL, .key = keys[i] };
	int r = bstore_apply(s->bs, ops, n);
	for (uint32_t i = 0; i < n && r == 0; i++)
		if (ops[i].status == 0 && metas)
			owner_charge(s, metas[i].owner, metas[i].len, false);
	free(ops);
	return r;
}

int dhash_store_drop(dhash_store_t *s, const struct cfs_id *key)
{
	struct bstore_meta m;
	int r = bstore_get(s->bs, key, &m, NULL);

	if (r == -ENOENT)
		return r;
	if (r < 0) /* a damaged record: its charge is unknown */
		return drop_many(s, key, NULL, 1);
	return drop_many(s, key, &m, 1);
}

int dhash_store_expire(dhash_store_t *s, uint64_t now, uint32_t max, uint32_t *ret_n)
{
	struct cfs_id keys[256], gone[256];
	struct bstore_meta metas[256];
	uint64_t ends[256];
	uint32_t n = 0;

	if (max > 256)
		max = 256;
	uint32_t m = (uint32_t)bstore_expiring(s->bs, now, keys, ends, max);
	for (uint32_t i = 0; i < m; i++) {
		int r = bstore_get(s->bs, &keys[i], &metas[n], NULL);
		if (r == 0 && metas[n].lease_until <= now) {
			gone[n++] = keys[i];
		} else if (r == -EUCLEAN) { /* a damaged record: dropped, its charge unknown */
			(void)drop_many(s, &keys[i], NULL, 1);
			bstore_drop_lease(s->bs, &keys[i], ends[i]);
		} else {
			bstore_drop_lease(s->bs, &keys[i], ends[i]); /* not the key's own entry */
		}
	}
	int r = n ? drop_many(s, gone, metas, n) : 0;
	*ret_n = r < 0 ? 0 : n;
	return r;
}

uint64_t dhash_store_expiring(dhash_store_t *s, uint64_t until, uint64_t max)
{
	return bstore_expiring(s->bs, until, NULL, NULL, max);
}

int dhash_store_scan(dhash_store_t *s, const struct cfs_id *from, const struct cfs_id *to,
                     struct cfs_id *keys, uint32_t max, uint32_t *ret_n)
{
	return bstore_scan(s->bs, from, to, keys, NULL, max, ret_n);
}

int dhash_store_scan_info(dhash_store_t *s, const struct cfs_id *from, const struct cfs_id *to,
                          struct cfs_id *keys, uint8_t *kinds, uint64_t *seqs, uint32_t max,
                          uint32_t *ret_n)
{
	struct bstore_meta *metas = (kinds || seqs) ? xmalloc((max ? max : 1) * sizeof(*metas)) : NULL;
	int r = bstore_scan(s->bs, from, to, keys, metas, max, ret_n);

	for (uint32_t i = 0; r == 0 && metas && i < *ret_n; i++) {
		if (kinds)
			kinds[i] = metas[i].kind;
		if (seqs)
			seqs[i] = metas[i].seq;
	}
	free(metas);
	return r;
}

uint32_t dhash_store_list_meta(dhash_store_t *s, const struct cfs_id *after, struct cfs_id *keys,
                               struct bstore_meta *metas, uint32_t max, bool *ret_more)
{
	return bstore_list(s->bs, after, keys, metas, max, ret_more);
}

uint32_t dhash_store_list(dhash_store_t *s, const struct cfs_id *after, struct cfs_id *keys,
                          uint32_t max, bool *ret_more)
{
	return bstore_list(s->bs, after, keys, NULL, max, ret_more);
}

void dhash_store_totals(dhash_store_t *s, uint64_t *blocks, uint64_t *bytes)
{
	struct bstore_stats st;

	bstore_stats(s->bs, &st);
	*blocks = st.blocks;
	*bytes = st.live_bytes;
}

void dhash_store_stats(dhash_store_t *s, struct bstore_stats *ret)
{
	bstore_stats(s->bs, ret);
}

bool dhash_store_compact(dhash_store_t *s, uint64_t budget)
{
	return bstore_compact_step(s->bs, budget);
}
