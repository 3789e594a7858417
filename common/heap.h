/*
 * common/heap.h — a binary min-heap of pointers, for the transport's
 * deadlines (calls, resends, links, datagrams the network model holds).
 * Each element stores its own index (set_idx), so that it can be removed
 * or re-keyed from the middle in O(log n); SIZE_MAX means "not in the
 * heap". Internal to common/.
 */
#ifndef CFS_COMMON_HEAP_H
#define CFS_COMMON_HEAP_H

#include <stddef.h>
#include <stdint.h>

struct cfs__heap {
	void **v;
	size_t n, cap;
	uint64_t (*key)(const void *);
	void (*set_idx)(void *, size_t);
};

/* Add p (grows the array on demand). */
void cfs__heap_push(struct cfs__heap *h, void *p);
/* Remove the element at index i; its index becomes SIZE_MAX. */
void cfs__heap_remove(struct cfs__heap *h, size_t i);
/* The smallest key, UINT64_MAX when the heap is empty. */
uint64_t cfs__heap_min(const struct cfs__heap *h);
/* Release the array; the heap is empty and usable again. */
void cfs__heap_free(struct cfs__heap *h);

#endif
