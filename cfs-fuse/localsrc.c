/*
 * A local source of blocks: the dir: store at PATH (a blockstore
 * directory, as the publisher writes it offline) read by this process,
 * for cfs-mount --from dir:PATH and cfs-cat --from — no ring, no daemon.
 *
 * It answers as client_get does, so that the block cache, the walks
 * and the root checks above it work unchanged: through a dhash_get_cb,
 * from the loop (an idle handle), never inside the call that asked, and
 * only with bytes that verify under their key — a content-hash block by
 * its hash, a signed root (stored under its root key) by its signature.
 * The kind the store recorded is tried first, the others next, so a
 * store that recorded no kind reads the same. A block that does not
 * verify is -EBADMSG with one log line: the disk rotted, and the mount
 * says EIO for what needs it, as for a block no replica can give.
 *
 * Reads are done on the loop thread, at most READS_PER_TICK per wake-up
 * so that FUSE requests are read in between: a read is one index lookup
 * and one pread of at most 64 KiB, mostly from the page cache.
 */
#include <stdlib.h>
#include <sys/stat.h>

#include "blockstore/blockstore.h"
#include "cfs-fuse/internal.h"

#define READS_PER_TICK 64

struct lget {
	struct cfs_id key;
	dhash_get_cb cb;
	void *arg;
	struct lget *next;
};

struct fs_local {
	uv_loop_t *loop;
	bstore_t *bs;
	char *path;
	uv_idle_t idle;
	struct lget *head, **tail;
	bool closing;
};

/* The kind the bytes verify as under key: 0, or -EBADMSG. */
static int verify(const struct cfs_id *key, uint8_t recorded, const uint8_t *p, size_t len,
                  uint32_t *ret_kind)
{
	uint32_t kinds[3] = { DHASH_KIND_CHASH, DHASH_KIND_ROOT, DHASH_KIND_VERSION };
	uint64_t seq;

	for (int i = 0; i < 3; i++)
		if (kinds[i] == recorded) {
			kinds[i] = kinds[0];
			kinds[0] = recorded;
		}
	for (int i = 0; i < 3; i++)
		if (dhash_verify(kinds[i], key, p, len, &seq) == 0) {
			*ret_kind = kinds[i];
			return 0;
		}
	return -EBADMSG;
}

/* Read one block and answer its asker. */
static void answer(struct fs_local *l, struct lget *g)
{
	struct dhash_get_result res = { .status = 0 };
	struct bstore_meta meta;
	uint64_t start = cfs_now_us();
	uint8_t *data = NULL;
	char k[9];
	int r = bstore_get(l->bs, &g->key, &meta, &data);

	if (r == 0 && (r = verify(&g->key, meta.kind, data, meta.len, &res.kind)) < 0)
		log_warn("block %s in the store %s does not verify (the disk rotted?)",
		         cfs_id_short(&g->key, k), l->path);
	else if (r == -EUCLEAN) {
		log_warn("block %s in the store %s is damaged", cfs_id_short(&g->key, k), l->path);
		r = -EBADMSG;
	} else if (r < 0 && r != -ENOENT)
		log_warn_errno(r, "reading block %s from the store %s", cfs_id_short(&g->key, k), l->path);
	res.status = r;
	if (r == 0) {
		res.data = data;
		res.len = meta.len;
	}
	res.latency_us = cfs_now_us() - start;
	g->cb(g->arg, &res);
	free(data);
	free(g);
}

static void on_idle(uv_idle_t *h)
{
	struct fs_local *l = h->data;

	for (int i = 0; i < READS_PER_TICK && l->head; i++) {
		struct lget *g = l->head;
		if (!(l->head = g->next))
			l->tail = &l->head;
		answer(l, g); /* may queue more: they wait for the next tick */
	}
	if (!l->head)
		uv_idle_stop(&l->idle);
}

int fs__local_open(uv_loop_t *loop, const char *path, struct fs_local **ret)
{
	struct bstore_config cfg = { .mode = BSTORE_DURABLE, .what = "dir: store" };
	struct stat st;
	struct fs_local *l;
	int r;

	/* a mount reads a store; it never makes an empty one */
	if (stat(path, &st) < 0)
		return log_error_errno(-errno, "no store at %s", path);
	if (!S_ISDIR(st.st_mode))
		return log_error_errno(-ENOTDIR, "no store at %s", path);
	l = xcalloc(1, sizeof(*l));
	if ((r = bstore_open(path, &cfg, &l->bs)) < 0) {
		free(l);
		if (r == -EBUSY)
			return log_error_errno(r, "the store %s is in use by another process (a publish "
			                       "into it?)", path);
		return log_error_errno(r, "cannot open the store %s", path);
	}
	l->loop = loop;
	l->path = xstrdup(path);
	l->tail = &l->head;
	uv_idle_init(loop, &l->idle);
	l->idle.data = l;
	*ret = l;
	return 0;
}

int fs__local_get(struct fs_local *l, const struct cfs_id *key, dhash_get_cb cb, void *arg)
{
	struct lget *g;

	if (l->closing)
		return -ECANCELED;
	g = xcalloc(1, sizeof(*g));
	g->key = *key;
	g->cb = cb;
	g->arg = arg;
	*l->tail = g;
	l->tail = &g->next;
	uv_idle_start(&l->idle, on_idle);
	return 0;
}

static void on_idle_closed(uv_handle_t *h)
{
	struct fs_local *l = h->data;
	free(l->path);
	free(l);
}

void fs__local_free(struct fs_local *l)
{
	struct dhash_get_result res = { .status = -ECANCELED };

	if (!l)
		return;
	l->closing = true;
	while (l->head) { /* as client_free: what is pending ends, cancelled */
		struct lget *g = l->head;
		l->head = g->next;
		g->cb(g->arg, &res);
		free(g);
	}
	bstore_close(l->bs);
	uv_close((uv_handle_t *)&l->idle, on_idle_closed);
}
