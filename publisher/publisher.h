/*
 * publisher — cfs-publish: walk a directory tree deterministically, chunk
 * and encode it with sfsro-format, sign the root with the next sequence
 * number, and push the blocks through a batched, asynchronous block sink
 * (a local directory store, or DHash), never signing a partial tree.
 *
 * Depends on sfsro-format/ (and dhash/ for the DHT sink). Its API is added
 * with the volume-format issue (#3); this folder exports nothing yet.
 */
#ifndef CFS_PUBLISHER_H
#define CFS_PUBLISHER_H

#include "sfsro-format/sfsro.h"

#endif
