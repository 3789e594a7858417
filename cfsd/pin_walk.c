/*
 * One round of one pin as a state machine without I/O (see cfsd/pin.h):
 * the daemon's pinner (cfsd/pin.c) and tests/unit/test_pin.c drive it.
 *
 * Why a walk of the whole tree every round: leases are per block and the
 * ring forgets a block whose lease nobody extended, so the pinner must name
 * every key the root reaches, and it can only learn the keys below a block
 * by reading the block. It reads from its own copy when it has one (the
 * copy is verified again: disks are not trusted either), so after the first
 * round a round costs one refresh per block and no fetches.
 */
#include <stdlib.h>
#include <string.h>

#include "cfsd/pin.h"
#include "sfsro-format/sfsro.h"

struct cfsd_pin_walk {
	enum cfsd_pin_state state;
	struct cfs_pubkey pk;
	struct cfs_id root_key;
	uint64_t min_seq, now;
	uint32_t versions;            /* the newest this many versions are kept */
	uint8_t code_m, code_n;       /* the newest root's code for data blocks (0: whole) */
	uint8_t *newest;              /* the root taken: the newest version's block too */
	size_t newest_len;
	struct cfsd_pin_store store;
	bool root_started;
	struct sfsro_blockset tree;   /* blocks to visit, every key met this round once */
	struct cfsd_pin_action *ready;/* actions events made (a refresh after a fetch, a put) */
	size_t nready, capready;
	uint32_t inflight;
	struct cfsd_pin_stats st;
};

struct cfsd_pin_walk *cfsd_pin_walk_new(const struct cfs_pubkey *pk, uint64_t min_seq, uint64_t now,
                                        const struct cfsd_pin_store *store)
{
	struct cfsd_pin_walk *w = xcalloc(1, sizeof(*w));

	w->pk = *pk;
	sfsro_root_key(pk, &w->root_key);
	w->min_seq = min_seq;
	w->now = now;
	w->store = *store;
	w->versions = 1;
	return w;
}

void cfsd_pin_walk_versions(struct cfsd_pin_walk *w, uint32_t n)
{
	w->versions = n ? n : 1;
}

void cfsd_pin_walk_free(struct cfsd_pin_walk *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->nready; i++)
		free(w->ready[i].data);
	free(w->ready);
	sfsro_blockset_free(&w->tree);
	free(w->newest);
	free(w);
}

enum cfsd_pin_state cfsd_pin_walk_state(const struct cfsd_pin_walk *w)
{
	return w->state;
}

const struct cfsd_pin_stats *cfsd_pin_walk_stats(const struct cfsd_pin_walk *w)
{
	return &w->st;
}

static void push(struct cfsd_pin_walk *w, const struct cfs_id *key, uint8_t btype, uint8_t height)
{
	if (sfsro_blockset_push(&w->tree, key, btype, height))
		w->st.blocks++;
}

/* Push the blocks a structural block names. */
static int expand(struct cfsd_pin_walk *w, uint8_t btype, uint8_t height, const uint8_t *p, size_t len)
{
	struct sfsro_bitem it = { .btype = btype, .height = height };
	uint64_t before = w->tree.pushed;
	int r = sfsro_blockset_expand(&w->tree, &it, p, len);

	w->st.blocks += w->tree.pushed - before;
	return r;
}

static void ready(struct cfsd_pin_walk *w, const struct cfsd_pin_action *a)
{
	if (w->nready == w->capready) {
		w->capready = w->capready ? 2 * w->capready : 16;
		w->ready = xrealloc(w->ready, w->capready * sizeof(*w->ready));
	}
	w->ready[w->nready++] = *a;
}

static void ready_key(struct cfsd_pin_walk *w, uint8_t type, const struct cfsd_pin_action *of)
{
	struct cfsd_pin_action a = { .type = type, .btype = of->btype, .height = of->height,
	                             .kind = of->kind, .code_m = of->code_m, .code_n = of->code_n,
	                             .key = of->key };
	ready(w, &a);
}

/* Does p, of kind, belong under key? A coded data block is the block
 * whose m-of-n coded key is key. */
