/*
 * Length-prefixed frames over UNIX stream sockets, for local clients
 * (cfsctl, cfs-mount, cfs-publish talking to the local cfsd).
 *
 * Input accumulates in a per-stream buffer; every complete frame is handed
 * up in order. A frame header announcing more than CFS_FRAME_MAX ends the
 * stream with -EMSGSIZE before anything that large is allocated.
 *
 * A listener's streams (the daemon's side) are bounded (100
 * connections holding half-sent 1 MiB frames cost 123 MiB, for ever): at
 * most max_conns at once (more are closed on accept), a frame left half
 * sent for idle_ms ends its stream with -ETIMEDOUT, and a stream whose
 * replies queue beyond queue_bytes unread is not read (nor are its
 * buffered frames handed up) until they drain: a client that does not read
 * its answers stops being served instead of growing the daemon. So one
 * local client holds at most a frame and queue_bytes of replies per
 * connection, and max_conns connections.
 */
#include "common/cfs.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define READ_CHUNK 65536

struct cfs_stream {
	uv_pipe_t pipe;
	cfs_listener_t *lst;  /* accepted from it (bounded), else NULL */
	uv_timer_t idle;      /* accepted streams: a half-sent frame's deadline */
	bool paused;          /* replies queued beyond the bound: not reading */
	bool reading;
	uint64_t frames;      /* frames handed up; the one the idle timer is for */
	uint64_t idle_frame;
	cfs_frame_cb on_frame;
	cfs_stream_end_cb on_end;
	void *arg;
	uint8_t *buf;
	size_t off, len, cap; /* unconsumed input is buf[off, len) */
	bool closing;
	/* connect */
	uv_connect_t creq;
	cfs_connect_cb on_connect;
	void *carg;
};

struct cfs_listener {
	uv_pipe_t pipe;
	char *path;
	unsigned mode;
	cfs_accept_cb on_accept;
	void *arg;
	struct cfs_listener_limits lim;
	uint32_t nconns;          /* accepted streams not yet freed */
	bool closed;              /* freed when the last stream is too */
	uint64_t refused, timed_out, paused;
};

static void listener_maybe_free(cfs_listener_t *l);

static cfs_stream_t *stream_alloc(uv_loop_t *loop)
{
	cfs_stream_t *s = xcalloc(1, sizeof(*s));
	uv_pipe_init(loop, &s->pipe, 0);
	s->pipe.data = s;
	return s;
}

static void stream_free(cfs_stream_t *s)
{
	cfs_listener_t *l = s->lst;

	free(s->buf);
	free(s);
	if (l) {
		l->nconns--;
		listener_maybe_free(l);
	}
}

static void on_idle_closed(uv_handle_t *h)
{
	stream_free(h->data);
}

static void on_stream_closed(uv_handle_t *h)
{
	cfs_stream_t *s = h->data;

	if (s->lst)
		uv_close((uv_handle_t *)&s->idle, on_idle_closed);
	else
		stream_free(s);
}

void cfs_stream_close(cfs_stream_t *s)
{
	if (!s || s->closing)
		return;
	s->closing = true;
	uv_close((uv_handle_t *)&s->pipe, on_stream_closed);
}

