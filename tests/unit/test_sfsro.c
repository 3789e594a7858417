/* sfsro-format: test vectors, round trips, tampering, roots, trees. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfsro-format/sfsro.h"

/* ---- an in-memory block store, as a walker source */

#define STORE_SLOTS (1u << 17)
struct mem_store {
	struct slot { bool used; struct cfs_id key; uint8_t *p; size_t len; } *s;
	size_t n;
};

static struct slot *slot_of(struct mem_store *m, const struct cfs_id *k)
{
	uint64_t h;
	memcpy(&h, k->b, 8);
	for (size_t i = h & (STORE_SLOTS - 1);; i = (i + 1) & (STORE_SLOTS - 1))
		if (!m->s[i].used || cfs_id_eq(&m->s[i].key, k))
			return &m->s[i];
}

static int mem_put(void *arg, const struct cfs_id *key, const uint8_t *p, size_t len)
{
	struct mem_store *m = arg;
	struct slot *s = slot_of(m, key);
	if (!s->used) {
		cr_assert(m->n < STORE_SLOTS / 2);
		s->used = true;
		s->key = *key;
		s->p = xmemdup(p, len);
		s->len = len;
		m->n++;
	}
	return 0;
}

static int mem_get(void *ctx, const struct cfs_id *key, uint8_t **ret, size_t *ret_len)
{
	struct slot *s = slot_of(ctx, key);
	if (!s->used)
		return -ENOENT;
	*ret = xmemdup(s->p, s->len);
	*ret_len = s->len;
	return 0;
}

static struct mem_store store;
static struct sfsro_source src = { mem_get, &store };

static void setup(void)
{
	cr_assert(cfs_crypto_init() == 0);
	store.s = calloc(STORE_SLOTS, sizeof(*store.s));
	store.n = 0;
}

static void teardown(void)
{
	for (size_t i = 0; i < STORE_SLOTS; i++)
		free(store.s[i].p);
	free(store.s);
}

TestSuite(sfsro, .init = setup, .fini = teardown, .timeout = 120);

/* ---- test vectors (docs/FORMAT.md) */

static char *hex(const uint8_t *p, size_t n)
{
	char *s = malloc(2 * n + 1);
	for (size_t i = 0; i < n; i++)
		sprintf(s + 2 * i, "%02x", p[i]);
	return s;
}

static void keypair(struct cfs_pubkey *pk, struct cfs_seckey *sk)
{
	uint8_t seed[32];
	for (int i = 0; i < 32; i++)
		seed[i] = (uint8_t)i;
	cfs_sign_seed_keypair(seed, pk, sk);
}

static uint8_t buf[SFSRO_BLOCK_SIZE_MAX + 8192];

#define CHECK_HEX(len, expect) do { char *h_ = hex(buf, (len)); \
	cr_assert_str_eq(h_, expect); free(h_); } while (0)

