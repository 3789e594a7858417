/* Identifier arithmetic on the 2^256 circle, at the edges. */
#include <criterion/criterion.h>
#include <string.h>

#include "common/cfs.h"

static struct cfs_id id_u64(uint64_t v)
{
	struct cfs_id a = { { 0 } };
	for (int i = 0; i < 8; i++)
		a.b[31 - i] = (uint8_t)(v >> (8 * i));
	return a;
}

/* A pointer to a temporary id, for passing values inline. */
static const struct cfs_id *P(struct cfs_id v)
{
	static struct cfs_id ring[16];
	static unsigned i;
	ring[i % 16] = v;
	return &ring[i++ % 16];
}

static struct cfs_id id_max(void)
{
	struct cfs_id a;
	memset(a.b, 0xff, 32);
	return a;
}

static struct cfs_id id_half(void) /* 2^255 */
{
	struct cfs_id a = { { 0 } };
	a.b[0] = 0x80;
	return a;
}

Test(id, add_sub_wrap)
{
	struct cfs_id max = id_max(), one = id_u64(1), zero = id_u64(0), r;

	cfs_id_add(&r, &max, &one);
	cr_assert(cfs_id_eq(&r, &zero), "2^256-1 + 1 wraps to 0");
	cfs_id_sub(&r, &zero, &one);
	cr_assert(cfs_id_eq(&r, &max), "0 - 1 wraps to 2^256-1");
	cfs_id_add(&r, &max, &max);
	cfs_id_sub(&r, &r, &max);
	cr_assert(cfs_id_eq(&r, &max));
	cfs_id_add(&r, &r, &zero);
	cr_assert(cfs_id_eq(&r, &max), "aliasing ret with an operand works");
}

Test(id, shr)
{
	struct cfs_id zero = id_u64(0), r, p;

	for (unsigned i = 0; i < 256; i++) {
		/* 2^255 >> i = 2^(255 - i) */
		cfs_id_add_pow2(&p, &zero, 255);
		cfs_id_shr(&r, &p, i);
		struct cfs_id want;
		cfs_id_add_pow2(&want, &zero, 255 - i);
		cr_assert(cfs_id_eq(&r, &want), "i=%u", i);
	}
	struct cfs_id a = id_u64(0xf0f0f0f0f0f0f0f0ull);
	cfs_id_shr(&r, &a, 4);
	cr_assert(cfs_id_eq(&r, P(id_u64(0x0f0f0f0f0f0f0f0full))));
	cfs_id_shr(&r, &a, 12);
	cr_assert(cfs_id_eq(&r, P(id_u64(0x000f0f0f0f0f0f0full))));
	cfs_id_shr(&r, &a, 0);
	cr_assert(cfs_id_eq(&r, &a));
	struct cfs_id max = id_max();
	cfs_id_shr(&r, &max, 256);
	cr_assert(cfs_id_eq(&r, &zero), "a shift by the whole width gives 0");
	cfs_id_shr(&r, &max, 255);
	cr_assert(cfs_id_eq(&r, P(id_u64(1))));
}

Test(id, add_pow2)
{
	struct cfs_id zero = id_u64(0), half = id_half(), r, r2;

	cfs_id_add_pow2(&r, &zero, 0);
	cr_assert(cfs_id_eq(&r, &(struct cfs_id){ .b[31] = 1 }));
	cfs_id_add_pow2(&r, &zero, 255);
	cr_assert(cfs_id_eq(&r, &half), "0 + 2^255 = 2^255");
	cfs_id_add_pow2(&r2, &r, 255);
	cr_assert(cfs_id_eq(&r2, &zero), "2^255 + 2^255 wraps to 0");
	cfs_id_add_pow2(&r, &zero, 64);
	cr_assert(cfs_id_eq(&r, &(struct cfs_id){ .b[23] = 1 }));
	struct cfs_id max = id_max();
	cfs_id_add_pow2(&r, &max, 8);
	cr_assert(cfs_id_eq(&r, P(id_u64(0xff))), "carry runs through every byte");
	/* add_pow2 agrees with add of an explicit power for every i */
	for (unsigned i = 0; i < 256; i++) {
		struct cfs_id p = { { 0 } }, a = id_u64(0x123456789abcdefull), x, y;
		p.b[31 - i / 8] = (uint8_t)(1u << (i % 8));
		cfs_id_add_pow2(&x, &a, i);
		cfs_id_add(&y, &a, &p);
		cr_assert(cfs_id_eq(&x, &y), "i=%u", i);
	}
}

