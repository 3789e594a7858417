/*
 * cfs-fuse — cfs-mount: a read-only FUSE file system (libfuse3 low-level
 * API) for one volume, driven from the same libuv loop as the DHash
 * client. Every block is verified against the signed root before a byte
 * of it is returned; long kernel cache timeouts, keep_cache, an adaptive
 * prefetch window, and atomic switches to newer roots.
 *
 * The only module that includes fuse_lowlevel.h. Depends on dhash/ and
 * sfsro-format/. Its API is added with the cfs-mount issue (#6); this
 * folder exports nothing yet.
 */
#ifndef CFS_CFSFUSE_H
#define CFS_CFSFUSE_H

#include "dhash/dhash.h"
#include "sfsro-format/sfsro.h"

#endif
