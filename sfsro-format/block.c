/*
 * Encoding, decoding and verification of the five block kinds. The exact
 * bytes are in docs/FORMAT.md; tests/unit/test_sfsro.c checks its vectors.
 *
 * Every block is a msgpack array whose first two items are a tag string
 * and the format version. Encoding goes through msgpack-c; decoding uses
 * the strict cursor reader of common/ (no allocation but the directory's
 * entry array, bounded by the block's size).
 */
#include "sfsro-format/internal.h"

#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#define TAG_ROOT "cfs.root"
#define TAG_INODE "cfs.inode"
#define TAG_DIR "cfs.dir"
#define TAG_INDIR "cfs.indir"
#define TAG_DATA "cfs.data"
#define ROOT_KEY_DOMAIN "cfs.root-key.v1"
#define VERSION_KEY_DOMAIN "cfs.root-version.v1"
#define ROOT_SIG_DOMAIN "cfs.root-sig.v1"
#define KEYS_MAX (SFSRO_BLOCK_SIZE_MAX / CFS_ID_BYTES)

void sfsro_root_key(const struct cfs_pubkey *pk, struct cfs_id *ret)
{
	struct cfs_hasher h;
	cfs_hasher_init(&h);
	cfs_hasher_update(&h, ROOT_KEY_DOMAIN, sizeof(ROOT_KEY_DOMAIN) - 1);
	cfs_hasher_update(&h, pk->b, sizeof(pk->b));
	cfs_hasher_final(&h, ret);
}

void sfsro_root_version_key(const struct cfs_pubkey *pk, uint64_t seq, struct cfs_id *ret)
{
	struct cfs_hasher h;
	uint8_t be[8];

	for (int i = 0; i < 8; i++)
		be[i] = (uint8_t)(seq >> (56 - 8 * i));
	cfs_hasher_init(&h);
	cfs_hasher_update(&h, VERSION_KEY_DOMAIN, sizeof(VERSION_KEY_DOMAIN) - 1);
	cfs_hasher_update(&h, pk->b, sizeof(pk->b));
	cfs_hasher_update(&h, be, sizeof(be));
	cfs_hasher_final(&h, ret);
}

int sfsro_verify_hash(const struct cfs_id *key, const uint8_t *p, size_t len)
{
	struct cfs_id h;
	cfs_hash(&h, p, len);
	return cfs_id_eq(&h, key) ? 0 : -EBADMSG;
}

int sfsro_check_name(const uint8_t *name, size_t len, const char **why)
{
	const char *w = NULL;
	if (len == 0)
		w = "empty name";
	else if (len > SFSRO_NAME_MAX)
		w = "name longer than 255 bytes";
	else if (memchr(name, '/', len))
		w = "name contains '/'";
	else if (memchr(name, 0, len))
		w = "name contains a NUL byte";
	else if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		w = "name is '.' or '..'";
	if (!w)
		return 0;
	if (why)
		*why = w;
	return -EINVAL;
}

uint32_t sfsro_fanout(uint32_t bsize)
{
	/* an indirect block of fanout keys stays within bsize with its header */
	return (bsize - 32) / CFS_ID_BYTES;
}

/* ------------------------------------------------------------ encoding */

/* An encoder writing straight into the caller's buffer: one copy of each
 * byte, no allocation. Past cap it stops and remembers. */
struct enc {
	uint8_t *buf;
	size_t cap, size;
	bool over;
	msgpack_packer pk;
};

static int enc_write(void *data, const char *p, size_t n)
{
	struct enc *e = data;
	if (e->over || n > e->cap - e->size) {
		e->over = true;
		return -1;
	}
	if (n) /* msgpack passes NULL for an empty bin */
		memcpy(e->buf + e->size, p, n);
	e->size += n;
	return 0;
}

static void enc_init_v(struct enc *e, uint8_t *buf, size_t cap, const char *tag, uint32_t items,
                       uint8_t version)
{
	*e = (struct enc){ .buf = buf, .cap = cap };
	msgpack_packer_init(&e->pk, e, enc_write);
	msgpack_pack_array(&e->pk, items);
	msgpack_pack_str_with_body(&e->pk, tag, strlen(tag));
	msgpack_pack_uint8(&e->pk, version);
}

