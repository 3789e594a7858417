/*
 * common/dgramq.h — the driver's queues of whole datagrams, with no I/O:
 * the ones the network model holds back until their time (a queue by due
 * time) and the ones a full socket refused (a FIFO with a byte cap).
 * The driver (common/transport.c) sends what they hand back.
 * Internal to common/.
 */
#ifndef CFS_COMMON_DGRAMQ_H
#define CFS_COMMON_DGRAMQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cfs.h"
#include "common/heap.h"

/* A datagram held in either queue; free() it once sent. */
struct cfs__dgram {
	struct cfs__dgram *next; /* FIFO */
	uint64_t due_us;         /* timed queue */
	size_t heap_idx;
	struct cfs_addr dst;
	size_t len;
	uint8_t data[];
};

/* Datagrams held until their due time. */
struct cfs__dgram_timed {
	struct cfs__heap heap;
};

void cfs__dgram_timed_init(struct cfs__dgram_timed *q);
/* Hold a copy of p until due_us. */
void cfs__dgram_timed_push(struct cfs__dgram_timed *q, const struct cfs_addr *dst,
                           const uint8_t *p, size_t len, uint64_t due_us);
/* The earliest due time, UINT64_MAX when empty. */
uint64_t cfs__dgram_timed_due(const struct cfs__dgram_timed *q);
/* The earliest datagram due by now, taken out (the caller frees it);
 * NULL when none is. */
struct cfs__dgram *cfs__dgram_timed_pop(struct cfs__dgram_timed *q, uint64_t now);
/* Drop every datagram held. */
void cfs__dgram_timed_free(struct cfs__dgram_timed *q);

/* Datagrams in order, at most max_bytes of them. */
struct cfs__dgram_fifo {
	struct cfs__dgram *head, *tail;
	size_t bytes, max_bytes;
};

void cfs__dgram_fifo_init(struct cfs__dgram_fifo *q, size_t max_bytes);
/* Queue a copy of p; false (nothing queued) when it would pass the cap. */
bool cfs__dgram_fifo_push(struct cfs__dgram_fifo *q, const struct cfs_addr *dst,
                          const uint8_t *p, size_t len);
/* The oldest datagram, left in place; NULL when empty. */
static inline struct cfs__dgram *cfs__dgram_fifo_head(const struct cfs__dgram_fifo *q)
{
	return q->head;
}
/* Drop the oldest datagram (sent or failed). */
void cfs__dgram_fifo_pop(struct cfs__dgram_fifo *q);
/* Drop every datagram queued. */
void cfs__dgram_fifo_free(struct cfs__dgram_fifo *q);

#endif
