/* The upload cap's token bucket (common/upcap.h), scripted in time: no
 * socket and no clock. */
#include <criterion/criterion.h>

#include "common/upcap.h"

#define RATE 1000000u /* 1 MB/s: the bucket holds 64 KiB (more than 20 ms) */
#define MS 1000ull

static struct cfs__upcap U;
static struct cfs__up_debit D;

static void setup(void)
{
	cfs__upcap_init(&U, RATE);
}

TestSuite(upcap, .init = setup);

/* Full at its first use; a take beyond what it holds waits, and the wait
 * it names is when the bytes are there. */
Test(upcap, take_until_empty)
{
	uint64_t now = 5 * MS, wait = 0;
	double burst = cfs__upcap_burst(&U);
	uint32_t n = 0;

	cr_assert_float_eq(burst, 65536.0, 1e-9);
	while (cfs__upcap_take(&U, 1200, false, now, &wait, &D))
		n++;
	cr_assert_eq(n, 65536 / 1200, "%u pieces from a full bucket", n);
	/* 464 bytes short at 1 MB/s: the shortest wait, a millisecond */
	cr_assert_eq(wait, 1000, "wait %llu us", (unsigned long long)wait);
	cr_assert(cfs__upcap_take(&U, 1200, false, now + wait, &wait, &D), "not there after the wait");
}

/* Time refills the bucket at the rate, up to its depth. */
Test(upcap, refill_at_the_rate)
{
	uint64_t now = 0, wait;

	cr_assert(cfs__upcap_take(&U, 65536, false, now, &wait, &D));
	cr_assert(!cfs__upcap_take(&U, 10000, false, now, &wait, &D));
	cr_assert(!cfs__upcap_take(&U, 10000, false, now + 9 * MS, &wait, &D), "10 kB in 9 ms");
	cr_assert(cfs__upcap_take(&U, 10000, false, now + 10 * MS, &wait, &D), "10 kB in 10 ms");
	/* a long idle fills it to its depth, no more */
	now += 10 * 1000 * MS;
	cr_assert(cfs__upcap_take(&U, 65536, false, now, &wait, &D));
	cr_assert(!cfs__upcap_take(&U, 1200, false, now, &wait, &D));
}

/* The background class leaves half the bucket to the foreground. */
Test(upcap, background_behind_a_reserve)
{
	uint64_t wait;

	cr_assert(cfs__upcap_take(&U, 30000, true, 0, &wait, &D));
	cr_assert(!cfs__upcap_take(&U, 10000, true, 0, &wait, &D), "into the foreground's half");
	cr_assert(cfs__upcap_take(&U, 30000, false, 0, &wait, &D), "the foreground's half");
}

/* Whole datagrams are charged: pieces make up for them. */
Test(upcap, datagrams_are_charged)
{
	uint64_t wait;

	cfs__upcap_charge(&U, 60000, 0);
	cr_assert(!cfs__upcap_take(&U, 10000, false, 0, &wait, &D));
	cr_assert(cfs__upcap_take(&U, 5000, false, 0, &wait, &D));
}

/* No cap: everything goes. */
Test(upcap, no_cap)
{
	uint64_t wait = 7;

	cfs__upcap_init(&U, 0);
	for (int i = 0; i < 1000; i++)
		cr_assert(cfs__upcap_take(&U, 65536, i & 1, 0, &wait, &D));
	cr_assert_eq(wait, 7);
}

/* A time older than one seen (another caller read the clock earlier)
 * adds nothing, and does not set the bucket's time back: the interval
 * after it is not counted twice. */
Test(upcap, clock_going_backwards)
{
	uint64_t wait;

	cr_assert(cfs__upcap_take(&U, 65536, false, 100 * MS, &wait, &D));
	cfs__upcap_charge(&U, 1200, 50 * MS); /* read at 50 ms, charged after */
	cr_assert(!cfs__upcap_take(&U, 1200, false, 90 * MS, &wait, &D), "earlier still: nothing added");
	/* 10 ms after 100 ms: 10,000 bytes, less the datagram's 1,200 */
	cr_assert(cfs__upcap_take(&U, 8800, false, 110 * MS, &wait, &D));
	cr_assert(!cfs__upcap_take(&U, 1200, false, 110 * MS, &wait, &D),
	          "the 50 ms from 50 ms to 100 ms were counted again");
}

/* A piece that took its bytes and did not go gives back what it took:
 * the bucket's bytes, and the foreground share it drained. */
