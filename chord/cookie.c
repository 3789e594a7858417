/*
 * Stateless LEAVE cookies (after QUIC's Retry tokens and DNS cookies, RFC
 * 7873). A LEAVE removes a node from its neighbours' tables, so it must come
 * from the node's own address, not merely carry it: the receiver answers a
 * LEAVE without a valid cookie with one, a keyed MAC over the sender's
 * address, ID and index and the current period, and does nothing else. Only
 * whoever receives at that address learns the cookie; a spoofer never does.
 *
 * The key is a per-process random secret replaced every period; cookies of
 * the current and the previous period are accepted, so one lives one to two
 * periods. Nothing is stored per sender.
 */
#include <sodium.h>
#include <string.h>

#include "chord/internal.h"

_Static_assert(CHORD_COOKIE_KEY_BYTES == crypto_generichash_KEYBYTES, "cookie key size");
_Static_assert(CFS_NONCE_BYTES >= crypto_generichash_BYTES_MIN, "cookie size");

void chord__cookie_init(struct chord__cookie_jar *j, uint64_t now_us)
{
	randombytes_buf(j->key, sizeof(j->key));
	j->epoch = now_us / CHORD_COOKIE_PERIOD_US;
}

void chord__cookie_wipe(struct chord__cookie_jar *j)
{
	sodium_memzero(j, sizeof(*j));
}

/* Move to now's period: the current key becomes the previous one. */
static void rotate(struct chord__cookie_jar *j, uint64_t now_us)
{
	uint64_t e = now_us / CHORD_COOKIE_PERIOD_US;

	if (e <= j->epoch)
		return;
	if (e == j->epoch + 1)
		memcpy(j->key[1], j->key[0], sizeof(j->key[0]));
	else
		randombytes_buf(j->key[1], sizeof(j->key[1]));
	randombytes_buf(j->key[0], sizeof(j->key[0]));
	j->epoch = e;
}

static void mac(const uint8_t key[static CHORD_COOKIE_KEY_BYTES], uint64_t epoch,
                const struct cfs_node *sender, uint8_t out[static CFS_NONCE_BYTES])
{
	static const char label[] = "cfs leave cookie";
	crypto_generichash_state st;
	const uint8_t *ip;
	size_t iplen = cfs_addr_ip_bytes(&sender->addr, &ip);
	uint8_t tail[2 + 4 + 8];

	cfs_put_be16(tail, cfs_addr_port(&sender->addr));
	cfs_put_be32(tail + 2, sender->vindex);
	cfs_put_be64(tail + 6, epoch);
	crypto_generichash_init(&st, key, CHORD_COOKIE_KEY_BYTES, CFS_NONCE_BYTES);
	crypto_generichash_update(&st, (const uint8_t *)label, sizeof(label));
	crypto_generichash_update(&st, ip, iplen);
	crypto_generichash_update(&st, tail, sizeof(tail));
	crypto_generichash_update(&st, sender->id.b, sizeof(sender->id.b));
	crypto_generichash_final(&st, out, CFS_NONCE_BYTES);
}

void chord__cookie_make(struct chord__cookie_jar *j, uint64_t now_us, const struct cfs_node *sender,
                        uint8_t out[static CFS_NONCE_BYTES])
{
	rotate(j, now_us);
	mac(j->key[0], j->epoch, sender, out);
}

bool chord__cookie_ok(struct chord__cookie_jar *j, uint64_t now_us, const struct cfs_node *sender,
                      const uint8_t cookie[static CFS_NONCE_BYTES])
{
	uint8_t want[CFS_NONCE_BYTES];
	bool ok;

	rotate(j, now_us);
	mac(j->key[0], j->epoch, sender, want);
	ok = sodium_memcmp(want, cookie, CFS_NONCE_BYTES) == 0;
	if (!ok && j->epoch > 0) {
		mac(j->key[1], j->epoch - 1, sender, want);
		ok = sodium_memcmp(want, cookie, CFS_NONCE_BYTES) == 0;
	}
	return ok;
}

enum chord__leave_verdict chord__leave_judge(struct chord__cookie_jar *j, uint64_t now_us,
                                             const struct cfs_node *sender, bool known,
                                             const uint8_t nonce[static CFS_NONCE_BYTES])
{
	static const uint8_t zero[CFS_NONCE_BYTES];

	if (!known)
		return LEAVE_STRANGER;
	if (memcmp(nonce, zero, CFS_NONCE_BYTES) == 0)
		return LEAVE_NO_COOKIE;
	if (!chord__cookie_ok(j, now_us, sender, nonce))
		return LEAVE_BAD_COOKIE;
	return LEAVE_APPLY;
}
