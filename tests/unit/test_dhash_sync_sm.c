/* Replica maintenance's rules (dhash/sync_sm.c), pure: no socket and no
 * store. */
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