static void enc_init(struct enc *e, uint8_t *buf, size_t cap, const char *tag, uint32_t items)
{
	enc_init_v(e, buf, cap, tag, items, SFSRO_VERSION);
}

static void enc_bin(struct enc *e, const void *p, size_t n)
{
	msgpack_pack_bin_with_body(&e->pk, p, n);
}

static int enc_finish(struct enc *e, size_t *ret_len)
{
	if (e->over)
		return -EMSGSIZE;
	*ret_len = e->size;
	return 0;
}

static void pack_root_body(msgpack_packer *pk, const struct sfsro_root *r)
{
	msgpack_pack_array(pk, r->code_m ? 9 : 8);
	msgpack_pack_bin_with_body(pk, r->pk.b, sizeof(r->pk.b));
	msgpack_pack_uint64(pk, r->seq);
	msgpack_pack_uint64(pk, r->issued);
	msgpack_pack_uint64(pk, r->valid_until);
	msgpack_pack_bin_with_body(pk, r->root_dir.b, CFS_ID_BYTES);
	msgpack_pack_uint32(pk, r->dir_mode);
	msgpack_pack_int64(pk, r->mtime_s);
	msgpack_pack_uint32(pk, r->mtime_ns);
	if (r->code_m) { /* format 2: the code, [m, n] */
		msgpack_pack_array(pk, 2);
		msgpack_pack_uint32(pk, r->code_m);
		msgpack_pack_uint32(pk, r->code_n);
	}
}

/* The signed message: domain tag ‖ body bytes exactly as they travel. */
static void root_sig_msg(const uint8_t *body, size_t len, uint8_t **ret, size_t *ret_len)
{
	size_t d = sizeof(ROOT_SIG_DOMAIN) - 1;
	uint8_t *m = xmalloc(d + len);
	memcpy(m, ROOT_SIG_DOMAIN, d);
	memcpy(m + d, body, len);
	*ret = m;
	*ret_len = d + len;
}

int sfsro_root_encode(const struct sfsro_root *r, const struct cfs_seckey *sk,
                      uint8_t *buf, size_t cap, size_t *ret_len)
{
	msgpack_sbuffer body;
	msgpack_packer bp;
	struct cfs_pubkey pk;
	uint8_t sig[CFS_SIG_BYTES], *m;
	size_t mlen;
	struct enc e;

	cfs_seckey_pubkey(sk, &pk);
	if (memcmp(pk.b, r->pk.b, sizeof(pk.b)) != 0 || r->dir_mode > 07777 || r->mtime_ns >= 1000000000u ||
	    ((r->code_m || r->code_n) && !sfsro_code_valid(r->code_m, r->code_n)))
		return -EINVAL;
	msgpack_sbuffer_init(&body);
	msgpack_packer_init(&bp, &body, msgpack_sbuffer_write);
	pack_root_body(&bp, r);
	root_sig_msg((const uint8_t *)body.data, body.size, &m, &mlen);
	cfs_sign(sig, m, mlen, sk);
	free(m);
	/* a replicated volume's root stays format 1, which every reader reads */
	enc_init_v(&e, buf, cap, TAG_ROOT, 4, r->code_m ? SFSRO_ROOT_VERSION_CODED : SFSRO_VERSION);
	enc_bin(&e, body.data, body.size);
	enc_bin(&e, sig, sizeof(sig));
	msgpack_sbuffer_destroy(&body);
	return enc_finish(&e, ret_len);
}

int sfsro_data_encode(const uint8_t *p, size_t len, uint8_t *buf, size_t cap, size_t *ret_len)
{
	struct enc e;
	if (len > SFSRO_BLOCK_SIZE_MAX)
		return -EINVAL;
	enc_init(&e, buf, cap, TAG_DATA, 3);
	enc_bin(&e, p, len);
	return enc_finish(&e, ret_len);
}

