/* The one action queue (common/actq.c): order, cleared entries, reuse of
 * the array when drained, the slide before growing, peek and free. */
#include <criterion/criterion.h>
#include <string.h>

#include "common/cfs.h"

struct act {
	int type;
	uint32_t i;
	uint8_t pad[40];
};

static struct act *push(struct cfs_actq *q, int type, uint32_t i)
{
	struct act *a = cfs_actq_push(q, sizeof(*a));

	a->type = type;
	a->i = i;
	return a;
}

Test(actq, empty_queue_has_nothing)
{
	struct cfs_actq q = { 0 };
	struct act a;

	cr_assert_not(cfs_actq_pop(&q, &a, sizeof(a)));
	cr_assert_null(cfs_actq_peek(&q));
	cfs_actq_free(&q);
	cfs_actq_free(&q); /* freeing an empty queue twice is fine */
}

Test(actq, first_in_first_out)
{
	struct cfs_actq q = { 0 };
	struct act a;

	for (uint32_t i = 0; i < 100; i++)
		push(&q, 1 + (int)(i % 3), i);
	for (uint32_t i = 0; i < 100; i++) {
		const struct act *p = cfs_actq_peek(&q);
		cr_assert_not_null(p);
		cr_assert_eq(p->i, i);
		cr_assert(cfs_actq_pop(&q, &a, sizeof(a)));
		cr_assert_eq(a.i, i);
		cr_assert_eq(a.type, 1 + (int)(i % 3));
	}
	cr_assert_not(cfs_actq_pop(&q, &a, sizeof(a)));
	cfs_actq_free(&q);
	cr_assert_null(q.a);
}

/* A pushed entry is cleared, even where an earlier one left bytes. */
Test(actq, entries_are_cleared)
{
	struct cfs_actq q = { 0 };
	struct act a, zero = { 0 };

	memset(push(&q, 9, 9)->pad, 0xff, sizeof(a.pad));
	cr_assert(cfs_actq_pop(&q, &a, sizeof(a)));
	struct act *b = cfs_actq_push(&q, sizeof(*b));
	cr_assert_eq(memcmp(b, &zero, sizeof(zero)), 0);
	cfs_actq_free(&q);
}

/* A machine that queues and drains in step keeps its first array; one
 * that drains part of a full queue slides the rest down, not grows. */
Test(actq, drained_and_slid_queues_do_not_grow)
{
	struct cfs_actq q = { 0 };
	struct act a;

	for (uint32_t round = 0; round < 1000; round++) {
		push(&q, 1, round);
		push(&q, 2, round);
		cr_assert(cfs_actq_pop(&q, &a, sizeof(a)) && a.type == 1 && a.i == round);
		cr_assert(cfs_actq_pop(&q, &a, sizeof(a)) && a.type == 2 && a.i == round);
	}
	uint32_t cap = q.cap;
	cr_assert_eq(cap, 8);
	for (uint32_t i = 0; i < cap; i++)
		push(&q, 1, i);
	for (uint32_t i = 0; i < 3; i++)
		cr_assert(cfs_actq_pop(&q, &a, sizeof(a)) && a.i == i);
	for (uint32_t i = cap; i < cap + 3; i++)
		push(&q, 1, i);
	cr_assert_eq(q.cap, cap, "slid down, not grown");
	for (uint32_t i = 3; i < cap + 3; i++)
		cr_assert(cfs_actq_pop(&q, &a, sizeof(a)) && a.i == i, "entry %u", i);
	cr_assert_not(cfs_actq_pop(&q, &a, sizeof(a)));
	/* Full from the front: it grows, keeping the order. */
	for (uint32_t i = 0; i < 3 * cap; i++)
		push(&q, 1, i);
	cr_assert_geq(q.cap, 3 * cap);
	for (uint32_t i = 0; i < 3 * cap; i++)
		cr_assert(cfs_actq_pop(&q, &a, sizeof(a)) && a.i == i);
	cfs_actq_free(&q);
}