static void stream_end(cfs_stream_t *s, int status)
{
	uv_read_stop((uv_stream_t *)&s->pipe);
	s->reading = false;
	if (s->lst)
		uv_timer_stop(&s->idle);
	if (s->on_end)
		s->on_end(s->arg, s, status);
	else
		cfs_stream_close(s);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	cfs_stream_t *s = h->data;

	if (s->off > 0 && s->off == s->len)
		s->off = s->len = 0;
	if (s->cap - s->len < READ_CHUNK) {
		if (s->off > 0) { /* compact before growing */
			memmove(s->buf, s->buf + s->off, s->len - s->off);
			s->len -= s->off;
			s->off = 0;
		}
		if (s->cap - s->len < READ_CHUNK) {
			s->cap = s->len + READ_CHUNK;
			s->buf = xrealloc(s->buf, s->cap);
		}
	}
	*buf = uv_buf_init((char *)s->buf + s->len, READ_CHUNK);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

/* Accepted streams: are the replies queued beyond the bound? */
static bool over_queue(const cfs_stream_t *s)
{
	return s->lst && uv_stream_get_write_queue_size((const uv_stream_t *)&s->pipe) > s->lst->lim.queue_bytes;
}

static void on_idle(uv_timer_t *t)
{
	cfs_stream_t *s = t->data;

	if (s->closing || s->paused || s->off == s->len)
		return;
	log_debug("local stream: a frame half sent for %u ms", s->lst->lim.idle_ms);
	s->lst->timed_out++;
	stream_end(s, -ETIMEDOUT);
}

/* Hand up every whole frame buffered, unless replies queue beyond the
 * bound (then stop reading until they drain: on_written). */
static void deliver(cfs_stream_t *s)
{
	while (!s->closing && s->len - s->off >= 4) {
		const uint8_t *p = s->buf + s->off;
		uint32_t n = cfs_get_be32(p);
		if (n > CFS_FRAME_MAX) {
			log_debug("local stream: frame of %u bytes exceeds the maximum", n);
			stream_end(s, -EMSGSIZE);
			return;
		}
		if (s->len - s->off - 4 < n)
			break;
		if (over_queue(s)) {
			if (!s->paused)
				s->lst->paused++;
			s->paused = true;
			uv_read_stop((uv_stream_t *)&s->pipe);
			s->reading = false;
			uv_timer_stop(&s->idle);
			return;
		}
		s->off += 4 + n;
		s->frames++;
		s->on_frame(s->arg, s, p + 4, n);
	}
	if (s->closing || !s->lst)
		return;
	/* a frame begun must end within idle_ms of its first byte: a byte now
	 * and then does not keep it alive */
	if (s->off == s->len) {
		uv_timer_stop(&s->idle);
	} else if (!uv_is_active((uv_handle_t *)&s->idle) || s->idle_frame != s->frames) {
		s->idle_frame = s->frames;
		uv_timer_start(&s->idle, on_idle, s->lst->lim.idle_ms, 0);
	}
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
	cfs_stream_t *s = st->data;

	if (nread == UV_EOF) {
		stream_end(s, s->off == s->len ? 0 : -EPROTO);
		return;
	}
	if (nread < 0) {
		stream_end(s, (int)nread);
		return;
	}
	s->len += (size_t)nread;
	deliver(s);
}

void cfs_stream_start(cfs_stream_t *s, cfs_frame_cb on_frame, cfs_stream_end_cb on_end, void *arg)
{
	s->on_frame = on_frame;
	s->on_end = on_end;
	s->arg = arg;
	s->reading = true;
	uv_read_start((uv_stream_t *)&s->pipe, on_alloc, on_read);
}

struct write_req {
	uv_write_t req;
	uint8_t data[];
};

static void on_written(uv_write_t *req, int status)
{
	cfs_stream_t *s = req->handle->data;

	free(container_of(req, struct write_req, req));
	/* replies drained below the bound: read (and hand up) again */
	if (status == 0 && s->paused && !s->closing && !over_queue(s)) {
		s->paused = false;
		s->reading = true;
		uv_read_start((uv_stream_t *)&s->pipe, on_alloc, on_read);
		deliver(s);
	}
}

/* Send w, whose data holds len bytes after room for the length header. */
static int frame_send(cfs_stream_t *s, struct write_req *w, size_t len)
{
	cfs_put_be32(w->data, (uint32_t)len);
	uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)(4 + len));
	int r = uv_write(&w->req, (uv_stream_t *)&s->pipe, &b, 1, on_written);
	if (r < 0)
		free(w);
	return r;
}

int cfs_stream_write(cfs_stream_t *s, const void *frame, size_t len)
{
	struct write_req *w;

	if (s->closing)
		return -ECANCELED;
	if (len > CFS_FRAME_MAX)
		return -EMSGSIZE;
	w = xmalloc(sizeof(*w) + 4 + len);
	memcpy(w->data + 4, frame, len);
	return frame_send(s, w, len);
}

/* Encode straight into the frame: most messages fit a datagram's size;
 * only the rare large one (a long status report) takes the full 1 MiB. */
int cfs_stream_write_msg(cfs_stream_t *s, const struct cfs_msg *m)
{
	size_t cap = CFS_DGRAM_MAX, len;
	struct write_req *w;
	int r;

	if (s->closing)
		return -ECANCELED;
	for (;;) {
		w = xmalloc(sizeof(*w) + 4 + cap);
		r = cfs_msg_encode(m, w->data + 4, cap, &len);
		if (r != -EMSGSIZE || cap == CFS_FRAME_MAX)
			break;
		free(w);
		cap = CFS_FRAME_MAX;
	}
	if (r < 0) {
		free(w);
		return r;
	}
	return frame_send(s, w, len);
}

/* ------------------------------------------------------------ connect */