static int verify(const struct cfs_id *key, uint8_t code_m, uint8_t code_n, uint32_t kind,
                  const uint8_t *p, size_t len)
{
	struct cfs_id k;
	uint64_t seq;
	int r;

	if (!code_m)
		return dhash_verify(kind, key, p, len, &seq);
	if (kind != DHASH_KIND_CHASH || (r = dhash_coded_key(p, len, code_m, code_n, &k)) < 0)
		return -EBADMSG;
	return cfs_id_eq(&k, key) ? 0 : -EBADMSG;
}

/* Our copy of key, verified again (it came from disk). */
static int load(struct cfsd_pin_walk *w, const struct cfsd_pin_action *a, uint32_t *kind, uint8_t **p,
                size_t *len)
{
	int r = w->store.get(w->store.ctx, &a->key, kind, p, len);

	if (r < 0)
		return r;
	if ((r = verify(&a->key, a->code_m, a->code_n, *kind, *p, *len)) < 0) {
		free(*p);
		*p = NULL;
	}
	return r;
}

/* A block to visit: fetch it when we hold no copy (the copy is how we can
 * put it back later); else read the keys it names from our copy and renew
 * it. */
static bool visit(struct cfsd_pin_walk *w, const struct sfsro_bitem *it, struct cfsd_pin_action *ret)
{
	*ret = (struct cfsd_pin_action){ .btype = it->btype, .height = it->height,
	                                 .kind = DHASH_KIND_CHASH, .key = it->key };
	if (it->btype == CFSD_PIN_B_DATA) {
		ret->code_m = w->code_m;
		ret->code_n = w->code_n;
	}
	if (!w->store.has(w->store.ctx, &it->key)) {
		ret->type = CFSD_PIN_A_FETCH;
		return true;
	}
	if (it->btype != CFSD_PIN_B_DATA) {
		uint32_t kind;
		uint8_t *p;
		size_t len;
		int r = load(w, ret, &kind, &p, &len);
		if (r < 0 || kind != DHASH_KIND_CHASH) {
			/* A copy that does not verify is fetched again (and
			 * replaced when it arrives). */
			if (r == 0)
				free(p);
			w->st.errors++;
			ret->type = CFSD_PIN_A_FETCH;
			return true;
		}
		r = expand(w, it->btype, it->height, p, len);
		free(p);
		if (r < 0)
			w->st.errors++;
	}
	ret->type = CFSD_PIN_A_REFRESH;
	return true;
}

enum cfsd_pin_act cfsd_pin_walk_next(struct cfsd_pin_walk *w, struct cfsd_pin_action *ret)
{
	*ret = (struct cfsd_pin_action){ .type = CFSD_PIN_A_WAIT };
	if (w->state == CFSD_PIN_S_DONE)
		return ret->type = CFSD_PIN_A_DONE;
	if (w->state == CFSD_PIN_S_ROOT) {
		if (w->root_started) {
			if (w->inflight)
				return CFSD_PIN_A_WAIT;
			/* The root's answer came and named nothing to walk. */
			w->state = CFSD_PIN_S_DONE;
			return ret->type = CFSD_PIN_A_DONE;
		}
		w->root_started = true;
		w->inflight++;
		*ret = (struct cfsd_pin_action){ .type = CFSD_PIN_A_FETCH, .btype = CFSD_PIN_B_ROOT,
		                                 .kind = DHASH_KIND_ROOT, .key = w->root_key };
		return CFSD_PIN_A_FETCH;
	}
	if (w->nready) {
		*ret = w->ready[--w->nready];
		w->inflight++;
		return (enum cfsd_pin_act)ret->type;
	}
	struct sfsro_bitem it;
	while (sfsro_blockset_pop(&w->tree, &it)) {
		if (visit(w, &it, ret)) {
			w->inflight++;
			return (enum cfsd_pin_act)ret->type;
		}
	}
	if (w->inflight)
		return CFSD_PIN_A_WAIT;
	w->state = CFSD_PIN_S_DONE;
	return ret->type = CFSD_PIN_A_DONE;
}

/* A version root: its tree is walked like the newest's, and its version
 * key renewed (or put back from our copy). Our copy is the way to keep a
 * version whose key no server holds any more; a version neither the ring
 * nor we have is gone, which is not an error: leases end. */