Test(sfsro, vectors)
{
	struct cfs_pubkey pk;
	struct cfs_seckey sk;
	struct cfs_id k1, k2, rk;
	char name[CFS_NAME_LEN + 1], h[65];
	size_t len;

	keypair(&pk, &sk);
	cfs_name_encode(name, pk.b);
	cr_assert_str_eq(name, "aoqqpp7tzyil4hlq3umoos6atft6jvrqtosq2xy53sdgiesvgg4a");
	sfsro_root_key(&pk, &rk);
	cr_assert_str_eq(cfs_id_hex(&rk, h), "c1751aff69c1f9efcff51d4454e3e94ea95455794e2a39ce32823ad903766eac");
	memset(k1.b, 0x11, 32);
	memset(k2.b, 0x22, 32);

	struct sfsro_root root = { .pk = pk, .seq = 1, .issued = 1700000000, .valid_until = 1702592000,
	                           .root_dir = k1, .dir_mode = 0755, .mtime_s = 1690000000, .mtime_ns = 5 };
	cr_assert(sfsro_root_encode(&root, &sk, buf, sizeof(buf), &len) == 0);
	CHECK_HEX(len, "94a86366732e726f6f7401c45998c42003a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b801ce6553f100ce657b7e00c4201111111111111111111111111111111111111111111111111111111111111111cd01edce64bb5a8005c4401bbcf62b392027f296cc11badff8fe469800b65eb53e3e828461d19cb963b61c1746d3009ee2fc77e94bffde8966d1506784e8ae42cd445b0166804d9558e30b");

	cr_assert(sfsro_data_encode((const uint8_t *)"hello", 5, buf, sizeof(buf), &len) == 0);
	CHECK_HEX(len, "93a86366732e6461746101c40568656c6c6f");

	struct cfs_id ks[2] = { k1, k2 };
	cr_assert(sfsro_indirect_encode(1, ks, 2, buf, sizeof(buf), &len) == 0);
	CHECK_HEX(len, "94a96366732e696e6469720101c44011111111111111111111111111111111111111111111111111111111111111112222222222222222222222222222222222222222222222222222222222222222");

	struct sfsro_inode ino = { .size = 8193, .mode = 0755, .mtime_s = 1690000000, .bsize = 8192,
	                           .fanout = sfsro_fanout(8192), .nkeys = 2, .keys = ks };
	cr_assert(sfsro_inode_encode(&ino, buf, sizeof(buf), &len) == 0);
	CHECK_HEX(len, "9ba96366732e696e6f646501cd2001cd01edce64bb5a8000cd2000ccff00c44011111111111111111111111111111111111111111111111111111111111111112222222222222222222222222222222222222222222222222222222222222222c400");

	struct sfsro_inode ino2 = { .size = 3, .mode = 0644, .mtime_s = -1, .bsize = 8192,
	                            .fanout = sfsro_fanout(8192), .inline_data = { (const uint8_t *)"hi\n", 3 } };
	cr_assert(sfsro_inode_encode(&ino2, buf, sizeof(buf), &len) == 0);
	CHECK_HEX(len, "9ba96366732e696e6f64650103cd01a4ff00cd2000ccff00c400c40368690a");

	struct sfsro_entry e[2] = {
		{ .name = { (const uint8_t *)"README", 6 }, .type = SFSRO_T_FILE, .size = 8193, .mode = 0644,
		  .mtime_s = 1690000000, .key = k2 },
		{ .name = { (const uint8_t *)"link", 4 }, .type = SFSRO_T_SYMLINK, .size = 6, .mode = 0777,
		  .mtime_s = 1690000000, .target = { (const uint8_t *)"README", 6 } },
	};
	struct sfsro_dir d = { .n = 2, .entries = e };
	cr_assert(sfsro_dir_encode(&d, buf, sizeof(buf), &len) == 0);
	CHECK_HEX(len, "94a76366732e64697201009298c406524541444d4501cd2001cd01a4ce64bb5a8000c4202222222222222222222222222222222222222222222222222222222222222222c40098c4046c696e6b0306cd01ffce64bb5a8000c400c406524541444d45");

	struct sfsro_dir_child c[2] = { { { (const uint8_t *)"a", 1 }, k1 }, { { (const uint8_t *)"m", 1 }, k2 } };
	struct sfsro_dir di = { .height = 1, .n = 2, .children = c };
	cr_assert(sfsro_dir_encode(&di, buf, sizeof(buf), &len) == 0);
	CHECK_HEX(len, "94a76366732e64697201019292c40161c420111111111111111111111111111111111111111111111111111111111111111192c4016dc4202222222222222222222222222222222222222222222222222222222222222222");
}

/* A coded volume's root is format 2, its body a ninth item [m, n]; the
 * same root without a code is format 1, byte for byte the vector above. */
