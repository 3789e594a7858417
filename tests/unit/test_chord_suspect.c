/* The suspect table (chord/suspect.c): bounded, entries expire, a full
 * table makes room by dropping the entry that expires first. */
#include <criterion/criterion.h>
#include <string.h>

#include "chord/internal.h"

static struct cfs_id id_of(uint32_t i)
{
	struct cfs_id id;

	memset(&id, 0, sizeof(id));
	memcpy(id.b, &i, sizeof(i));
	id.b[31] = 0x5a;
	return id;
}

Test(chord_suspect, add_expire_and_renew)
{
	struct chord__suspects s;
	struct cfs_id a = id_of(1), b = id_of(2);

	chord__suspects_init(&s, 1000);
	cr_assert(!chord__suspects_has(&s, &a, 0));
	cr_assert(chord__suspects_add(&s, &a, "lied", 100));
	cr_assert(!chord__suspects_add(&s, &a, "lied again", 200), "renewed, not new");
	cr_assert(chord__suspects_has(&s, &a, 1199));
	cr_assert(!chord__suspects_has(&s, &a, 1200), "expired");
	cr_assert(!chord__suspects_has(&s, &b, 500));
	cr_assert_eq(chord__suspects_count(&s, 500), 1);
	cr_assert_eq(chord__suspects_count(&s, 1200), 0);
	cr_assert(chord__suspects_add(&s, &a, "back", 1300), "a new suspicion after expiry");
	cr_assert_eq(s.reported, 2);
}

Test(chord_suspect, bounded)
{
	struct chord__suspects s;

	chord__suspects_init(&s, 1000);
	for (uint32_t i = 0; i < CHORD__SUSPECTS_MAX; i++)
		chord__suspects_add(&s, (struct cfs_id[]){ id_of(i) }, "x", 10 + i);
	cr_assert_eq(s.n, CHORD__SUSPECTS_MAX);
	chord__suspects_add(&s, (struct cfs_id[]){ id_of(999) }, "x", 500);
	cr_assert_eq(s.n, CHORD__SUSPECTS_MAX);
	cr_assert(!chord__suspects_has(&s, (struct cfs_id[]){ id_of(0) }, 500), "the oldest made room");
	cr_assert(chord__suspects_has(&s, (struct cfs_id[]){ id_of(1) }, 500));
	cr_assert(chord__suspects_has(&s, (struct cfs_id[]){ id_of(999) }, 500));
}

/* A claim to a key by a node that precedes it: refused, and a suspect
 * only when the node claims again more than the grace later, within the
 * window; a suspect's next claim in a window makes it one again at once. */
Test(chord_suspect, claims_make_a_suspect_only_when_repeated)
{
	struct chord__suspects s;
	struct cfs_id a = id_of(1), b = id_of(2);
	uint64_t t = 1000000, g = CHORD__CLAIM_GRACE_US;

	chord__suspects_init(&s, 1000);
	cr_assert(!chord__suspects_strike(&s, &a, t), "one claim is no proof");
	cr_assert(!chord__suspects_strike(&s, &a, t + g), "claims within the grace: a stale predecessor");
	cr_assert(chord__suspects_strike(&s, &a, t + g + 1), "claims past the grace");
	cr_assert(!chord__suspects_strike(&s, &b, t + g + 1), "another node: its first");
	cr_assert(chord__suspects_strike(&s, &a, t + g + 2 + CHORD__CLAIM_WINDOW_US / 2),
	          "a suspect claiming again: at once");
	/* claims that stop for a whole window are forgotten: the count starts again */
	uint64_t later = t + g + 3 + CHORD__CLAIM_WINDOW_US / 2 + CHORD__CLAIM_WINDOW_US;
	cr_assert(!chord__suspects_strike(&s, &a, later));
	cr_assert(chord__suspects_strike(&s, &a, later + g + 1));
}

Test(chord_suspect, claims_bounded)
{
	struct chord__suspects s;

	chord__suspects_init(&s, 1000);
	for (uint32_t i = 0; i < CHORD__SUSPECTS_MAX; i++)
		chord__suspects_strike(&s, (struct cfs_id[]){ id_of(i) }, 10 + i);
	cr_assert_eq(s.nstrike, CHORD__SUSPECTS_MAX);
	chord__suspects_strike(&s, (struct cfs_id[]){ id_of(999) }, 500);
	cr_assert_eq(s.nstrike, CHORD__SUSPECTS_MAX);
	cr_assert(chord__suspects_strike(&s, (struct cfs_id[]){ id_of(1) }, 12 + CHORD__CLAIM_GRACE_US));
	/* id 0's first claim made room: its next claim is a first again */
	cr_assert(!chord__suspects_strike(&s, (struct cfs_id[]){ id_of(0) }, 11 + CHORD__CLAIM_GRACE_US));
}
