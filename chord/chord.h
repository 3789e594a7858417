/*
 * chord — the ring (CFS section 4, DHash++ section 2).
 *
 * Contract: given a key, find its successor on the identifier circle.
 * Each process runs V virtual servers (IDs H(IP ‖ port ‖ index), checked
 * by a nonce before any node enters a table, CFS 4.4) on one transport.
 * It keeps a successor list of r entries, a predecessor and a finger table
 * (PNS), stabilises on jittered timers, detects failures by missed probes,
 * and offers iterative (CFS Fig. 5) and recursive (DHash++ Fig. 10) lookups
 * with greedy, CFS-cost and delay-aware next-hop choice, and the ring-size
 * estimate N ≈ r/f.
 *
 * Depends on common/ only. Its API is added with the ring issue (#4); this
 * folder exports nothing yet.
 */
#ifndef CFS_CHORD_H
#define CFS_CHORD_H

#include "common/cfs.h"

#endif
