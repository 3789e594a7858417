/* dhash: the one rule for "have these keys" (have.c, dhash_have_many),
 * which the daemon's CTL_HAVE and a plain ring client both answer with:
 * keys' answers fed in scripted orders, with no socket. */
#include <criterion/criterion.h>

#include "dhash/client_sm.h"

static bool bit(const struct dhash__haves *h, uint32_t i)
{
	return h->bits[i / 8] >> (i % 8) & 1;
}

Test(dhash_haves, every_key_answered_gives_the_bitmap)
{
	struct dhash__haves h;

	dhash__haves_init(&h, 10);
	for (uint32_t i = 0; i < 10; i++)
		cr_assert_eq(dhash__haves_on_key(&h, i, 0, i % 3 == 0), i == 9,
		             "done only with the last key");
	cr_assert_eq(h.err, 0);
	for (uint32_t i = 0; i < 10; i++)
		cr_assert_eq(bit(&h, i), i % 3 == 0, "key %u", i);
	dhash__haves_fini(&h);
}

Test(dhash_haves, an_unanswered_key_fails_the_batch_whatever_was_found)
{
	struct dhash__haves h;

	dhash__haves_init(&h, 3);
	(void)dhash__haves_on_key(&h, 0, 0, 1);
	(void)dhash__haves_on_key(&h, 1, -EHOSTUNREACH, 0);
	cr_assert(dhash__haves_on_key(&h, 2, 0, 1));
	cr_assert_eq(h.err, -EHOSTUNREACH, "a key nobody answered is not absent");
	dhash__haves_fini(&h);

	dhash__haves_init(&h, 2);
	(void)dhash__haves_on_key(&h, 0, 0, 0);
	cr_assert(dhash__haves_on_key(&h, 1, -ETIMEDOUT, 0));
	cr_assert_eq(h.err, -ETIMEDOUT, "nor when every other key was absent");
	dhash__haves_fini(&h);
}

Test(dhash_haves, the_lowest_unanswered_key_names_the_error_in_any_order)
{
	struct dhash__haves a, b;

	dhash__haves_init(&a, 8);
	dhash__haves_init(&b, 8);
	for (uint32_t i = 0; i < 8; i++) {
		int st = i == 2 ? -EHOSTUNREACH : i == 5 ? -ETIMEDOUT : 0;
		(void)dhash__haves_on_key(&a, i, st, 1);
		(void)dhash__haves_on_key(&b, 7 - i, 7 - i == 2 ? -EHOSTUNREACH : 7 - i == 5 ? -ETIMEDOUT : 0,
		                          1);
	}
	cr_assert_eq(a.err, -EHOSTUNREACH);
	cr_assert_eq(b.err, -EHOSTUNREACH, "the answers' order does not matter");
	cr_assert_eq(a.err_at, 2);
	cr_assert_eq(b.err_at, 2);
	dhash__haves_fini(&a);
	dhash__haves_fini(&b);
}
