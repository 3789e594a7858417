/* cfsd/pin_walk.c: a pin's round driven by scripted events, no network. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cfsd/pin.h"
#include "sfsro-format/sfsro.h"

/* ---- block stores: the ring (blocks can go missing) and the pinner's copies */

#define MAXB 4096
struct blocks {
	struct blk { struct cfs_id key; uint32_t kind; uint8_t *p; size_t len; bool gone; } b[MAXB];
	size_t n;
	unsigned refreshed[MAXB], fetched[MAXB], puts;
};

static struct blk *find(struct blocks *s, const struct cfs_id *key)
{
	for (size_t i = 0; i < s->n; i++)
		if (cfs_id_eq(&s->b[i].key, key))
			return &s->b[i];
	return NULL;
}

static int add(struct blocks *s, const struct cfs_id *key, uint32_t kind, const uint8_t *p, size_t len)
{
	struct blk *b = find(s, key);
	if (!b) {
		cr_assert(s->n < MAXB);
		b = &s->b[s->n++];
		b->key = *key;
	}
	free(b->p);
	b->kind = kind;
	b->p = xmemdup(p, len);
	b->len = len;
	b->gone = false;
	return 0;
}

static bool st_has(void *ctx, const struct cfs_id *key)
{
	struct blk *b = find(ctx, key);
	return b && !b->gone;
}

static int st_get(void *ctx, const struct cfs_id *key, uint32_t *kind, uint8_t **p, size_t *len)
{
	struct blk *b = find(ctx, key);
	if (!b || b->gone)
		return -ENOENT;
	*kind = b->kind;
	*p = xmemdup(b->p, b->len);
	*len = b->len;
	return 0;
}

static int st_put(void *ctx, const struct cfs_id *key, uint32_t kind, const uint8_t *p, size_t len)
{
	return add(ctx, key, kind, p, len);
}

static struct blocks *ring, *local;
static struct cfsd_pin_store store;
static struct cfs_pubkey pk;
static struct cfs_seckey sk;
static struct cfs_id root_dir, root_key, big_data0, sub_top;
static uint32_t run_versions = 1;
static uint8_t buf[SFSRO_BLOCK_SIZE_MAX + 1024];

static int emit(void *arg, const struct cfs_id *key, const uint8_t *p, size_t len)
{
	return add(ring, key, DHASH_KIND_CHASH, p, len);
}

static void chash(const uint8_t *p, size_t len, struct cfs_id *ret)
{
	cr_assert(dhash_block_key(DHASH_KIND_CHASH, p, len, ret) == 0);
	add(ring, ret, DHASH_KIND_CHASH, p, len);
}

static void sign_root(uint64_t seq, uint64_t valid_until)
{
	struct sfsro_root r = { .pk = pk, .seq = seq, .issued = 1, .valid_until = valid_until,
	                        .root_dir = root_dir, .dir_mode = 0755 };
	size_t len;
	struct cfs_id vkey;
	cr_assert(sfsro_root_encode(&r, &sk, buf, sizeof(buf), &len) == 0);
	add(ring, &root_key, DHASH_KIND_ROOT, buf, len);
	sfsro_root_version_key(&pk, seq, &vkey); /* as cfs-publish stores it */
	add(ring, &vkey, DHASH_KIND_VERSION, buf, len);
}

/*
 * / { big (40 data blocks of 1 KiB: fanout 31, so two indirect blocks),
 *     sub/ (200 entries, all the same inline file: an index over leaves),
 *     tiny (inline), link -> big }
 */