static void on_connected(uv_connect_t *req, int status)
{
	cfs_stream_t *s = container_of(req, cfs_stream_t, creq);

	if (status < 0) {
		s->on_connect(s->carg, status, NULL);
		cfs_stream_close(s);
		return;
	}
	s->on_connect(s->carg, 0, s);
}

int cfs_stream_connect(uv_loop_t *loop, const char *path, cfs_connect_cb cb, void *arg)
{
	cfs_stream_t *s;

	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -ENAMETOOLONG;
	s = stream_alloc(loop);
	s->on_connect = cb;
	s->carg = arg;
	uv_pipe_connect(&s->creq, &s->pipe, path, on_connected);
	return 0;
}

/* ------------------------------------------------------------ listen */

/* Is somebody answering on path? A socket file nobody answers is stale. */
static bool socket_is_live(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool live;

	if (fd < 0)
		return false;
	strncpy(sun.sun_path, path, sizeof(sun.sun_path) - 1);
	live = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;
	close(fd);
	return live;
}

static void on_connection(uv_stream_t *server, int status)
{
	cfs_listener_t *l = server->data;
	cfs_stream_t *s;

	if (status < 0)
		return;
	s = stream_alloc(server->loop);
	s->lst = l;
	l->nconns++;
	uv_timer_init(server->loop, &s->idle);
	s->idle.data = s;
	if (uv_accept(server, (uv_stream_t *)&s->pipe) < 0) {
		cfs_stream_close(s);
		return;
	}
	if (l->nconns > l->lim.max_conns) { /* the connection itself is the refusal */
		l->refused++;
		log_debug("control socket: %u connections already, one refused", l->nconns - 1);
		cfs_stream_close(s);
		return;
	}
	l->on_accept(l->arg, s);
}

int cfs_listener_new(uv_loop_t *loop, const char *path, unsigned mode,
                     cfs_accept_cb on_accept, void *arg, cfs_listener_t **ret)
{
	cfs_listener_t *l;
	int r;

	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return log_error_errno(-ENAMETOOLONG, "control socket path '%s'", path);
	if (socket_is_live(path))
		return log_error_errno(-EADDRINUSE, "control socket %s is in use by a running process", path);
	unlink(path); /* stale file, or none */

	l = xcalloc(1, sizeof(*l));
	l->path = xstrdup(path);
	l->mode = mode ? mode : 0600;
	l->on_accept = on_accept;
	l->arg = arg;
	l->lim = (struct cfs_listener_limits){ CFS_CTL_CONNS_DEFAULT, CFS_CTL_IDLE_MS_DEFAULT,
	                                       CFS_CTL_QUEUE_DEFAULT };
	uv_pipe_init(loop, &l->pipe, 0);
	l->pipe.data = l;
	if ((r = uv_pipe_bind(&l->pipe, path)) < 0 ||
	    (chmod(path, l->mode) < 0 && (r = -errno)) ||
	    (r = uv_listen((uv_stream_t *)&l->pipe, 64, on_connection)) < 0) {
		log_error_errno(r, "cannot listen on %s", path);
		cfs_listener_close(l);
		return r;
	}
	*ret = l;
	return 0;
}

/* The listener's memory outlives its pipe while accepted streams point to it. */
static void listener_maybe_free(cfs_listener_t *l)
{
	if (!l->closed || l->nconns > 0)
		return;
	free(l->path);
	free(l);
}

static void on_listener_closed(uv_handle_t *h)
{
	cfs_listener_t *l = h->data;

	l->closed = true;
	listener_maybe_free(l);
}

void cfs_listener_close(cfs_listener_t *l)
{
	if (!l)
		return;
	unlink(l->path);
	uv_close((uv_handle_t *)&l->pipe, on_listener_closed);
}

void cfs_listener_set_limits(cfs_listener_t *l, const struct cfs_listener_limits *lim)
{
	l->lim = *lim;
	if (!l->lim.max_conns)
		l->lim.max_conns = CFS_CTL_CONNS_DEFAULT;
	if (!l->lim.idle_ms)
		l->lim.idle_ms = CFS_CTL_IDLE_MS_DEFAULT;
	if (!l->lim.queue_bytes)
		l->lim.queue_bytes = CFS_CTL_QUEUE_DEFAULT;
}

void cfs_listener_stats(const cfs_listener_t *l, uint32_t *ret_conns, uint64_t *ret_refused,
                        uint64_t *ret_timed_out, uint64_t *ret_paused)
{
	*ret_conns = l->nconns;
	*ret_refused = l->refused;
	*ret_timed_out = l->timed_out;
	*ret_paused = l->paused;
}