int sfsro_indirect_encode(uint32_t height, const struct cfs_id *keys, uint32_t n,
                          uint8_t *buf, size_t cap, size_t *ret_len)
{
	struct enc e;
	if (height < 1 || height > SFSRO_HEIGHT_MAX || n == 0 || n > KEYS_MAX)
		return -EINVAL;
	enc_init(&e, buf, cap, TAG_INDIR, 4);
	msgpack_pack_uint32(&e.pk, height);
	enc_bin(&e, keys, (size_t)n * CFS_ID_BYTES);
	return enc_finish(&e, ret_len);
}

int sfsro_inode_encode(const struct sfsro_inode *ino, uint8_t *buf, size_t cap, size_t *ret_len)
{
	struct enc e;
	if (ino->mode > 07777 || ino->mtime_ns >= 1000000000u || ino->nkeys > KEYS_MAX ||
	    ino->inline_data.len > SFSRO_INLINE_MAX)
		return -EINVAL;
	enc_init(&e, buf, cap, TAG_INODE, 11);
	msgpack_pack_uint64(&e.pk, ino->size);
	msgpack_pack_uint32(&e.pk, ino->mode);
	msgpack_pack_int64(&e.pk, ino->mtime_s);
	msgpack_pack_uint32(&e.pk, ino->mtime_ns);
	msgpack_pack_uint32(&e.pk, ino->bsize);
	msgpack_pack_uint32(&e.pk, ino->fanout);
	msgpack_pack_uint32(&e.pk, ino->height);
	enc_bin(&e, ino->keys, (size_t)ino->nkeys * CFS_ID_BYTES);
	enc_bin(&e, ino->inline_data.p, ino->inline_data.len);
	return enc_finish(&e, ret_len);
}

static void pack_entry(msgpack_packer *pk, const struct sfsro_entry *en)
{
	msgpack_pack_array(pk, 8);
	msgpack_pack_bin_with_body(pk, en->name.p, en->name.len);
	msgpack_pack_uint8(pk, en->type);
	msgpack_pack_uint64(pk, en->size);
	msgpack_pack_uint32(pk, en->mode);
	msgpack_pack_int64(pk, en->mtime_s);
	msgpack_pack_uint32(pk, en->mtime_ns);
	if (en->type == SFSRO_T_SYMLINK)
		msgpack_pack_bin(pk, 0);
	else
		msgpack_pack_bin_with_body(pk, en->key.b, CFS_ID_BYTES);
	msgpack_pack_bin_with_body(pk, en->target.p, en->type == SFSRO_T_SYMLINK ? en->target.len : 0);
}

size_t sfsro_entry_size(const struct sfsro_entry *en)
{
	/* array 1 + name (<=2+255) + type 1 + size 9 + mode 5 + mtime 9 + ns 5
	 * + key 2+32 + target (<=3+4095): an upper bound, exact enough to
	 * split directories well within the block size */
	return 1 + 3 + en->name.len + 1 + 9 + 5 + 9 + 5 + 2 + CFS_ID_BYTES + 3 +
	       (en->type == SFSRO_T_SYMLINK ? en->target.len : 0);
}

int sfsro_dir_encode(const struct sfsro_dir *d, uint8_t *buf, size_t cap, size_t *ret_len)
{
	struct enc e;
	if (d->height > SFSRO_HEIGHT_MAX)
		return -EINVAL;
	enc_init(&e, buf, cap, TAG_DIR, 4);
	msgpack_pack_uint32(&e.pk, d->height);
	msgpack_pack_array(&e.pk, d->n);
	for (uint32_t i = 0; i < d->n; i++) {
		if (d->height == 0) {
			pack_entry(&e.pk, &d->entries[i]);
		} else {
			msgpack_pack_array(&e.pk, 2);
			enc_bin(&e, d->children[i].first.p, d->children[i].first.len);
			enc_bin(&e, d->children[i].key.b, CFS_ID_BYTES);
		}
	}
	return enc_finish(&e, ret_len);
}

/* ------------------------------------------------------------ decoding */

#define TRY(x) do { if ((x) < 0) return -EPROTO; } while (0)

