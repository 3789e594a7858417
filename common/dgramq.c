/*
 * The driver's queues of whole datagrams (common/dgramq.h): no I/O, no
 * clock; the driver passes `now` and sends what comes back.
 */
#include "common/dgramq.h"

#include <stdlib.h>
#include <string.h>

static struct cfs__dgram *dgram_new(const struct cfs_addr *dst, const uint8_t *p, size_t len)
{
	struct cfs__dgram *d = xmalloc(sizeof(*d) + len);

	d->next = NULL;
	d->due_us = 0;
	d->heap_idx = SIZE_MAX;
	d->dst = *dst;
	d->len = len;
	memcpy(d->data, p, len);
	return d;
}

static uint64_t dgram_key(const void *p) { return ((const struct cfs__dgram *)p)->due_us; }
static void dgram_set_idx(void *p, size_t i) { ((struct cfs__dgram *)p)->heap_idx = i; }

void cfs__dgram_timed_init(struct cfs__dgram_timed *q)
{
	q->heap = (struct cfs__heap){ .key = dgram_key, .set_idx = dgram_set_idx };
}

void cfs__dgram_timed_push(struct cfs__dgram_timed *q, const struct cfs_addr *dst,
                           const uint8_t *p, size_t len, uint64_t due_us)
{
	struct cfs__dgram *d = dgram_new(dst, p, len);

	d->due_us = due_us;
	cfs__heap_push(&q->heap, d);
}

uint64_t cfs__dgram_timed_due(const struct cfs__dgram_timed *q)
{
	return cfs__heap_min(&q->heap);
}

struct cfs__dgram *cfs__dgram_timed_pop(struct cfs__dgram_timed *q, uint64_t now)
{
	struct cfs__dgram *d;

	if (!q->heap.n || (d = q->heap.v[0])->due_us > now)
		return NULL;
	cfs__heap_remove(&q->heap, 0);
	return d;
}

void cfs__dgram_timed_free(struct cfs__dgram_timed *q)
{
	while (q->heap.n) {
		struct cfs__dgram *d = q->heap.v[0];
		cfs__heap_remove(&q->heap, 0);
		free(d);
	}
	cfs__heap_free(&q->heap);
}

void cfs__dgram_fifo_init(struct cfs__dgram_fifo *q, size_t max_bytes)
{
	*q = (struct cfs__dgram_fifo){ .max_bytes = max_bytes };
}

bool cfs__dgram_fifo_push(struct cfs__dgram_fifo *q, const struct cfs_addr *dst,
                          const uint8_t *p, size_t len)
{
	if (q->bytes + len > q->max_bytes)
		return false;
	struct cfs__dgram *d = dgram_new(dst, p, len);
	if (q->tail)
		q->tail->next = d;
	else
		q->head = d;
	q->tail = d;
	q->bytes += len;
	return true;
}

void cfs__dgram_fifo_pop(struct cfs__dgram_fifo *q)
{
	struct cfs__dgram *d = q->head;

	if (!d)
		return;
	q->head = d->next;
	if (!q->head)
		q->tail = NULL;
	q->bytes -= d->len;
	free(d);
}

void cfs__dgram_fifo_free(struct cfs__dgram_fifo *q)
{
	while (q->head)
		cfs__dgram_fifo_pop(q);
}