Test(sfsro, coded_root_vector_and_round_trip)
{
	struct cfs_pubkey pk;
	struct cfs_seckey sk;
	struct cfs_id k1;
	struct sfsro_root back;
	size_t len;

	keypair(&pk, &sk);
	memset(k1.b, 0x11, 32);
	struct sfsro_root root = { .pk = pk, .seq = 1, .issued = 1700000000, .valid_until = 1702592000,
	                           .root_dir = k1, .dir_mode = 0755, .mtime_s = 1690000000, .mtime_ns = 5,
	                           .code_m = 4, .code_n = 12 };
	cr_assert(sfsro_root_encode(&root, &sk, buf, sizeof(buf), &len) == 0);
	CHECK_HEX(len, "94a86366732e726f6f7402c45c99c42003a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b801ce6553f100ce657b7e00c4201111111111111111111111111111111111111111111111111111111111111111cd01edce64bb5a800592040cc44010e6b7d528fee35a3951352329f5a4b15fd0b6ba780e1f7f635023319a2c690fabf865a2d88e7c4ab0036e14d26b6b9d2483b658a459a7219ebac08a12532e01");
	cr_assert_eq(sfsro_root_decode(buf, len, &back), 0);
	cr_assert_eq(back.code_m, 4);
	cr_assert_eq(back.code_n, 12);
	cr_assert_eq(back.seq, 1);
	/* a later format is refused as such, not as garbage */
	buf[10] = 3;
	cr_assert_eq(sfsro_root_decode(buf, len, &back), -EPROTONOSUPPORT);
	buf[10] = 1; /* format 1 with nine items: malformed */
	cr_assert_eq(sfsro_root_decode(buf, len, &back), -EPROTO);
	/* codes outside 1 <= m < n <= 32, m <= 16 are not encoded */
	root.code_n = 4;
	cr_assert_eq(sfsro_root_encode(&root, &sk, buf, sizeof(buf), &len), -EINVAL);
	root.code_m = 17;
	root.code_n = 20;
	cr_assert_eq(sfsro_root_encode(&root, &sk, buf, sizeof(buf), &len), -EINVAL);
	root.code_m = 0;
	root.code_n = 0;
	cr_assert(sfsro_root_encode(&root, &sk, buf, sizeof(buf), &len) == 0);
	cr_assert_eq(buf[10], 1, "a replicated volume's root stays format 1");
	cr_assert_eq(sfsro_root_decode(buf, len, &back), 0);
	cr_assert_eq(back.code_m + back.code_n, 0);
}

/* ---- roots */