static int header(struct cfs_mpr *r, const uint8_t *p, size_t len, const char *tag, uint32_t items)
{
	uint64_t ver;
	cfs_mpr_init(r, p, len);
	TRY(cfs_mpr_array_n(r, items));
	TRY(cfs_mpr_expect_str(r, tag));
	TRY(cfs_mpr_uint(r, 255, &ver));
	return ver == SFSRO_VERSION ? 0 : -EPROTO;
}

static int get_id(struct cfs_mpr *r, struct cfs_id *ret)
{
	struct cfs_bytes b;
	TRY(cfs_mpr_bin(r, CFS_ID_BYTES, CFS_ID_BYTES, &b));
	memcpy(ret->b, b.p, CFS_ID_BYTES);
	return 0;
}

static int get_u32(struct cfs_mpr *r, uint32_t max, uint32_t *ret)
{
	uint64_t v;
	TRY(cfs_mpr_uint(r, max, &v));
	*ret = (uint32_t)v;
	return 0;
}

static int get_keys(struct cfs_mpr *r, const struct cfs_id **ret, uint32_t *ret_n)
{
	struct cfs_bytes b;
	TRY(cfs_mpr_bin(r, 0, (size_t)KEYS_MAX * CFS_ID_BYTES, &b));
	if (b.len % CFS_ID_BYTES)
		return -EPROTO;
	*ret = (const struct cfs_id *)b.p;
	*ret_n = (uint32_t)(b.len / CFS_ID_BYTES);
	return 0;
}

int sfsro_root_decode(const uint8_t *p, size_t len, struct sfsro_root *ret)
{
	struct cfs_mpr r, b;
	struct cfs_bytes body, sig;
	uint64_t ver, m = 0, n = 0;
	uint8_t *msg;
	size_t mlen;
	int v;

	/* format 1 (replicated) or 2 (coded): its own header check */
	cfs_mpr_init(&r, p, len);
	TRY(cfs_mpr_array_n(&r, 4));
	TRY(cfs_mpr_expect_str(&r, TAG_ROOT));
	TRY(cfs_mpr_uint(&r, 255, &ver));
	if (ver > SFSRO_ROOT_VERSION_CODED)
		return -EPROTONOSUPPORT;
	if (ver < SFSRO_VERSION)
		return -EPROTO;
	TRY(cfs_mpr_bin(&r, 1, 512, &body));
	TRY(cfs_mpr_bin(&r, CFS_SIG_BYTES, CFS_SIG_BYTES, &sig));
	TRY(cfs_mpr_end(&r));
	cfs_mpr_init(&b, body.p, body.len);
	struct cfs_id pk;
	TRY(cfs_mpr_array_n(&b, ver == SFSRO_ROOT_VERSION_CODED ? 9 : 8));
	TRY(get_id(&b, &pk));
	memcpy(ret->pk.b, pk.b, sizeof(pk.b));
	TRY(cfs_mpr_uint(&b, UINT64_MAX, &ret->seq));
	TRY(cfs_mpr_uint(&b, UINT64_MAX, &ret->issued));
	TRY(cfs_mpr_uint(&b, UINT64_MAX, &ret->valid_until));
	TRY(get_id(&b, &ret->root_dir));
	TRY(get_u32(&b, 07777, &ret->dir_mode));
	TRY(cfs_mpr_int(&b, &ret->mtime_s));
	TRY(get_u32(&b, 999999999, &ret->mtime_ns));
	if (ver == SFSRO_ROOT_VERSION_CODED) {
		TRY(cfs_mpr_array_n(&b, 2));
		TRY(cfs_mpr_uint(&b, SFSRO_CODE_M_MAX, &m));
		TRY(cfs_mpr_uint(&b, SFSRO_CODE_N_MAX, &n));
		if (!sfsro_code_valid((uint32_t)m, (uint32_t)n))
			return -EPROTO;
	}
	ret->code_m = (uint8_t)m;
	ret->code_n = (uint8_t)n;
	TRY(cfs_mpr_end(&b));
	/* the signature covers the body bytes exactly as received */
	root_sig_msg(body.p, body.len, &msg, &mlen);
	v = cfs_verify(sig.p, msg, mlen, &ret->pk);
	free(msg);
	return v;
}