static void setup(void)
{
	cr_assert(cfs_crypto_init() == 0);
	ring = calloc(1, sizeof(*ring));
	local = calloc(1, sizeof(*local));
	store = (struct cfsd_pin_store){ st_has, st_get, st_put, local };
	uint8_t seed[32] = { 42 };
	cfs_sign_seed_keypair(seed, &pk, &sk);
	sfsro_root_key(&pk, &root_key);

	struct cfs_id data[40], big, tiny;
	uint8_t content[1024];
	size_t len;
	for (int i = 0; i < 40; i++) {
		memset(content, i + 1, sizeof(content));
		cr_assert(sfsro_data_encode(content, sizeof(content), buf, sizeof(buf), &len) == 0);
		chash(buf, len, &data[i]);
	}
	big_data0 = data[0];
	struct sfsro_inode ino = { .size = 40 * 1024, .mode = 0644, .bsize = 1024 };
	cr_assert(sfsro_build_file(&ino, data, 40, emit, NULL, &big) == 0);
	cr_assert_eq(ino.height, 1);
	struct sfsro_inode small = { .size = 5, .mode = 0644, .bsize = 1024,
	                             .inline_data = { (const uint8_t *)"hello", 5 } };
	cr_assert(sfsro_build_file(&small, NULL, 0, emit, NULL, &tiny) == 0);

	static char names[200][16];
	struct sfsro_entry e[200];
	for (int i = 0; i < 200; i++) {
		snprintf(names[i], sizeof(names[i]), "n%03d", i);
		e[i] = (struct sfsro_entry){ .name = { (const uint8_t *)names[i], strlen(names[i]) },
		                             .type = SFSRO_T_FILE, .size = 5, .mode = 0644, .key = tiny };
	}
	cr_assert(sfsro_build_dir(e, 200, 1024, emit, NULL, &sub_top) == 0);
	struct sfsro_entry top[4] = {
		{ .name = { (const uint8_t *)"big", 3 }, .type = SFSRO_T_FILE, .size = 40 * 1024, .mode = 0644, .key = big },
		{ .name = { (const uint8_t *)"link", 4 }, .type = SFSRO_T_SYMLINK, .size = 3, .mode = 0777,
		  .target = { (const uint8_t *)"big", 3 } },
		{ .name = { (const uint8_t *)"sub", 3 }, .type = SFSRO_T_DIR, .size = 200, .mode = 0755, .key = sub_top },
		{ .name = { (const uint8_t *)"tiny", 4 }, .type = SFSRO_T_FILE, .size = 5, .mode = 0644, .key = tiny },
	};
	cr_assert(sfsro_build_dir(top, 4, 1024, emit, NULL, &root_dir) == 0);
	sign_root(1, UINT64_MAX);
	run_versions = 1;
}

static void teardown(void)
{
	for (size_t i = 0; i < ring->n; i++)
		free(ring->b[i].p);
	for (size_t i = 0; i < local->n; i++)
		free(local->b[i].p);
	free(ring);
	free(local);
}

TestSuite(pin, .init = setup, .fini = teardown, .timeout = 60);

/* ---- the driver: carry out actions against the fake ring */

struct script {
	unsigned window;
	bool lifo;              /* answer the newest action first */
	int fetch_fail;         /* a get's failure other than -ENOENT (0: none) */
	uint8_t code_m;         /* the volume's code: data blocks' actions carry it */
	unsigned fetches, refreshes, puts, waits, coded;
};

static void answer(struct cfsd_pin_walk *w, struct cfsd_pin_action *a, struct script *s)
{
	struct blk *b = find(ring, &a->key);
	size_t i = b ? (size_t)(b - ring->b) : 0;

	cr_assert_eq(a->code_m, s->code_m && a->btype == CFSD_PIN_B_DATA ? s->code_m : 0,
	             "action %u on a block of type %u with code %u", a->type, a->btype, a->code_m);
	if (a->code_m)
		s->coded++;
	switch (a->type) {
	case CFSD_PIN_A_FETCH:
		s->fetches++;
		if (b)
			ring->fetched[i]++;
		if (s->fetch_fail && a->btype != CFSD_PIN_B_ROOT)
			cfsd_pin_walk_fetched(w, a, s->fetch_fail, 0, NULL, 0);
		else if (!b || b->gone)
			cfsd_pin_walk_fetched(w, a, -ENOENT, 0, NULL, 0);
		else
			cfsd_pin_walk_fetched(w, a, 0, b->kind, b->p, b->len);
		break;
	case CFSD_PIN_A_REFRESH:
		s->refreshes++;
		if (b)
			ring->refreshed[i]++;
		cfsd_pin_walk_refreshed(w, a, 0, b && !b->gone ? 3 : 0);
		break;
	case CFSD_PIN_A_PUT: {
		uint64_t seq;
		struct cfs_id k;
		s->puts++;
		if (a->code_m)
			cr_assert(dhash_coded_key(a->data, a->len, a->code_m, a->code_n, &k) == 0 &&
			          cfs_id_eq(&k, &a->key), "a coded put of a bad block");
		else
			cr_assert(dhash_verify(a->kind, &a->key, a->data, a->len, &seq) == 0, "a put of a bad block");
		add(ring, &a->key, a->kind, a->data, a->len);
		ring->puts++;
		cfsd_pin_walk_put_done(w, a, 0);
		free(a->data);
		break;
	}
	default:
		cr_assert_fail("unexpected action %u", a->type);
	}
}

