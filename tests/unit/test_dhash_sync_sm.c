/* Replica maintenance's rules and one sync session's machine
 * (dhash/sync_sm.c), scripted: events in, actions checked, no socket and
 * no store. */
#include <criterion/criterion.h>
#include <string.h>

#include "dhash/sync_sm.h"

static const struct cfs_id peer = { { 0xee } };

/* An ID whose first two bytes are a and b. */
static struct cfs_id id2(uint8_t a, uint8_t b)
{
	struct cfs_id x = { { 0 } };

	x.b[0] = a;
	x.b[1] = b;
	return x;
}

/* (0x00.., 0x80..] in 64 parts of 2·2^248; the last ends at hi. */
Test(sync_rules, part_ends)
{
	struct dhash__sync_range r = { id2(0, 0), id2(0x80, 0), 0, false };
	struct cfs_id end;

	dhash__sync_part_end(&r, 0, &end);
	cr_assert(cfs_id_eq(&end, &(struct cfs_id){ { 0x02 } }));
	dhash__sync_part_end(&r, 3, &end);
	cr_assert(cfs_id_eq(&end, &(struct cfs_id){ { 0x08 } }));
	dhash__sync_part_end(&r, DHASH_SYNC_PARTS - 1, &end);
	cr_assert(cfs_id_eq(&end, &r.hi));
}

/* More than 64 keys here, or a root not yet compared by digest: split,
 * down to DEPTH_MAX levels; anything else listed. */
Test(sync_rules, split_or_list)
{
	struct dhash__sync_range r = { id2(0, 0), id2(0x80, 0), 0, false };

	cr_assert(!dhash__sync_splits(&r, DHASH_SYNC_LEAF_KEYS, false));
	cr_assert(dhash__sync_splits(&r, DHASH_SYNC_LEAF_KEYS + 1, false));
	cr_assert(dhash__sync_splits(&r, 1, true));
	r.differs = true;
	cr_assert(!dhash__sync_splits(&r, 1, true), "compared by digest already");
	r.depth = DHASH_SYNC_DEPTH_MAX;
	cr_assert(!dhash__sync_splits(&r, 100000, false), "the depth limit");
}

/* The newer root wins on both sides; equal or not roots: nothing. */
Test(sync_rules, root_sequences)
{
	cr_assert_eq(dhash__sync_root_cmp(DHASH_KIND_ROOT, 4, DHASH_KIND_ROOT, 5), 1);
	cr_assert_eq(dhash__sync_root_cmp(DHASH_KIND_ROOT, 5, DHASH_KIND_ROOT, 4), -1);
	cr_assert_eq(dhash__sync_root_cmp(DHASH_KIND_ROOT, 5, DHASH_KIND_ROOT, 5), 0);
	cr_assert_eq(dhash__sync_root_cmp(DHASH_KIND_CHASH, 0, DHASH_KIND_ROOT, 9), 0);
}

/* A refusal believed again doubles its wait, up to a day; one noted
 * after its wait and as long again have lapsed starts afresh. */
Test(sync_rules, refusals_back_off)
{
	struct cfs_htab ref;
	struct cfs_id k = id2(1, 2), other = { { 0x11 } };

	dhash__sync_refused_init(&ref);
	dhash__sync_refuse(&ref, &k, &peer, 0, 100);
	cr_assert(dhash__sync_is_refused(&ref, &k, &peer, 99));
	cr_assert(!dhash__sync_is_refused(&ref, &k, &peer, 100));
	cr_assert(!dhash__sync_is_refused(&ref, &k, &other, 50), "another peer's refusal is its own");
	dhash__sync_refuse(&ref, &k, &peer, 150, 100);
	cr_assert(dhash__sync_is_refused(&ref, &k, &peer, 349));
	cr_assert(!dhash__sync_is_refused(&ref, &k, &peer, 350));
	dhash__sync_refuse(&ref, &k, &peer, 10000, 100); /* long after: afresh */
	cr_assert(!dhash__sync_is_refused(&ref, &k, &peer, 10100));
	cr_assert(!dhash__sync_is_refused(NULL, &k, &peer, 0));
	cfs_htab_free(&ref);
}

/* ------------------------------------------------------------ a session */

static struct dhash_sync_stats st;
static struct dhash__sync_sm m;