static void version_tree(struct cfsd_pin_walk *w, const uint8_t *p, size_t len, uint64_t seq)
{
	struct sfsro_root r;

	if (sfsro_root_decode(p, len, &r) < 0 || sfsro_root_check(&r, &w->pk, 0, 0) < 0 ||
	    r.seq != seq) {
		w->st.errors++;
		return;
	}
	w->st.versions++;
	/* The walk reads data blocks by the newest root's code: a version
	 * published with another one keeps its record, not its tree. */
	if (r.code_m == w->code_m && r.code_n == w->code_n)
		push(w, &r.root_dir, CFSD_PIN_B_DIR, 0);
}

static void version_start(struct cfsd_pin_walk *w, uint64_t seq)
{
	struct cfsd_pin_action a = { .btype = CFSD_PIN_B_VERSION, .height = 0,
	                             .kind = DHASH_KIND_VERSION };
	uint32_t kind = 0;
	uint8_t *p = NULL;
	size_t len;

	sfsro_root_version_key(&w->pk, seq, &a.key);
	if (cfs_idmap_get(&w->tree.seen, &a.key, NULL))
		return;
	cfs_idmap_put(&w->tree.seen, &a.key, 0);
	w->st.blocks++;
	if (!w->store.has(w->store.ctx, &a.key)) {
		a.type = CFSD_PIN_A_FETCH;
		ready(w, &a);
		return;
	}
	if (load(w, &a, &kind, &p, &len) < 0 || kind != DHASH_KIND_VERSION) {
		free(p);
		w->st.errors++;
		a.type = CFSD_PIN_A_FETCH;
		ready(w, &a);
		return;
	}
	version_tree(w, p, len, seq);
	free(p);
	a.type = CFSD_PIN_A_REFRESH;
	ready(w, &a);
}

/*
 * The root: take the newest verified root of the pinned key that we can
 * see, the ring's or our copy, and never one older than a root seen
 * before. When our copy is newer than what the ring serves (the replicas
 * lost the latest version), ours goes back on the ring.
 */
static void root_arrived(struct cfsd_pin_walk *w, const struct cfsd_pin_action *a, int status,
                         uint32_t kind, const uint8_t *p, size_t len)
{
	struct sfsro_root ring, held;
	bool ring_ok = false, held_ok = false;
	uint8_t *hp = NULL, *up = NULL;
	size_t hlen = 0, ulen = 0;
	uint32_t hkind;

	if (status == 0 && kind == DHASH_KIND_ROOT && sfsro_root_decode(p, len, &ring) == 0 &&
	    sfsro_root_check(&ring, &w->pk, 0, 0) == 0)
		ring_ok = true;
	else if (status == 0)
		w->st.errors++; /* dhash_get verified it: not expected */
	if (load(w, a, &hkind, &hp, &hlen) == 0) {
		held_ok = hkind == DHASH_KIND_ROOT && sfsro_root_decode(hp, hlen, &held) == 0 &&
		          sfsro_root_check(&held, &w->pk, 0, 0) == 0;
	}
	uint64_t held_seq = held_ok ? held.seq : 0;
	const struct sfsro_root *use = NULL;
	if (ring_ok && ring.seq >= w->min_seq && ring.seq >= held_seq) {
		use = &ring;
		up = xmemdup(p, len);
		ulen = len;
		if (!held_ok || ring.seq > held.seq) {
			if (w->store.put(w->store.ctx, &w->root_key, DHASH_KIND_ROOT, p, len) == 0)
				w->st.fetched++;
			else
				w->st.errors++;
		}
		ready_key(w, CFSD_PIN_A_REFRESH, a);
	} else if (held_ok && held.seq >= w->min_seq) {
		use = &held;
		up = xmemdup(hp, hlen);
		ulen = hlen;
		if (ring_ok) {
			/* The ring serves an older version: put ours back. */
			struct cfsd_pin_action put = *a;
			put.type = CFSD_PIN_A_PUT;
			put.data = hp;
			put.len = hlen;
			hp = NULL;
			ready(w, &put);
		} else {
			ready_key(w, CFSD_PIN_A_REFRESH, a);
		}
	} else if (status == -ENOENT || ring_ok) {
		/* No root at all, or only one older than a version seen. */
		w->st.missing++;
	} else {
		w->st.errors++;
	}
	free(hp);
	if (!use) {
		free(up);
		return;
	}
	cfs_idmap_put(&w->tree.seen, &w->root_key, 0); /* met, but not a tree block to visit */
	w->st.blocks++;
	w->st.seq = use->seq;
	w->st.valid_until = use->valid_until;
	w->st.root_expired = use->valid_until < w->now;
	w->code_m = use->code_m; /* its data blocks' code: see version_tree */
	w->code_n = use->code_n;
	push(w, &use->root_dir, CFSD_PIN_B_DIR, 0);
	w->state = CFSD_PIN_S_TREE;
	/* The versions' keys, the newest's first: a pin keeps its versions
	 * readable by number too. */
	w->newest = up;
	w->newest_len = ulen;
	for (uint32_t i = 0; i < w->versions && use->seq > i; i++)
		version_start(w, use->seq - i);
}

