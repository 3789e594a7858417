/* Length-prefixed frames over a UNIX stream socket. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cfs.h"

static uv_loop_t loop;
static char dir[64], path[128];
static cfs_listener_t *lst;
static cfs_stream_t *server_side, *client_side;
static int frames, end_status = 1;
static size_t total;

static void srv_frame(void *arg, cfs_stream_t *s, const uint8_t *f, size_t len)
{
	frames++;
	total += len;
	/* echo the frame back */
	cr_assert(cfs_stream_write(s, f, len) == 0);
}

static cfs_stream_t *accepted[4];
static int naccepted;

static void srv_end(void *arg, cfs_stream_t *s, int status)
{
	end_status = status;
	cfs_stream_close(s);
	for (int i = 0; i < naccepted; i++)
		if (accepted[i] == s)
			accepted[i] = NULL;
}

static void on_accept(void *arg, cfs_stream_t *s)
{
	cr_assert(naccepted < 4);
	accepted[naccepted++] = s;
	server_side = s;
	cfs_stream_start(s, srv_frame, srv_end, NULL);
}

static int echoed;
static void cli_frame(void *arg, cfs_stream_t *s, const uint8_t *f, size_t len)
{
	static struct cfs_msg m;
	if (len == CFS_FRAME_MAX) {
		for (size_t i = 0; i < len; i++)
			cr_assert_eq(f[i], (uint8_t)i);
	} else {
		cr_assert(cfs_msg_decode(f, len, &m, NULL) == 0);
		cr_assert_eq(m.type, CFS_MSG_CTL_STATUS);
		if (m.is_reply) { /* the long report: text survives intact */
			cr_assert_eq(m.data.len, 200000);
			for (size_t i = 0; i < m.data.len; i++)
				cr_assert_eq(m.data.p[i], 'a' + i % 26);
		}
	}
	echoed++;
}

static void on_connect(void *arg, int status, cfs_stream_t *s)
{
	cr_assert_eq(status, 0);
	client_side = s;
	cfs_stream_start(s, cli_frame, NULL, NULL);
}

