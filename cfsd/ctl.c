/* Default paths and the client side of the control socket. */
#include "cfsd/cfsd.h"
#include "dhash/dhash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cfsd_default_data_dir(char *buf, size_t n)
{
	return dhash_default_data_dir(buf, n);
}

int cfsd_socket_path(const char *data_dir, char *buf, size_t n)
{
	int len = snprintf(buf, n, "%s/%s", data_dir, CFSD_SOCKET_NAME);
	return len < 0 || (size_t)len >= n ? -ENAMETOOLONG : 0;
}

/* One request, one reply, on a private loop. */
struct ctl_call {
	const struct cfs_msg *req;
	cfsd_ctl_reply_fn fn;
	void *arg;
	int status;
	bool done;
	cfs_stream_t *s;
	uv_timer_t timer;
};

static void finish(struct ctl_call *c, int status, const struct cfs_msg *reply)
{
	if (c->done)
		return;
	c->done = true;
	c->status = status;
	c->fn(c->arg, status, reply);
	uv_timer_stop(&c->timer);
	if (c->s)
		cfs_stream_close(c->s);
	c->s = NULL;
}

static void on_frame(void *arg, cfs_stream_t *s, const uint8_t *f, size_t len)
{
	struct ctl_call *c = arg;
	struct cfs_msg *m = xmalloc(sizeof(*m));
	const char *why = "";
	int r = cfs_msg_decode(f, len, m, &why);

	if (r < 0)
		log_error("malformed reply from cfsd: %s", why);
	else if (!m->is_reply || m->type != c->req->type)
		r = log_error_errno(-EPROTO, "unexpected message from cfsd");
	else if (m->status < 0)
		r = m->status;
	finish(c, r, r == 0 ? m : NULL);
	free(m);
}

static void on_end(void *arg, cfs_stream_t *s, int status)
{
	struct ctl_call *c = arg;
	finish(c, status < 0 ? status : -ECONNRESET, NULL);
}

static void on_connect(void *arg, int status, cfs_stream_t *s)
{
	struct ctl_call *c = arg;
	int r;

	if (status < 0) {
		finish(c, status, NULL);
		return;
	}
	c->s = s;
	cfs_stream_start(s, on_frame, on_end, c);
	if ((r = cfs_stream_write_msg(s, c->req)) < 0)
		finish(c, r, NULL);
}

static void on_timeout(uv_timer_t *t)
{
	finish(t->data, -ETIMEDOUT, NULL);
}

int cfsd_ctl_call(const char *path, const struct cfs_msg *req, unsigned timeout_ms,
                  cfsd_ctl_reply_fn fn, void *arg)
{
	struct ctl_call c = { .req = req, .fn = fn, .arg = arg };
	uv_loop_t loop;
	int r;

	uv_loop_init(&loop);
	uv_timer_init(&loop, &c.timer);
	c.timer.data = &c;
	uv_timer_start(&c.timer, on_timeout, timeout_ms, 0);
	if ((r = cfs_stream_connect(&loop, path, on_connect, &c)) < 0)
		finish(&c, r, NULL);
	while (!c.done)
		uv_run(&loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&c.timer, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	return c.status;
}
