/*
 * Default paths, and cfsctl's synchronous use of the control socket.
 *
 * The control protocol itself has one client, client_call (client/daemon.c):
 * it frames, matches replies to requests by ID, times out and reports a
 * missing daemon. Here is only what a command-line tool adds on top: a
 * private event loop that runs until every request is answered, and a
 * window, so that a lookup of a million keys keeps at most `window` of them
 * in the daemon at a time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfsd/cfsd.h"
#include "client/client.h"

int cfsd_default_data_dir(char *buf, size_t n)
{
	return client_default_data_dir(buf, n);
}

int cfsd_socket_path(const char *data_dir, char *buf, size_t n)
{
	int len = snprintf(buf, n, "%s/%s", data_dir, CLIENT_SOCKET_NAME);
	return len < 0 || (size_t)len >= n ? -ENAMETOOLONG : 0;
}

/* n requests over one connection, at most window unanswered. */
struct run {
	client_t *l;
	size_t n, issued, done;
	unsigned window;
	cfsd_pipe_build_fn build;
	cfsd_pipe_reply_fn reply;
	void *arg;
	int status;               /* the first failure with no reply */
	bool finished;            /* every request issued has its answer */
	struct cfs_msg *m;        /* the request being built */
	struct slot { struct run *p; size_t i; } *slots;
};

static void issue(struct run *p);

static void on_reply(void *arg, int status, const struct cfs_msg *reply)
{
	struct slot *s = arg;
	struct run *p = s->p;

	p->done++;
	if (reply)
		p->reply(p->arg, s->i, reply);
	else if (!p->status)
		p->status = status;
	issue(p);
	p->finished = p->done == p->issued;
}

static void issue(struct run *p)
{
	while (!p->status && p->issued < p->n && p->issued - p->done < p->window) {
		size_t i = p->issued;
		cfs_msg_init(p->m, CFS_MSG_PING);
		p->build(p->arg, i, p->m);
		p->slots[i] = (struct slot){ p, i };
		int r = client_call(p->l, p->m, on_reply, &p->slots[i]);
		if (r < 0) {
			p->status = r;
			return;
		}
		p->issued++;
	}
}

/* The pipeline on a private loop, each request failing after timeout_ms. */
static int run(const char *sock, size_t n, unsigned window, uint32_t timeout_ms,
               cfsd_pipe_build_fn build, cfsd_pipe_reply_fn reply, void *arg)
{
	struct run p = { .n = n, .window = window ? window : 64, .build = build,
	                 .reply = reply, .arg = arg };
	uv_loop_t loop;
	int r;

	if (n == 0)
		return 0;
	uv_loop_init(&loop);
	if ((r = client_new(&loop, sock, timeout_ms, &p.l)) < 0) {
		uv_loop_close(&loop);
		return r;
	}
	p.m = xmalloc(sizeof(*p.m));
	p.slots = xcalloc(n, sizeof(*p.slots));
	issue(&p);
	p.finished = p.done == p.issued;
	(void)cfs_loop_run_until(&loop, &p.finished);
	client_free(p.l);
	cfs_loop_run(&loop);
	uv_loop_close(&loop);
	free(p.slots);
	free(p.m);
	return p.status;
}

int cfsd_ctl_pipeline(const char *sock, size_t n, unsigned window, cfsd_pipe_build_fn build,
                      cfsd_pipe_reply_fn reply, void *arg)
{
	/* No deadline of our own: a lookup or put waits as long as the
	 * daemon's own timeouts make it. */
	return run(sock, n, window, UINT32_MAX, build, reply, arg);
}

/* One request: a pipeline of one, whose reply goes to fn. */
struct one {
	const struct cfs_msg *req;
	cfsd_ctl_reply_fn fn;
	void *arg;
	int status;
};

static void one_build(void *arg, size_t i, struct cfs_msg *m)
{
	struct one *o = arg;
	*m = *o->req;
}

static void one_reply(void *arg, size_t i, const struct cfs_msg *reply)
{
	struct one *o = arg;

	o->status = reply->status;
	if (reply->status < 0)
		o->fn(o->arg, reply->status, NULL);
	else
		o->fn(o->arg, 0, reply);
}

int cfsd_ctl_call(const char *path, const struct cfs_msg *req, unsigned timeout_ms,
                  cfsd_ctl_reply_fn fn, void *arg)
{
	struct one o = { .req = req, .fn = fn, .arg = arg };
	int r = run(path, 1, 1, timeout_ms, one_build, one_reply, &o);

	if (r < 0) {
		fn(arg, r, NULL);
		return r;
	}
	return o.status;
}
