/*
 * Erasure-coded data blocks (DHash++ 4.4): a block of B bytes becomes n
 * fragments of ceil(B/m) bytes, any m of which give the block back.
 * Reed-Solomon over GF(2^8) with a Cauchy matrix, by ISA-L; the first m
 * fragments are the block itself (the code is systematic), so a reader
 * that gets those decodes nothing.
 *
 * Every fragment can be checked on its own, by a server that stores it and
 * by a reader, against the block's key and nothing else (docs/FORMAT.md,
 * "Coded blocks"): the key hashes (m, n, B, the root of a hash tree over
 * the n fragments, the hash of the block), and each fragment carries its
 * path up that tree and the block's hash. A hostile holder therefore
 * costs a reader one wasted fetch per bad fragment, never a wrong block;
 * the block decoded from any m good fragments is checked against the hash
 * the key commits to, so every reader gets the publisher's bytes or an
 * error.
 *
 * ISA-L's tables are computed once per (m, n) for encoding and once per
 * erasure pattern for decoding, and kept (a small cache under a lock: the
 * publisher encodes from several threads).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "sfsro-format/internal.h"

#define TAG "cfs coded block v1"
#define LEAF 0x00
#define NODE 0x01
#define CACHE 32 /* decode tables kept, one per erasure pattern */

/* ------------------------------------------------------------ tables */

struct tables {
	uint8_t m, n;
	uint32_t have;            /* decode: the m fragments used (bitmap); encode: 0 */
	uint32_t want;            /* decode: the data fragments rebuilt */
	uint64_t used;            /* for eviction */
	uint8_t g[32 * SFSRO_CODE_N_MAX * SFSRO_CODE_N_MAX];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct tables *cache[CACHE];
static uint64_t clock_ticks;

/* The n x m encoding matrix: identity on top, Cauchy below. */
static void matrix(uint8_t m, uint8_t n, uint8_t *a)
{
	gf_gen_cauchy1_matrix(a, n, m);
}

static struct tables *tables_find(uint8_t m, uint8_t n, uint32_t have, uint32_t want)
{
	for (int i = 0; i < CACHE; i++)
		if (cache[i] && cache[i]->m == m && cache[i]->n == n && cache[i]->have == have &&
		    cache[i]->want == want) {
			cache[i]->used = ++clock_ticks;
			return cache[i];
		}
	return NULL;
}

static struct tables *tables_keep(struct tables *t)
{
	int slot = 0;

