/* The progress bar's line (common/progress.c): counters and a time in,
 * text out; no terminal. */
#include <criterion/criterion.h>
#include <string.h>

#include "common/cfs.h"

Test(progress, decimal_bytes)
{
	char b[16];
	cr_assert_str_eq(cfs_decimal_bytes(0, b), "0 B");
	cr_assert_str_eq(cfs_decimal_bytes(999, b), "999 B");
	cr_assert_str_eq(cfs_decimal_bytes(1500, b), "1.5 kB");
	cr_assert_str_eq(cfs_decimal_bytes(12300000, b), "12.3 MB");
	cr_assert_str_eq(cfs_decimal_bytes(UINT64_MAX, b), "18446744.1 TB");
}

/* The rate counts from the mark, not from zero: 10 MB in 2 s after a
 * mark at 5 MB is 2.5 MB/s, and the 90 MB left take 36 s. */
Test(progress, rate_and_eta_from_the_mark)
{
	struct cfs_progress p = { .total_files = 10, .total_bytes = 100000000, .done_files = 4,
	                          .done_bytes = 10000000, .rate_us = 1000000, .rate_bytes = 5000000 };
	char line[160];

	cfs_progress_line(&p, 3000000, line, sizeof(line));
	cr_assert_str_eq(line, " 10%  4/10 files  10.0 MB/100.0 MB  2.5 MB/s  ETA 0:36");
}

/* Before the mark, or right after it, there is no rate and no ETA; a tree
 * of empty files shows its percentage by files; done beyond the totals
 * (a total counted low) is shown as the total. */
Test(progress, no_rate_yet_empty_files_and_overshoot)
{
	struct cfs_progress p = { .total_files = 4, .done_files = 1 };
	char line[160];

	cfs_progress_line(&p, 5000000, line, sizeof(line));
	cr_assert_str_eq(line, " 25%  1/4 files  0 B/0 B  0 B/s  ETA --:--");
	p = (struct cfs_progress){ .total_files = 2, .total_bytes = 1000, .done_files = 3,
	                           .done_bytes = 5000, .rate_us = 1, .rate_bytes = 0 };
	cfs_progress_line(&p, 1000001, line, sizeof(line));
	cr_assert_str_eq(line, "100%  2/2 files  1.0 kB/1.0 kB  1.0 kB/s  ETA 0:00");
}

/* Off: nothing is drawn and the draw time stays unset. */
Test(progress, off_draws_nothing)
{
	struct cfs_progress p = { .total_files = 1 };
	cfs_progress_draw(&p, 123456789);
	cr_assert_eq(p.drawn_us, 0);
}
