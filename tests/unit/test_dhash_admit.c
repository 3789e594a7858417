/* Store admission: who may hand a server a replica's
 * copy (chord_holder_plausible, a pure function of the receiver's view),
 * the lease cap, a REFRESH charged to the refresher (the store), and the
 * refresh machines answering a server's nonce challenge (CFS 5.4). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dhash/client_sm.h"
#include "tests/unit/dhash_sm_fixtures.h"

static void setup(void)
{
	cfs_log_init("test", CFS_LOG_ERROR);
}

TestSuite(admit, .init = setup);

/* The point g successor gaps after key in a ring of n: key + g/n of the circle. */
static struct cfs_id at(const struct cfs_id *key, double g, double n)
{
	struct cfs_id d = { 0 }, r;
	uint64_t x = g < 0 ? 0 : (uint64_t)(g / n * 18446744073709551616.0);

	for (int i = 0; i < 8; i++)
		d.b[i] = (uint8_t)(x >> (56 - 8 * i));
	if (g < 0) {
		r = at(&(struct cfs_id){ { 0 } }, -g, n);
		cfs_id_sub(&r, key, &r);
		return r;
	}
	cfs_id_add(&r, key, &d);
	return r;
}

Test(admit, the_keys_successor_may_place_a_copy_on_the_next)
{
	struct cfs_id key = { { 0x42, 0x17 } };
	struct cfs_id primary = at(&key, 0.5, 1000), me = at(&key, 3, 1000);

	cr_assert(chord_holder_plausible(&key, &primary, &me, 1, 1000, 6));
	/* a copy from beyond us, or before the key, is nobody's replica push */
	struct cfs_id beyond = at(&key, 4, 1000), before = at(&key, -1, 1000);
	cr_assert_not(chord_holder_plausible(&key, &beyond, &me, 1, 1000, 6));
	cr_assert_not(chord_holder_plausible(&key, &before, &me, 1, 1000, 6));
}

/* A short successor list overstates the ring now and then: the floor
 * undoes the worst that was seen (1,400 for 256 nodes, 6 successors) and
 * stays close to the estimate with long lists. */
Test(admit, the_ring_size_floor_allows_for_short_successor_lists)
{
	cr_assert_leq(chord_ring_size_floor(1400, 6), 256);
	cr_assert_geq(chord_ring_size_floor(1400, 6), 100);
	double f16 = chord_ring_size_floor(1000, 16) / 1000, f64 = chord_ring_size_floor(1000, 64) / 1000;
	cr_assert(f16 > 0.25 && f16 < 0.4, "16 gaps: %f", f16);
	cr_assert(f64 > f16 && f64 < 1, "64 gaps: %f", f64);
	cr_assert_eq(chord_ring_size_floor(1000, 0), 1000);
	cr_assert_eq(chord_ring_size_floor(2, 1), 1);
	/* the refused copy of that ring, accepted with the floor */
	struct cfs_id key = { { 0x3e } };
	struct cfs_id primary = at(&key, 0.0039 * 256, 256), me = at(&key, 0.0237 * 256, 256);
	cr_assert_not(chord_holder_plausible(&key, &primary, &me, 1, 1400, 6));
	cr_assert(chord_holder_plausible(&key, &primary, &me, 1, chord_ring_size_floor(1400, 6), 6));
}

Test(admit, a_member_far_from_the_key_is_refused)
{
	struct cfs_id key = { { 0x99 } };
	struct cfs_id far = at(&key, 100, 1000), me = at(&key, 101, 1000);
	struct cfs_id primary = at(&key, 0.5, 1000), far_me = at(&key, 100, 1000);

	cr_assert_not(chord_holder_plausible(&key, &far, &me, 1, 1000, 6));
	/* nor may the primary push to a server that is no replica of the key */
	cr_assert_not(chord_holder_plausible(&key, &primary, &far_me, 1, 1000, 6));
	/* 2k + 8 = 20 gaps of slack: the 6th successor a little far is fine */
	struct cfs_id sixth = at(&key, 15, 1000);
	cr_assert(chord_holder_plausible(&key, &primary, &sixth, 1, 1000, 6));
}

Test(admit, one_of_our_virtual_servers_suffices_and_small_rings_are_one_neighbourhood)
{
	struct cfs_id key = { { 0x10 } }, selves[3];
	struct cfs_id primary = at(&key, 1, 3000);

	selves[0] = at(&key, 900, 3000);
	selves[1] = at(&key, 2, 3000);
	selves[2] = at(&key, -5, 3000);
	cr_assert(chord_holder_plausible(&key, &primary, selves, 3, 3000, 6));
	/* a ring smaller than the neighbourhood: every member is a neighbour */
	cr_assert(chord_holder_plausible(&key, &selves[0], &selves[2], 1, 12, 3));
}

Test(admit, every_lease_is_capped)
{
	dhash_server_t *s = calloc(1, sizeof(*s)); /* only cfg is read */
	uint64_t now = dhash__wall_now();

	s->cfg.max_lease_s = 3600;
	s->cfg.lease_s = 60;
	cr_assert_leq(dhash__grant_lease(s, UINT64_MAX, NULL), now + 3601);
	cr_assert_geq(dhash__grant_lease(s, UINT64_MAX, NULL), now + 3600);
	cr_assert_leq(dhash__grant_lease(s, 0, NULL), now + 61);
	s->cfg.max_lease_s = 0; /* not "uncapped": the default cap */
	cr_assert_leq(dhash__grant_lease(s, UINT64_MAX, NULL), now + DHASH_MAX_LEASE_DEFAULT_S + 1);
	free(s);
}

