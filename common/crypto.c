/* BLAKE2b-256, Ed25519 and the canonical base32 text form — libsodium only. */
#include "common/cfs.h"

#include <sodium.h>
#include <string.h>

_Static_assert(sizeof(struct cfs_hasher) >= sizeof(crypto_generichash_state),
               "cfs_hasher too small for crypto_generichash_state");

int cfs_crypto_init(void)
{
	return sodium_init() < 0 ? -EIO : 0;
}

void cfs_hash(struct cfs_id *ret, const void *data, size_t len)
{
	crypto_generichash(ret->b, CFS_HASH_BYTES, data, len, NULL, 0);
}

void cfs_hasher_init(struct cfs_hasher *h)
{
	crypto_generichash_init((crypto_generichash_state *)h->opaque, NULL, 0, CFS_HASH_BYTES);
}

void cfs_hasher_update(struct cfs_hasher *h, const void *data, size_t len)
{
	crypto_generichash_update((crypto_generichash_state *)h->opaque, data, len);
}

void cfs_hasher_final(struct cfs_hasher *h, struct cfs_id *ret)
{
	crypto_generichash_final((crypto_generichash_state *)h->opaque, ret->b, CFS_HASH_BYTES);
}

void cfs_sign_keypair(struct cfs_pubkey *ret_pk, struct cfs_seckey *ret_sk)
{
	crypto_sign_keypair(ret_pk->b, ret_sk->b);
}

void cfs_sign_seed_keypair(const uint8_t seed[static 32], struct cfs_pubkey *ret_pk,
                           struct cfs_seckey *ret_sk)
{
	crypto_sign_seed_keypair(ret_pk->b, ret_sk->b, seed);
}

void cfs_seckey_pubkey(const struct cfs_seckey *sk, struct cfs_pubkey *ret_pk)
{
	crypto_sign_ed25519_sk_to_pk(ret_pk->b, sk->b);
}

void cfs_sign(uint8_t sig[static CFS_SIG_BYTES], const void *msg, size_t len,
              const struct cfs_seckey *sk)
{
	crypto_sign_detached(sig, NULL, msg, len, sk->b);
}

int cfs_verify(const uint8_t sig[static CFS_SIG_BYTES], const void *msg, size_t len,
               const struct cfs_pubkey *pk)
{
	return crypto_sign_verify_detached(sig, msg, len, pk->b) == 0 ? 0 : -EBADMSG;
}

void cfs_wipe(void *p, size_t n)
{
	sodium_memzero(p, n);
}

void cfs_seckey_wipe(struct cfs_seckey *sk)
{
	sodium_memzero(sk->b, sizeof(sk->b));
}

/* ------------------------------------------------------------ base32 */

static const char b32_alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";

void cfs_name_encode(char out[static CFS_NAME_LEN + 1], const uint8_t in[static 32])
{
	unsigned acc = 0, bits = 0, o = 0;

	for (unsigned i = 0; i < 32; i++) {
		acc = (acc << 8) | in[i];
		bits += 8;
		while (bits >= 5) {
			bits -= 5;
			out[o++] = b32_alphabet[(acc >> bits) & 31];
		}
	}
	if (bits) /* 256 = 51·5 + 1: one bit left, padded with four zeros */
		out[o++] = b32_alphabet[(acc << (5 - bits)) & 31];
	out[o] = 0;
}

static int b32_value(char c)
{
	if (c >= 'a' && c <= 'z')
		return c - 'a';
	if (c >= '2' && c <= '7')
		return c - '2' + 26;
	return -1;
}

int cfs_name_decode(uint8_t out[static 32], const char *s, const char **ret_why)
{
	const char *why;
	unsigned acc = 0, bits = 0, o = 0;
	size_t len = strnlen(s, CFS_NAME_LEN + 1);

	if (len != CFS_NAME_LEN) {
		why = "a volume name or key is exactly 52 base32 characters";
		goto bad;
	}
	for (size_t i = 0; i < len; i++) {
		int v = b32_value(s[i]);
		if (v < 0) {
			why = (s[i] >= 'A' && s[i] <= 'Z')
			      ? "uppercase is not canonical: names are lowercase base32"
			      : (s[i] == '=' ? "padding '=' is not part of a name"
			                     : "only the characters a-z and 2-7 may appear in a name");
			goto bad;
		}
		acc = (acc << 5) | (unsigned)v;
		bits += 5;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (uint8_t)(acc >> bits);
		}
	}
	if (acc & ((1u << bits) - 1)) {
		why = "the last character's unused bits must be zero (not canonical)";
		goto bad;
	}
	return 0;
bad:
	if (ret_why)
		*ret_why = why;
	return -EINVAL;
}

int cfs_volume_spec_parse(const char *s, uint8_t out[static 32], uint64_t *ret_seq,
                          const char **ret_path, const char **ret_why)
{
	char name[CFS_NAME_LEN + 1];
	size_t n = strcspn(s, "@/");
	const char *rest = s + n, *why;
	uint64_t seq = 0;

	if (n != CFS_NAME_LEN) {
		why = "a volume name is exactly 52 base32 characters (then @SEQ or /path, if any)";
		goto bad;
	}
	memcpy(name, s, n);
	name[n] = 0;
	if (cfs_name_decode(out, name, ret_why) < 0)
		return -EINVAL;
	if (*rest == '@') {
		const char *num = ++rest;
		size_t digits = strspn(num, "0123456789");
		if (!strncmp(num, "latest", 6) && (num[6] == 0 || num[6] == '/')) {
			rest = num + 6;
		} else if (digits == 0 || digits > 19 || (num[digits] && num[digits] != '/') ||
		           num[0] == '0') {
			why = "a version is @latest or @SEQ, a sequence number from 1";
			goto bad;
		} else {
			for (size_t i = 0; i < digits; i++)
				seq = seq * 10 + (uint64_t)(num[i] - '0');
			rest = num + digits;
		}
	}
	if (*rest && !ret_path) {
		why = "no path may follow the volume here";
		goto bad;
	}
	*ret_seq = seq;
	if (ret_path)
		*ret_path = rest;
	return 0;
bad:
	if (ret_why)
		*ret_why = why;
	return -EINVAL;
}
