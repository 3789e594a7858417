/* The driver's queues of whole datagrams (common/dgramq.c): datagrams the
 * network model holds come out in due order only once due on a scripted
 * clock; the full socket's FIFO keeps order and its byte cap. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dgramq.h"

static struct cfs_addr addr(uint16_t port)
{
	struct cfs_addr a;
	char s[32];

	snprintf(s, sizeof(s), "127.0.0.1:%u", (unsigned)port);
	cr_assert_eq(cfs_addr_parse(&a, s), 0);
	return a;
}

Test(dgramq, timed_releases_in_due_order_on_the_clock)
{
	struct cfs__dgram_timed q;
	const uint64_t due[] = { 3000, 1000, 2000, 1000 };
	struct cfs_addr a = addr(4000);
	uint8_t byte;

	cfs__dgram_timed_init(&q);
	cr_assert_eq(cfs__dgram_timed_due(&q), UINT64_MAX);
	for (unsigned i = 0; i < 4; i++) {
		byte = (uint8_t)i;
		cfs__dgram_timed_push(&q, &a, &byte, 1, due[i]);
	}
	cr_assert_eq(cfs__dgram_timed_due(&q), 1000);
	cr_assert_null(cfs__dgram_timed_pop(&q, 999));
	/* at each time, exactly the datagrams due by then come out */
	const uint64_t clock[] = { 1000, 1999, 2000, 5000 };
	unsigned got = 0;
	uint64_t last = 0;
	for (unsigned k = 0; k < 4; k++) {
		struct cfs__dgram *d;
		unsigned want = 0;
		for (unsigned i = 0; i < 4; i++)
			want += due[i] <= clock[k];
		while ((d = cfs__dgram_timed_pop(&q, clock[k]))) {
			cr_assert_geq(d->due_us, last);
			cr_assert_leq(d->due_us, clock[k]);
			cr_assert_eq(d->due_us, due[d->data[0]]);
			cr_assert(cfs_addr_eq(&d->dst, &a));
			last = d->due_us;
			got++;
			free(d);
		}
		cr_assert_eq(got, want, "at %lu: %u out, want %u", (unsigned long)clock[k], got, want);
	}
	cr_assert_eq(cfs__dgram_timed_due(&q), UINT64_MAX);
	cfs__dgram_timed_free(&q);
}

Test(dgramq, timed_free_drops_what_is_held)
{
	struct cfs__dgram_timed q;
	struct cfs_addr a = addr(4001);
	uint8_t p[100] = { 0 };

	cfs__dgram_timed_init(&q);
	for (unsigned i = 0; i < 50; i++)
		cfs__dgram_timed_push(&q, &a, p, sizeof(p), 100 + i);
	cfs__dgram_timed_free(&q);
	cr_assert_eq(cfs__dgram_timed_due(&q), UINT64_MAX);
	cr_assert_null(cfs__dgram_timed_pop(&q, UINT64_MAX - 1));
	cfs__dgram_timed_free(&q); /* again: harmless */
}

Test(dgramq, fifo_keeps_order_and_byte_cap)
{
	struct cfs__dgram_fifo q;
	uint8_t p[300];
	const size_t cap = 1000, len = 300;
	unsigned pushed = 0;

	cfs__dgram_fifo_init(&q, cap);
	cr_assert_null(cfs__dgram_fifo_head(&q));
	for (unsigned i = 0; i < 5; i++) {
		struct cfs_addr a = addr((uint16_t)(5000 + i));
		memset(p, (int)i, sizeof(p));
		bool ok = cfs__dgram_fifo_push(&q, &a, p, len);
		cr_assert_eq(ok, (i + 1) * len <= cap);
		pushed += ok;
	}
	cr_assert_eq(pushed, cap / len);
	cr_assert_eq(q.bytes, pushed * len);
	for (unsigned i = 0; i < pushed; i++) {
		struct cfs__dgram *d = cfs__dgram_fifo_head(&q);
		struct cfs_addr a = addr((uint16_t)(5000 + i));
		cr_assert_not_null(d);
		cr_assert(cfs_addr_eq(&d->dst, &a));
		cr_assert_eq(d->len, len);
		cr_assert_eq(d->data[0], i);
		cr_assert_eq(d->data[len - 1], i);
		cfs__dgram_fifo_pop(&q);
		cr_assert_eq(q.bytes, (pushed - i - 1) * len);
	}
	cr_assert_null(cfs__dgram_fifo_head(&q));
	cr_assert_null(q.tail);
	/* room again once drained */
	struct cfs_addr a = addr(6000);
	cr_assert(cfs__dgram_fifo_push(&q, &a, p, len));
	cfs__dgram_fifo_free(&q);
	cr_assert_null(cfs__dgram_fifo_head(&q));
	cr_assert_eq(q.bytes, 0);
}
