/* Hashing, signatures and the canonical text form of names. */
#include <criterion/criterion.h>
#include <string.h>

#include "common/cfs.h"

static void init(void) { cr_assert(cfs_crypto_init() == 0); }

TestSuite(crypto, .init = init);

Test(crypto, blake2b_256_vector)
{
	/* BLAKE2b-256("abc"), from the BLAKE2 reference implementation. */
	struct cfs_id h;
	char hex[65];
	cfs_hash(&h, "abc", 3);
	cr_assert_str_eq(cfs_id_hex(&h, hex),
	    "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319");
	cfs_hash(&h, "", 0);
	cr_assert_str_eq(cfs_id_hex(&h, hex),
	    "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8");
}

Test(crypto, incremental_matches_oneshot)
{
	struct cfs_hasher st;
	struct cfs_id a, b;
	uint8_t buf[1000];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7);
	cfs_hash(&a, buf, sizeof(buf));
	cfs_hasher_init(&st);
	cfs_hasher_update(&st, buf, 1);
	cfs_hasher_update(&st, buf + 1, 500);
	cfs_hasher_update(&st, buf + 501, 499);
	cfs_hasher_final(&st, &b);
	cr_assert(cfs_id_eq(&a, &b));
}

Test(crypto, sign_verify)
{
	struct cfs_pubkey pk, pk2, other;
	struct cfs_seckey sk, sk2;
	uint8_t sig[CFS_SIG_BYTES];
	const char msg[] = "root block";

	cfs_sign_keypair(&pk, &sk);
	cfs_sign_keypair(&other, &sk2);
	cfs_seckey_pubkey(&sk, &pk2);
	cr_assert(memcmp(pk.b, pk2.b, 32) == 0);
	cfs_sign(sig, msg, sizeof(msg), &sk);
	cr_assert(cfs_verify(sig, msg, sizeof(msg), &pk) == 0);
	cr_assert(cfs_verify(sig, msg, sizeof(msg), &other) == -EBADMSG, "another key");
	cr_assert(cfs_verify(sig, msg, sizeof(msg) - 1, &pk) == -EBADMSG, "another message");
	sig[5] ^= 1;
	cr_assert(cfs_verify(sig, msg, sizeof(msg), &pk) == -EBADMSG, "a flipped bit");
	cfs_seckey_wipe(&sk);
	uint8_t zero[64] = { 0 };
	cr_assert(memcmp(sk.b, zero, 64) == 0);
}

Test(crypto, name_roundtrip)
{
	uint8_t in[32], out[32];
	char name[CFS_NAME_LEN + 1];

	for (int t = 0; t < 200; t++) {
		for (int i = 0; i < 32; i++)
			in[i] = (uint8_t)(t * 31 + i * 17);
		cfs_name_encode(name, in);
		cr_assert_eq(strlen(name), CFS_NAME_LEN);
		cr_assert(cfs_name_decode(out, name, NULL) == 0);
		cr_assert(memcmp(in, out, 32) == 0);
	}
}

