/*
 * How many block fetches a mount keeps in flight: the bandwidth-delay
 * product of its path to the ring, found the way BBR finds a full pipe
 * (Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM Queue
 * 2016). Fetches are counted in rounds: a round opens at a completion and
 * closes when as many more have completed as the bound allowed when it
 * opened. The first round in which the bound was reached measures the
 * rate, and the bound doubles to probe; each later such round whose rate
 * grew by a quarter over the best doubles it again; after three rounds
 * without that growth the pipe is full, and the bound goes back to where
 * it was before the doubling that did not pay. A round in which the bound
 * was never reached (the reader asked for less) says nothing about the
 * path and is not counted.
 *
 * More in flight than the path carries only lengthens every fetch (on a
 * loopback ring the rate peaks at 8-16 fetches), so the bound starts at
 * --max-fetches and grows only where the rate says so, and only while a
 * fetch takes 10 ms or more (the bound over the rate, Little's law, checked
 * at every round): across continents a fetch takes a round trip of 100 ms
 * or more. The bytes in flight
 * stay below max_bytes (a quarter of the block cache: what is fetched
 * ahead must still be there when it is read).
 *
 * No I/O and no clock: the caller passes the time.
 */
#include "cfs-fuse/internal.h"

#define PIPE_GROWTH 1.25  /* a round's rate over the best, to double */
#define PIPE_FLAT_ROUNDS 3
/* A fetch that takes less than this (in flight over the rate, Little's
 * law) is on a short path that the start fills: no probing there. */
#define PIPE_LONG_US 10000

void fs__pipe_init(struct fs_pipe *p, uint32_t base, uint64_t max_bytes)
{
	*p = (struct fs_pipe){ .limit = base ? base : 1, .max_bytes = max_bytes };
	p->base = p->prev_limit = p->limit;
}

void fs__pipe_start(struct fs_pipe *p, uint32_t active)
{
	if (active >= p->limit)
		p->round_limited = true;
}

static void round_close(struct fs_pipe *p, uint64_t now_us)
{
	uint64_t us = now_us > p->round_start_us ? now_us - p->round_start_us : 1;
	double rate = (double)p->round_bytes * 1e6 / (double)us;
	uint64_t per_fetch = p->round_done ? p->round_bytes / p->round_done : 0;

	p->rounds++;
	/* blocks grew (small files' rounds grew it, then a large file's
	 * blocks came): the bytes in flight stay under max_bytes */
	if (per_fetch && (uint64_t)p->limit * per_fetch > p->max_bytes && p->limit > p->base) {
		uint64_t fit = p->max_bytes / per_fetch;
		p->limit = fit > p->base ? (uint32_t)fit : p->base;
	}
	if (!p->round_limited || p->full)
		return;
	if (rate > 0 && (double)p->round_len * (double)per_fetch * 1e6 / rate < PIPE_LONG_US) {
		/* a short path, now that the start is over: what the bound is
		 * fills it (a mount's first rounds take the cold start's lookups
		 * and first contacts; the warm-up after them is no sign of a
		 * long path) */
		p->full = true;
		return;
	}
	if (p->best_rate == 0 || rate >= p->best_rate * PIPE_GROWTH) {
		p->best_rate = rate;
		p->flat = 0;
		if ((uint64_t)p->limit * 2 * per_fetch > p->max_bytes || p->limit > UINT32_MAX / 2) {
			p->full = true; /* as far as memory goes */
			return;
		}
		p->prev_limit = p->limit;
		p->limit *= 2;
		return;
	}
	if (++p->flat >= PIPE_FLAT_ROUNDS) {
		p->full = true;
		p->limit = p->prev_limit;
	}
}

void fs__pipe_done(struct fs_pipe *p, size_t bytes, uint64_t now_us)
{
	if (!p->round_open) { /* this completion opens the round */
		p->round_open = true;
		p->round_start_us = now_us;
		p->round_len = p->limit;
		p->round_done = 0;
		p->round_bytes = 0;
		p->round_limited = false;
		return;
	}
	p->round_done++;
	p->round_bytes += bytes;
	if (p->round_done >= p->round_len) {
		round_close(p, now_us);
		p->round_open = false;
	}
}