/* A session over (0x00.., 0x80..]: its parts are 2·2^248 wide, part i
 * ending at (2i + 2)·2^248. */
static void start(bool drain)
{
	struct cfs_id lo = id2(0, 0), hi = id2(0x80, 0);

	memset(&st, 0, sizeof(st));
	dhash__sync_sm_init(&m, &peer, &lo, &hi, drain, &st);
}

static void done(void)
{
	dhash__sync_sm_fini(&m);
}

TestSuite(sync_sm, .fini = done);

static struct dhash__sync_act expect(enum dhash__sync_act_type type)
{
	struct dhash__sync_act a;

	cr_assert(dhash__sync_sm_next(&m, &a), "no action; expected %d", type);
	cr_assert_eq(a.type, type, "action %d, expected %d", a.type, type);
	return a;
}

static void expect_none(void)
{
	struct dhash__sync_act a;

	cr_assert(!dhash__sync_sm_next(&m, &a), "unexpected action %d", a.type);
}

static struct dhash__sync_act take(enum dhash__sync_act_type type, const struct cfs_id *key)
{
	struct dhash__sync_act a;

	cr_assert(dhash__sync_sm_take_xfer(&m, &a), "no transfer; expected %d", type);
	cr_assert_eq(a.type, type, "transfer %d, expected %d", a.type, type);
	if (key)
		cr_assert(cfs_id_eq(&a.key, key), "another key");
	return a;
}

static void no_xfer(void)
{
	struct dhash__sync_act a;

	cr_assert(!dhash__sync_sm_take_xfer(&m, &a), "unexpected transfer %d", a.type);
}

/* Our digests of a range: part i's is i + 1 (any value will do), and
 * the peer's the same but for the parts named in diff (up to 4, 0xff
 * ends the list). */
static void digest_pair(struct cfs_id mine[DHASH_SYNC_PARTS], struct cfs_id theirs[DHASH_SYNC_PARTS],
                        const uint8_t *diff)
{
	for (uint32_t i = 0; i < DHASH_SYNC_PARTS; i++) {
		mine[i] = id2((uint8_t)(i + 1), 0);
		theirs[i] = mine[i];
	}
	for (; diff && *diff != 0xff; diff++)
		theirs[*diff].b[31] ^= 1;
}

/* Digest the range the machine asked for, part p differing. */
static void digest_one_differs(uint8_t p)
{
	struct cfs_id mine[DHASH_SYNC_PARTS], theirs[DHASH_SYNC_PARTS];
	uint8_t diff[2] = { p, 0xff };

	expect(DHASH_SYNC_DIGEST);
	digest_pair(mine, theirs, diff);
	dhash__sync_sm_on_digest(&m, 0, theirs, DHASH_SYNC_PARTS, mine);
}

/* A range that agrees costs one digest exchange and nothing else. */
Test(sync_sm, ranges_that_agree)
{
	struct cfs_id mine[DHASH_SYNC_PARTS], theirs[DHASH_SYNC_PARTS];

	start(false);
	struct dhash__sync_act a = expect(DHASH_SYNC_SCAN);
	cr_assert(cfs_id_eq(&a.range.lo, &(struct cfs_id){ { 0 } }));
	dhash__sync_sm_on_scan(&m, 0, DHASH_SYNC_LEAF_KEYS + 1, false);
	a = expect(DHASH_SYNC_DIGEST);
	cr_assert_eq(a.range.depth, 0);
	expect_none();
	digest_pair(mine, theirs, NULL);
	dhash__sync_sm_on_digest(&m, 0, theirs, DHASH_SYNC_PARTS, mine);
	no_xfer();
	a = expect(DHASH_SYNC_FINISH);
	cr_assert_eq(a.counts.digests, 1);
	cr_assert_eq(a.counts.parts_differ + a.counts.listings + a.counts.pushed + a.counts.fetched, 0);
	cr_assert(!a.counts.cut_short);
	cr_assert_eq(st.digests, 1);
	cr_assert_eq(st.debt_round, 0);
}

/* One part differs: it is listed, and the key only we hold is pushed,
 * the one only the peer holds fetched; a key both hold moves nowhere. */
