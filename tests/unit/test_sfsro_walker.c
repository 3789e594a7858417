/* sfsro-format: the volume walker, stepped and fed by a script — no
 * sockets, no loop. Volumes are built in memory with the builder; data
 * blocks are made on demand from their number, so a file of height 3
 * costs only its indirect blocks. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dhash/dhash.h"
#include "sfsro-format/sfsro.h"

#define BS 1024 /* fanout 31: heights 0..3 within 30,000 blocks */

/* ---- the store: structural blocks kept, data blocks made on demand */

static struct cfs_idmap kept, made; /* key -> index in blk, data block number */
static struct blk { uint8_t *p; size_t len; } *blk;
static uint32_t nblk, capblk;
static uint64_t made_size;          /* the file the data blocks belong to */
static unsigned gets;               /* blocks fed */

static int put(void *arg, const struct cfs_id *key, const uint8_t *p, size_t len)
{
	if (cfs_idmap_get(&kept, key, NULL))
		return 0;
	if (nblk == capblk) {
		capblk = capblk ? 2 * capblk : 256;
		blk = xrealloc(blk, capblk * sizeof(*blk));
	}
	blk[nblk] = (struct blk){ xmemdup(p, len), len };
	cfs_idmap_put(&kept, key, nblk++);
	return 0;
}

/* The byte at off of every test file: a block starts with its number,
 * so blocks differ (full blocks of one number are alike in every file). */
static uint8_t pattern(uint64_t off)
{
	uint64_t b = off / BS, i = off % BS;
	return i < 8 ? (uint8_t)(b >> (8 * i)) ^ 0x5a : (uint8_t)(off * 7 + b * 13);
}

static size_t data_block(uint64_t b, uint64_t size, uint8_t *out, size_t cap)
{
	uint8_t payload[BS];
	size_t n = size - b * BS < BS ? (size_t)(size - b * BS) : BS, len;
	for (size_t i = 0; i < n; i++)
		payload[i] = pattern(b * BS + i);
	cr_assert(sfsro_data_encode(payload, n, out, cap, &len) == 0);
	return len;
}

/* Bytes of key, or NULL. */
static const uint8_t *lookup_block(const struct cfs_id *key, size_t *len, uint8_t *scratch)
{
	uint32_t i;
	if (cfs_idmap_get(&kept, key, &i)) {
		*len = blk[i].len;
		return blk[i].p;
	}
	if (cfs_idmap_get(&made, key, &i)) {
		*len = data_block(i, made_size, scratch, 2 * BS);
		return scratch;
	}
	return NULL;
}

static void setup(void)
{
	cr_assert(cfs_crypto_init() == 0);
	gets = 0;
}

static void teardown(void)
{
	for (uint32_t i = 0; i < nblk; i++)
		free(blk[i].p);
	free(blk);
	blk = NULL;
	nblk = capblk = 0;
	cfs_idmap_free(&kept);
	cfs_idmap_free(&made);
}

TestSuite(sfsro_walker, .init = setup, .fini = teardown, .timeout = 60);

/* ---- the script: step; hold the NEEDs; feed them when the walker waits */

enum order { FIFO, LIFO };

struct run {
	enum order order;
	struct sfsro_step *needs;
	unsigned nneeds, max_pending, hints, blocks;
	char (*names)[SFSRO_NAME_MAX + 1];
	unsigned nnames, cap;
	uint64_t last_index;
	struct cfs_idmap seen;              /* BLOCK keys */
	bool dup_block;
	unsigned kinds[8];
};

static void feed_one(sfsro_walker_t *w, const struct cfs_id *key)
{
	uint8_t scratch[2 * BS];
	size_t len;
	const uint8_t *p = lookup_block(key, &len, scratch);
	gets++;
	cr_assert_eq(sfsro_walker_feed(w, key, p ? 0 : -ENOENT, p, p ? len : 0, 0), 0);
}

/* Step w to its end; entries and blocks are recorded in r. */
static int drive(sfsro_walker_t *w, struct run *r)
{
	struct sfsro_step s;
	int st;

	for (;;) {
		st = sfsro_walker_step(w, &s);
		if (st == SFSRO_WALK_NEED) {
			r->needs = xrealloc(r->needs, (r->nneeds + 1) * sizeof(*r->needs));
			r->needs[r->nneeds++] = s;
			if (r->nneeds > r->max_pending)
				r->max_pending = r->nneeds;
		} else if (st == SFSRO_WALK_WAIT) {
			cr_assert(r->nneeds > 0, "waits with nothing asked for");
			unsigned i = r->order == FIFO ? 0 : r->nneeds - 1;
			struct cfs_id key = r->needs[i].key;
			memmove(&r->needs[i], &r->needs[i + 1], (r->nneeds - i - 1) * sizeof(r->needs[0]));
			r->nneeds--;
			feed_one(w, &key);
		} else if (st == SFSRO_WALK_HINT) {
			r->hints++;
		} else if (st == SFSRO_WALK_ENTRY) {
			if (r->nnames == r->cap) {
				r->cap = r->cap ? 2 * r->cap : 64;
				r->names = xrealloc(r->names, r->cap * sizeof(*r->names));
			}
			memcpy(r->names[r->nnames], s.entry->name.p, s.entry->name.len);
			r->names[r->nnames][s.entry->name.len] = 0;
			r->nnames++;
			r->last_index = s.index;
		} else if (st == SFSRO_WALK_BLOCK) {
			r->dup_block |= cfs_idmap_get(&r->seen, &s.key, NULL);
			r->kinds[s.btype]++;
			cfs_idmap_put(&r->seen, &s.key, 0);
			r->blocks++;
		} else {
			return st;
		}
	}
}