static void setup(void)
{
	uv_loop_init(&loop);
	strcpy(dir, "/tmp/cfs-stream-XXXXXX");
	cr_assert(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/ctl.sock", dir);
	cr_assert(cfs_listener_new(&loop, path, 0600, on_accept, NULL, &lst) == 0);
	frames = echoed = 0;
	total = 0;
	end_status = 1;
	server_side = client_side = NULL;
}

static void teardown(void)
{
	if (client_side)
		cfs_stream_close(client_side);
	for (int i = 0; i < naccepted; i++)
		cfs_stream_close(accepted[i]);
	naccepted = 0;
	if (lst)
		cfs_listener_close(lst);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert(uv_loop_close(&loop) == 0);
	cr_assert(access(path, F_OK) != 0, "the socket file is removed");
	rmdir(dir);
}

TestSuite(stream, .init = setup, .fini = teardown, .timeout = 30);

Test(stream, frames_roundtrip)
{
	struct stat sb;
	static struct cfs_msg m;
	size_t big = CFS_FRAME_MAX;
	uint8_t *b = malloc(big);

	cr_assert(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
	cr_assert(cfs_stream_connect(&loop, path, on_connect, NULL) == 0);
	while (!client_side)
		uv_run(&loop, UV_RUN_ONCE);
	for (size_t i = 0; i < big; i++)
		b[i] = (uint8_t)i;
	cfs_msg_init(&m, CFS_MSG_CTL_STATUS);
	for (int i = 0; i < 10; i++)
		cr_assert(cfs_stream_write_msg(client_side, &m) == 0);
	cr_assert(cfs_stream_write(client_side, b, big) == 0);
	cr_assert(cfs_stream_write(client_side, b, big + 1) == -EMSGSIZE);
	/* a message larger than a datagram takes the long encoding path */
	char *text = malloc(200000);
	for (size_t i = 0; i < 200000; i++)
		text[i] = (char)('a' + i % 26);
	cfs_msg_init(&m, CFS_MSG_CTL_STATUS);
	m.is_reply = true;
	m.data = (struct cfs_bytes){ (const uint8_t *)text, 200000 };
	cr_assert(cfs_stream_write_msg(client_side, &m) == 0);
	free(text);
	free(b);
	while (echoed < 12)
		uv_run(&loop, UV_RUN_ONCE);
	cr_assert_eq(frames, 12);
}

Test(stream, oversized_frame_ends_stream)
{
	cr_assert(cfs_stream_connect(&loop, path, on_connect, NULL) == 0);
	while (!client_side || !server_side)
		uv_run(&loop, UV_RUN_ONCE);
	/* raw header announcing 2 GiB: write through a plain socket */
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	strcpy(sun.sun_path, path);
	cr_assert(connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0);
	static const uint8_t hdr[4] = { 0x80, 0, 0, 0 };
	cr_assert(write(fd, hdr, 4) == 4);
	while (end_status == 1)
		uv_run(&loop, UV_RUN_ONCE);
	cr_assert_eq(end_status, -EMSGSIZE);
	close(fd);
}

Test(stream, live_socket_refused_stale_replaced)
{
	cfs_listener_t *second;
	cr_assert_eq(cfs_listener_new(&loop, path, 0600, on_accept, NULL, &second), -EADDRINUSE);
	cfs_listener_close(lst);
	lst = NULL;
	uv_run(&loop, UV_RUN_DEFAULT);
	/* leave a stale socket file behind: bound, never listened on */
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	strcpy(sun.sun_path, path);
	cr_assert(bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0);
	close(fd);
	cr_assert(access(path, F_OK) == 0);
	cr_assert(cfs_listener_new(&loop, path, 0600, on_accept, NULL, &lst) == 0);
}

static int raw_connect(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	strcpy(sun.sun_path, path);
	cr_assert(connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0);
	return fd;
}

/* A frame left half sent ends its stream after idle_ms,
 * whether or not a byte trickles in now and then. */
Test(stream, half_sent_frame_times_out)
{
	cfs_listener_set_limits(lst, &(struct cfs_listener_limits){ .idle_ms = 200 });
	int fd = raw_connect();
	static const uint8_t hdr[5] = { 0, 0x10, 0, 0, 'x' }; /* 1 MiB announced */
	cr_assert(write(fd, hdr, 5) == 5);
	uint64_t t0 = uv_now(&loop);
	for (int i = 0; i < 3 && end_status == 1; i++) { /* a byte every 100 ms */
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(100000);
		uv_update_time(&loop);
		(void)!write(fd, "y", 1);
	}
	while (end_status == 1)
		uv_run(&loop, UV_RUN_ONCE);
	cr_assert_eq(end_status, -ETIMEDOUT);
	cr_assert_lt(uv_now(&loop) - t0, 1000);
	uint32_t conns;
	uint64_t refused, timed_out, paused;
	cfs_listener_stats(lst, &conns, &refused, &timed_out, &paused);
	cr_assert_eq(timed_out, 1);
	close(fd);
}

Test(stream, connections_beyond_the_bound_are_closed)
{
	int fds[4];
	uint32_t conns;
	uint64_t refused, timed_out, paused;

	cfs_listener_set_limits(lst, &(struct cfs_listener_limits){ .max_conns = 2 });
	for (int i = 0; i < 4; i++)
		fds[i] = raw_connect();
	for (int i = 0; i < 50; i++)
		uv_run(&loop, UV_RUN_NOWAIT), usleep(1000);
	cfs_listener_stats(lst, &conns, &refused, &timed_out, &paused);
	cr_assert_eq(naccepted, 2);
	cr_assert_eq(refused, 2);
	cr_assert_eq(conns, 2);
	char c;
	cr_assert_eq(read(fds[3], &c, 1), 0, "the refused connection sees EOF");
	for (int i = 0; i < 4; i++)
		close(fds[i]);
}

/* A client that never reads its replies stops being read: the replies
 * queued stay near the bound instead of growing with its requests. */
Test(stream, unread_replies_stop_the_reading)
{
	static uint8_t frame[4 + 60000];
	uint32_t conns;
	uint64_t refused, timed_out, paused;
	int fd;

	cfs_listener_set_limits(lst, &(struct cfs_listener_limits){ .queue_bytes = 256 << 10 });
	fd = raw_connect();
	cfs_put_be32(frame, 60000);
	for (int i = 0; i < 200; i++) { /* 12 MB of echo requests, nothing read */
		ssize_t w = send(fd, frame, sizeof(frame), MSG_DONTWAIT);
		for (int j = 0; j < 5; j++)
			uv_run(&loop, UV_RUN_NOWAIT);
		if (w < 0)
			usleep(1000);
	}
	cfs_listener_stats(lst, &conns, &refused, &timed_out, &paused);
	cr_assert_geq(paused, 1);
	cr_assert_lt(frames, 200, "%d frames served with their replies unread", frames);
	close(fd);
}
