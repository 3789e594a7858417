/*
 * The wide-area delay line's logic, free of I/O: which one-way delay and
 * loss a packet from one address to another gets, and which held packets
 * are due for release at a given time. tests/harness/cfs_delayline.c drives
 * it from a netfilter queue in a router namespace (this kernel has no
 * netem, so delay comes from user space).
 *
 * The matrix text, one directive per line, '#' starts a comment:
 *
 *   node IPV4 REGION             IPV4 belongs to REGION (a name of letters,
 *                                digits, '-', '_' and '.', at most 31 bytes)
 *   rtt REGION REGION MS [LOSS%] the round-trip time between two regions (a
 *                                region with itself: within it), MS a plain
 *                                decimal; each direction holds packets for
 *                                MS/2; LOSS%, from 0 to 100, drops that share
 *                                of the packets in each direction
 *
 * A pair with no rtt line, or an address with no node line, passes with no
 * delay and no loss. Refused, with the line: unknown words, a second node
 * line for one address, numbers that are not plain non-negative decimals,
 * an rtt over 60,000 ms, more than DELAY_MAX_REGIONS regions or
 * DELAY_MAX_NODES nodes, a line over DELAY_MAX_LINE bytes.
 *
 * Within a pair the delay is constant, so packets leave in the order they
 * came: the line never reorders a flow; the heap breaks ties of release
 * time by arrival order.
 */
#ifndef CFS_TESTBED_DELAY_H
#define CFS_TESTBED_DELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DELAY_MAX_REGIONS 64u
#define DELAY_MAX_NODES   4096u
#define DELAY_MAX_LINE    256u
#define DELAY_MAX_RTT_MS  60000u

struct delay_node {
	uint32_t ip;        /* IPv4, host byte order */
	uint8_t region;
};

struct delay_matrix {
	char region[DELAY_MAX_REGIONS][32];
	unsigned nregions;
	struct delay_node node[DELAY_MAX_NODES];   /* sorted by ip after parsing */
	unsigned nnodes;
	uint32_t oneway_us[DELAY_MAX_REGIONS][DELAY_MAX_REGIONS];
	uint32_t loss_ppm[DELAY_MAX_REGIONS][DELAY_MAX_REGIONS];   /* per million */
};

/* Parse TEXT (LEN bytes) into *M. 0, or -1 with the reason (and line) in
 * ERR. */
int delay_parse(const char *text, size_t len, struct delay_matrix *m, char *err, size_t errlen);

/* The one-way delay (µs) and loss (per million) from SRC to DST (IPv4, host
 * byte order). */
void delay_pair(const struct delay_matrix *m, uint32_t src, uint32_t dst,
                uint32_t *oneway_us, uint32_t *loss_ppm);

/* Held packets: a min-heap on (release time, arrival sequence). */
struct delay_held {
	uint64_t release_us;
	uint64_t seq;
	uint32_t id;        /* the netfilter queue's packet ID */
};

struct delay_line {
	struct delay_held *h;
	size_t n, cap;
	uint64_t seq;
};

void delay_line_init(struct delay_line *l);
void delay_line_free(struct delay_line *l);
/* Hold packet ID until RELEASE_US. -1 when out of memory. */
int delay_line_push(struct delay_line *l, uint32_t id, uint64_t release_us);
/* The earliest release time, or UINT64_MAX when nothing is held. */
uint64_t delay_line_next(const struct delay_line *l);
/* Take the earliest packet if it is due at NOW_US: true and *ID. */
bool delay_line_pop_due(struct delay_line *l, uint64_t now_us, uint32_t *id);

#endif
