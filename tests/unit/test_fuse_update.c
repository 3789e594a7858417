/* cfsctl update's asks and the root checks that answer them (struct
 * fs_updq, cfs-fuse/root.c): an ask is answered only by a check that
 * started after it. No FUSE session: the requests are tokens. */
#include <criterion/criterion.h>

#include "cfs-fuse/internal.h"

static struct fs_updq Q;
static fuse_req_t out[FS_UPDATE_WAITERS_MAX];
static uint64_t before[FS_UPDATE_WAITERS_MAX];

/* A distinct made-up request: never dereferenced. */
static fuse_req_t req(uintptr_t i)
{
	return (fuse_req_t)(i * 16 + 16);
}

static void setup(void)
{
	memset(&Q, 0, sizeof(Q));
}

TestSuite(fuse_update, .init = setup);

/* An ask while a check runs (one that may have fetched the root before
 * the publish the asker just made) is not answered by it: another check
 * runs after it, and answers that ask. */
Test(fuse_update, an_ask_during_a_check_waits_for_the_next)
{
	uint32_t n;

	cr_assert_eq(fs__updq_add(&Q, req(1), 7), FS_UPDQ_START);
	cr_assert(fs__updq_begin(&Q));
	cr_assert_eq(fs__updq_add(&Q, req(2), 7), FS_UPDQ_WAIT);
	cr_assert_eq(fs__updq_add(&Q, req(3), 7), FS_UPDQ_WAIT);
	cr_assert(!fs__updq_begin(&Q), "two checks at once");

	cr_assert(fs__updq_end(&Q, out, before, &n), "no check after the one that ran");
	cr_assert_eq(n, 1, "the check answered %u asks", n);
	cr_assert_eq(out[0], req(1));
	cr_assert_eq(before[0], 7);

	cr_assert(fs__updq_begin(&Q));
	cr_assert_eq(fs__updq_add(&Q, req(4), 8), FS_UPDQ_WAIT);
	cr_assert(fs__updq_end(&Q, out, before, &n));
	cr_assert_eq(n, 2);
	cr_assert_eq(out[0], req(2));
	cr_assert_eq(out[1], req(3));

	cr_assert(fs__updq_begin(&Q));
	cr_assert(!fs__updq_end(&Q, out, before, &n), "a check with nobody waiting after it");
	cr_assert_eq(n, 1);
	cr_assert_eq(out[0], req(4));
	cr_assert_eq(before[0], 8);
	cr_assert_eq(Q.n, 0);
}

/* The periodic check starts with nobody waiting: an ask during it waits
 * for the next as well. */
Test(fuse_update, the_periodic_check_answers_nobody_who_came_later)
{
	uint32_t n;

	cr_assert(fs__updq_begin(&Q));
	cr_assert_eq(fs__updq_add(&Q, req(1), 3), FS_UPDQ_WAIT);
	cr_assert(fs__updq_end(&Q, out, before, &n));
	cr_assert_eq(n, 0);
	cr_assert(fs__updq_begin(&Q));
	cr_assert(!fs__updq_end(&Q, out, before, &n));
	cr_assert_eq(n, 1);
	/* and with nobody at all, nothing follows */
	cr_assert(fs__updq_begin(&Q));
	cr_assert(!fs__updq_end(&Q, out, before, &n));
	cr_assert_eq(n, 0);
}

/* At most FS_UPDATE_WAITERS_MAX wait; the mount's end takes them all. */
Test(fuse_update, bounded_and_taken_at_the_end)
{
	cr_assert_eq(fs__updq_add(&Q, req(0), 1), FS_UPDQ_START);
	cr_assert(fs__updq_begin(&Q));
	for (uintptr_t i = 1; i < FS_UPDATE_WAITERS_MAX; i++)
		cr_assert_eq(fs__updq_add(&Q, req(i), 1), FS_UPDQ_WAIT);
	cr_assert_eq(fs__updq_add(&Q, req(99), 1), FS_UPDQ_FULL);
	cr_assert_eq(fs__updq_take_all(&Q, out, before), FS_UPDATE_WAITERS_MAX);
	cr_assert_eq(out[FS_UPDATE_WAITERS_MAX - 1], req(FS_UPDATE_WAITERS_MAX - 1));
	cr_assert_eq(Q.n, 0);
}

/* The first root's two answers (a plain client's early root, then its
 * read quorum's): the quorum's wins unless it is older or refused; the
 * early one stands then; without either the quorum's error stands. */
Test(fuse_update, the_first_root_never_goes_back)
{
	cr_assert_eq(fs__first_pick(false, 0, 0, 5), FS_FIRST_QUORUM);
	cr_assert_eq(fs__first_pick(true, 5, 0, 5), FS_FIRST_QUORUM, "the same version: either");
	cr_assert_eq(fs__first_pick(true, 5, 0, 6), FS_FIRST_QUORUM, "newer: the quorum's");
	cr_assert_eq(fs__first_pick(true, 6, 0, 5), FS_FIRST_EARLY, "older: never back");
	cr_assert_eq(fs__first_pick(true, 6, -ESTALE, 2), FS_FIRST_EARLY);
	cr_assert_eq(fs__first_pick(true, 6, -ETIMEDOUT, 0), FS_FIRST_EARLY);
	cr_assert_eq(fs__first_pick(false, 0, -EKEYEXPIRED, 9), FS_FIRST_NONE);
	cr_assert_eq(fs__first_pick(false, 0, -ENOENT, 0), FS_FIRST_NONE);
}

/* After the mount started with the early root, the quorum's answer moves
 * it forward only, and only when accepted. */
Test(fuse_update, the_quorum_moves_a_started_mount_forward_only)
{
	cr_assert(fs__first_moves(5, 0, 6));
	cr_assert(!fs__first_moves(5, 0, 5));
	cr_assert(!fs__first_moves(6, 0, 5));
	cr_assert(!fs__first_moves(5, -ESTALE, 7));
	cr_assert(!fs__first_moves(5, -EBADMSG, 9));
}