static struct cfsd_pin_stats run(uint64_t min_seq, uint64_t now, struct script *s)
{
	struct cfsd_pin_walk *w = cfsd_pin_walk_new(&pk, min_seq, now, &store);
	cfsd_pin_walk_versions(w, run_versions);
	struct cfsd_pin_action pend[64];
	size_t np = 0;

	memset(ring->refreshed, 0, sizeof(ring->refreshed));
	memset(ring->fetched, 0, sizeof(ring->fetched));
	for (;;) {
		enum cfsd_pin_act t = CFSD_PIN_A_WAIT;
		while (np < s->window) {
			t = cfsd_pin_walk_next(w, &pend[np]);
			if (t == CFSD_PIN_A_WAIT || t == CFSD_PIN_A_DONE)
				break;
			np++;
		}
		if (t == CFSD_PIN_A_DONE) {
			cr_assert_eq(np, 0, "done with actions out");
			break;
		}
		if (t == CFSD_PIN_A_WAIT)
			s->waits++;
		cr_assert(np > 0, "waiting with nothing out");
		struct cfsd_pin_action a;
		if (s->lifo) {
			a = pend[--np];
		} else {
			a = pend[0];
			memmove(pend, pend + 1, --np * sizeof(pend[0]));
		}
		answer(w, &a, s);
	}
	cr_assert_eq(cfsd_pin_walk_state(w), CFSD_PIN_S_DONE);
	struct cfsd_pin_stats st = *cfsd_pin_walk_stats(w);
	cfsd_pin_walk_free(w);
	return st;
}

/* ---- rounds */

Test(pin, first_round_copies_and_renews_every_block_once)
{
	struct script s = { .window = 32 };
	size_t total = ring->n;
	struct cfsd_pin_stats st = run(0, 100, &s);

	cr_assert_eq(st.seq, 1);
	cr_assert_eq(st.blocks, total, "reached %lu of %zu blocks", st.blocks, total);
	cr_assert_eq(st.renewed, total);
	cr_assert_eq(st.fetched, total);
	cr_assert_eq(st.restored + st.missing + st.errors, 0);
	for (size_t i = 0; i < ring->n; i++) {
		cr_assert_eq(ring->refreshed[i], 1, "block %zu refreshed %u times", i, ring->refreshed[i]);
		cr_assert_eq(ring->fetched[i], 1);
	}
	cr_assert_eq(local->n, total, "every block copied here");
	cr_assert(s.waits > 0, "the root's fetch comes first, alone");
}

Test(pin, later_rounds_read_the_copies_and_fetch_only_the_root)
{
	struct script s = { .window = 32 };
	size_t total = ring->n;
	(void)run(0, 100, &s);
	s = (struct script){ .window = 5, .lifo = true };
	struct cfsd_pin_stats st = run(1, 100, &s);
	cr_assert_eq(s.fetches, 1, "%u fetches", s.fetches);
	cr_assert_eq(st.fetched, 0);
	cr_assert_eq(st.renewed, total);
	cr_assert_eq(s.refreshes, total);
}