static void run_free(struct run *r)
{
	free(r->names);
	free(r->needs);
	cfs_idmap_free(&r->seen);
}

/* ---- building */

static struct cfs_id build_file(uint64_t size)
{
	struct sfsro_inode ino = { .size = size, .mode = 0644, .bsize = BS };
	uint64_t nb = (size + BS - 1) / BS;
	struct cfs_id *keys = xcalloc(nb ? nb : 1, sizeof(*keys)), key;
	uint8_t out[2 * BS], inl[SFSRO_INLINE_MAX];

	made_size = size;
	if (size <= SFSRO_INLINE_MAX) {
		for (uint64_t i = 0; i < size; i++)
			inl[i] = pattern(i);
		ino.inline_data = (struct cfs_bytes){ inl, (size_t)size };
		nb = 0;
	}
	for (uint64_t b = 0; b < nb; b++) {
		size_t len = data_block(b, size, out, sizeof(out));
		cfs_hash(&keys[b], out, len);
		cfs_idmap_put(&made, &keys[b], (uint32_t)b);
	}
	cr_assert(sfsro_build_file(&ino, keys, nb, put, NULL, &key) == 0);
	free(keys);
	return key;
}

static char names[4000][16];

static struct cfs_id build_dir(unsigned n, const char *fmt)
{
	struct sfsro_entry *e = xcalloc(n ? n : 1, sizeof(*e));
	struct cfs_id key, ino = build_file(10);

	for (unsigned i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), fmt, i);
		e[i] = (struct sfsro_entry){ .name = { (const uint8_t *)names[i], strlen(names[i]) },
		                             .type = SFSRO_T_FILE, .size = 10, .mode = 0644, .key = ino };
	}
	cr_assert(sfsro_build_dir(e, n, BS, put, NULL, &key) == 0);
	free(e);
	return key;
}

