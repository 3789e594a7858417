/*
 * The only place that runs a libuv loop (tools/lint.sh keeps it so).
 *
 * A loop is run from the top of a program, never from inside one of its
 * own callbacks: a callback that spins the loop again re-enters code that
 * is half way through a step (a fetch completing into a walk that is
 * still on the stack), which is how re-entrancy bugs are made. The
 * synchronous tools wait for an answer with cfs_loop_run_until at the top
 * level; everything else is a callback. A nested call is a bug, so it is
 * an assert, not an error.
 */
#include <assert.h>

#include "common/cfs.h"

/* Set while a loop runs on this thread under one of the calls below. */
static __thread bool running;

static int run(uv_loop_t *loop, uv_run_mode mode)
{
	assert(!running && "a libuv loop run from inside one of its callbacks");
	running = true;
	int alive = uv_run(loop, mode);
	running = false;
	return alive;
}

int cfs_loop_run_until(uv_loop_t *loop, const bool *done)
{
	while (!*done)
		if (!run(loop, UV_RUN_ONCE) && !*done)
			return -EDEADLK; /* nothing is left that could set it */
	return 0;
}

void cfs_loop_run(uv_loop_t *loop)
{
	(void)run(loop, UV_RUN_DEFAULT);
}

void cfs_loop_poll(uv_loop_t *loop)
{
	(void)run(loop, UV_RUN_NOWAIT);
}

bool cfs_loop_is_running(void)
{
	return running;
}
