/* The one fan-in (common/fanin.c): the count of requests out, the first
 * error, and the caller's hold while it starts them. */
#include <criterion/criterion.h>

#include "common/cfs.h"

Test(fanin, the_last_end_finishes)
{
	struct cfs_fanin f = { 0 };

	for (int i = 0; i < 3; i++)
		cfs_fanin_add(&f);
	cr_assert_not(cfs_fanin_end(&f, 0));
	cr_assert_not(cfs_fanin_end(&f, 0));
	cr_assert(cfs_fanin_end(&f, 0));
	cr_assert_eq(f.status, 0);
	cr_assert_eq(f.out, 0);
}

/* The first error is kept, whatever comes after it; successes never
 * clear it, and positive statuses (counts) are not errors. */
Test(fanin, first_error_is_kept)
{
	struct cfs_fanin f = { 0 };

	for (int i = 0; i < 5; i++)
		cfs_fanin_add(&f);
	cr_assert_not(cfs_fanin_end(&f, 7));
	cr_assert_eq(f.status, 0);
	cr_assert_not(cfs_fanin_end(&f, -ETIMEDOUT));
	cr_assert_not(cfs_fanin_end(&f, 0));
	cr_assert_not(cfs_fanin_end(&f, -EBADMSG));
	cr_assert(cfs_fanin_end(&f, 0));
	cr_assert_eq(f.status, -ETIMEDOUT);
}

/* A starter's hold: an answer that comes (or a start that fails) while
 * requests are still being started never finishes the whole; ending the
 * hold does, once nothing else is out. */
Test(fanin, the_hold_keeps_it_open)
{
	struct cfs_fanin f = { 0 };

	cfs_fanin_add(&f); /* the hold */
	cfs_fanin_add(&f);
	cr_assert_not(cfs_fanin_end(&f, 0)); /* answered at once */
	cfs_fanin_add(&f);
	cr_assert_not(cfs_fanin_end(&f, -EIO)); /* could not start */
	cfs_fanin_add(&f);
	cr_assert_not(cfs_fanin_end(&f, 0)); /* the hold, last of the start */
	cr_assert_eq(f.out, 1);
	cr_assert(cfs_fanin_end(&f, 0));
	cr_assert_eq(f.status, -EIO);

	/* Nothing started: ending the hold finishes at once. */
	struct cfs_fanin g = { 0 };
	cfs_fanin_add(&g);
	cr_assert(cfs_fanin_end(&g, 0));
	cr_assert_eq(g.status, 0);
}