Test(pin, blocks_gone_from_the_ring_are_put_back_from_the_copies)
{
	struct script s = { .window = 32 };
	size_t total = ring->n;
	(void)run(0, 100, &s);
	find(ring, &big_data0)->gone = true;
	find(ring, &sub_top)->gone = true;
	find(ring, &root_key)->gone = true;
	s = (struct script){ .window = 3 };
	struct cfsd_pin_stats st = run(1, 100, &s);
	cr_assert_eq(st.restored, 3, "re-stored %lu", st.restored);
	cr_assert_eq(st.renewed, total - 3);
	cr_assert_eq(st.missing + st.errors, 0);
	cr_assert_eq(st.seq, 1, "the root came from the copy");
	cr_assert(!find(ring, &big_data0)->gone && !find(ring, &sub_top)->gone &&
	          !find(ring, &root_key)->gone);
}

Test(pin, without_a_copy_a_lost_block_is_counted_missing)
{
	struct script s = { .window = 8 };
	size_t total = ring->n;
	find(ring, &big_data0)->gone = true;
	find(ring, &sub_top)->gone = true; /* and the 200 entries below it are unreachable */
	struct cfsd_pin_stats st = run(0, 100, &s);
	cr_assert_eq(st.missing, 2);
	cr_assert_eq(st.restored, 0);
	cr_assert_eq(s.puts, 0);
	cr_assert(st.blocks < total);
}

Test(pin, a_newer_root_is_followed_and_an_older_one_never_taken)
{
	struct script s = { .window = 32 };
	(void)run(0, 100, &s);
	sign_root(5, UINT64_MAX);
	struct cfsd_pin_stats st = run(1, 100, &s);
	cr_assert_eq(st.seq, 5);
	cr_assert_eq(st.fetched, 2, "the new root copied, and its version block");

	/* The ring's replicas lost version 5 and serve 3: ours goes back. */
	sign_root(3, UINT64_MAX);
	st = run(5, 100, &s);
	cr_assert_eq(st.seq, 5);
	cr_assert_eq(st.restored, 1);
	struct sfsro_root r;
	struct blk *b = find(ring, &root_key);
	cr_assert(sfsro_root_decode(b->p, b->len, &r) == 0);
	cr_assert_eq(r.seq, 5, "the ring has version 5 again");

	/* A pin that saw 9 takes neither 5 nor its copy of 5. */
	st = run(9, 100, &s);
	cr_assert_eq(st.seq, 0);
	cr_assert_eq(st.missing, 1);
	cr_assert_eq(st.blocks, 0);
}

Test(pin, an_expired_root_still_has_its_blocks_renewed)
{
	struct script s = { .window = 32 };
	size_t total = ring->n;
	sign_root(2, 50);
	struct cfsd_pin_stats st = run(0, 100, &s);
	cr_assert(st.root_expired);
	cr_assert_eq(st.renewed, total);
}

Test(pin, failed_gets_are_errors_and_the_round_still_ends)
{
	struct script s = { .window = 4, .fetch_fail = -ETIMEDOUT };
	struct cfsd_pin_stats st = run(0, 100, &s);
	cr_assert_eq(st.errors, 2, "the root directory's and the version block's gets failed");
	cr_assert_eq(st.renewed, 1, "the root alone");
}

Test(pin, a_corrupt_copy_is_fetched_again)
{
	struct script s = { .window = 32 };
	size_t total = ring->n;
	(void)run(0, 100, &s);
	struct blk *b = find(local, &sub_top);
	b->p[b->len - 1] ^= 1;
	struct cfsd_pin_stats st = run(1, 100, &s);
	cr_assert_eq(st.errors, 1);
	cr_assert_eq(st.fetched, 1);
	cr_assert_eq(st.renewed, total);
	cr_assert(sfsro_verify_hash(&sub_top, b->p, b->len) == 0, "the copy was replaced");
}

/* ---- versions (cfsctl pin --versions N) */

/* Version seq of the volume with top directory dir, under its version key
 * (as cfs-publish stores it); newest: under the root key as well. */