Test(sync_sm, one_differing_part_listed_pushed_and_fetched)
{
	struct cfs_id both = id2(0x07, 1), ours = id2(0x07, 2), theirs = id2(0x08, 0);
	struct cfs_id outside = id2(0x09, 0);

	start(false);
	expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, 0, 500, false);
	digest_one_differs(3); /* (0x06.., 0x08..] */
	struct dhash__sync_act a = expect(DHASH_SYNC_SCAN);
	cr_assert(cfs_id_eq(&a.range.lo, &(struct cfs_id){ { 0x06 } }));
	cr_assert(cfs_id_eq(&a.range.hi, &(struct cfs_id){ { 0x08 } }));
	cr_assert_eq(a.range.depth, 1);
	cr_assert(a.range.differs);
	dhash__sync_sm_on_scan(&m, 0, 2, false);
	a = expect(DHASH_SYNC_KEYS);
	cr_assert(cfs_id_eq(&a.key, &a.range.lo), "listed from the start of the part");
	struct cfs_id page[] = { both, theirs, outside };
	dhash__sync_sm_on_keys(&m, 0, page, 3, false);
	expect(DHASH_SYNC_LOCAL);
	struct cfs_id local[] = { ours, both };
	uint8_t kinds[] = { DHASH_KIND_CHASH, DHASH_KIND_CHASH };
	dhash__sync_sm_on_local(&m, local, kinds, 2, &(struct dhash__sync_view){ 0 });
	expect_none();
	take(DHASH_SYNC_PUSH, &ours);
	take(DHASH_SYNC_FETCH, &theirs);
	no_xfer();
	dhash__sync_sm_on_xfer(&m, DHASH_SYNC_PUSH, true, 0);
	expect_none(); /* the fetch is still out */
	dhash__sync_sm_on_xfer(&m, DHASH_SYNC_FETCH, true, 0);
	a = expect(DHASH_SYNC_FINISH);
	cr_assert_eq(a.counts.digests, 1);
	cr_assert_eq(a.counts.parts_differ, 1);
	cr_assert_eq(a.counts.listings, 1);
	cr_assert_eq(a.counts.listed, 3);
	cr_assert_eq(a.counts.pushed, 1);
	cr_assert_eq(a.counts.fetched, 1);
	cr_assert_eq(st.debt_round, 2);
}

/* Fragments are each holder's own: one only we hold is not pushed, one
 * the peer lists under a key we hold a fragment of is not fetched, and
 * both are counted. */
Test(sync_sm, fragments_are_neither_pushed_nor_fetched)
{
	struct cfs_id mine = id2(0x07, 1), shared = id2(0x07, 2), block = id2(0x07, 3);

	start(false);
	expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, 0, 3, false);
	expect(DHASH_SYNC_KEYS);
	struct cfs_id page[] = { shared };
	dhash__sync_sm_on_keys(&m, 0, page, 1, false);
	expect(DHASH_SYNC_LOCAL);
	struct cfs_id local[] = { shared, block, mine };
	uint8_t kinds[] = { DHASH_KIND_FRAG, DHASH_KIND_CHASH, DHASH_KIND_FRAG };
	dhash__sync_sm_on_local(&m, local, kinds, 3, NULL);
	take(DHASH_SYNC_PUSH, &block); /* a whole block only we hold still goes */
	no_xfer();
	dhash__sync_sm_on_xfer(&m, DHASH_SYNC_PUSH, true, 0);
	struct dhash__sync_act a = expect(DHASH_SYNC_FINISH);
	cr_assert_eq(a.counts.pushed, 1);
	cr_assert_eq(a.counts.fetched, 0);
	cr_assert_eq(st.frag_skipped, 2);
	cr_assert_eq(st.debt_round, 1);
}

/* A listing of more than one page asks for the next after the last key. */
Test(sync_sm, a_listing_in_pages)
{
	struct cfs_id k1 = id2(0x10, 0), k2 = id2(0x20, 0);

	start(false);
	expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, 0, 3, false);
	expect(DHASH_SYNC_KEYS);
	dhash__sync_sm_on_keys(&m, 0, &k1, 1, true);
	struct dhash__sync_act a = expect(DHASH_SYNC_KEYS);
	cr_assert(cfs_id_eq(&a.key, &k1));
	dhash__sync_sm_on_keys(&m, 0, &k2, 1, false);
	expect(DHASH_SYNC_LOCAL);
	uint8_t kinds[] = { DHASH_KIND_CHASH, DHASH_KIND_CHASH };
	struct cfs_id local[] = { k2, k1 };
	dhash__sync_sm_on_local(&m, local, kinds, 2, NULL);
	no_xfer();
	a = expect(DHASH_SYNC_FINISH);
	cr_assert_eq(a.counts.listings, 2);
	cr_assert_eq(st.listings, 2);
}

