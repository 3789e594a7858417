/* sfsro-format's private helpers, shared by its own files only. */
#ifndef CFS_SFSRO_INTERNAL_H
#define CFS_SFSRO_INTERNAL_H

#include "sfsro-format/sfsro.h"

/* The order directory entries are kept in: bytewise, a prefix first. */
int sfsro__name_cmp(const struct cfs_bytes *a, const struct cfs_bytes *b);

#endif
