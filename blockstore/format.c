/*
 * The byte layouts of the engine (docs/STORAGE.md), no I/O.
 *
 * A pack file:  "CFSPACK1" | version u32 | number u32, then entries:
 *   0  magic "CFSB"
 *   4  len   u32      the block's length
 *   8  key[32]
 *  40  kind  u8, three zero bytes
 *  44  seq   u64
 *  52  lease u64      as put (a later change of lease is in the index only)
 *  60  owner[16]
 *  76  check u32      the first 4 bytes of BLAKE2b-256 over bytes 0..75
 *  80  the block's bytes
 * An index record (the LevelDB value under 'K' key), 58 bytes:
 *   0  version u8 (1) | pack u32 | offset u64 | len u32 | kind u8 |
 *      seq u64 | lease u64 | owner[16] | tick u64
 * All integers big-endian. The header check finds entries when a pack is
 * scanned (compaction, and the replay at open of puts whose index records
 * were not flushed) and tells a damaged entry from a block; the block's
 * own bytes are checked by the readers, who verify every block against
 * its key. The header holds the meta of the put, so that a put is whole
 * once its entry is flushed.
 */
#include <string.h>

#include "blockstore/internal.h"

static const uint8_t pack_magic[8] = { 'C', 'F', 'S', 'P', 'A', 'C', 'K', '1' };
static const uint8_t entry_magic[4] = { 'C', 'F', 'S', 'B' };

static uint32_t header_check(const uint8_t *p)
{
	struct cfs_id h;
	cfs_hash(&h, p, 76);
	return cfs_get_be32(h.b);
}

void bstore__entry_header(uint8_t out[BSTORE__ENTRY_HDR], const struct cfs_id *key,
                          const struct bstore_meta *meta)
{
	memcpy(out, entry_magic, 4);
	cfs_put_be32(out + 4, meta->len);
	memcpy(out + 8, key->b, CFS_ID_BYTES);
	out[40] = meta->kind;
	out[41] = out[42] = out[43] = 0;
	cfs_put_be64(out + 44, meta->seq);
	cfs_put_be64(out + 52, meta->lease_until);
	memcpy(out + 60, meta->owner, 16);
	cfs_put_be32(out + 76, header_check(out));
}

int bstore__entry_parse(const uint8_t *p, size_t len, struct cfs_id *ret_key,
                        struct bstore_meta *ret_meta)
{
	if (len < BSTORE__ENTRY_HDR || memcmp(p, entry_magic, 4) != 0 || p[41] || p[42] || p[43] ||
	    cfs_get_be32(p + 76) != header_check(p))
		return -EINVAL;
	uint32_t n = cfs_get_be32(p + 4);
	if (n > BSTORE_BLOCK_MAX)
		return -EINVAL;
	memcpy(ret_key->b, p + 8, CFS_ID_BYTES);
	memset(ret_meta, 0, sizeof(*ret_meta));
	ret_meta->len = n;
	ret_meta->kind = p[40];
	ret_meta->seq = cfs_get_be64(p + 44);
	ret_meta->lease_until = cfs_get_be64(p + 52);
	memcpy(ret_meta->owner, p + 60, 16);
	return len - BSTORE__ENTRY_HDR >= n ? 1 : 0;
}

void bstore__pack_header(uint8_t out[BSTORE__PACK_HDR], uint32_t num)
{
	memcpy(out, pack_magic, 8);
	cfs_put_be32(out + 8, BSTORE_FORMAT_VERSION);
	cfs_put_be32(out + 12, num);
}

bool bstore__pack_header_ok(const uint8_t *p, size_t len, uint32_t num)
{
	return len >= BSTORE__PACK_HDR && !memcmp(p, pack_magic, 8) &&
	       cfs_get_be32(p + 8) == BSTORE_FORMAT_VERSION && cfs_get_be32(p + 12) == num;
}

void bstore__rec_encode(uint8_t out[BSTORE__REC_BYTES], const struct bstore__rec *r)
{
	out[0] = 1;
	cfs_put_be32(out + 1, r->pack);
	cfs_put_be64(out + 5, r->off);
	cfs_put_be32(out + 13, r->meta.len);
	out[17] = r->meta.kind;
	cfs_put_be64(out + 18, r->meta.seq);
	cfs_put_be64(out + 26, r->meta.lease_until);
	memcpy(out + 34, r->meta.owner, 16);
	cfs_put_be64(out + 50, r->tick);
}

int bstore__rec_decode(const uint8_t *p, size_t len, struct bstore__rec *ret)
{
	if (len != BSTORE__REC_BYTES || p[0] != 1)
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	ret->pack = cfs_get_be32(p + 1);
	ret->off = cfs_get_be64(p + 5);
	ret->meta.len = cfs_get_be32(p + 13);
	ret->meta.kind = p[17];
	ret->meta.seq = cfs_get_be64(p + 18);
	ret->meta.lease_until = cfs_get_be64(p + 26);
	memcpy(ret->meta.owner, p + 34, 16);
	ret->tick = cfs_get_be64(p + 50);
	if (ret->pack == 0 || ret->off < BSTORE__PACK_HDR || ret->meta.len > BSTORE_BLOCK_MAX ||
	    ret->off > UINT64_MAX / 2)
		return -EINVAL;
	return 0;
}

void bstore__rec_key(uint8_t out[1 + CFS_ID_BYTES], const struct cfs_id *key)
{
	out[0] = BSTORE__P_REC;
	memcpy(out + 1, key->b, CFS_ID_BYTES);
}

void bstore__lease_key(uint8_t out[9 + CFS_ID_BYTES], uint64_t until, const struct cfs_id *key)
{
	out[0] = BSTORE__P_LEASE;
	cfs_put_be64(out + 1, until);
	memcpy(out + 9, key->b, CFS_ID_BYTES);
}