int sfsro_root_check(const struct sfsro_root *r, const struct cfs_pubkey *pk,
                     uint64_t min_seq, uint64_t now)
{
	if (memcmp(r->pk.b, pk->b, sizeof(pk->b)) != 0)
		return -EKEYREJECTED;
	if (r->seq < min_seq)
		return -ESTALE;
	if (r->valid_until < now)
		return -EKEYEXPIRED;
	return 0;
}

int sfsro_data_decode(const uint8_t *p, size_t len, struct cfs_bytes *ret)
{
	struct cfs_mpr r;
	TRY(header(&r, p, len, TAG_DATA, 3));
	TRY(cfs_mpr_bin(&r, 0, SFSRO_BLOCK_SIZE_MAX, ret));
	return cfs_mpr_end(&r);
}

int sfsro_indirect_decode(const uint8_t *p, size_t len, uint32_t *ret_height,
                          const struct cfs_id **ret_keys, uint32_t *ret_n)
{
	struct cfs_mpr r;
	TRY(header(&r, p, len, TAG_INDIR, 4));
	TRY(get_u32(&r, SFSRO_HEIGHT_MAX, ret_height));
	TRY(get_keys(&r, ret_keys, ret_n));
	if (*ret_height < 1 || *ret_n == 0)
		return -EPROTO;
	return cfs_mpr_end(&r);
}

/* ceil(a / b^h), saturating: how many keys a level of height h needs. */
static uint64_t level_count(uint64_t nblocks, uint64_t fanout, uint32_t h)
{
	for (uint32_t i = 0; i < h; i++)
		nblocks = nblocks / fanout + (nblocks % fanout != 0);
	return nblocks;
}

int sfsro_inode_decode(const uint8_t *p, size_t len, struct sfsro_inode *ret)
{
	struct cfs_mpr r;
	uint64_t nblocks;

	memset(ret, 0, sizeof(*ret));
	TRY(header(&r, p, len, TAG_INODE, 11));
	TRY(cfs_mpr_uint(&r, UINT64_MAX, &ret->size));
	TRY(get_u32(&r, 07777, &ret->mode));
	TRY(cfs_mpr_int(&r, &ret->mtime_s));
	TRY(get_u32(&r, 999999999, &ret->mtime_ns));
	TRY(get_u32(&r, SFSRO_BLOCK_SIZE_MAX, &ret->bsize));
	TRY(get_u32(&r, KEYS_MAX, &ret->fanout));
	TRY(get_u32(&r, SFSRO_HEIGHT_MAX, &ret->height));
	TRY(get_keys(&r, &ret->keys, &ret->nkeys));
	TRY(cfs_mpr_bin(&r, 0, SFSRO_INLINE_MAX, &ret->inline_data));
	TRY(cfs_mpr_end(&r));
	/* the shape must follow from the size: no other tree is valid */
	if (ret->bsize < SFSRO_BLOCK_SIZE_MIN || ret->fanout != sfsro_fanout(ret->bsize))
		return -EPROTO;
	if (ret->size <= SFSRO_INLINE_MAX)
		return ret->inline_data.len == ret->size && ret->nkeys == 0 && ret->height == 0 ? 0 : -EPROTO;
	if (ret->inline_data.len)
		return -EPROTO;
	nblocks = ret->size / ret->bsize + (ret->size % ret->bsize != 0);
	if (level_count(nblocks, ret->fanout, ret->height) != ret->nkeys || ret->nkeys > ret->fanout)
		return -EPROTO;
	if (ret->height > 0 && level_count(nblocks, ret->fanout, ret->height - 1) <= ret->fanout)
		return -EPROTO; /* one level too many */
	return 0;
}

int sfsro_name_cmp(const struct cfs_bytes *a, const struct cfs_bytes *b)
{
	size_t n = a->len < b->len ? a->len : b->len;
	int c = memcmp(a->p, b->p, n);
	return c ? c : (a->len > b->len) - (a->len < b->len);
}

