/*
 * The one action queue (see cfs_actq in cfs.h): the actions a state machine
 * that does no I/O returns to its driver, first in first out. One array,
 * taken from the front: an emptied queue starts again at the beginning,
 * and a full one slides its live entries down before it grows, so a
 * machine that queues and drains in step (a lookup) keeps a small array
 * while one that queues thousands at once (a refresh of many keys) grows
 * it only as far as it needs.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfs.h"

void *cfs_actq_push(struct cfs_actq *q, size_t size)
{
	assert(size > 0 && (q->size == 0 || q->size == size));
	q->size = size;
	if (q->head == q->n)
		q->head = q->n = 0;
	if (q->n == q->cap) {
		if (q->head > 0) { /* room at the front: slide down */
			memmove(q->a, q->a + q->head * size, (q->n - q->head) * size);
			q->n -= q->head;
			q->head = 0;
		} else {
			q->cap = q->cap ? 2 * q->cap : 8;
			q->a = xrealloc(q->a, q->cap * size);
		}
	}
	void *e = q->a + q->n++ * size;
	memset(e, 0, size);
	return e;
}

bool cfs_actq_pop(struct cfs_actq *q, void *ret, size_t size)
{
	if (q->head == q->n)
		return false;
	assert(size == q->size);
	memcpy(ret, q->a + q->head++ * size, size);
	return true;
}

const void *cfs_actq_peek(const struct cfs_actq *q)
{
	return q->head < q->n ? q->a + q->head * q->size : NULL;
}

void cfs_actq_free(struct cfs_actq *q)
{
	free(q->a);
	*q = (struct cfs_actq){ 0 };
}