static void check_read(const struct cfs_id *ino, uint64_t size, uint64_t off, size_t len, enum order o)
{
	sfsro_walker_t *w = sfsro_walker_new();
	struct run r = { .order = o };
	uint8_t *buf = xmalloc(len + 1);
	size_t n = 99;

	sfsro_walker_read(w, ino, off, buf, len, &n);
	cr_assert_eq(drive(w, &r), SFSRO_WALK_DONE, "size %lu off %lu", (unsigned long)size, (unsigned long)off);
	size_t want = off >= size ? 0 : size - off < len ? (size_t)(size - off) : len;
	cr_assert_eq(n, want, "size %lu off %lu len %zu: %zu bytes", (unsigned long)size, (unsigned long)off, len, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(buf[i], pattern(off + i), "byte %lu", (unsigned long)(off + i));
	free(buf);
	run_free(&r);
	sfsro_walker_free(w);
}

/* ---- roots */

static void keypair(struct cfs_pubkey *pk, struct cfs_seckey *sk, uint8_t seed)
{
	uint8_t s[32];
	memset(s, seed, sizeof(s));
	cfs_sign_seed_keypair(s, pk, sk);
}

static int root_walk(const struct cfs_pubkey *pk, const uint8_t *p, size_t len, int status,
                     uint64_t min_seq, uint64_t now, struct sfsro_root *ret)
{
	sfsro_walker_t *w = sfsro_walker_new();
	struct sfsro_step s;
	struct cfs_id key;
	int r;

	sfsro_walker_root(w, pk, min_seq, now, ret);
	cr_assert_eq(sfsro_walker_step(w, &s), SFSRO_WALK_NEED);
	sfsro_root_key(pk, &key);
	cr_assert(cfs_id_eq(&s.key, &key));
	cr_assert_eq(s.btype, SFSRO_B_ROOT);
	cr_assert_eq(sfsro_walker_step(w, &s), SFSRO_WALK_WAIT);
	cr_assert_eq(sfsro_walker_feed(w, &s.key, 0, p, len, 0), -ENOENT, "a key not asked for");
	cr_assert_eq(sfsro_walker_feed(w, &key, status, p, len, 0), 0);
	r = sfsro_walker_step(w, &s);
	cr_assert_eq(sfsro_walker_step(w, &s), r, "the end is sticky");
	sfsro_walker_free(w);
	return r;
}

Test(sfsro_walker, root)
{
	struct cfs_pubkey pk, other;
	struct cfs_seckey sk, osk;
	struct sfsro_root root = { .seq = 5, .issued = 100, .valid_until = 1000, .dir_mode = 0755 }, got;
	uint8_t buf[1024];
	size_t len;

	keypair(&pk, &sk, 1);
	keypair(&other, &osk, 2);
	root.pk = pk;
	cfs_hash(&root.root_dir, "x", 1);
	cr_assert(sfsro_root_encode(&root, &sk, buf, sizeof(buf), &len) == 0);
	cr_assert_eq(root_walk(&pk, buf, len, 0, 5, 999, &got), SFSRO_WALK_DONE);
	cr_assert_eq(got.seq, 5);
	cr_assert(cfs_id_eq(&got.root_dir, &root.root_dir));
	cr_assert_eq(root_walk(&pk, buf, len, 0, 6, 999, &got), -ESTALE);
	cr_assert_eq(root_walk(&pk, buf, len, 0, 0, 1001, &got), -EKEYEXPIRED);
	cr_assert_eq(root_walk(&other, buf, len, 0, 0, 0, &got), -EKEYREJECTED);
	cr_assert_eq(root_walk(&pk, NULL, 0, -ENOENT, 0, 0, &got), -ENOENT);
	buf[len - 3] ^= 1; /* the signature */
	cr_assert_eq(root_walk(&pk, buf, len, 0, 0, 0, &got), -EBADMSG);
}

static int version_walk(const struct cfs_pubkey *pk, uint64_t seq, const uint8_t *p, size_t len,
                        struct sfsro_root *ret)
{
	sfsro_walker_t *w = sfsro_walker_new();
	struct sfsro_step s;
	struct cfs_id key, newest;
	int r;

	sfsro_walker_root_version(w, pk, seq, ret);
	cr_assert_eq(sfsro_walker_step(w, &s), SFSRO_WALK_NEED);
	sfsro_root_version_key(pk, seq, &key);
	sfsro_root_key(pk, &newest);
	cr_assert(cfs_id_eq(&s.key, &key), "a version comes from its version key");
	cr_assert(!cfs_id_eq(&key, &newest));
	cr_assert_eq(sfsro_walker_feed(w, &key, 0, p, len, 0), 0);
	r = sfsro_walker_step(w, &s);
	sfsro_walker_free(w);
	return r;
}

Test(sfsro_walker, a_version_by_number)
{
	struct cfs_pubkey pk, other;
	struct cfs_seckey sk, osk;
	struct sfsro_root root = { .seq = 5, .issued = 100, .valid_until = 1000, .dir_mode = 0755 }, got;
	struct cfs_id k5, k6, k5o;
	uint8_t buf[1024];
	size_t len;
	uint64_t seq;

	keypair(&pk, &sk, 1);
	keypair(&other, &osk, 2);
	root.pk = pk;
	cfs_hash(&root.root_dir, "x", 1);
	cr_assert(sfsro_root_encode(&root, &sk, buf, sizeof(buf), &len) == 0);
	/* explicit: neither expiry nor a rollback bound applies */
	cr_assert_eq(version_walk(&pk, 5, buf, len, &got), SFSRO_WALK_DONE);
	cr_assert_eq(got.seq, 5);
	/* another number's bytes, another volume's, a broken signature */
	cr_assert_eq(version_walk(&pk, 6, buf, len, &got), -EBADMSG);
	cr_assert_eq(version_walk(&other, 5, buf, len, &got), -EKEYREJECTED);
	/* keys: distinct per volume and per number; servers verify them */
	sfsro_root_version_key(&pk, 5, &k5);
	sfsro_root_version_key(&pk, 6, &k6);
	sfsro_root_version_key(&other, 5, &k5o);
	cr_assert(!cfs_id_eq(&k5, &k6) && !cfs_id_eq(&k5, &k5o));
	cr_assert_eq(dhash_verify(DHASH_KIND_VERSION, &k5, buf, len, &seq), 0);
	cr_assert_eq(seq, 5);
	cr_assert_eq(dhash_verify(DHASH_KIND_VERSION, &k6, buf, len, &seq), -EBADMSG);
	cr_assert(dhash_verify(DHASH_KIND_ROOT, &k5, buf, len, &seq) < 0, "not the newest's key");
	struct cfs_id got_key;
	cr_assert_eq(dhash_block_key(DHASH_KIND_VERSION, buf, len, &got_key), 0);
	cr_assert(cfs_id_eq(&got_key, &k5));
	buf[len - 3] ^= 1;
	cr_assert_eq(version_walk(&pk, 5, buf, len, &got), -EBADMSG);
	cr_assert(dhash_verify(DHASH_KIND_VERSION, &k5, buf, len, &seq) < 0);
}

/* ---- files of every height, read at every kind of offset */

Test(sfsro_walker, read_every_height)
{
	/* inline, height 0 (<= 31 blocks), 1 (<= 961), 2 (<= 29,791), 3 */
	static const uint64_t sizes[] = { 0, 1, 1000, 1025, 31 * BS, 31 * BS + 1, 961 * BS, 961 * BS + 5,
	                                  29791ull * BS + 77 };
	for (size_t i = 0; i < CFS_ARRAY_SIZE(sizes); i++) {
		uint64_t size = sizes[i];
		struct cfs_id ino = build_file(size);
		check_read(&ino, size, 0, 100000, FIFO);
		check_read(&ino, size, size / 2, 3 * BS + 17, LIFO);
		check_read(&ino, size, size, 10, FIFO);        /* at the end */
		check_read(&ino, size, size + 5000, 10, FIFO); /* past it */
		check_read(&ino, size, 3, 0, FIFO);            /* nothing */
		if (size > 31 * BS) /* across an indirect block's end: blocks 30 and 31 */
			check_read(&ino, size, 31 * BS - 10, 20, LIFO);
		if (size > 961 * BS) /* across a height-2 block's end */
			check_read(&ino, size, 961ull * BS - 3000, 6000, LIFO);
		cfs_idmap_free(&made);
	}
}

Test(sfsro_walker, read_asks_in_parallel_once_per_key)
{
	uint64_t size = 100 * BS;
	struct cfs_id ino = build_file(size);
	sfsro_walker_t *w = sfsro_walker_new();
	struct run r = { .order = LIFO };
	uint8_t *buf = xmalloc(40 * BS);
	size_t n;

	/* 40 data blocks under two indirect blocks: those two are asked
	 * for together, then all the data blocks */
	sfsro_walker_read(w, &ino, 20 * BS, buf, 40 * BS, &n);
	gets = 0;
	cr_assert_eq(drive(w, &r), SFSRO_WALK_DONE);
	cr_assert_eq(n, 40 * BS);
	cr_assert_eq(gets, 1 + 2 + 40, "one fetch per distinct block: %u", gets);
	cr_assert_geq(r.max_pending, 20, "%u asked for at once", r.max_pending);
	run_free(&r);

	/* a file of one repeated block: one fetch for its one data key */
	struct sfsro_inode same = { .size = 20 * BS, .mode = 0644, .bsize = BS };
	struct cfs_id keys[20], key;
	uint8_t out[2 * BS];
	size_t len = data_block(0, BS, out, sizeof(out));
	made_size = BS;
	cfs_hash(&keys[0], out, len);
	cfs_idmap_put(&made, &keys[0], 0);
	for (int i = 1; i < 20; i++)
		keys[i] = keys[0];
	cr_assert(sfsro_build_file(&same, keys, 20, put, NULL, &key) == 0);
	struct run r2 = { .order = FIFO };
	sfsro_walker_read(w, &key, 0, buf, 20 * BS, &n);
	gets = 0;
	cr_assert_eq(drive(w, &r2), SFSRO_WALK_DONE);
	cr_assert_eq(gets, 2, "the inode, and the one data block: %u", gets);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(buf[i], pattern(i % BS));
	run_free(&r2);
	free(buf);
	sfsro_walker_free(w);
}

Test(sfsro_walker, inode_and_locate)
{
	uint64_t size = 1000 * BS; /* height 2 */
	struct cfs_id ino = build_file(size), key;
	sfsro_walker_t *w = sfsro_walker_new();
	struct sfsro_inode got;
	uint8_t *bytes, out[2 * BS];
	size_t len;
	struct run r = { 0 };

	sfsro_walker_inode(w, &ino, &got, &bytes, &len);
	cr_assert_eq(drive(w, &r), SFSRO_WALK_DONE);
	cr_assert_eq(got.size, size);
	cr_assert_eq(got.height, 2);
	cr_assert(got.keys >= (const struct cfs_id *)bytes && (const uint8_t *)got.keys < bytes + len);
	free(bytes);

	for (uint64_t b = 0; b < 1000; b += 333) {
		struct run rl = { 0 };
		sfsro_walker_locate(w, &ino, b, &key);
		gets = 0;
		cr_assert_eq(drive(w, &rl), SFSRO_WALK_DONE);
		cr_assert_eq(gets, 3, "the inode and two indirect blocks, no data");
		struct cfs_id want;
		len = data_block(b, size, out, sizeof(out));
		cfs_hash(&want, out, len);
		cr_assert(cfs_id_eq(&key, &want));
		run_free(&rl);
	}
	struct run rx = { 0 };
	sfsro_walker_locate(w, &ino, 1000, &key);
	cr_assert_lt(drive(w, &rx), 0, "past the end");
	/* a file whose inode names its data blocks */
	ino = build_file(5 * BS);
	sfsro_walker_locate(w, &ino, 4, &key);
	struct run ry = { 0 };
	cr_assert_eq(drive(w, &ry), SFSRO_WALK_DONE);
	ino = build_file(10); /* inline: no blocks */
	sfsro_walker_locate(w, &ino, 0, &key);
	struct run rz = { 0 };
	cr_assert_eq(drive(w, &rz), -EINVAL);
	run_free(&r);
	run_free(&rx);
	run_free(&ry);
	run_free(&rz);
	sfsro_walker_free(w);
}

/* ---- directories */

static int lookup(const struct cfs_id *dir, const char *name, struct sfsro_node *ret)
{
	sfsro_walker_t *w = sfsro_walker_new();
	struct run r = { 0 };
	sfsro_walker_lookup(w, dir, (const uint8_t *)name, strlen(name), ret);
	int st = drive(w, &r);
	sfsro_walker_free(w);
	run_free(&r);
	return st;
}

Test(sfsro_walker, lookup_in_a_large_directory)
{
	struct cfs_id top = build_dir(3000, "name-%05u");
	struct sfsro_node node;

	for (unsigned i = 0; i < 3000; i += 97) {
		gets = 0;
		cr_assert_eq(lookup(&top, names[i], &node), 0, "%s", names[i]);
		cr_assert_str_eq((const char *)node.name, names[i]);
		cr_assert_eq(node.e.type, SFSRO_T_FILE);
		cr_assert_geq(gets, 3, "a multi-level directory: %u blocks", gets);
	}
	cr_assert_eq(lookup(&top, "name-02999", &node), 0);
	cr_assert_eq(lookup(&top, "name-", &node), -ENOENT);      /* before the first */
	cr_assert_eq(lookup(&top, "name-01000x", &node), -ENOENT); /* between two */
	cr_assert_eq(lookup(&top, "zzz", &node), -ENOENT);        /* after the last */
	cr_assert_eq(lookup(&top, "a", &node), -ENOENT);
	cr_assert_eq(lookup(&top, "", &node), -ENOENT);
	char longname[300];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[299] = 0;
	cr_assert_eq(lookup(&top, longname, &node), -ENAMETOOLONG);
}

Test(sfsro_walker, readdir_streams_and_seeks)
{
	struct cfs_id top = build_dir(3000, "e%05u");
	sfsro_walker_t *w = sfsro_walker_new();
	struct run r = { 0 };

	sfsro_walker_readdir(w, &top);
	cr_assert_eq(drive(w, &r), SFSRO_WALK_DONE);
	cr_assert_eq(r.nnames, 3000);
	for (unsigned i = 0; i < 3000; i++)
		cr_assert_str_eq(r.names[i], names[i]);
	cr_assert_gt(r.hints, 10, "the next leaf is hinted: %u", r.hints);
	unsigned first_gets = gets;

	/* back to the start: the listing begins again from the top */
	struct run r2 = { 0 };
	sfsro_walker_seek(w, 0);
	cr_assert_eq(drive(w, &r2), SFSRO_WALK_DONE);
	cr_assert_eq(r2.nnames, 3000);
	cr_assert_eq(gets, 2 * first_gets);
	run_free(&r2);

	/* a few entries, then on from one before the last handed out */
	struct sfsro_step s;
	sfsro_walker_seek(w, 1500);
	struct run r3 = { 0 };
	int st;
	unsigned got = 0;
	while ((st = sfsro_walker_step(w, &s)) != SFSRO_WALK_ENTRY || ++got < 5) {
		cr_assert_geq(st, 0);
		if (st == SFSRO_WALK_NEED)
			feed_one(w, &s.key);
	}
	cr_assert_eq(s.index, 1504);
	cr_assert(s.entry->name.len == 6 && memcmp(s.entry->name.p, names[1504], 6) == 0);
	unsigned before = gets;
	sfsro_walker_seek(w, 1504);
	cr_assert_eq(sfsro_walker_step(w, &s), SFSRO_WALK_ENTRY);
	cr_assert_eq(s.index, 1504);
	cr_assert_eq(gets, before, "on within the leaf: no block");
	sfsro_walker_seek(w, 2990);
	cr_assert_eq(drive(w, &r3), SFSRO_WALK_DONE);
	cr_assert_eq(r3.nnames, 10);
	cr_assert_str_eq(r3.names[0], names[2990]);
	sfsro_walker_seek(w, 5000);
	cr_assert_eq(drive(w, &r3), SFSRO_WALK_DONE, "past the end");
	cr_assert_eq(r3.nnames, 10);
	run_free(&r3);
	run_free(&r);
	sfsro_walker_free(w);
}

Test(sfsro_walker, readdir_empty_and_small)
{
	struct cfs_id empty = build_dir(0, "x%u"), small = build_dir(3, "s%u");
	sfsro_walker_t *w = sfsro_walker_new();
	struct run r = { 0 }, r2 = { 0 };

	sfsro_walker_readdir(w, &empty);
	cr_assert_eq(drive(w, &r), SFSRO_WALK_DONE);
	cr_assert_eq(r.nnames, 0);
	sfsro_walker_readdir(w, &small);
	cr_assert_eq(drive(w, &r2), SFSRO_WALK_DONE);
	cr_assert_eq(r2.nnames, 3);
	cr_assert_eq(r2.hints, 0);
	run_free(&r);
	run_free(&r2);
	sfsro_walker_free(w);
}

/* ---- paths over a small volume */

static struct sfsro_root small_volume(void)
{
	struct cfs_id sub = build_dir(3, "s%u"), big = build_file(5000);
	struct sfsro_entry e[4] = {
		{ .name = { (const uint8_t *)"big", 3 }, .type = SFSRO_T_FILE, .size = 5000, .mode = 0644, .key = big },
		{ .name = { (const uint8_t *)"l", 1 }, .type = SFSRO_T_SYMLINK, .size = 3, .mode = 0777,
		  .target = { (const uint8_t *)"big", 3 } },
		{ .name = { (const uint8_t *)"sub", 3 }, .type = SFSRO_T_DIR, .size = 3, .mode = 0755, .key = sub },
	};
	struct sfsro_root root = { .dir_mode = 0755 };
	cr_assert(sfsro_build_dir(e, 3, BS, put, NULL, &root.root_dir) == 0);
	return root;
}

static int path(const struct sfsro_root *root, const char *p, struct sfsro_node *ret)
{
	sfsro_walker_t *w = sfsro_walker_new();
	struct run r = { 0 };
	sfsro_walker_path(w, root, p, ret);
	int st = drive(w, &r);
	sfsro_walker_free(w);
	run_free(&r);
	return st;
}

Test(sfsro_walker, paths)
{
	struct sfsro_root root = small_volume();
	struct sfsro_node n;

	cr_assert_eq(path(&root, "/", &n), 0);
	cr_assert_eq(n.e.type, SFSRO_T_DIR);
	cr_assert(cfs_id_eq(&n.e.key, &root.root_dir));
	cr_assert_eq(path(&root, "", &n), 0);
	cr_assert_eq(path(&root, "//sub//s1/", &n), 0);
	cr_assert_str_eq((const char *)n.name, "s1");
	cr_assert_eq(path(&root, "sub/s2", &n), 0);
	cr_assert_eq(path(&root, "/l", &n), 0);
	cr_assert_eq(n.e.type, SFSRO_T_SYMLINK);
	cr_assert_str_eq((const char *)n.target, "big");
	cr_assert_eq(path(&root, "/big/x", &n), -ENOTDIR);
	cr_assert_eq(path(&root, "/l/x", &n), -ENOTDIR, "links are not followed");
	cr_assert_eq(path(&root, "/sub/nope", &n), -ENOENT);
	cr_assert_eq(path(&root, "/nope/s1", &n), -ENOENT);
	char p[5000];
	memset(p, 'a', sizeof(p) - 1);
	p[sizeof(p) - 1] = 0;
	cr_assert_eq(path(&root, p, &n), -ENAMETOOLONG);
	p[0] = '/';
	p[300] = 0;
	cr_assert_eq(path(&root, p, &n), -ENAMETOOLONG, "a component over 255 bytes");
}

/* ---- every block once */

Test(sfsro_walker, visit_meets_every_block_once)
{
	/* a directory of every kind of entry, files of heights 0..2, one
	 * subdirectory twice (a DAG) and a large directory */
	struct cfs_id f0 = build_file(5 * BS), f1 = build_file(40 * BS + 3);
	cfs_idmap_free(&made);
	struct cfs_id f2 = build_file(1000 * BS), fi = build_file(7), big = build_dir(600, "d%04u");
	uint32_t data_blocks = 1000 + 1; /* c's; a's and b's full blocks are c's first ones */
	struct sfsro_entry e[] = {
		{ .name = { (const uint8_t *)"a", 1 }, .type = SFSRO_T_FILE, .size = 5 * BS, .key = f0 },
		{ .name = { (const uint8_t *)"b", 1 }, .type = SFSRO_T_FILE, .size = 40 * BS + 3, .key = f1 },
		{ .name = { (const uint8_t *)"big", 3 }, .type = SFSRO_T_DIR, .size = 600, .key = big },
		{ .name = { (const uint8_t *)"c", 1 }, .type = SFSRO_T_FILE, .size = 1000 * BS, .key = f2 },
		{ .name = { (const uint8_t *)"i", 1 }, .type = SFSRO_T_FILE, .size = 7, .key = fi },
		{ .name = { (const uint8_t *)"l", 1 }, .type = SFSRO_T_SYMLINK, .size = 1, .target = { (const uint8_t *)"a", 1 } },
		{ .name = { (const uint8_t *)"same", 4 }, .type = SFSRO_T_DIR, .size = 600, .key = big },
	};
	struct cfs_id top;
	cr_assert(sfsro_build_dir(e, CFS_ARRAY_SIZE(e), BS, put, NULL, &top) == 0);
	sfsro_walker_t *w = sfsro_walker_new();
	struct run r = { .order = LIFO };
	sfsro_walker_visit(w, &top);
	gets = 0;
	cr_assert_eq(drive(w, &r), SFSRO_WALK_DONE);
	cr_assert(!r.dup_block, "a block reported twice");
	cr_assert_eq(r.kinds[SFSRO_B_INODE], 5, "a, b, c, i and big's entries' inode");
	/* c: 33 + 2; b: 2, its first one is c's first */
	cr_assert_eq(r.kinds[SFSRO_B_INDIRECT], 33 + 2 + 1, "b's and c's indirect blocks");
	cr_assert_eq(r.blocks, nblk + data_blocks, "%u blocks, %u structural + %u data", r.blocks, nblk,
	             data_blocks);
	cr_assert_eq(gets, nblk, "every structural block fetched once, no data block");
	cr_assert_gt(r.max_pending, 1, "blocks asked for in parallel");
	run_free(&r);
	sfsro_walker_free(w);
}

/* ---- what a hostile or broken store can do */

Test(sfsro_walker, corrupt_block_is_ebadmsg)
{
	struct cfs_id top = build_dir(3, "c%u");
	sfsro_walker_t *w = sfsro_walker_new();
	struct sfsro_step s;
	uint32_t i;

	cr_assert(cfs_idmap_get(&kept, &top, &i));
	uint8_t *bad = xmemdup(blk[i].p, blk[i].len);
	bad[blk[i].len - 1] ^= 0x40;
	sfsro_walker_readdir(w, &top);
	cr_assert_eq(sfsro_walker_step(w, &s), SFSRO_WALK_NEED);
	cr_assert_eq(sfsro_walker_feed(w, &top, 0, bad, blk[i].len, 0), 0);
	cr_assert_eq(sfsro_walker_step(w, &s), -EBADMSG);
	/* trusted (SFSRO_FEED_VERIFIED): the structure is still checked */
	sfsro_walker_readdir(w, &top);
	cr_assert_eq(sfsro_walker_step(w, &s), SFSRO_WALK_NEED);
	cr_assert_eq(sfsro_walker_feed(w, &top, 0, bad, blk[i].len - 5, SFSRO_FEED_VERIFIED), 0);
	cr_assert_eq(sfsro_walker_step(w, &s), -EPROTO);
	free(bad);
	sfsro_walker_free(w);
}

Test(sfsro_walker, missing_block_propagates)
{
	struct cfs_id ino = build_file(100 * BS);
	sfsro_walker_t *w = sfsro_walker_new();
	uint8_t buf[4 * BS];
	size_t n;
	struct run r = { 0 };
	uint32_t i;

	cfs_idmap_free(&made); /* every data block lost */
	sfsro_walker_read(w, &ino, 0, buf, sizeof(buf), &n);
	cr_assert_eq(drive(w, &r), -ENOENT);
	/* a late answer for the other blocks changes nothing */
	for (unsigned k = 0; k < r.nneeds; k++)
		cr_assert_eq(sfsro_walker_feed(w, &r.needs[k].key, 0, NULL, 0, 0), 0);
	struct sfsro_step s;
	cr_assert_eq(sfsro_walker_step(w, &s), -ENOENT);
	/* a lost inode */
	struct cfs_id nowhere;
	cfs_hash(&nowhere, "nowhere", 7);
	struct run r2 = { 0 };
	sfsro_walker_read(w, &nowhere, 0, buf, 10, &n);
	cr_assert_eq(drive(w, &r2), -ENOENT);
	cr_assert_eq(n, 0);
	/* a block of the wrong kind where an inode should be */
	struct cfs_id dir = build_dir(2, "k%u");
	cr_assert(cfs_idmap_get(&kept, &dir, &i));
	struct run r3 = { 0 };
	sfsro_walker_read(w, &dir, 0, buf, 10, &n);
	cr_assert_eq(drive(w, &r3), -EPROTO);
	run_free(&r);
	run_free(&r2);
	run_free(&r3);
	sfsro_walker_free(w);
}

/* A lying cache (fed as verified): blocks under made-up keys. */
static struct cfs_id fake(const char *s)
{
	struct cfs_id k;
	cfs_hash(&k, s, strlen(s));
	return k;
}

static uint8_t *enc_dir(const struct sfsro_dir *d, size_t *len)
{
	static uint8_t buf[4][SFSRO_BLOCK_SIZE_MAX];
	static unsigned which;
	uint8_t *b = buf[which++ % 4];
	cr_assert(sfsro_dir_encode(d, b, SFSRO_BLOCK_SIZE_MAX, len) == 0);
	return b;
}

/* Step w, answering every NEED from the table as verified. */
static int drive_lies(sfsro_walker_t *w, const struct cfs_id *keys, uint8_t *const *bytes,
                      const size_t *lens, unsigned n, unsigned *ret_steps)
{
	struct sfsro_step s;
	int st;

	*ret_steps = 0;
	while ((st = sfsro_walker_step(w, &s)) > 0 && ++*ret_steps < 100000) {
		if (st != SFSRO_WALK_NEED)
			continue;
		unsigned i = 0;
		while (i < n && !cfs_id_eq(&keys[i], &s.key))
			i++;
		cr_assert(i < n);
		cr_assert_eq(sfsro_walker_feed(w, &s.key, 0, bytes[i], lens[i], SFSRO_FEED_VERIFIED), 0);
	}
	return st;
}

Test(sfsro_walker, a_directory_pointing_at_its_ancestor)
{
	/* top: "sub" -> mid; mid: "up" -> top. A cycle needs a hash fixed
	 * point, so only a lying cache can show one. */
	struct cfs_id k[2] = { fake("top"), fake("mid") };
	struct sfsro_entry te = { .name = { (const uint8_t *)"sub", 3 }, .type = SFSRO_T_DIR, .key = k[1] };
	struct sfsro_entry me = { .name = { (const uint8_t *)"up", 2 }, .type = SFSRO_T_DIR, .key = k[0] };
	struct sfsro_dir td = { .n = 1, .entries = &te }, md = { .n = 1, .entries = &me };
	uint8_t *b[2];
	size_t len[2];
	unsigned steps;
	b[0] = enc_dir(&td, &len[0]);
	b[1] = enc_dir(&md, &len[1]);
	sfsro_walker_t *w = sfsro_walker_new();

	sfsro_walker_visit(w, &k[0]);
	cr_assert_eq(drive_lies(w, k, b, len, 2, &steps), SFSRO_WALK_DONE, "a visit meets each block once");
	cr_assert_lt(steps, 10);
	struct sfsro_root root = { .root_dir = k[0] };
	struct sfsro_node n;
	sfsro_walker_path(w, &root, "/sub/up/sub/up/sub/up/sub", &n);
	cr_assert_eq(drive_lies(w, k, b, len, 2, &steps), SFSRO_WALK_DONE, "a path is finite");
	cr_assert(cfs_id_eq(&n.e.key, &k[1]));
	sfsro_walker_path(w, &root, "/sub/up/sub/up/nope", &n);
	cr_assert_eq(drive_lies(w, k, b, len, 2, &steps), -ENOENT);
	sfsro_walker_readdir(w, &k[1]);
	cr_assert_eq(drive_lies(w, k, b, len, 2, &steps), SFSRO_WALK_DONE);
	/* a directory whose index names itself: a child is one level down */
	struct sfsro_dir_child c = { .first = { (const uint8_t *)"a", 1 }, .key = k[0] };
	struct sfsro_dir self = { .height = 1, .n = 1, .children = &c };
	b[0] = enc_dir(&self, &len[0]);
	sfsro_walker_readdir(w, &k[0]);
	cr_assert_eq(drive_lies(w, k, b, len, 1, &steps), -EPROTO);
	sfsro_walker_lookup(w, &k[0], (const uint8_t *)"a", 1, &n);
	cr_assert_eq(drive_lies(w, k, b, len, 1, &steps), -EPROTO);
	sfsro_walker_free(w);
}

Test(sfsro_walker, an_indirect_block_pointing_at_itself)
{
	/* an inode of height 2 over one indirect block that names itself */
	struct cfs_id k[2] = { fake("inode"), fake("indirect") };
	uint8_t ib[256], nb[512];
	size_t len[2];
	struct sfsro_inode ino = { .size = 2000ull * BS, .mode = 0644, .bsize = BS,
	                           .fanout = sfsro_fanout(BS), .height = 2, .nkeys = 3 };
	struct cfs_id keys[3] = { k[1], k[1], k[1] };
	ino.keys = keys;
	cr_assert(sfsro_inode_encode(&ino, nb, sizeof(nb), &len[0]) == 0);
	cr_assert(sfsro_indirect_encode(2, &k[1], 1, ib, sizeof(ib), &len[1]) == 0);
	uint8_t *b[2] = { nb, ib };
	uint8_t buf[BS];
	size_t n;
	unsigned steps;
	sfsro_walker_t *w = sfsro_walker_new();

	sfsro_walker_read(w, &k[0], 0, buf, sizeof(buf), &n);
	cr_assert_eq(drive_lies(w, k, b, len, 2, &steps), -EPROTO, "heights only go down");
	cr_assert_lt(steps, 10);
	/* through the hash check, the same lie is a bad block */
	sfsro_walker_read(w, &k[0], 0, buf, sizeof(buf), &n);
	struct sfsro_step s;
	cr_assert_eq(sfsro_walker_step(w, &s), SFSRO_WALK_NEED);
	cr_assert_eq(sfsro_walker_feed(w, &k[0], 0, nb, len[0], SFSRO_FEED_VERIFIED), 0);
	cr_assert_eq(sfsro_walker_step(w, &s), SFSRO_WALK_NEED);
	cr_assert_eq(sfsro_walker_feed(w, &k[1], 0, ib, len[1], 0), 0);
	cr_assert_eq(sfsro_walker_step(w, &s), -EBADMSG);
	/* a visit: the block is met once */
	struct cfs_id top = fake("top");
	struct sfsro_entry e = { .name = { (const uint8_t *)"f", 1 }, .type = SFSRO_T_FILE, .key = k[0] };
	struct sfsro_dir d = { .n = 1, .entries = &e };
	struct cfs_id vk[3] = { top, k[0], k[1] };
	size_t vlen[3] = { 0, len[0], len[1] };
	uint8_t *vb[3] = { enc_dir(&d, &vlen[0]), nb, ib };
	sfsro_walker_visit(w, &top);
	cr_assert_eq(drive_lies(w, vk, vb, vlen, 3, &steps), SFSRO_WALK_DONE, "a key met once ends there");
	cr_assert_lt(steps, 10);
	sfsro_walker_free(w);
}

Test(sfsro_walker, directory_ranges_out_of_order)
{
	/* an index [a -> L1, m -> L2] whose L1 holds a name above m */
	struct sfsro_entry l1e[2] = { { .name = { (const uint8_t *)"a", 1 }, .type = SFSRO_T_SYMLINK,
	                                .target = { (const uint8_t *)"t", 1 } },
	                              { .name = { (const uint8_t *)"z", 1 }, .type = SFSRO_T_SYMLINK,
	                                .target = { (const uint8_t *)"t", 1 } } };
	struct sfsro_entry l2e[1] = { { .name = { (const uint8_t *)"m", 1 }, .type = SFSRO_T_SYMLINK,
	                                .target = { (const uint8_t *)"t", 1 } } };
	struct sfsro_dir l1 = { .n = 2, .entries = l1e }, l2 = { .n = 1, .entries = l2e };
	struct cfs_id k1, k2, top;
	uint8_t buf[4096];
	size_t len;
	cr_assert(sfsro_dir_encode(&l1, buf, sizeof(buf), &len) == 0);
	cfs_hash(&k1, buf, len);
	put(NULL, &k1, buf, len);
	cr_assert(sfsro_dir_encode(&l2, buf, sizeof(buf), &len) == 0);
	cfs_hash(&k2, buf, len);
	put(NULL, &k2, buf, len);
	struct sfsro_dir_child c[2] = { { { (const uint8_t *)"a", 1 }, k1 }, { { (const uint8_t *)"m", 1 }, k2 } };
	struct sfsro_dir idx = { .height = 1, .n = 2, .children = c };
	cr_assert(sfsro_dir_encode(&idx, buf, sizeof(buf), &len) == 0);
	cfs_hash(&top, buf, len);
	put(NULL, &top, buf, len);

	sfsro_walker_t *w = sfsro_walker_new();
	struct run r = { 0 };
	struct sfsro_node n;
	sfsro_walker_readdir(w, &top);
	cr_assert_eq(drive(w, &r), -EPROTO);
	cr_assert_eq(r.nnames, 0, "nothing is listed from a misplaced leaf");
	cr_assert_eq(lookup(&top, "a", &n), -EPROTO);
	cr_assert_eq(lookup(&top, "m", &n), 0, "the honest part still answers");
	/* a leaf at the wrong height, and an empty leaf below an index */
	struct sfsro_dir_child c2[2] = { { { (const uint8_t *)"a", 1 }, top }, { { (const uint8_t *)"m", 1 }, k2 } };
	struct sfsro_dir idx2 = { .height = 1, .n = 2, .children = c2 };
	struct cfs_id top2, empty, top3;
	cr_assert(sfsro_dir_encode(&idx2, buf, sizeof(buf), &len) == 0);
	cfs_hash(&top2, buf, len);
	put(NULL, &top2, buf, len);
	cr_assert_eq(lookup(&top2, "b", &n), -EPROTO);
	struct sfsro_dir none = { .n = 0 };
	cr_assert(sfsro_dir_encode(&none, buf, sizeof(buf), &len) == 0);
	cfs_hash(&empty, buf, len);
	put(NULL, &empty, buf, len);
	struct sfsro_dir_child c3[1] = { { { (const uint8_t *)"a", 1 }, empty } };
	struct sfsro_dir idx3 = { .height = 1, .n = 1, .children = c3 };
	cr_assert(sfsro_dir_encode(&idx3, buf, sizeof(buf), &len) == 0);
	cfs_hash(&top3, buf, len);
	put(NULL, &top3, buf, len);
	struct run r3 = { 0 };
	sfsro_walker_readdir(w, &top3);
	cr_assert_eq(drive(w, &r3), -EPROTO);
	run_free(&r);
	run_free(&r3);
	sfsro_walker_free(w);
}

Test(sfsro_walker, the_api_at_its_edges)
{
	sfsro_walker_t *w = sfsro_walker_new();
	struct sfsro_step s;
	struct cfs_id k = fake("k");

	cr_assert_eq(sfsro_walker_step(w, &s), -EINVAL, "no operation started");
	cr_assert_eq(sfsro_walker_feed(w, &k, 0, NULL, 0, 0), -ENOENT);
	sfsro_walker_free(NULL);
	sfsro_walker_free(w);
}
