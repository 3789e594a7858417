/*
 * The action queue the client's state machines (client_sm.h) fill and
 * their drivers empty: first in, first out, grown on demand (a refresh of
 * many keys queues one lookup per key at once).
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/client_sm.h"

struct dhash__act *dhash__actq_push(struct dhash__actq *q, enum dhash__act_type type)
{
	if (q->head == q->n)
		q->head = q->n = 0;
	if (q->n == q->cap) {
		if (q->head > 0) { /* room at the front: slide down */
			memmove(q->a, q->a + q->head, (q->n - q->head) * sizeof(*q->a));
			q->n -= q->head;
			q->head = 0;
		} else {
			q->cap = q->cap ? 2 * q->cap : 8;
			q->a = xrealloc(q->a, q->cap * sizeof(*q->a));
		}
	}
	struct dhash__act *a = &q->a[q->n++];
	memset(a, 0, sizeof(*a));
	a->type = type;
	return a;
}

bool dhash__actq_pop(struct dhash__actq *q, struct dhash__act *ret)
{
	if (q->head == q->n)
		return false;
	*ret = q->a[q->head++];
	return true;
}

enum dhash__act_type dhash__actq_peek(const struct dhash__actq *q)
{
	return q->head < q->n ? q->a[q->head].type : 0;
}

void dhash__actq_free(struct dhash__actq *q)
{
	free(q->a);
	*q = (struct dhash__actq){ 0 };
}