	for (int i = 0; i < CACHE; i++) {
		if (!cache[i]) {
			slot = i;
			break;
		}
		if (cache[i]->used < cache[slot]->used)
			slot = i;
	}
	free(cache[slot]);
	t->used = ++clock_ticks;
	cache[slot] = t;
	return t;
}

/* Tables to compute the n - m parity fragments from the m data ones. */
static int encode_tables(uint8_t m, uint8_t n, uint8_t *g)
{
	uint8_t a[SFSRO_CODE_N_MAX * SFSRO_CODE_N_MAX];
	struct tables *t;

	pthread_mutex_lock(&lock);
	if (!(t = tables_find(m, n, 0, 0))) {
		t = xcalloc(1, sizeof(*t));
		*t = (struct tables){ .m = m, .n = n };
		matrix(m, n, a);
		ec_init_tables(m, n - m, &a[m * m], t->g);
		tables_keep(t);
	}
	memcpy(g, t->g, 32u * m * (n - m));
	pthread_mutex_unlock(&lock);
	return 0;
}

/* Tables to rebuild the data fragments in want from the m fragments in
 * have: the rows of the inverse of have's submatrix. */
static int decode_tables(uint8_t m, uint8_t n, uint32_t have, uint32_t want, uint8_t *g)
{
	uint8_t a[SFSRO_CODE_N_MAX * SFSRO_CODE_N_MAX], b[SFSRO_CODE_M_MAX * SFSRO_CODE_M_MAX],
		inv[SFSRO_CODE_M_MAX * SFSRO_CODE_M_MAX], rows[SFSRO_CODE_M_MAX * SFSRO_CODE_M_MAX];
	struct tables *t;
	int r = 0;
	uint32_t nwant = (uint32_t)__builtin_popcount(want);

	pthread_mutex_lock(&lock);
	if (!(t = tables_find(m, n, have, want))) {
		matrix(m, n, a);
		uint32_t k = 0;
		for (uint32_t i = 0; i < n && k < m; i++)
			if (have & (1u << i))
				memcpy(&b[m * k++], &a[m * i], m);
		if (gf_invert_matrix(b, inv, m) < 0) {
			r = -EPROTO; /* not reached: every m rows of a Cauchy code are independent */
		} else {
			k = 0;
			for (uint32_t d = 0; d < m; d++)
				if (want & (1u << d))
					memcpy(&rows[m * k++], &inv[m * d], m);
			t = xcalloc(1, sizeof(*t));
			*t = (struct tables){ .m = m, .n = n, .have = have, .want = want };
			ec_init_tables(m, (int)nwant, rows, t->g);
			tables_keep(t);
		}
	}
	if (r == 0)
		memcpy(g, t->g, 32u * m * nwant);
	pthread_mutex_unlock(&lock);
	return r;
}

/* ------------------------------------------------------------ the tree */

static uint32_t depth_of(uint8_t n)
{
	uint32_t d = 0;

	while ((1u << d) < n)
		d++;
	return d;
}

static void leaf_hash(struct cfs_id *ret, uint8_t i, const uint8_t *data, size_t len)
{
	struct cfs_hasher h;
	uint8_t pre[2] = { LEAF, i };

	cfs_hasher_init(&h);
	cfs_hasher_update(&h, pre, sizeof(pre));
	cfs_hasher_update(&h, data, len);
	cfs_hasher_final(&h, ret);
}

static void node_hash(struct cfs_id *ret, const struct cfs_id *l, const struct cfs_id *r)
{
	struct cfs_hasher h;
	uint8_t pre = NODE;

	cfs_hasher_init(&h);
	cfs_hasher_update(&h, &pre, 1);
	cfs_hasher_update(&h, l->b, CFS_HASH_BYTES);
	cfs_hasher_update(&h, r->b, CFS_HASH_BYTES);
	cfs_hasher_final(&h, ret);
}

/* The key: what it commits to, hashed under a tag of its own. */
static void key_of(struct cfs_id *ret, uint8_t m, uint8_t n, uint32_t len, const struct cfs_id *root,
                   const struct cfs_id *block_hash)
{
	struct cfs_hasher h;
	uint8_t hdr[6] = { m, n };

	cfs_put_be32(hdr + 2, len);

	cfs_hasher_init(&h);
	cfs_hasher_update(&h, TAG, sizeof(TAG) - 1);
	cfs_hasher_update(&h, hdr, sizeof(hdr));
	cfs_hasher_update(&h, root->b, CFS_HASH_BYTES);
	cfs_hasher_update(&h, block_hash->b, CFS_HASH_BYTES);
	cfs_hasher_final(&h, ret);
}

/* ------------------------------------------------------------ API */

bool sfsro_code_valid(uint32_t m, uint32_t n)
{
	return m >= 1 && n > m && m <= SFSRO_CODE_M_MAX && n <= SFSRO_CODE_N_MAX;
}

size_t sfsro_frag_data_len(uint32_t block_len, uint32_t m)
{
	return m ? (block_len + m - 1) / m : 0;
}

size_t sfsro_frag_len(uint32_t block_len, uint32_t m, uint32_t n)
{
	return SFSRO_FRAG_HDR + sfsro_frag_data_len(block_len, m) + depth_of((uint8_t)n) * CFS_HASH_BYTES;
}

int sfsro_code_encode(const uint8_t *block, size_t len, uint32_t m, uint32_t n, struct cfs_id *ret_key,
                      uint8_t *const *frags)
{
	if (!sfsro_code_valid(m, n) || len == 0 || len > SFSRO_CODED_BLOCK_MAX)
		return -EINVAL;
	size_t fl = sfsro_frag_data_len((uint32_t)len, m);
	uint32_t depth = depth_of((uint8_t)n), width = 1u << depth;
	uint8_t *data[SFSRO_CODE_N_MAX];
	struct cfs_id tree[2 * SFSRO_CODE_N_MAX], block_hash, root;

	/* The data fragments are the block, the last one padded with zeros. */
	for (uint32_t i = 0; i < n; i++)
		data[i] = frags[i] + SFSRO_FRAG_HDR;
	for (uint32_t i = 0; i < m; i++) {
		size_t at = i * fl, take = at < len ? (len - at < fl ? len - at : fl) : 0;
		memcpy(data[i], block + at, take);
		memset(data[i] + take, 0, fl - take);
	}
	uint8_t g[32 * SFSRO_CODE_M_MAX * SFSRO_CODE_N_MAX];
	encode_tables((uint8_t)m, (uint8_t)n, g);
	ec_encode_data((int)fl, (int)m, (int)(n - m), g, data, &data[m]);

	/* The tree: leaves width..2*width-1 (all zero past n), root at 1. */
	memset(tree, 0, sizeof(tree));
	for (uint32_t i = 0; i < n; i++)
		leaf_hash(&tree[width + i], (uint8_t)i, data[i], fl);
	for (uint32_t i = width - 1; i >= 1; i--)
		node_hash(&tree[i], &tree[2 * i], &tree[2 * i + 1]);
	root = tree[1]; /* n >= 2: the tree has a level above its leaves */
	cfs_hash(&block_hash, block, len);
	key_of(ret_key, (uint8_t)m, (uint8_t)n, (uint32_t)len, &root, &block_hash);

	for (uint32_t i = 0; i < n; i++) {
		uint8_t *f = frags[i];
		f[0] = SFSRO_FRAG_VERSION;
		f[1] = (uint8_t)m;
		f[2] = (uint8_t)n;
		f[3] = (uint8_t)i;
		cfs_put_be32(f + 4, (uint32_t)len);
		memcpy(f + 8, block_hash.b, CFS_HASH_BYTES);
		uint8_t *proof = data[i] + fl;
		for (uint32_t at = width + i, d = 0; d < depth; d++, at /= 2)
			memcpy(proof + d * CFS_HASH_BYTES, tree[at ^ 1].b, CFS_HASH_BYTES);
	}
	return 0;
}

int sfsro_code_key(const uint8_t *block, size_t len, uint32_t m, uint32_t n, struct cfs_id *ret_key)
{
	uint8_t *frags[SFSRO_CODE_N_MAX];
	int r;

	if (!sfsro_code_valid(m, n) || len == 0 || len > SFSRO_CODED_BLOCK_MAX)
		return -EINVAL;
	size_t flen = sfsro_frag_len((uint32_t)len, m, n);
	uint8_t *mem = xmalloc(flen * n);
	for (uint32_t i = 0; i < n; i++)
		frags[i] = mem + i * flen;
	r = sfsro_code_encode(block, len, m, n, ret_key, frags);
	free(mem);
	return r;
}

int sfsro_frag_parse(const uint8_t *f, size_t len, struct sfsro_frag *ret)
{
	if (len < SFSRO_FRAG_HDR || f[0] != SFSRO_FRAG_VERSION)
		return -EPROTO;
	ret->m = f[1];
	ret->n = f[2];
	ret->index = f[3];
	ret->block_len = cfs_get_be32(f + 4);
	memcpy(ret->block_hash.b, f + 8, CFS_HASH_BYTES);
	if (!sfsro_code_valid(ret->m, ret->n) || ret->index >= ret->n || ret->block_len == 0 ||
	    ret->block_len > SFSRO_CODED_BLOCK_MAX || len != sfsro_frag_len(ret->block_len, ret->m, ret->n))
		return -EPROTO;
	ret->data = f + SFSRO_FRAG_HDR;
	ret->data_len = sfsro_frag_data_len(ret->block_len, ret->m);
	ret->proof = ret->data + ret->data_len;
	return 0;
}

int sfsro_frag_key(const uint8_t *f, size_t len, struct cfs_id *ret_key, struct sfsro_frag *ret)
{
	struct sfsro_frag fr;
	struct cfs_id h;
	int r = sfsro_frag_parse(f, len, &fr);

	if (r < 0)
		return r;
	uint32_t depth = depth_of(fr.n);
	leaf_hash(&h, fr.index, fr.data, fr.data_len);
	for (uint32_t d = 0, at = (1u << depth) + fr.index; d < depth; d++, at /= 2) {
		struct cfs_id sib;
		memcpy(sib.b, fr.proof + d * CFS_HASH_BYTES, CFS_HASH_BYTES);
		if (at & 1)
			node_hash(&h, &sib, &h);
		else
			node_hash(&h, &h, &sib);
	}
	key_of(ret_key, fr.m, fr.n, fr.block_len, &h, &fr.block_hash);
	if (ret)
		*ret = fr;
	return 0;
}

int sfsro_frag_verify(const struct cfs_id *key, const uint8_t *f, size_t len, struct sfsro_frag *ret)
{
	struct sfsro_frag fr;
	struct cfs_id k;
	int r = sfsro_frag_key(f, len, &k, &fr);

	if (r < 0)
		return r;
	if (!cfs_id_eq(&k, key))
		return -EBADMSG;
	if (ret)
		*ret = fr;
	return 0;
}

int sfsro_code_decode(const struct cfs_id *key, const uint8_t *const *frags, const size_t *lens,
                      uint32_t nfrags, uint8_t *out, size_t cap, size_t *ret_len)
{
	struct sfsro_frag fr[SFSRO_CODE_N_MAX], one;
	const uint8_t *src[SFSRO_CODE_M_MAX];
	uint32_t have = 0, k = 0;
	bool bad = false;

	/* The first m fragments that verify, one per index. */
	for (uint32_t i = 0; i < nfrags; i++) {
		if (!frags[i] || sfsro_frag_verify(key, frags[i], lens[i], &one) < 0) {
			bad |= frags[i] != NULL;
			continue;
		}
		if (have & (1u << one.index))
			continue;
		have |= 1u << one.index;
		fr[k++] = one; /* m, n and the length are under the key: the same in all */
		if (k == one.m)
			break;
	}
	if (k == 0 || k < fr[0].m)
		return bad ? -EBADMSG : -ENODATA;
	uint32_t m = fr[0].m, n = fr[0].n, blen = fr[0].block_len;
	size_t fl = fr[0].data_len;
	if (cap < blen)
		return -ENOBUFS;
	/* by index */
	const uint8_t *by[SFSRO_CODE_N_MAX] = { 0 };
	for (uint32_t i = 0; i < k; i++)
		by[fr[i].index] = fr[i].data;
	uint32_t want = 0;
	for (uint32_t d = 0; d < m; d++)
		if (!by[d])
			want |= 1u << d;
	uint8_t *rebuilt[SFSRO_CODE_M_MAX] = { 0 }, *buf = NULL;
	if (want) {
		uint8_t g[32 * SFSRO_CODE_M_MAX * SFSRO_CODE_M_MAX];
		uint32_t nwant = (uint32_t)__builtin_popcount(want), j = 0;
		if (decode_tables((uint8_t)m, (uint8_t)n, have, want, g) < 0)
			return -EPROTO;
		buf = xmalloc(nwant * fl);
		for (uint32_t i = 0, s = 0; i < n; i++)
			if (have & (1u << i))
				src[s++] = by[i];
		uint8_t *dst[SFSRO_CODE_M_MAX];
		for (uint32_t d = 0; d < m; d++)
			if (want & (1u << d)) {
				rebuilt[d] = buf + j * fl;
				dst[j++] = rebuilt[d];
			}
		ec_encode_data((int)fl, (int)m, (int)nwant, g, (uint8_t **)src, dst);
	}
	for (uint32_t d = 0; d < m; d++) {
		size_t at = d * fl, take = at < blen ? (blen - at < fl ? blen - at : fl) : 0;
		memcpy(out + at, by[d] ? by[d] : rebuilt[d], take);
	}
	free(buf);
	/* Rebuilt from parity, the block is checked against the hash the key
	 * commits to: fragments that verify but decode to another block (a
	 * publisher's inconsistent encoding) give an error, never bytes that
	 * differ from what the data fragments hold. The data fragments alone
	 * are the block already checked, leaf by leaf. */
	struct cfs_id h;
	if (want) {
		cfs_hash(&h, out, blen);
		if (!cfs_id_eq(&h, &fr[0].block_hash))
			return -EBADMSG;
	}
	*ret_len = blen;
	return 0;
}
