/*
 * The binary min-heap of common/heap.h: an array, children of i at 2i+1
 * and 2i+2, every move reported to the element through set_idx.
 */
#include "common/heap.h"

#include <stdlib.h>

#include "common/cfs.h" /* xrealloc */

static void heap_swap(struct cfs__heap *h, size_t a, size_t b)
{
	void *t = h->v[a];
	h->v[a] = h->v[b];
	h->v[b] = t;
	h->set_idx(h->v[a], a);
	h->set_idx(h->v[b], b);
}

static void heap_up(struct cfs__heap *h, size_t i)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (h->key(h->v[p]) <= h->key(h->v[i]))
			break;
		heap_swap(h, i, p);
		i = p;
	}
}

static void heap_down(struct cfs__heap *h, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < h->n && h->key(h->v[l]) < h->key(h->v[m]))
			m = l;
		if (r < h->n && h->key(h->v[r]) < h->key(h->v[m]))
			m = r;
		if (m == i)
			return;
		heap_swap(h, i, m);
		i = m;
	}
}

void cfs__heap_push(struct cfs__heap *h, void *p)
{
	if (h->n == h->cap) {
		h->cap = h->cap ? 2 * h->cap : 64;
		h->v = xrealloc(h->v, h->cap * sizeof(*h->v));
	}
	h->v[h->n] = p;
	h->set_idx(p, h->n);
	heap_up(h, h->n++);
}

void cfs__heap_remove(struct cfs__heap *h, size_t i)
{
	h->set_idx(h->v[i], SIZE_MAX);
	if (i != --h->n) {
		h->v[i] = h->v[h->n];
		h->set_idx(h->v[i], i);
		heap_down(h, i);
		heap_up(h, i);
	}
}

uint64_t cfs__heap_min(const struct cfs__heap *h)
{
	return h->n ? h->key(h->v[0]) : UINT64_MAX;
}

void cfs__heap_free(struct cfs__heap *h)
{
	free(h->v);
	h->v = NULL;
	h->n = h->cap = 0;
}
