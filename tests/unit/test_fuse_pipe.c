/* cfs-fuse: the bound on fetches in flight (pipe.c), driven by a simulated
 * path: transmissions leave one after another at the path's bandwidth and
 * each fetch takes at least its round trip. A reader keeps the bound
 * filled (or fewer, when it reads slowly). No loop, no network. */
#include <criterion/criterion.h>

#include "cfs-fuse/internal.h"

#define BLOCK 65536u

struct path {
	double rtt_us, bytes_per_us;
	double done_at[8192];     /* completion times of the fetches in flight */
	uint32_t n;
	double last_tx_end;       /* when the path's last transmission ends */
};

/* Start one fetch at now: it ends a round trip later, or after the
 * transmissions queued before it, whichever is later. */
static void path_start(struct path *p, double now)
{
	double tx = (double)BLOCK / p->bytes_per_us;
	double tx_end = (p->last_tx_end > now ? p->last_tx_end : now) + tx;

	p->last_tx_end = tx_end;
	double end = now + p->rtt_us > tx_end ? now + p->rtt_us : tx_end;
	cr_assert_lt(p->n, 8192);
	p->done_at[p->n++] = end;
}

/* Remove and return the earliest completion time. */
static double path_next(struct path *p)
{
	uint32_t best = 0;
	for (uint32_t i = 1; i < p->n; i++)
		if (p->done_at[i] < p->done_at[best])
			best = i;
	double t = p->done_at[best];
	p->done_at[best] = p->done_at[--p->n];
	return t;
}

/* fetches fetches through pipe on path; the reader keeps at most want
 * in flight (0: as many as the bound allows). The delivered rate, B/s. */
static double run(struct fs_pipe *pp, struct path *p, uint32_t fetches, uint32_t want)
{
	double now = 0, first = -1;
	uint64_t bytes = 0;

	for (uint32_t started = 0, ended = 0; ended < fetches;) {
		uint32_t bound = want && want < pp->limit ? want : pp->limit;
		while (p->n < bound && started < fetches) {
			path_start(p, now);
			started++;
			fs__pipe_start(pp, p->n);
		}
		now = path_next(p);
		ended++;
		if (first < 0)
			first = now;
		bytes += BLOCK;
		fs__pipe_done(pp, BLOCK, (uint64_t)now);
	}
	return (double)bytes / ((now - first) / 1e6);
}

/* 200 ms and 50 MB/s: a bandwidth-delay product of 10 MB, 153 blocks of
 * 64 KiB. From 24 the bound grows past it, and no further than twice it. */
Test(fuse_pipe, grows_to_the_bandwidth_delay_product)
{
	struct fs_pipe pp;
	struct path p = { .rtt_us = 200000, .bytes_per_us = 50.0 };
	uint32_t bdp = (uint32_t)(p.rtt_us * p.bytes_per_us / BLOCK);

	fs__pipe_init(&pp, 24, 1ull << 30);
	double rate = run(&pp, &p, 6000, 0);
	cr_assert(pp.full, "the pipe was found full");
	cr_assert_geq(pp.limit, bdp, "bound %u below the BDP of %u blocks", pp.limit, bdp);
	cr_assert_leq(pp.limit, 2 * bdp, "bound %u over 2x the BDP of %u blocks", pp.limit, bdp);
	cr_assert_gt(rate, 0.8 * 50e6, "delivered %.1f MB/s of 50", rate / 1e6);

	/* the same path with the bound fixed at 24 delivers a fraction */
	struct path q = { .rtt_us = 200000, .bytes_per_us = 50.0 };
	struct fs_pipe fixed;
	fs__pipe_init(&fixed, 24, 0); /* max_bytes 0: never grows */
	double slow = run(&fixed, &q, 2000, 0);
	cr_assert_eq(fixed.limit, 24);
	cr_assert_lt(slow, 0.25 * rate, "%.1f MB/s with 24, %.1f grown", slow / 1e6, rate / 1e6);
}

/* A short path (1 ms, 400 MB/s: 6 blocks in flight fill it): 24 is more
 * than enough, and a fetch takes 4 ms: no probe at all. */
Test(fuse_pipe, stays_where_the_path_is_full_already)
{
	struct fs_pipe pp;
	struct path p = { .rtt_us = 1000, .bytes_per_us = 400.0 };

	fs__pipe_init(&pp, 24, 1ull << 30);
	(void)run(&pp, &p, 3000, 0);
	cr_assert(pp.full);
	cr_assert_eq(pp.limit, 24, "bound %u on a full short path", pp.limit);
	cr_assert_eq(pp.prev_limit, 24, "never probed");
}

/* 20 ms at 100 MB/s (31 blocks): a fetch takes longer than 10 ms, so the
 * bound probes, doubles once (48 > 31) and, the rate flat past that,
 * returns to 48 or stays at most twice the BDP. */
Test(fuse_pipe, a_medium_path_probes_and_settles)
{
	struct fs_pipe pp;
	struct path p = { .rtt_us = 20000, .bytes_per_us = 100.0 };
	uint32_t bdp = (uint32_t)(p.rtt_us * p.bytes_per_us / BLOCK);

	fs__pipe_init(&pp, 24, 1ull << 30);
	(void)run(&pp, &p, 4000, 0);
	cr_assert(pp.full);
	cr_assert_geq(pp.limit, bdp, "bound %u below the BDP of %u", pp.limit, bdp);
	cr_assert_leq(pp.limit, 2 * bdp + 24, "bound %u", pp.limit);
}

/* A reader that keeps 4 fetches out never reaches the bound: its rounds
 * say nothing of the path, and the bound does not move. */
Test(fuse_pipe, a_slow_reader_does_not_grow_it)
{
	struct fs_pipe pp;
	struct path p = { .rtt_us = 200000, .bytes_per_us = 50.0 };

	fs__pipe_init(&pp, 24, 1ull << 30);
	(void)run(&pp, &p, 2000, 4);
	cr_assert_eq(pp.limit, 24);
	cr_assert_not(pp.full);
	cr_assert_gt(pp.rounds, 10);
}

/* The bytes in flight stay under max_bytes (a quarter of the cache). */
Test(fuse_pipe, memory_bounds_it)
{
	struct fs_pipe pp;
	struct path p = { .rtt_us = 200000, .bytes_per_us = 50.0 };

	fs__pipe_init(&pp, 24, 8ull << 20);
	(void)run(&pp, &p, 3000, 0);
	cr_assert_leq((uint64_t)pp.limit * BLOCK, 8ull << 20, "bound %u", pp.limit);
	cr_assert_geq(pp.limit, 96, "grew while it could: %u", pp.limit);
}