static struct cfs_id sign_version(uint64_t seq, const struct cfs_id *dir, bool newest)
{
	struct sfsro_root r = { .pk = pk, .seq = seq, .issued = 1, .valid_until = UINT64_MAX,
	                        .root_dir = *dir, .dir_mode = 0755 };
	struct cfs_id vkey;
	size_t len;
	cr_assert(sfsro_root_encode(&r, &sk, buf, sizeof(buf), &len) == 0);
	sfsro_root_version_key(&pk, seq, &vkey);
	add(ring, &vkey, DHASH_KIND_VERSION, buf, len);
	if (newest)
		add(ring, &root_key, DHASH_KIND_ROOT, buf, len);
	return vkey;
}

/* A second tree sharing "sub" with the first: / { sub/, other (inline) }. */
static struct cfs_id second_tree(size_t *ret_new_blocks)
{
	size_t before = ring->n;
	struct cfs_id other, top;
	struct sfsro_inode small = { .size = 6, .mode = 0644, .bsize = 1024,
	                             .inline_data = { (const uint8_t *)"second", 6 } };
	cr_assert(sfsro_build_file(&small, NULL, 0, emit, NULL, &other) == 0);
	struct sfsro_entry top_e[2] = {
		{ .name = { (const uint8_t *)"other", 5 }, .type = SFSRO_T_FILE, .size = 6, .mode = 0644, .key = other },
		{ .name = { (const uint8_t *)"sub", 3 }, .type = SFSRO_T_DIR, .size = 200, .mode = 0755, .key = sub_top },
	};
	cr_assert(sfsro_build_dir(top_e, 2, 1024, emit, NULL, &top) == 0);
	*ret_new_blocks = ring->n - before;
	return top;
}

Test(pin, the_newest_n_versions_are_kept_and_shared_blocks_walked_once)
{
	struct script s = { .window = 32 };
	size_t tree1 = ring->n - 2; /* the first tree's blocks: not the root, not version 1 */
	size_t tree2_new;
	struct cfs_id top2 = second_tree(&tree2_new);
	struct cfs_id v1 = sign_version(1, &root_dir, false);
	struct cfs_id v2 = sign_version(2, &top2, false);
	struct cfs_id v3 = sign_version(3, &root_dir, true); /* a refresh: v1's tree again */

	run_versions = 2;
	struct cfsd_pin_stats st = run(0, 100, &s);
	cr_assert_eq(st.seq, 3);
	cr_assert_eq(st.versions, 2);
	cr_assert_eq(st.versions_gone + st.missing + st.errors + st.restored, 0);
	/* both trees once each, the root key and the two version keys */
	cr_assert_eq(st.blocks, tree1 + tree2_new + 3, "%lu blocks, want %zu", st.blocks,
	             tree1 + tree2_new + 3);
	cr_assert_eq(st.renewed, st.blocks);
	cr_assert_eq(ring->fetched[find(ring, &v1) - ring->b] + ring->refreshed[find(ring, &v1) - ring->b], 0,
	             "version 1 is not kept");
	cr_assert_eq(ring->refreshed[find(ring, &v2) - ring->b], 1);
	cr_assert_eq(ring->refreshed[find(ring, &v3) - ring->b], 1);
	for (size_t i = 0; i < ring->n; i++)
		cr_assert(ring->refreshed[i] <= 1, "block %zu refreshed %u times", i, ring->refreshed[i]);
	cr_assert_eq(ring->refreshed[find(ring, &sub_top) - ring->b], 1, "shared by both trees: once");
}

Test(pin, versions_that_are_gone_are_counted_not_errors)
{
	struct script s = { .window = 32 };
	struct cfs_id v1;
	sfsro_root_version_key(&pk, 1, &v1);
	find(ring, &v1)->gone = true; /* its lease ended */
	sign_version(2, &root_dir, false);
	sign_version(3, &root_dir, true);
	run_versions = 6; /* 3, 2, 1 asked; 1 is gone */
	struct cfsd_pin_stats st = run(0, 100, &s);
	cr_assert_eq(st.versions, 2);
	cr_assert_eq(st.versions_gone, 1);
	cr_assert_eq(st.errors + st.missing, 0);
}