Test(id, distance)
{
	struct cfs_id a = id_u64(10), b = id_u64(3), max = id_max(), r;

	cfs_id_distance(&r, &b, &a);
	cr_assert(cfs_id_eq(&r, P(id_u64(7))));
	cfs_id_distance(&r, &a, &b); /* clockwise the long way */
	struct cfs_id expect;
	cfs_id_sub(&expect, P(id_u64(0)), P(id_u64(7)));
	cr_assert(cfs_id_eq(&r, &expect));
	cfs_id_distance(&r, &max, P(id_u64(0)));
	cr_assert(cfs_id_eq(&r, P(id_u64(1))), "distance across the wrap point is 1");
	cfs_id_distance(&r, &a, &a);
	cr_assert(cfs_id_is_zero(&r));
}

Test(id, compare)
{
	struct cfs_id a = id_u64(1), b = id_u64(2), max = id_max(), half = id_half();
	cr_assert(cfs_id_cmp(&a, &b) < 0);
	cr_assert(cfs_id_cmp(&b, &a) > 0);
	cr_assert(cfs_id_cmp(&a, &a) == 0);
	cr_assert(cfs_id_cmp(&half, &b) > 0, "the most significant byte comes first");
	cr_assert(cfs_id_cmp(&max, &half) > 0);
	cr_assert(cfs_id_eq(&max, &max) && !cfs_id_eq(&a, &b));
}

Test(id, intervals_plain)
{
	struct cfs_id a = id_u64(10), b = id_u64(20);
	cr_assert(cfs_id_in_oo(P(id_u64(15)), &a, &b));
	cr_assert(!cfs_id_in_oo(&a, &a, &b) && !cfs_id_in_oo(&b, &a, &b));
	cr_assert(cfs_id_in_oc(&b, &a, &b) && !cfs_id_in_oc(&a, &a, &b));
	cr_assert(cfs_id_in_co(&a, &a, &b) && !cfs_id_in_co(&b, &a, &b));
	cr_assert(!cfs_id_in_oo(P(id_u64(5)), &a, &b) && !cfs_id_in_oo(P(id_u64(25)), &a, &b));
}

Test(id, intervals_wrap)
{
	struct cfs_id max = id_max(), a, b = id_u64(5), zero = id_u64(0);
	cfs_id_sub(&a, &max, P(id_u64(4))); /* 2^256 - 5 */

	cr_assert(cfs_id_in_oo(&max, &a, &b), "2^256-1 lies in (2^256-5, 5)");
	cr_assert(cfs_id_in_oo(&zero, &a, &b), "0 lies in (2^256-5, 5)");
	cr_assert(cfs_id_in_oo(P(id_u64(4)), &a, &b));
	cr_assert(!cfs_id_in_oo(P(id_u64(6)), &a, &b));
	cr_assert(!cfs_id_in_oo(P(id_half()), &a, &b));
	cr_assert(cfs_id_in_oc(&b, &a, &b) && !cfs_id_in_oc(&a, &a, &b));
	cr_assert(cfs_id_in_co(&a, &a, &b) && !cfs_id_in_co(&b, &a, &b));
	/* (max, 0] holds exactly 0 */
	cr_assert(cfs_id_in_oc(&zero, &max, &zero));
	cr_assert(!cfs_id_in_oc(&max, &max, &zero));
	cr_assert(!cfs_id_in_oc(P(id_u64(1)), &max, &zero));
}

Test(id, intervals_full_and_empty)
{
	struct cfs_id a = id_u64(7), a1 = id_u64(8), x = id_half(), max = id_max();

	/* a == b wraps the whole circle */
	cr_assert(cfs_id_in_oo(&x, &a, &a) && !cfs_id_in_oo(&a, &a, &a), "(a,a) is all but a");
	cr_assert(cfs_id_in_oc(&a, &a, &a) && cfs_id_in_oc(&x, &a, &a), "(a,a] is everything");
	cr_assert(cfs_id_in_co(&a, &a, &a) && cfs_id_in_co(&max, &a, &a), "[a,a) is everything");
	/* (a, a+1) is empty */
	cr_assert(!cfs_id_in_oo(&a, &a, &a1) && !cfs_id_in_oo(&a1, &a, &a1));
	cr_assert(!cfs_id_in_oo(&x, &a, &a1) && !cfs_id_in_oo(&max, &a, &a1));
	/* (max, 0) is empty too, across the wrap point */
	struct cfs_id zero = id_u64(0);
	cr_assert(!cfs_id_in_oo(&zero, &max, &zero) && !cfs_id_in_oo(&max, &max, &zero));
	cr_assert(!cfs_id_in_oo(&x, &max, &zero));
}