Test(admit, a_refresh_moves_the_charge_to_the_refresher_within_its_quota)
{
	char dir[] = "/tmp/cfs-admit-XXXXXX";
	dhash_store_t *st;
	struct cfs_id k = { { 1, 2, 3 } };
	uint8_t a[16] = { 10, 0, 0, 1 }, b[16] = { 10, 0, 0, 2 }, data[100] = { 0 };
	struct dhash_rec rec = { .kind = 0, .lease_until = 1000, .data = data, .len = sizeof(data) };
	bool found;
	uint32_t over;

	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(dhash_store_open(dir, 0, &st), 0);
	memcpy(rec.owner, a, 16);
	cr_assert_eq(dhash_store_put(st, &k, &rec), 0);
	cr_assert_eq(dhash_store_usage(st, a), 100);
	/* b's quota cannot hold it: not extended, reported absent */
	cr_assert_eq(dhash_store_extend_charged(st, &k, 1, 2000, b, 50, &found, &over), 0);
	cr_assert_not(found);
	cr_assert_eq(over, 1);
	cr_assert_eq(dhash_store_usage(st, a), 100);
	/* it can: b keeps it alive from now on, and pays for it */
	cr_assert_eq(dhash_store_extend_charged(st, &k, 1, 2000, b, 1000, &found, &over), 0);
	cr_assert(found);
	cr_assert_eq(over, 0);
	cr_assert_eq(dhash_store_usage(st, a), 0);
	cr_assert_eq(dhash_store_usage(st, b), 100);
	/* a lease already long enough costs nothing and moves nothing */
	cr_assert_eq(dhash_store_extend_charged(st, &k, 1, 1500, a, 1000, &found, &over), 0);
	cr_assert(found);
	cr_assert_eq(dhash_store_usage(st, b), 100);
	dhash_store_close(st);
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

/* ---- the refresh machines and a server's challenge */

static struct dhash__act acts[64];
static uint32_t nacts;

#define DRAIN(next, sm)                                  \
	do {                                             \
		nacts = 0;                               \
		while (nacts < 64 && next(sm, &acts[nacts])) \
			nacts++;                         \
	} while (0)

static const uint8_t nonce[CFS_NONCE_BYTES] = "server-nonce-01";

static struct dhash__reply challenge(const struct cfs_addr *from)
{
	return (struct dhash__reply){ .status = 0, .flags = DHASH_STORE_R_CHALLENGE, .nonce = nonce,
	                              .from = from };
}

Test(admit, a_refresh_answers_a_challenge_once_per_server)
{
	struct dhash__probe pr;
	struct chord_lookup_result r = { .n = 2 };
	static const uint8_t yes = 1;

	r.succ[0] = node(1);
	r.succ[1] = node(2);
	dhash__probe_init(&pr, true, 3, 9000);
	DRAIN(dhash__probe_next, &pr);
	dhash__probe_on_lookup(&pr, &r);
	DRAIN(dhash__probe_next, &pr);
	cr_assert_eq(nacts, 2);
	struct dhash__reply c = challenge(&r.succ[0].addr);
	dhash__probe_on_reply(&pr, &c);
	DRAIN(dhash__probe_next, &pr);
	cr_assert_eq(nacts, 2);
	cr_assert_eq(acts[0].type, DHASH_ACT_KEEP_NONCE);
	cr_assert(cfs_addr_eq(&acts[0].addr, &r.succ[0].addr));
	cr_assert_eq(memcmp(acts[0].nonce, nonce, CFS_NONCE_BYTES), 0);
	cr_assert_eq(acts[1].type, DHASH_ACT_REFRESH);
	cr_assert_eq(acts[1].i, 0);
	/* a second challenge from the same server is an answer without the key */
	dhash__probe_on_reply(&pr, &c);
	DRAIN(dhash__probe_next, &pr);
	cr_assert_eq(nacts, 0);
	struct dhash__reply ok = { .status = 0, .data = &yes, .len = 1, .lease_until = 8000 };
	dhash__probe_on_reply(&pr, &ok);
	DRAIN(dhash__probe_next, &pr);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].found, 1);
	dhash__probe_fini(&pr);
}

Test(admit, refresh_many_answers_a_challenge_once_per_call)
{
	struct dhash__rmany rm;
	struct cfs_id key = { { 5 } };
	struct chord_lookup_result r = { .n = 1 };
	static const uint8_t yes = 1;

	r.succ[0] = node(1);
	dhash__rmany_init(&rm, &key, 1, 1, 5000);
	DRAIN(dhash__rmany_next, &rm);
	dhash__rmany_on_lookup(&rm, 0, &r, 0);
	DRAIN(dhash__rmany_next, &rm);
	cr_assert_eq(nacts, 1);
	struct dhash__reply c = challenge(&r.succ[0].addr);
	dhash__rmany_on_reply(&rm, 0, &c);
	DRAIN(dhash__rmany_next, &rm);
	cr_assert_eq(nacts, 2);
	cr_assert_eq(acts[0].type, DHASH_ACT_KEEP_NONCE);
	cr_assert_eq(acts[1].type, DHASH_ACT_REFRESH);
	cr_assert_eq(acts[1].i, 0);
	struct dhash__reply ok = { .status = 0, .data = &yes, .len = 1, .lease_until = 4000 };
	dhash__rmany_on_reply(&rm, 0, &ok);
	DRAIN(dhash__rmany_next, &rm);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].data[0], 1);
	cr_assert_eq(acts[0].lease, 4000);
	dhash__rmany_fini(&rm);
}
