/* common's private helpers, shared by its own files only. */
#ifndef CFS_COMMON_INTERNAL_H
#define CFS_COMMON_INTERNAL_H

#include "common/cfs.h"

/* The n-byte big-endian unsigned integer at p (n <= 8). */
uint64_t cfs__be(const uint8_t *p, unsigned n);

#endif