/* A differing part with more than 64 keys here is split again. */
Test(sync_sm, a_large_part_is_split_again)
{
	start(false);
	expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, 0, 1000, false);
	digest_one_differs(0);
	struct dhash__sync_act a = expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, 0, DHASH_SYNC_LEAF_KEYS + 1, false);
	a = expect(DHASH_SYNC_DIGEST);
	cr_assert_eq(a.range.depth, 1);
	cr_assert(cfs_id_eq(&a.range.hi, &(struct cfs_id){ { 0x02 } }));
}

/* Below DEPTH_MAX levels a part is listed however many keys it holds. */
Test(sync_sm, the_depth_limit)
{
	start(false);
	for (uint32_t d = 0; d < DHASH_SYNC_DEPTH_MAX; d++) {
		struct dhash__sync_act a = expect(DHASH_SYNC_SCAN);
		cr_assert_eq(a.range.depth, d);
		dhash__sync_sm_on_scan(&m, 0, 100000, false);
		digest_one_differs(5);
	}
	struct dhash__sync_act a = expect(DHASH_SYNC_SCAN);
	cr_assert_eq(a.range.depth, DHASH_SYNC_DEPTH_MAX);
	dhash__sync_sm_on_scan(&m, 0, 100000, false);
	expect(DHASH_SYNC_KEYS);
	cr_assert_eq(m.n.digests, DHASH_SYNC_DEPTH_MAX);
}

/* A small range holding a root is split by digest anyway (a listing
 * cannot tell root versions apart); a root both hold in a part that
 * differs is fetched, and the peer's higher sequence taken. */
Test(sync_sm, a_root_newer_at_the_peer_is_fetched)
{
	struct cfs_id root = id2(0x07, 9);
	uint8_t kinds[] = { DHASH_KIND_ROOT };

	start(false);
	expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, 0, 1, true);
	digest_one_differs(3);
	expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, 0, 1, true); /* compared by digest now: listed */
	expect(DHASH_SYNC_KEYS);
	dhash__sync_sm_on_keys(&m, 0, &root, 1, false);
	expect(DHASH_SYNC_LOCAL);
	dhash__sync_sm_on_local(&m, &root, kinds, 1, NULL);
	take(DHASH_SYNC_FETCH_ROOT, &root);
	cr_assert_eq(st.roots_checked, 1);
	cr_assert_eq(st.debt_round, 0, "a root compared is no missing copy");
	cr_assert_eq(dhash__sync_sm_on_root(&m, &root, DHASH_KIND_ROOT, 4, DHASH_KIND_ROOT, 5), 1);
	no_xfer();
	dhash__sync_sm_on_xfer(&m, DHASH_SYNC_FETCH_ROOT, true, 0);
	struct dhash__sync_act a = expect(DHASH_SYNC_FINISH);
	cr_assert_eq(a.counts.pushed + a.counts.fetched, 0);
}

/* The peer's lower sequence is sent ours; equal ones, or a key that is
 * not a root on both sides, move nothing. */
Test(sync_sm, a_root_older_at_the_peer_is_pushed)
{
	struct cfs_id root = id2(0x07, 9);
	uint8_t kinds[] = { DHASH_KIND_ROOT };

	start(false);
	expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, 0, 1, true);
	digest_one_differs(3);
	expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, 0, 1, true);
	expect(DHASH_SYNC_KEYS);
	dhash__sync_sm_on_keys(&m, 0, &root, 1, false);
	expect(DHASH_SYNC_LOCAL);
	dhash__sync_sm_on_local(&m, &root, kinds, 1, NULL);
	take(DHASH_SYNC_FETCH_ROOT, &root);
	cr_assert_eq(dhash__sync_sm_on_root(&m, &root, DHASH_KIND_ROOT, 5, DHASH_KIND_ROOT, 5), 0);
	cr_assert_eq(dhash__sync_sm_on_root(&m, &root, DHASH_KIND_CHASH, 5, DHASH_KIND_ROOT, 9), 0);
	cr_assert_eq(dhash__sync_sm_on_root(&m, &root, DHASH_KIND_ROOT, 5, DHASH_KIND_ROOT, 4), -1);
	cr_assert_eq(st.roots_pushed, 1);
	dhash__sync_sm_on_xfer(&m, DHASH_SYNC_FETCH_ROOT, true, 0);
	expect_none();
	take(DHASH_SYNC_PUSH, &root);
	dhash__sync_sm_on_xfer(&m, DHASH_SYNC_PUSH, true, 0);
	struct dhash__sync_act a = expect(DHASH_SYNC_FINISH);
	cr_assert_eq(a.counts.pushed, 1);
}

