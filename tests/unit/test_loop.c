/* common/loop.c: the only way a loop is run; a run from inside one of
 * the loop's own callbacks is a bug, and asserts. */
#include <criterion/criterion.h>
#include <signal.h>

#include "common/cfs.h"

static bool done;

static void on_timer(uv_timer_t *t)
{
	done = true;
	uv_close((uv_handle_t *)t, NULL);
}

Test(loop, run_until_stops_when_done)
{
	uv_loop_t loop;
	uv_timer_t t;

	uv_loop_init(&loop);
	uv_timer_init(&loop, &t);
	done = false;
	uv_timer_start(&t, on_timer, 5, 0);
	cr_assert(!cfs_loop_is_running());
	cr_assert_eq(cfs_loop_run_until(&loop, &done), 0);
	cr_assert(done);
	cfs_loop_run(&loop); /* the close */
	cfs_loop_poll(&loop);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

Test(loop, run_until_with_nothing_left_is_an_error)
{
	uv_loop_t loop;
	bool never = false;

	uv_loop_init(&loop);
	cr_assert_eq(cfs_loop_run_until(&loop, &never), -EDEADLK);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

static uv_loop_t nested_loop;

static void on_nested(uv_timer_t *t)
{
	bool d = false;
	cr_assert(cfs_loop_is_running());
	(void)cfs_loop_run_until(&nested_loop, &d); /* a bug: asserts */
}

Test(loop, a_nested_run_asserts, .signal = SIGABRT)
{
	uv_timer_t t;

	uv_loop_init(&nested_loop);
	uv_timer_init(&nested_loop, &t);
	uv_timer_start(&t, on_nested, 1, 0);
	cfs_loop_run(&nested_loop);
}
