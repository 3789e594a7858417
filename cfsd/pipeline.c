/*
 * Many control requests over one connection to the daemon, pipelined: at
 * most `window` unanswered at a time, each reply matched to its request by
 * ID (the request's index). cfsctl lookup, put and get run on this.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cfsd/cfsd.h"

struct pipe {
	cfs_stream_t *s;
	size_t n, sent, done;
	unsigned window;
	uint8_t type;
	cfsd_pipe_build_fn build;
	cfsd_pipe_reply_fn reply;
	void *arg;
	int status;
	struct cfs_msg m;
};

static void fail(struct pipe *p, int status)
{
	if (!p->status)
		p->status = status;
	if (p->s)
		cfs_stream_close(p->s);
	p->s = NULL;
}

static void send_more(struct pipe *p)
{
	while (p->s && p->sent < p->n && p->sent - p->done < p->window) {
		cfs_msg_init(&p->m, CFS_MSG_PING);
		p->build(p->arg, p->sent, &p->m);
		p->type = p->m.type;
		p->m.reqid = p->sent;
		int r = cfs_stream_write_msg(p->s, &p->m);
		if (r < 0) {
			fail(p, r);
			return;
		}
		p->sent++;
	}
	if (p->done == p->n && p->s) {
		cfs_stream_close(p->s);
		p->s = NULL;
	}
}

static void on_frame(void *arg, cfs_stream_t *s, const uint8_t *f, size_t len)
{
	struct pipe *p = arg;
	const char *why = "not a reply to a request in flight";

	if (cfs_msg_decode(f, len, &p->m, &why) < 0 || !p->m.is_reply || p->m.reqid >= p->sent) {
		fprintf(stderr, "cfsctl: malformed reply from cfsd: %s\n", why);
		fail(p, -EPROTO);
		return;
	}
	p->reply(p->arg, p->m.reqid, &p->m);
	p->done++;
	send_more(p);
}

static void on_end(void *arg, cfs_stream_t *s, int status)
{
	struct pipe *p = arg;

	if (p->done < p->n)
		fail(p, status < 0 ? status : -ECONNRESET);
}

static void on_connect(void *arg, int status, cfs_stream_t *s)
{
	struct pipe *p = arg;

	if (status < 0) {
		p->status = status;
		return;
	}
	p->s = s;
	cfs_stream_start(s, on_frame, on_end, p);
	send_more(p);
}

int cfsd_ctl_pipeline(const char *sock, size_t n, unsigned window, cfsd_pipe_build_fn build,
                      cfsd_pipe_reply_fn reply, void *arg)
{
	struct pipe *p = xcalloc(1, sizeof(*p));
	uv_loop_t loop;
	int r;

	p->n = n;
	p->window = window ? window : 64;
	p->build = build;
	p->reply = reply;
	p->arg = arg;
	if (n == 0) {
		free(p);
		return 0;
	}
	uv_loop_init(&loop);
	if ((r = cfs_stream_connect(&loop, sock, on_connect, p)) < 0)
		p->status = r;
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	r = p->status;
	free(p);
	return r;
}