/* A root in a part that agrees by digest is not fetched: only parts that
 * differ have their roots compared. */
Test(sync_sm, a_root_listed_without_a_differing_digest_is_not_fetched)
{
	struct cfs_id root = id2(0x07, 9);
	uint8_t kinds[] = { DHASH_KIND_ROOT };

	start(false);
	expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, 0, 1, false);
	expect(DHASH_SYNC_KEYS);
	dhash__sync_sm_on_keys(&m, 0, &root, 1, false);
	expect(DHASH_SYNC_LOCAL);
	dhash__sync_sm_on_local(&m, &root, kinds, 1, NULL);
	no_xfer();
	expect(DHASH_SYNC_FINISH);
}

/* Three pushes, one window slot: the first times out, the session ends,
 * and a drain counts the two it never sent. */
Test(sync_sm, a_timeout_ends_the_session_with_its_counts)
{
	struct cfs_id k[3] = { id2(0x10, 0), id2(0x11, 0), id2(0x12, 0) };
	uint8_t kinds[3] = { 0 };

	start(true);
	expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, 0, 3, false);
	expect(DHASH_SYNC_KEYS);
	dhash__sync_sm_on_keys(&m, 0, NULL, 0, false);
	expect(DHASH_SYNC_LOCAL);
	dhash__sync_sm_on_local(&m, k, kinds, 3, NULL);
	take(DHASH_SYNC_PUSH, &k[0]);
	dhash__sync_sm_on_xfer(&m, DHASH_SYNC_PUSH, true, -ETIMEDOUT);
	no_xfer();
	struct dhash__sync_act a = expect(DHASH_SYNC_FINISH);
	cr_assert(a.counts.cut_short);
	cr_assert_eq(a.counts.pushed, 1);
	cr_assert_eq(a.counts.dropped, 2);
	cr_assert_eq(a.counts.listings, 1);
}

/* A digest that times out ends the session, the rest uncompared. */
Test(sync_sm, a_silent_peer_cuts_the_comparison_short)
{
	start(false);
	expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, 0, 100, false);
	expect(DHASH_SYNC_DIGEST);
	dhash__sync_sm_on_digest(&m, -ETIMEDOUT, NULL, 0, NULL);
	struct dhash__sync_act a = expect(DHASH_SYNC_FINISH);
	cr_assert(a.counts.cut_short);
	cr_assert_eq(a.counts.digests, 1);
}

/* A call that could not be made is not counted, and ends the comparing. */
Test(sync_sm, a_call_never_made)
{
	start(false);
	expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, 0, 100, false);
	expect(DHASH_SYNC_DIGEST);
	dhash__sync_sm_on_unsent(&m);
	struct dhash__sync_act a = expect(DHASH_SYNC_FINISH);
	cr_assert(a.counts.cut_short);
	cr_assert_eq(a.counts.digests, 0);
	cr_assert_eq(st.digests, 0);
}

/* A store that cannot be read leaves that range uncompared; the next
 * range is compared all the same. */
Test(sync_sm, an_unreadable_store_skips_the_range)
{
	start(false);
	expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, 0, 100, false);
	struct cfs_id mine[DHASH_SYNC_PARTS], theirs[DHASH_SYNC_PARTS];
	uint8_t diff[] = { 1, 2, 0xff };
	expect(DHASH_SYNC_DIGEST);
	digest_pair(mine, theirs, diff);
	dhash__sync_sm_on_digest(&m, 0, theirs, DHASH_SYNC_PARTS, mine);
	expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, -EIO, 0, false);
	expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, 0, 0, false);
	expect(DHASH_SYNC_KEYS);
	cr_assert(m.n.cut_short);
}