void cfsd_pin_walk_fetched(struct cfsd_pin_walk *w, const struct cfsd_pin_action *a, int status,
                           uint32_t kind, const uint8_t *p, size_t len)
{
	w->inflight--;
	if (a->btype == CFSD_PIN_B_ROOT) {
		root_arrived(w, a, status, kind, p, len);
		return;
	}
	if (a->btype == CFSD_PIN_B_VERSION) {
		struct sfsro_root r;
		struct cfs_id newest_key;
		sfsro_root_version_key(&w->pk, w->st.seq, &newest_key);
		if (status == -ENOENT && w->newest && cfs_id_eq(&a->key, &newest_key)) {
			/* The newest's version key is on no server (a publisher
			 * older than version roots, or lost): the root's bytes
			 * are its block; keep them and put them there. */
			struct cfsd_pin_action put = *a;
			if (w->store.put(w->store.ctx, &a->key, DHASH_KIND_VERSION, w->newest,
			                 w->newest_len) < 0) {
				w->st.errors++;
				return;
			}
			w->st.fetched++;
			w->st.versions++;
			put.type = CFSD_PIN_A_PUT;
			put.data = xmemdup(w->newest, w->newest_len);
			put.len = w->newest_len;
			ready(w, &put);
			return;
		}
		if (status == -ENOENT) {
			w->st.versions_gone++;
			return;
		}
		if (status < 0 || kind != DHASH_KIND_VERSION || sfsro_root_decode(p, len, &r) < 0) {
			w->st.errors++;
			return;
		}
		if (w->store.put(w->store.ctx, &a->key, kind, p, len) == 0)
			w->st.fetched++;
		else
			w->st.errors++;
		version_tree(w, p, len, r.seq);
		ready_key(w, CFSD_PIN_A_REFRESH, a);
		return;
	}
	if (status < 0) {
		/* Nobody serves it and we hold no copy: lost, unless it
		 * comes back by itself. */
		if (status == -ENOENT)
			w->st.missing++;
		else
			w->st.errors++;
		return;
	}
	if (kind != DHASH_KIND_CHASH || verify(&a->key, a->code_m, a->code_n, kind, p, len) < 0) {
		w->st.errors++;
		return;
	}
	if (w->store.put(w->store.ctx, &a->key, kind, p, len) == 0)
		w->st.fetched++;
	else
		w->st.errors++;
	if (a->btype != CFSD_PIN_B_DATA && expand(w, a->btype, a->height, p, len) < 0)
		w->st.errors++;
	ready_key(w, CFSD_PIN_A_REFRESH, a);
}

void cfsd_pin_walk_refreshed(struct cfsd_pin_walk *w, const struct cfsd_pin_action *a, int status,
                             uint32_t found)
{
	w->inflight--;
	if (status == 0 && found) {
		w->st.renewed++;
		return;
	}
	if (status < 0 && status != -ENOENT) {
		w->st.errors++;
		return;
	}
	/* No replica holds it: put our copy back, with a fresh lease. */
	struct cfsd_pin_action put = *a;
	uint32_t kind;
	put.type = CFSD_PIN_A_PUT;
	if (load(w, a, &kind, &put.data, &put.len) < 0 || kind != a->kind) {
		if (put.data)
			free(put.data);
		w->st.missing++;
		return;
	}
	ready(w, &put);
}

void cfsd_pin_walk_put_done(struct cfsd_pin_walk *w, const struct cfsd_pin_action *a, int status)
{
	w->inflight--;
	if (status == 0)
		w->st.restored++;
	else
		w->st.errors++;
}