Test(upcap, give_back_restores_tokens_and_share)
{
	uint64_t wait;
	struct cfs__up_debit d2;

	cr_assert(cfs__upcap_take(&U, 65536, false, 0, &wait, &D));
	cfs__upcap_give_back(&U, &D);
	cr_assert(cfs__upcap_take(&U, 65536, false, 0, &wait, &D), "the bytes did not come back");
	cr_assert_float_eq(D.tokens, 65536.0, 1e-6);

	/* in debt: only the share (a tenth of the rate, filled while no piece
	 * went) lets a foreground piece through */
	cfs__upcap_charge(&U, 200000, 0);
	cr_assert(cfs__upcap_take(&U, 1200, false, 20 * MS, &wait, &D), "2,000 bytes of share");
	cr_assert_float_eq(D.share, 1200.0, 1e-6);
	cr_assert(!cfs__upcap_take(&U, 1200, false, 20 * MS, &wait, &d2), "800 bytes of share left");
	cfs__upcap_give_back(&U, &D);
	cr_assert(cfs__upcap_take(&U, 1200, false, 20 * MS, &wait, &d2), "the share did not come back");
	cr_assert(!cfs__upcap_take(&U, 1200, false, 20 * MS, &wait, &d2));
}

/* Giving back never fills the bucket beyond its depth. */
Test(upcap, give_back_bounded)
{
	uint64_t wait;

	cr_assert(cfs__upcap_take(&U, 30000, false, 0, &wait, &D));
	cr_assert(cfs__upcap_take(&U, 1, false, 1000 * MS, &wait, &D)); /* full again, less a byte */
	D.tokens = 30000;
	cfs__upcap_give_back(&U, &D);
	cr_assert(cfs__upcap_take(&U, 65536, false, 1000 * MS, &wait, &D));
	cr_assert(!cfs__upcap_take(&U, 1200, false, 1000 * MS, &wait, &D), "over the bucket's depth");
}

/* Both classes hungry for 20 s, the foreground asked first every
 * millisecond: the background still gets its least share, a tenth of the
 * rate, and the two together stay at the cap. */
Test(upcap, background_gets_its_least_share)
{
	uint64_t wait, fg = 0, bg = 0, now;

	for (now = 0; now <= 20000 * MS; now += MS) {
		while (cfs__upcap_take(&U, 1200, false, now, &wait, &D))
			fg += 1200;
		while (cfs__upcap_take(&U, 1200, true, now, &wait, &D))
			bg += 1200;
	}
	double total = (double)(fg + bg), secs = 20.0;
	cr_assert(bg >= 0.09 * secs * RATE, "the background sent %llu bytes of %.0f",
	          (unsigned long long)bg, total);
	cr_assert(fg >= 0.85 * secs * RATE, "the foreground sent %llu bytes", (unsigned long long)fg);
	cr_assert(total <= secs * RATE + 2 * cfs__upcap_burst(&U), "%.0f bytes in %.0f s at %u B/s",
	          total, secs, RATE);
}

/* Alone, the background may use the whole rate above the reserve. */
Test(upcap, background_alone_uses_the_rate)
{
	uint64_t wait, bg = 0, now;

	for (now = 0; now <= 10000 * MS; now += MS)
		while (cfs__upcap_take(&U, 1200, true, now, &wait, &D))
			bg += 1200;
	cr_assert(bg >= 0.95 * 10 * RATE && bg <= 10 * RATE + cfs__upcap_burst(&U), "%llu bytes",
	          (unsigned long long)bg);
}

/* A background piece held after it took its share gives the share back. */
Test(upcap, give_back_restores_the_background_share)
{
	uint64_t wait;
	struct cfs__up_debit first;

	cfs__upcap_charge(&U, 65536, 0);
	cr_assert(cfs__upcap_take(&U, 1200, true, 20 * MS, &wait, &first), "2,000 bytes of share");
	cr_assert_float_eq(first.bg_share, 1200.0, 1e-6);
	cr_assert(!cfs__upcap_take(&U, 1200, true, 20 * MS, &wait, &D));
	cr_assert(wait >= 4000, "waits %llu us for 400 bytes of share at 100 kB/s",
	          (unsigned long long)wait);
	cfs__upcap_give_back(&U, &first);
	cr_assert(cfs__upcap_take(&U, 1200, true, 20 * MS, &wait, &D));
}