/* A key denied here that the peer holds is not fetched; one the peer
 * refused as denied there is not pushed while the refusal holds, and is
 * pushed again once it lapsed. */
Test(sync_sm, denied_keys_are_neither_pushed_nor_fetched)
{
	struct cfs_id denied = id2(0x10, 0), refused = id2(0x11, 0);
	struct cfs_htab deny, ref;
	uint8_t kinds[1] = { 0 };
	bool added;

	cfs_htab_init(&deny, sizeof(struct cfs_id), 1);
	(void)cfs_htab_put(&deny, &denied, &added);
	dhash__sync_refused_init(&ref);
	dhash__sync_refuse(&ref, &refused, &peer, 1000, 500);
	struct dhash__sync_view v = { .deny = &deny, .refused = &ref, .now_ms = 1200 };

	for (int lapsed = 0; lapsed < 2; lapsed++) {
		start(false);
		expect(DHASH_SYNC_SCAN);
		dhash__sync_sm_on_scan(&m, 0, 1, false);
		expect(DHASH_SYNC_KEYS);
		dhash__sync_sm_on_keys(&m, 0, &denied, 1, false);
		expect(DHASH_SYNC_LOCAL);
		v.now_ms = lapsed ? 1500 : 1200;
		dhash__sync_sm_on_local(&m, &refused, kinds, 1, &v);
		if (lapsed) {
			take(DHASH_SYNC_PUSH, &refused);
			cr_assert_eq(st.push_denied_skipped, 0);
		} else {
			cr_assert_eq(st.push_denied_skipped, 1);
		}
		no_xfer();
		cr_assert_eq(st.denied_skipped, 1);
		dhash__sync_sm_fini(&m);
	}
	cfs_htab_free(&deny);
	cfs_htab_free(&ref);
}

/* A drain fetches nothing: what the peer has that we lack stays there. */
Test(sync_sm, a_drain_only_pushes)
{
	struct cfs_id ours = id2(0x10, 0), theirs = id2(0x11, 0);
	uint8_t kinds[1] = { 0 };

	start(true);
	expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, 0, 1, false);
	expect(DHASH_SYNC_KEYS);
	dhash__sync_sm_on_keys(&m, 0, &theirs, 1, false);
	expect(DHASH_SYNC_LOCAL);
	dhash__sync_sm_on_local(&m, &ours, kinds, 1, NULL);
	take(DHASH_SYNC_PUSH, &ours);
	no_xfer();
	cr_assert_eq(st.debt_round, 1);
}

/* Comparing pauses while BACKLOG transfers wait, and goes on as the
 * driver takes them. */
Test(sync_sm, comparing_waits_for_the_backlog)
{
	size_t n = DHASH_SYNC_BACKLOG;
	struct cfs_id *keys = xcalloc(n, sizeof(*keys));
	uint8_t *kinds = xcalloc(n, 1);
	struct cfs_id mine[DHASH_SYNC_PARTS], theirs[DHASH_SYNC_PARTS];
	uint8_t diff[] = { 0, 1, 0xff };

	for (size_t i = 0; i < n; i++) {
		keys[i] = id2(0x01, (uint8_t)(i >> 8));
		keys[i].b[2] = (uint8_t)i;
	}
	start(false);
	expect(DHASH_SYNC_SCAN);
	dhash__sync_sm_on_scan(&m, 0, 100000, false);
	expect(DHASH_SYNC_DIGEST);
	digest_pair(mine, theirs, diff);
	dhash__sync_sm_on_digest(&m, 0, theirs, DHASH_SYNC_PARTS, mine);
	expect(DHASH_SYNC_SCAN); /* part 1 (0x02.., 0x04..] first: a stack */
	dhash__sync_sm_on_scan(&m, 0, 0, false);
	expect(DHASH_SYNC_KEYS);
	dhash__sync_sm_on_keys(&m, 0, NULL, 0, false);
	expect(DHASH_SYNC_LOCAL);
	dhash__sync_sm_on_local(&m, keys, kinds, n, NULL); /* outside the part: the store's word */
	expect_none();
	take(DHASH_SYNC_PUSH, NULL);
	expect(DHASH_SYNC_SCAN);
	free(keys);
	free(kinds);
}
