/*
 * Per-IP quotas with nonce confirmation (CFS 5.4).
 *
 * A client's STORE (DHASH_STORE_F_PRIMARY) is charged to the IP address it
 * came from, and only once that address has shown it receives what is sent
 * to it: a STORE without the right nonce is answered with a challenge (flag
 * DHASH_STORE_R_CHALLENGE and the nonce) and nothing is stored; the client
 * sends it again with the nonce. A sender that forged its source address
 * never sees the challenge (it went to the real owner of the address), so
 * it gets nothing stored and costs the server no state: the nonce is a keyed
 * hash of the address and a ten-minute epoch under a secret drawn at start,
 * checked against this epoch and the last one.
 *
 * The charge lives with the block (its record's owner; the store counts
 * bytes per owner at open and on every write and delete), so a block whose
 * lease ends is refunded, and a block already stored costs nothing again.
 * Copies between servers (replication, repair) and cached copies are not
 * charged; a replica's copy is taken only from a ring member placing a
 * copy of a key near it (dhash__admit_replica). A REFRESH is a put of
 * time: it needs the nonce too, and each block it extends is charged to
 * the refresher from then on (the owner before it refunded) if its quota
 * holds it. Every lease is capped at max_lease_s, whoever asks.
 * --capacity-mb bounds what STOREs may add to the store.
 */
#include <sodium.h>
#include <string.h>

#include "dhash/internal.h"

#define EPOCH_S 600

void dhash__quota_init(dhash_server_t *s)
{
	randombytes_buf(s->quota_secret, sizeof(s->quota_secret));
}

void dhash__quota_owner(const struct cfs_addr *a, uint8_t out[16])
{
	const uint8_t *ip;
	size_t n = cfs_addr_ip_bytes(a, &ip);

	memset(out, 0, 16);
	if (n == 4) { /* v4-mapped, so that one address has one owner */
		out[10] = out[11] = 0xff;
		memcpy(out + 12, ip, 4);
	} else if (n == 16) {
		memcpy(out, ip, 16);
	}
}

static void nonce_for(const dhash_server_t *s, const struct cfs_addr *a, uint64_t epoch,
                      uint8_t out[CFS_NONCE_BYTES])
{
	uint8_t in[16 + 2 + 8];
	uint16_t port = cfs_addr_port(a);

	dhash__quota_owner(a, in);
	cfs_put_be16(in + 16, port);
	cfs_put_be64(in + 18, epoch);
	crypto_generichash(out, CFS_NONCE_BYTES, in, sizeof(in), s->quota_secret,
	                   sizeof(s->quota_secret));
}

bool dhash__quota_confirmed(dhash_server_t *s, const struct cfs_addr *from, const uint8_t *nonce)
{
	uint64_t epoch = dhash__wall_now() / EPOCH_S;
	uint8_t want[CFS_NONCE_BYTES];

	for (uint64_t back = 0; back < 2 && back <= epoch; back++) { /* this epoch or the last */
		nonce_for(s, from, epoch - back, want);
		if (sodium_memcmp(want, nonce, CFS_NONCE_BYTES) == 0)
			return true;
	}
	return false;
}

void dhash__quota_challenge(dhash_server_t *s, const struct cfs_reply_to *from, enum cfs_msg_type type)
{
	cfs_msg_init(&s->reply, type);
	s->reply.flags = DHASH_STORE_R_CHALLENGE;
	nonce_for(s, &from->addr, dhash__wall_now() / EPOCH_S, s->reply.nonce);
	s->challenges++;
	(void)cfs_transport_reply(chord_transport(s->chord), from, &s->reply);
}

bool dhash__quota_cache_room(dhash_server_t *s, size_t len)
{
	uint64_t blocks, bytes;

	if (!s->cfg.capacity_bytes)
		return true;
	dhash_store_totals(s->store, &blocks, &bytes);
	if (bytes + len > s->cfg.capacity_bytes)
		return false;
	dhash_cache_trim(s->cache, s->cfg.capacity_bytes - bytes - len);
	return true;
}

int dhash__quota_admit(dhash_server_t *s, const struct cfs_id *key, const struct dhash_rec *rec,
                uint64_t batch_bytes, uint64_t batch_owner_bytes)
{
	static const uint8_t nobody[16];
	bool charged = memcmp(rec->owner, nobody, 16) != 0;
	uint64_t blocks, bytes;

	if (!s->cfg.capacity_bytes && !(charged && s->cfg.quota_bytes))
		return 0;
	if (dhash_store_has(s->store, key))
		return 0; /* stored already: it takes no more room */
	dhash_store_totals(s->store, &blocks, &bytes);
	if (s->cfg.capacity_bytes && bytes + batch_bytes + rec->len > s->cfg.capacity_bytes)
		return -ENOSPC;
	/* The capacity holds replicas and cached copies together: cached
	 * copies make room first (CFS 5.2: evicted before any replica). */
	if (s->cfg.capacity_bytes && s->cache)
		dhash_cache_trim(s->cache, s->cfg.capacity_bytes - bytes - batch_bytes - rec->len);
	if (charged && s->cfg.quota_bytes &&
	    dhash_store_usage(s->store, rec->owner) + batch_owner_bytes + rec->len > s->cfg.quota_bytes)
		return -EDQUOT;
	return 0;
}
