/*
 * cfsctl lookup: many lookups through the local daemon over one control
 * connection, pipelined (up to 64 in flight), one line of output per key:
 *
 *   KEY SUCCESSOR-ID SUCCESSOR-ADDR RPCS TIMEOUTS
 *
 * or "KEY error MESSAGE". Keys come from the command line, from standard
 * input ("-"), or are drawn at random (--random N).
 */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfsd/cfsd.h"

#define WINDOW 64

struct batch {
	uv_loop_t *loop;
	cfs_stream_t *s;
	struct cfs_id *keys;
	size_t n, sent, done;
	uint32_t mode, nsucc, flags;
	int status;
	unsigned errors;
	struct cfs_msg m;
};

static void fail(struct batch *b, int status)
{
	if (!b->status)
		b->status = status;
	if (b->s)
		cfs_stream_close(b->s);
	b->s = NULL;
}

static void send_more(struct batch *b)
{
	while (b->s && b->sent < b->n && b->sent - b->done < WINDOW) {
		cfs_msg_init(&b->m, CFS_MSG_CTL_LOOKUP);
		b->m.reqid = b->sent;
		b->m.key = b->keys[b->sent];
		b->m.mode = b->mode;
		b->m.nsucc = b->nsucc;
		b->m.flags = b->flags;
		int r = cfs_stream_write_msg(b->s, &b->m);
		if (r < 0) {
			fail(b, r);
			return;
		}
		b->sent++;
	}
	if (b->done == b->n && b->s) {
		cfs_stream_close(b->s);
		b->s = NULL;
	}
}

static void on_frame(void *arg, cfs_stream_t *s, const uint8_t *f, size_t len)
{
	struct batch *b = arg;
	const char *why = "";
	char k[65], id[65], a[CFS_ADDR_STRLEN];

	if (cfs_msg_decode(f, len, &b->m, &why) < 0 || !b->m.is_reply ||
	    b->m.type != CFS_MSG_CTL_LOOKUP || b->m.reqid >= b->sent) {
		fprintf(stderr, "cfsctl: malformed reply from cfsd: %s\n", why);
		fail(b, -EPROTO);
		return;
	}
	cfs_id_hex(&b->keys[b->m.reqid], k);
	if (b->m.status < 0 || b->m.n_nodes == 0) {
		printf("%s error %s\n", k, b->m.status < 0 ? strerror(-b->m.status) : "no answer");
		b->errors++;
	} else {
		printf("%s %s %s %u %u\n", k, cfs_id_hex(&b->m.nodes[0].id, id),
		       cfs_addr_str(&b->m.nodes[0].addr, a), b->m.count, b->m.timeouts);
	}
	b->done++;
	send_more(b);
}

static void on_end(void *arg, cfs_stream_t *s, int status)
{
	struct batch *b = arg;

	if (b->done < b->n)
		fail(b, status < 0 ? status : -ECONNRESET);
}

static void on_connect(void *arg, int status, cfs_stream_t *s)
{
	struct batch *b = arg;

	if (status < 0) {
		b->status = status;
		return;
	}
	b->s = s;
	cfs_stream_start(s, on_frame, on_end, b);
	send_more(b);
}

int cfsctl_lookup(const char *sock, uint32_t mode, uint32_t nsucc, uint32_t flags,
                  char **args, int nargs, unsigned random_n)
{
	struct batch *b = xcalloc(1, sizeof(*b));
	size_t cap = 0;
	uv_loop_t loop;
	int r;

	for (int i = 0; i < nargs; i++) {
		char line[256];
		bool from_stdin = strcmp(args[i], "-") == 0;
		while (from_stdin ? fgets(line, sizeof(line), stdin) != NULL : true) {
			const char *t = args[i];
			if (from_stdin) {
				line[strcspn(line, " \t\r\n")] = 0;
				if (!line[0])
					continue;
				t = line;
			}
			if (b->n == cap)
				b->keys = xrealloc(b->keys, (cap = cap * 2 + 64) * sizeof(*b->keys));
			if (cfs_id_from_hex(&b->keys[b->n], t) < 0) {
				fprintf(stderr, "cfsctl: '%s' is not a key (64 hex digits)\n", t);
				free(b->keys);
				free(b);
				return 2;
			}
			b->n++;
			if (!from_stdin)
				break;
		}
	}
	for (unsigned i = 0; i < random_n; i++) {
		if (b->n == cap)
			b->keys = xrealloc(b->keys, (cap = cap * 2 + 64) * sizeof(*b->keys));
		randombytes_buf(b->keys[b->n++].b, CFS_ID_BYTES);
	}
	b->mode = mode;
	b->nsucc = nsucc;
	b->flags = flags;
	uv_loop_init(&loop);
	b->loop = &loop;
	if ((r = cfs_stream_connect(&loop, sock, on_connect, b)) < 0)
		b->status = r;
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	r = b->status;
	if (r == -ENOENT || r == -ECONNREFUSED)
		fprintf(stderr, "cfsctl: no cfsd is running on %s\n", sock);
	else if (r < 0)
		fprintf(stderr, "cfsctl: lookups through %s failed: %s\n", sock, strerror(-r));
	int rc = r < 0 ? 1 : b->errors ? 3 : 0;
	free(b->keys);
	free(b);
	return rc;
}
