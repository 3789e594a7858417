/* A drain's ranges (dhash/sync.c), pure: which keys a leaving virtual
 * server holds for its process (dhash__drain_held). */
#include <criterion/criterion.h>

#include "dhash/internal.h"

static struct cfs_id idx(uint8_t x)
{
	return (struct cfs_id){ { x } };
}

TestSuite(dhash_drain);

/* The held range runs back to the nearest other virtual server of the
 * process that has joined: one still joining holds nothing. */
Test(dhash_drain, held_range_counts_only_joined_vnodes)
{
	struct cfs_id selves[3] = { idx(10), idx(20), idx(30) }, lo;
	bool joined[3] = { true, false, true };

	dhash__drain_held(selves, joined, 3, 2, &lo);
	cr_assert(cfs_id_eq(&lo, &selves[0]), "(20, 30]: 20 has not joined, (10, 30] is ours");
	dhash__drain_held(selves, joined, 3, 0, &lo);
	cr_assert(cfs_id_eq(&lo, &selves[2]), "round the circle: (30, 10]");
	joined[1] = true;
	dhash__drain_held(selves, joined, 3, 2, &lo);
	cr_assert(cfs_id_eq(&lo, &selves[1]));
	/* alone in the ring: the whole circle */
	joined[0] = joined[1] = false;
	dhash__drain_held(selves, joined, 3, 2, &lo);
	cr_assert(cfs_id_eq(&lo, &selves[2]));
}
