/*
 * sfsro-format — the volume's block formats (CFS 3 and 5.5, SFSRO):
 * signed root, file inode, directory, indirect block, data block.
 *
 * Contract: pure functions, no I/O and no event loop — encode, decode and
 * verify each block kind, byte-exact as docs/FORMAT.md will state with
 * test vectors. Depends on libsodium and msgpack through common/ only.
 * Its API is added with the volume-format issue (#3); this folder exports
 * nothing yet.
 */
#ifndef CFS_SFSRO_H
#define CFS_SFSRO_H

#include "common/cfs.h"

#endif