Test(id, unit_and_hex)
{
	char h[65], s[9];
	struct cfs_id half = id_half();
	cr_assert_float_eq(cfs_id_to_unit(&half), 0.5, 1e-12);
	cr_assert_float_eq(cfs_id_to_unit(&(struct cfs_id){ { 0 } }), 0.0, 1e-12);
	cr_assert(cfs_id_to_unit(&(struct cfs_id){ .b = { [0 ... 31] = 0xff } }) < 1.0);
	cr_assert_str_eq(cfs_id_hex(&half, h),
	    "8000000000000000000000000000000000000000000000000000000000000000");
	cr_assert_str_eq(cfs_id_short(&half, s), "80000000");
}

Test(id, node_id_and_addresses)
{
	struct cfs_addr a, b, c;
	struct cfs_id i0, i1, j0;
	char buf[CFS_ADDR_STRLEN];

	cr_assert(cfs_addr_parse(&a, "127.0.0.1:4000") == 0);
	cr_assert(cfs_addr_parse(&b, "[::1]:4000") == 0);
	cr_assert(cfs_addr_parse(&c, "4000") == 0);
	cr_assert(cfs_addr_eq(&a, &c), "a bare port means loopback");
	cr_assert_str_eq(cfs_addr_str(&a, buf), "127.0.0.1:4000");
	cr_assert_str_eq(cfs_addr_str(&b, buf), "[::1]:4000");
	cr_assert(cfs_addr_parse(&c, "127.0.0.1:0") < 0);
	cr_assert(cfs_addr_parse(&c, "127.0.0.1:65536") < 0);
	cr_assert(cfs_addr_parse(&c, "::1:4000") < 0, "IPv6 needs brackets");
	cr_assert(cfs_addr_parse(&c, "host:") < 0);

	cfs_node_id(&i0, &a, 0);
	cfs_node_id(&i1, &a, 1);
	cfs_node_id(&j0, &b, 0);
	cr_assert(!cfs_id_eq(&i0, &i1) && !cfs_id_eq(&i0, &j0));
	/* H(IP ‖ index) computed by hand: the port is not hashed (PROTOCOL.md "Node IDs") */
	uint8_t raw[4 + 4] = { 127, 0, 0, 1, 0, 0, 0, 1 };
	struct cfs_id expect;
	cfs_hash(&expect, raw, sizeof(raw));
	cr_assert(cfs_id_eq(&i1, &expect));
	/* the vector tests/harness/cfsmsg.py's node_id("127.0.0.1", 1) gives */
	cr_assert_str_eq(cfs_id_hex(&i1, (char[65]){ 0 }),
	                 "97e92349dda5cbf1f7692eb8822d4bfb8bb1a6e97c5a17e9b3d21d03166abd34");
	struct cfs_addr other_port;
	cr_assert(cfs_addr_parse(&other_port, "127.0.0.1:4001") == 0);
	cfs_node_id(&j0, &other_port, 1);
	cr_assert(cfs_id_eq(&i1, &j0), "another port of one IP has the same IDs");
	uint8_t raw6[16 + 4] = { [15] = 1, [19] = 0 };
	cfs_hash(&expect, raw6, sizeof(raw6));
	cfs_node_id(&j0, &b, 0);
	cr_assert(cfs_id_eq(&j0, &expect), "IPv6: the 16 raw bytes, then the index");
}

Test(idmap, put_get_replace_and_grow)
{
	struct cfs_idmap m = { 0 };
	struct cfs_id k;
	uint32_t v;

	cr_assert(!cfs_idmap_get(&m, P(id_u64(1)), &v), "an empty map holds nothing");
	for (uint32_t i = 0; i < 5000; i++) { /* grows past its first 1,024 slots */
		cfs_hash(&k, &i, sizeof(i));
		cfs_idmap_put(&m, &k, i);
	}
	cr_assert_eq(cfs_htab_count(&m.t), 5000);
	for (uint32_t i = 0; i < 5000; i++) {
		cfs_hash(&k, &i, sizeof(i));
		cr_assert(cfs_idmap_get(&m, &k, &v));
		cr_assert_eq(v, i);
	}
	cfs_hash(&k, "absent", 6);
	cr_assert(!cfs_idmap_get(&m, &k, NULL));
	uint32_t zero = 0;
	cfs_hash(&k, &zero, sizeof(zero));
	cfs_idmap_put(&m, &k, 77); /* replace: no new entry */
	cr_assert_eq(cfs_htab_count(&m.t), 5000);
	cr_assert(cfs_idmap_get(&m, &k, &v) && v == 77);
	cfs_idmap_free(&m);
	cr_assert_eq(cfs_htab_count(&m.t), 0);
}