Test(sfsro, root_checks)
{
	struct cfs_pubkey pk, other_pk;
	struct cfs_seckey sk, other_sk;
	struct sfsro_root r = { 0 }, got;
	size_t len;

	keypair(&pk, &sk);
	cfs_sign_keypair(&other_pk, &other_sk);
	r.pk = pk;
	r.seq = 5;
	r.valid_until = 2000;
	cr_assert(sfsro_root_encode(&r, &sk, buf, sizeof(buf), &len) == 0);
	cr_assert(sfsro_root_decode(buf, len, &got) == 0);
	cr_assert_eq(got.seq, 5);
	cr_assert(sfsro_root_check(&got, &pk, 5, 1000) == 0, "equal sequence accepted");
	cr_assert_eq(sfsro_root_check(&got, &other_pk, 0, 1000), -EKEYREJECTED, "another key");
	cr_assert_eq(sfsro_root_check(&got, &pk, 6, 1000), -ESTALE, "older than seen");
	cr_assert_eq(sfsro_root_check(&got, &pk, 0, 2001), -EKEYEXPIRED, "expired");
	/* a root claiming pk but signed by another key */
	r.pk = other_pk;
	cr_assert(sfsro_root_encode(&r, &sk, buf, sizeof(buf), &len) == -EINVAL, "encode refuses a mismatched key");
	r.pk = pk;
	cr_assert(sfsro_root_encode(&r, &sk, buf, sizeof(buf), &len) == 0);
	memcpy(buf + 16, other_pk.b, 32); /* 94 a8 "cfs.root" 01 c4 59 | 98 c4 20 <pk> */
	cr_assert_eq(sfsro_root_decode(buf, len, &got), -EBADMSG, "key swapped in the body");
	/* every single bit flip is refused */
	cr_assert(sfsro_root_encode(&r, &sk, buf, sizeof(buf), &len) == 0);
	for (size_t i = 0; i < len * 8; i++) {
		buf[i / 8] ^= (uint8_t)(1u << (i % 8));
		int v = sfsro_root_decode(buf, len, &got);
		/* the format byte (10) may also name a format this reader lacks */
		cr_assert(v == -EBADMSG || v == -EPROTO || (i / 8 == 10 && v == -EPROTONOSUPPORT),
		          "bit %zu: %d", i, v);
		buf[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
}

/* ---- names */

Test(sfsro, names)
{
	const char *why;
	uint8_t long_name[256];
	memset(long_name, 'x', sizeof(long_name));
	cr_assert(sfsro_check_name((const uint8_t *)"a b\n\xff", 5, &why) == 0);
	cr_assert(sfsro_check_name(long_name, 255, &why) == 0);
	cr_assert(sfsro_check_name(long_name, 256, &why) == -EINVAL);
	cr_assert(sfsro_check_name((const uint8_t *)"a/b", 3, &why) == -EINVAL && strstr(why, "/"));
	cr_assert(sfsro_check_name((const uint8_t *)"a\0b", 3, &why) == -EINVAL && strstr(why, "NUL"));
	cr_assert(sfsro_check_name((const uint8_t *)".", 1, &why) == -EINVAL);
	cr_assert(sfsro_check_name((const uint8_t *)"..", 2, &why) == -EINVAL);
	cr_assert(sfsro_check_name((const uint8_t *)"...", 3, &why) == 0);
	cr_assert(sfsro_check_name((const uint8_t *)"", 0, &why) == -EINVAL);
}

/* ---- files: build, read back through the walker */

static void file_content(uint8_t *p, uint64_t n, unsigned seed)
{
	for (uint64_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 2654435761u + seed) >> 13);
}

static struct cfs_id build_file(const uint8_t *content, uint64_t size, uint32_t bsize)
{
	uint64_t nblocks = size / bsize + (size % bsize != 0);
	struct cfs_id *keys = calloc(nblocks ? nblocks : 1, sizeof(*keys)), key;
	struct sfsro_inode ino = { .size = size, .mode = 0644, .bsize = bsize, .mtime_s = 12345 };
	size_t len;

	if (size <= SFSRO_INLINE_MAX) {
		ino.inline_data = (struct cfs_bytes){ content, size };
	} else {
		for (uint64_t b = 0; b < nblocks; b++) {
			uint64_t n = size - b * bsize < bsize ? size - b * bsize : bsize;
			cr_assert(sfsro_data_encode(content + b * bsize, n, buf, sizeof(buf), &len) == 0);
			cfs_hash(&keys[b], buf, len);
			mem_put(&store, &keys[b], buf, len);
		}
	}
	cr_assert(sfsro_build_file(&ino, keys, nblocks, mem_put, &store, &key) == 0);
	free(keys);
	return key;
}

Test(sfsro, files_of_every_shape)
{
	/* block size 1024: fanout 31, so 31 blocks fit the inode, 961 need one
	 * level of indirection, more need two */
	static const uint64_t sizes[] = { 0, 1, 1024, 1025, 2048, 2049, 31 * 1024, 31 * 1024 + 1,
	                                  961 * 1024, 961 * 1024 + 1, 1000 * 1024 + 7 };
	uint8_t *content = malloc(1100 * 1024), *back = malloc(1100 * 1024);
	for (size_t t = 0; t < CFS_ARRAY_SIZE(sizes); t++) {
		uint64_t size = sizes[t];
		file_content(content, size, (unsigned)t);
		struct cfs_id key = build_file(content, size, 1024);
		size_t n;
		cr_assert(sfsro_walk_read(&src, &key, 0, back, size + 100, &n) == 0);
		cr_assert_eq(n, size, "size %lu", (unsigned long)size);
		cr_assert(memcmp(content, back, size) == 0, "size %lu", (unsigned long)size);
		/* unaligned ranges across block boundaries */
		if (size > 3000) {
			cr_assert(sfsro_walk_read(&src, &key, 1000, back, 2000, &n) == 0);
			cr_assert(n == 2000 && memcmp(content + 1000, back, 2000) == 0);
		}
		cr_assert(sfsro_walk_read(&src, &key, size, back, 10, &n) == 0 && n == 0, "read at EOF");
	}
	free(content);
	free(back);
}

Test(sfsro, deterministic_and_deduplicated)
{
	uint8_t *zeros = calloc(1, 64 * 8192);
	struct cfs_id a = build_file(zeros, 64 * 8192, 8192);
	size_t before = store.n;
	struct cfs_id b = build_file(zeros, 64 * 8192, 8192);
	cr_assert(cfs_id_eq(&a, &b), "same file, same inode key");
	cr_assert_eq(store.n, before, "no new block the second time");
	cr_assert_eq(before, 2, "64 identical data blocks are one block, plus the inode");
	free(zeros);
}

/* ---- directories */

struct listing { uint32_t n; char prev[SFSRO_NAME_MAX + 2]; };

static int count_entry(void *arg, const struct sfsro_entry *e)
{
	struct listing *l = arg;
	char name[SFSRO_NAME_MAX + 1];
	memcpy(name, e->name.p, e->name.len);
	name[e->name.len] = 0;
	cr_assert(l->n == 0 || strcmp(l->prev, name) < 0, "sorted: %s after %s", name, l->prev);
	strcpy(l->prev, name);
	l->n++;
	return 0;
}

Test(sfsro, large_directory)
{
	enum { N = 10000 };
	struct sfsro_entry *e = calloc(N, sizeof(*e));
	char (*names)[32] = calloc(N, 32);
	struct cfs_id file = build_file((const uint8_t *)"x", 1, 8192), top;
	struct sfsro_node node;

	for (int i = 0; i < N; i++) {
		snprintf(names[i], 32, "file-%05d", (i * 7919) % N); /* shuffled */
		e[i] = (struct sfsro_entry){ .name = { (const uint8_t *)names[i], strlen(names[i]) },
		                             .type = SFSRO_T_FILE, .size = 1, .mode = 0644, .key = file };
	}
	sfsro_sort_entries(e, N);
	size_t before = store.n;
	cr_assert(sfsro_build_dir(e, N, 8192, mem_put, &store, &top) == 0);
	cr_assert(store.n - before > 10, "spans many blocks: %zu", store.n - before);

	struct listing l = { 0 };
	cr_assert(sfsro_walk_readdir(&src, &top, count_entry, &l) == 0);
	cr_assert_eq(l.n, N);
	for (int i = 0; i < N; i += 97) {
		char want[32];
		snprintf(want, sizeof(want), "file-%05d", i);
		cr_assert(sfsro_walk_lookup(&src, &top, (const uint8_t *)want, strlen(want), &node) == 0, "%s", want);
		cr_assert_str_eq((char *)node.name, want);
	}
	cr_assert_eq(sfsro_walk_lookup(&src, &top, (const uint8_t *)"file-", 5, &node), -ENOENT);
	cr_assert_eq(sfsro_walk_lookup(&src, &top, (const uint8_t *)"zzz", 3, &node), -ENOENT);
	cr_assert_eq(sfsro_walk_lookup(&src, &top, (const uint8_t *)"a", 1, &node), -ENOENT);
	free(e);
	free(names);
}

/* A small volume: / { a/ { deep } , f (3 blocks), l -> f }, signed. */
static struct sfsro_root small_volume(struct cfs_seckey *sk, struct cfs_pubkey *pk, size_t *ret_len)
{
	uint8_t content[3000];
	struct cfs_id f, a, top;
	file_content(content, sizeof(content), 9);
	f = build_file(content, sizeof(content), 1024);
	struct sfsro_entry inner = { .name = { (const uint8_t *)"deep", 4 }, .type = SFSRO_T_FILE,
	                             .size = 3000, .mode = 0600, .key = f };
	cr_assert(sfsro_build_dir(&inner, 1, 8192, mem_put, &store, &a) == 0);
	struct sfsro_entry top_e[3] = {
		{ .name = { (const uint8_t *)"a", 1 }, .type = SFSRO_T_DIR, .size = 1, .mode = 0755, .key = a },
		{ .name = { (const uint8_t *)"f", 1 }, .type = SFSRO_T_FILE, .size = 3000, .mode = 0755, .key = f },
		{ .name = { (const uint8_t *)"l", 1 }, .type = SFSRO_T_SYMLINK, .size = 1, .mode = 0777,
		  .target = { (const uint8_t *)"f", 1 } },
	};
	cr_assert(sfsro_build_dir(top_e, 3, 8192, mem_put, &store, &top) == 0);
	keypair(pk, sk);
	struct sfsro_root r = { .pk = *pk, .seq = 1, .valid_until = UINT64_MAX, .root_dir = top, .dir_mode = 0755 };
	struct cfs_id rk;
	sfsro_root_key(pk, &rk);
	cr_assert(sfsro_root_encode(&r, sk, buf, sizeof(buf), ret_len) == 0);
	mem_put(&store, &rk, buf, *ret_len);
	return r;
}

static int walk_all(const struct sfsro_root *root)
{
	struct sfsro_node n;
	uint8_t data[3000];
	size_t got;
	int r;
	if ((r = sfsro_walk_path(&src, root, "/a/deep", &n)) < 0)
		return r;
	if ((r = sfsro_walk_read(&src, &n.e.key, 0, data, sizeof(data), &got)) < 0)
		return r;
	if ((r = sfsro_walk_path(&src, root, "/l", &n)) < 0)
		return r;
	return 0;
}

Test(sfsro, paths)
{
	struct cfs_seckey sk;
	struct cfs_pubkey pk;
	struct sfsro_root root, got;
	struct sfsro_node n;
	size_t len;

	small_volume(&sk, &pk, &len);
	cr_assert(sfsro_walk_root(&src, &pk, 1, 1000, &got) == 0);
	root = got;
	cr_assert(sfsro_walk_path(&src, &root, "/", &n) == 0 && n.e.type == SFSRO_T_DIR);
	cr_assert(sfsro_walk_path(&src, &root, "//a//deep/", &n) == 0 && n.e.type == SFSRO_T_FILE);
	cr_assert_eq(n.e.mode, 0600);
	cr_assert(sfsro_walk_path(&src, &root, "/l", &n) == 0 && n.e.type == SFSRO_T_SYMLINK);
	cr_assert_str_eq((char *)n.target, "f");
	cr_assert_eq(sfsro_walk_path(&src, &root, "/f/x", &n), -ENOTDIR);
	cr_assert_eq(sfsro_walk_path(&src, &root, "/nope", &n), -ENOENT);
	cr_assert_eq(sfsro_walk_path(&src, &root, "rel", &n), -EINVAL);
	cr_assert_eq(sfsro_walk_root(&src, &pk, 2, 1000, &got), -ESTALE);
	cr_assert(walk_all(&root) == 0);
}

Test(sfsro, every_bit_flip_detected)
{
	struct cfs_seckey sk;
	struct cfs_pubkey pk;
	size_t len;
	struct sfsro_root root = small_volume(&sk, &pk, &len);
	struct cfs_id rk;
	sfsro_root_key(&pk, &rk);
	int flips = 0;

	cfs_log_set_level(CFS_LOG_ERROR); /* one warning per flip otherwise */
	for (size_t i = 0; i < STORE_SLOTS; i++) {
		struct slot *s = &store.s[i];
		if (!s->used || cfs_id_eq(&s->key, &rk))
			continue;
		for (size_t bit = 0; bit < s->len * 8; bit++) {
			s->p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			int r = walk_all(&root);
			cr_assert(r == -EBADMSG, "bit %zu of a %zu-byte block went unnoticed: %d", bit, s->len, r);
			s->p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			flips++;
		}
	}
	cr_assert(walk_all(&root) == 0);
	cr_assert(flips > 1000);
}

/* ---- malformed blocks */

Test(sfsro, decoders_refuse_malformed)
{
	struct sfsro_inode ino;
	struct sfsro_dir d;
	struct cfs_bytes b;
	size_t len;
	struct cfs_id ks[3];
	memset(ks, 7, sizeof(ks));

	/* inode whose key count does not follow from its size */
	struct sfsro_inode bad = { .size = 3 * 8192, .mode = 0644, .bsize = 8192,
	                           .fanout = sfsro_fanout(8192), .keys = ks, .nkeys = 2 };
	cr_assert(sfsro_inode_encode(&bad, buf, sizeof(buf), &len) == 0);
	cr_assert_eq(sfsro_inode_decode(buf, len, &ino), -EPROTO);
	bad.nkeys = 3;
	cr_assert(sfsro_inode_encode(&bad, buf, sizeof(buf), &len) == 0);
	cr_assert_eq(sfsro_inode_decode(buf, len, &ino), 0);
	bad.fanout = 7; /* fanout must follow from the block size */
	cr_assert(sfsro_inode_encode(&bad, buf, sizeof(buf), &len) == 0);
	cr_assert_eq(sfsro_inode_decode(buf, len, &ino), -EPROTO);
	/* a small file that is not inline */
	struct sfsro_inode small = { .size = 5, .bsize = 8192, .fanout = sfsro_fanout(8192), .keys = ks, .nkeys = 1 };
	cr_assert(sfsro_inode_encode(&small, buf, sizeof(buf), &len) == 0);
	cr_assert_eq(sfsro_inode_decode(buf, len, &ino), -EPROTO);

	/* directory entries out of order, duplicated, or badly named */
	struct sfsro_entry e[2] = {
		{ .name = { (const uint8_t *)"b", 1 }, .type = SFSRO_T_FILE },
		{ .name = { (const uint8_t *)"a", 1 }, .type = SFSRO_T_FILE },
	};
	struct sfsro_dir dd = { .n = 2, .entries = e };
	cr_assert(sfsro_dir_encode(&dd, buf, sizeof(buf), &len) == 0);
	cr_assert_eq(sfsro_dir_decode(buf, len, &d), -EPROTO);
	e[1].name = e[0].name;
	cr_assert(sfsro_dir_encode(&dd, buf, sizeof(buf), &len) == 0);
	cr_assert_eq(sfsro_dir_decode(buf, len, &d), -EPROTO);
	e[1].name = (struct cfs_bytes){ (const uint8_t *)"c/d", 3 };
	cr_assert(sfsro_dir_encode(&dd, buf, sizeof(buf), &len) == 0);
	cr_assert_eq(sfsro_dir_decode(buf, len, &d), -EPROTO);
	e[1].name = (struct cfs_bytes){ (const uint8_t *)"..", 2 };
	cr_assert(sfsro_dir_encode(&dd, buf, sizeof(buf), &len) == 0);
	cr_assert_eq(sfsro_dir_decode(buf, len, &d), -EPROTO);

	/* every truncation of a data block, and a wrong tag */
	cr_assert(sfsro_data_encode((const uint8_t *)"hello", 5, buf, sizeof(buf), &len) == 0);
	for (size_t cut = 0; cut < len; cut++)
		cr_assert_eq(sfsro_data_decode(buf, cut, &b), -EPROTO);
	cr_assert_eq(sfsro_inode_decode(buf, len, &ino), -EPROTO, "a data block is not an inode");
	buf[len] = 0;
	cr_assert_eq(sfsro_data_decode(buf, len + 1, &b), -EPROTO, "trailing byte");
}