Test(pin, a_version_lost_from_the_ring_is_put_back_from_the_copy)
{
	struct script s = { .window = 32 };
	size_t tree2_new;
	struct cfs_id top2 = second_tree(&tree2_new);
	struct cfs_id v2 = sign_version(2, &top2, false);
	sign_version(3, &root_dir, true);
	run_versions = 2;
	(void)run(0, 100, &s);
	find(ring, &v2)->gone = true;
	s = (struct script){ .window = 4, .lifo = true };
	struct cfsd_pin_stats st = run(3, 100, &s);
	cr_assert_eq(st.restored, 1);
	cr_assert_eq(st.versions, 2);
	cr_assert(!find(ring, &v2)->gone, "version 2 is on the ring again");
	struct sfsro_root r;
	cr_assert(sfsro_root_decode(find(ring, &v2)->p, find(ring, &v2)->len, &r) == 0 && r.seq == 2);
}

Test(pin, the_newest_version_key_missing_everywhere_is_put_back_from_the_root)
{
	struct script s = { .window = 32 };
	struct cfs_id v1;
	sfsro_root_version_key(&pk, 1, &v1);
	find(ring, &v1)->gone = true; /* published before version roots existed */
	struct cfsd_pin_stats st = run(0, 100, &s);
	cr_assert_eq(st.versions, 1);
	cr_assert_eq(st.versions_gone + st.errors + st.missing, 0);
	cr_assert_eq(st.restored, 1);
	cr_assert(!find(ring, &v1)->gone, "the ring holds version 1 under its key again");
}

/* A coded volume (rs:2/4): its data blocks are named by their coded keys,
 * fetched, renewed and put back with the root's code (the ring's get of
 * one returns the whole block, checked against the coded key); its other
 * blocks stay whole. */
Test(pin, a_coded_volume_keeps_its_data_blocks_by_their_code)
{
	struct cfs_id data[3], file, dkey;
	uint8_t content[1024];
	size_t len;

	for (int i = 0; i < 3; i++) {
		memset(content, 0x70 + i, sizeof(content));
		cr_assert(sfsro_data_encode(content, sizeof(content), buf, sizeof(buf), &len) == 0);
		cr_assert(dhash_coded_key(buf, len, 2, 4, &data[i]) == 0);
		add(ring, &data[i], DHASH_KIND_CHASH, buf, len);
	}
	struct sfsro_inode ino = { .size = 3 * 1024, .mode = 0644, .bsize = 1024 };
	cr_assert(sfsro_build_file(&ino, data, 3, emit, NULL, &file) == 0);
	struct sfsro_entry e = { .name = { (const uint8_t *)"f", 1 }, .type = SFSRO_T_FILE,
	                         .size = 3 * 1024, .mode = 0644, .key = file };
	cr_assert(sfsro_build_dir(&e, 1, 1024, emit, NULL, &dkey) == 0);
	struct sfsro_root r = { .pk = pk, .seq = 2, .issued = 1, .valid_until = UINT64_MAX,
	                        .root_dir = dkey, .dir_mode = 0755, .code_m = 2, .code_n = 4 };
	struct cfs_id vkey;
	cr_assert(sfsro_root_encode(&r, &sk, buf, sizeof(buf), &len) == 0);
	add(ring, &root_key, DHASH_KIND_ROOT, buf, len);
	sfsro_root_version_key(&pk, 2, &vkey);
	add(ring, &vkey, DHASH_KIND_VERSION, buf, len);

	struct script s = { .window = 8, .code_m = 2 };
	struct cfsd_pin_stats st = run(0, 100, &s);
	cr_assert_eq(st.seq, 2);
	cr_assert_eq(st.errors + st.missing, 0);
	cr_assert_eq(s.coded, 6, "%u coded actions: a fetch and a renewal per data block", s.coded);
	for (int i = 0; i < 3; i++)
		cr_assert(find(local, &data[i]), "data block %d copied whole under its coded key", i);

	find(ring, &data[1])->gone = true; /* below m fragments: put back */
	s = (struct script){ .window = 8, .code_m = 2 };
	st = run(2, 100, &s);
	cr_assert_eq(st.restored, 1);
	cr_assert_eq(s.puts, 1);
	cr_assert_eq(s.fetches, 1, "only the root fetched: the copies are read here");
	cr_assert(!find(ring, &data[1])->gone);
}