static int get_entry(struct cfs_mpr *r, struct sfsro_entry *e)
{
	struct cfs_bytes key;
	uint64_t type;

	TRY(cfs_mpr_array_n(r, 8));
	TRY(cfs_mpr_bin(r, 1, SFSRO_NAME_MAX, &e->name));
	TRY(sfsro_check_name(e->name.p, e->name.len, NULL));
	TRY(cfs_mpr_uint(r, SFSRO_T_SYMLINK, &type));
	e->type = (uint8_t)type;
	TRY(cfs_mpr_uint(r, UINT64_MAX, &e->size));
	TRY(get_u32(r, 07777, &e->mode));
	TRY(cfs_mpr_int(r, &e->mtime_s));
	TRY(get_u32(r, 999999999, &e->mtime_ns));
	TRY(cfs_mpr_bin(r, 0, CFS_ID_BYTES, &key));
	TRY(cfs_mpr_bin(r, 0, SFSRO_SYMLINK_MAX, &e->target));
	if (e->type == SFSRO_T_SYMLINK) {
		if (key.len != 0 || e->target.len == 0 || memchr(e->target.p, 0, e->target.len))
			return -EPROTO;
		memset(e->key.b, 0, CFS_ID_BYTES);
	} else {
		if (e->type == 0 || key.len != CFS_ID_BYTES || e->target.len != 0)
			return -EPROTO;
		memcpy(e->key.b, key.p, CFS_ID_BYTES);
	}
	return 0;
}

void sfsro_dir_clear(struct sfsro_dir *d)
{
	free(d->entries);
	free(d->children);
	memset(d, 0, sizeof(*d));
}

int sfsro_dir_decode(const uint8_t *p, size_t len, struct sfsro_dir *ret)
{
	struct cfs_mpr r;
	uint32_t n;

	memset(ret, 0, sizeof(*ret));
	TRY(header(&r, p, len, TAG_DIR, 4));
	TRY(get_u32(&r, SFSRO_HEIGHT_MAX, &ret->height));
	TRY(cfs_mpr_array(&r, &n));
	/* an entry takes at least 12 bytes, an index item 37: the arrays below
	 * stay within a small multiple of the block's size */
	if ((ret->height > 0 && n == 0) || (size_t)n * (ret->height ? 37 : 12) > len - r.off)
		return -EPROTO;
	if (ret->height == 0)
		ret->entries = xcalloc(n ? n : 1, sizeof(*ret->entries));
	else
		ret->children = xcalloc(n, sizeof(*ret->children));
	for (uint32_t i = 0; i < n; i++) {
		const struct cfs_bytes *name, *prev = NULL;
		if (ret->height == 0) {
			if (get_entry(&r, &ret->entries[i]) < 0)
				goto bad;
			name = &ret->entries[i].name;
			if (i)
				prev = &ret->entries[i - 1].name;
		} else {
			struct sfsro_dir_child *c = &ret->children[i];
			if (cfs_mpr_array_n(&r, 2) < 0 || cfs_mpr_bin(&r, 1, SFSRO_NAME_MAX, &c->first) < 0 ||
			    sfsro_check_name(c->first.p, c->first.len, NULL) < 0 || get_id(&r, &c->key) < 0)
				goto bad;
			name = &c->first;
			if (i)
				prev = &ret->children[i - 1].first;
		}
		if (prev && sfsro_name_cmp(prev, name) >= 0) /* strictly increasing */
			goto bad;
		ret->n = i + 1;
	}
	if (cfs_mpr_end(&r) < 0)
		goto bad;
	return 0;
bad:
	sfsro_dir_clear(ret);
	return -EPROTO;
}

bool sfsro_dir_in_range(const struct sfsro_dir *d, const struct cfs_bytes *lo,
                        const struct cfs_bytes *hi)
{
	const struct cfs_bytes *first = d->n == 0 ? NULL
	                                : d->height ? &d->children[0].first : &d->entries[0].name;
	const struct cfs_bytes *last = d->n == 0 ? NULL
	                               : d->height ? &d->children[d->n - 1].first
	                                           : &d->entries[d->n - 1].name;

	if (lo && (!first || sfsro_name_cmp(first, lo) != 0))
		return false;
	return !hi || !last || sfsro_name_cmp(last, hi) < 0;
}