Test(crypto, name_vector)
{
	uint8_t zero[32] = { 0 }, ff[32];
	char name[CFS_NAME_LEN + 1];

	memset(ff, 0xff, 32);
	cfs_name_encode(name, zero);
	cr_assert_str_eq(name, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	cfs_name_encode(name, ff);
	/* 51 full groups of ones, then one 1-bit padded with zeros: 10000 = 'q' */
	cr_assert_str_eq(name, "777777777777777777777777777777777777777777777777777q");
}

Test(crypto, name_rejects_noncanonical)
{
	uint8_t out[32], in[32];
	char name[CFS_NAME_LEN + 1], bad[CFS_NAME_LEN + 2];
	const char *why = NULL;

	for (int i = 0; i < 32; i++)
		in[i] = (uint8_t)i;
	cfs_name_encode(name, in);

	cr_assert(cfs_name_decode(out, "", &why) == -EINVAL && why);
	strcpy(bad, name);
	bad[CFS_NAME_LEN - 1] = 0; /* too short */
	cr_assert(cfs_name_decode(out, bad, &why) == -EINVAL);
	strcpy(bad, name);
	strcat(bad, "a"); /* too long */
	cr_assert(cfs_name_decode(out, bad, &why) == -EINVAL);
	strcpy(bad, name);
	bad[3] = (char)(bad[3] - 'a' + 'A'); /* uppercase */
	if (bad[3] >= 'A' && bad[3] <= 'Z') {
		why = NULL;
		cr_assert(cfs_name_decode(out, bad, &why) == -EINVAL);
		cr_assert(strstr(why, "uppercase"), "why: %s", why);
	}
	strcpy(bad, name);
	bad[10] = '1'; /* not in the alphabet */
	cr_assert(cfs_name_decode(out, bad, &why) == -EINVAL);
	strcpy(bad, name);
	bad[10] = '=';
	cr_assert(cfs_name_decode(out, bad, &why) == -EINVAL && strstr(why, "padding"));
	/* nonzero unused bits in the last character: 'r' = 10001 */
	strcpy(bad, name);
	bad[CFS_NAME_LEN - 1] = 'r';
	why = NULL;
	cr_assert(cfs_name_decode(out, bad, &why) == -EINVAL);
	cr_assert(strstr(why, "canonical"), "why: %s", why);
}

Test(crypto, volume_specs)
{
	uint8_t in[32], out[32];
	char name[CFS_NAME_LEN + 1], s[200];
	const char *why, *path;
	uint64_t seq;

	for (int i = 0; i < 32; i++)
		in[i] = (uint8_t)(7 * i);
	cfs_name_encode(name, in);
	cr_assert(cfs_volume_spec_parse(name, out, &seq, NULL, &why) == 0 && seq == 0);
	cr_assert(memcmp(in, out, 32) == 0);
	snprintf(s, sizeof(s), "%s@latest", name);
	cr_assert(cfs_volume_spec_parse(s, out, &seq, NULL, &why) == 0 && seq == 0);
	snprintf(s, sizeof(s), "%s@42", name);
	cr_assert(cfs_volume_spec_parse(s, out, &seq, NULL, &why) == 0 && seq == 42);
	snprintf(s, sizeof(s), "%s@18446744073709551615", name); /* too many digits */
	cr_assert(cfs_volume_spec_parse(s, out, &seq, NULL, &why) == -EINVAL);
	snprintf(s, sizeof(s), "%s@9999999999999999999/a/b", name);
	cr_assert(cfs_volume_spec_parse(s, out, &seq, &path, &why) == 0);
	cr_assert(seq == 9999999999999999999ull && !strcmp(path, "/a/b"));
	snprintf(s, sizeof(s), "%s/x", name);
	cr_assert(cfs_volume_spec_parse(s, out, &seq, &path, &why) == 0 && seq == 0 && !strcmp(path, "/x"));
	cr_assert(cfs_volume_spec_parse(name, out, &seq, &path, &why) == 0 && !strcmp(path, ""));
	snprintf(s, sizeof(s), "%s@latest/x", name);
	cr_assert(cfs_volume_spec_parse(s, out, &seq, &path, &why) == 0 && seq == 0 && !strcmp(path, "/x"));
	/* refused, each with a reason */
	const char *bad[] = { "@0", "@", "@01", "@-1", "@1x", "@latestx", "@ 1", "@1@2", "/x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(s, sizeof(s), "%s%s", name, bad[i]);
		why = NULL;
		cr_assert(cfs_volume_spec_parse(s, out, &seq, NULL, &why) == -EINVAL && why, "%s", bad[i]);
	}
	snprintf(s, sizeof(s), "%.51s@1", name); /* a short name */
	cr_assert(cfs_volume_spec_parse(s, out, &seq, NULL, &why) == -EINVAL);
	cr_assert(cfs_volume_spec_parse("", out, &seq, NULL, &why) == -EINVAL);
}
