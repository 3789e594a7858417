/*
 * The local directory store ("dir:PATH"): a block sink and block source on
 * the local file system, for offline publishing, mounting without a ring
 * (cfs-mount --from dir:) and tests. It is the storage engine
 * (blockstore/blockstore.h) in a durable store at PATH, the same format
 * as a server's replica store: bytes in PATH/packs, the index in PATH/db.
 * A volume's signed root is a block like the others, under its root key.
 *
 * A put batch is written on a libuv worker thread while the publisher
 * builds the next batch, one batch at a time in order; the engine makes
 * each one group commit (the pack flushed before the index names it), so
 * an acknowledged block survives a crash. Which keys are stored, and their
 * leases, are also kept in memory, so that the loop answers "which do you
 * have" without waiting for a write in progress. Other completions are
 * delivered from the loop (an idle handle), never inside the call that
 * started them.
 *
 * Unlike a DHash server, this store does not hash what it is given again:
 * its only writer is the publisher in the same process, which made each
 * key from the bytes it hands over (hashing twice cost a fifth of the
 * publishing speed). Every reader verifies — cfs-fsck, the walker, a mount.
 */
#define _GNU_SOURCE
#include "publisher/internal.h"
#include "blockstore/blockstore.h"
#include "dhash/dhash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netdb.h>
#include <arpa/inet.h>


struct completion {
	pub_done_fn done;
	void *arg;
	int status;
	struct completion *next;
};

/* A put or a lease change, written on a worker thread, one at a time in order. */
struct dirstore_job {
	uv_work_t w;
	struct dirstore *d;
	struct pub_block *blocks;  /* a put: written, status set */
	size_t n;
	struct cfs_id *keys;       /* a lease change */
	size_t nkeys;
	bool *done_keys;           /* which keys moved */
	uint64_t lease;
	int status;
	pub_done_fn done;
	void *arg;
	struct dirstore_job *next;
};

struct dirstore {
	char *path;
	uv_loop_t *loop;
	uv_idle_t idle;
	struct completion *head, *tail;
	struct sfsro_source src;
	bstore_t *bs;
	struct cfs_idmap map;      /* key -> index into leases */
	uint64_t *leases;
	size_t nleases, cap_leases;
	struct dirstore_job *jobs, *jobs_tail; /* in order; the first one is written next */
	bool writing, closing;
};

static void set_lease(struct dirstore *d, const struct cfs_id *key, uint64_t lease)
{
	uint32_t i;
	if (cfs_idmap_get(&d->map, key, &i)) {
		d->leases[i] = lease;
		return;
	}
	if (d->nleases == d->cap_leases) {
		d->cap_leases = d->cap_leases ? 2 * d->cap_leases : 1024;
		d->leases = xrealloc(d->leases, d->cap_leases * sizeof(*d->leases));
	}
	d->leases[d->nleases] = lease;
	cfs_idmap_put(&d->map, key, (uint32_t)d->nleases++);
}

static const uint64_t *find_lease(const struct dirstore *d, const struct cfs_id *key)
{
	uint32_t i;
	return cfs_idmap_get(&d->map, key, &i) ? &d->leases[i] : NULL;
}

static void on_idle(uv_idle_t *h)
{
	struct dirstore *d = h->data;
	struct completion *c = d->head;

	d->head = d->tail = NULL;
	uv_idle_stop(&d->idle);
	while (c) {
		struct completion *next = c->next;
		c->done(c->arg, c->status);
		free(c);
		c = next;
	}
}

static void complete_later(struct dirstore *d, pub_done_fn done, void *arg, int status)
{
	struct completion *c = xcalloc(1, sizeof(*c));
	c->done = done;
	c->arg = arg;
	c->status = status;
	if (d->tail)
		d->tail->next = c;
	else
		d->head = c;
	d->tail = c;
	uv_idle_start(&d->idle, on_idle);
}

/* ---- writing: one job at a time, on a worker thread */

static void put_work(uv_work_t *w)
{
	struct dirstore_job *j = w->data;
	struct bstore_op *ops = xcalloc(j->n ? j->n : 1, sizeof(*ops));

	for (size_t i = 0; i < j->n; i++) {
		ops[i] = (struct bstore_op){ .type = BSTORE_PUT, .key = j->blocks[i].key, .data = j->blocks[i].p };
		ops[i].meta.kind = DHASH_KIND_CHASH;
		ops[i].meta.lease_until = j->lease;
		ops[i].meta.len = (uint32_t)j->blocks[i].len;
	}
	j->status = j->n ? bstore_apply(j->d->bs, ops, j->n) : 0;
	for (size_t i = 0; i < j->n; i++)
		j->blocks[i].status = ops[i].status;
	free(ops);
}

/* A new lease for each key (a refresh, or a put that found a block with a
 * shorter one): -ENOENT if one is missing, the others moved anyway. */
static void lease_work(uv_work_t *w)
{
	struct dirstore_job *j = w->data;
	struct bstore_op *ops = xcalloc(j->nkeys ? j->nkeys : 1, sizeof(*ops));
	size_t m = 0;
	int missing = 0;

	for (size_t i = 0; i < j->nkeys; i++) {
		struct bstore_meta meta;
		if (bstore_get(j->d->bs, &j->keys[i], &meta, NULL) < 0) {
			missing = -ENOENT;
			continue;
		}
		meta.lease_until = j->lease;
		ops[m++] = (struct bstore_op){ .type = BSTORE_SET, .key = j->keys[i], .meta = meta };
	}
	j->status = m ? bstore_apply(j->d->bs, ops, m) : 0;
	for (size_t i = 0, k = 0; i < j->nkeys && k < m; i++)
		if (cfs_id_eq(&ops[k].key, &j->keys[i]))
			j->done_keys[i] = ops[k++].status == 0;
	if (j->status == 0)
		j->status = missing;
	free(ops);
}

static void run_next(struct dirstore *d);

static void job_free(struct dirstore_job *j)
{
	free(j->keys);
	free(j->done_keys);
	free(j);
}

static void after_work(uv_work_t *w, int status)
{
	struct dirstore_job *j = w->data;
	struct dirstore *d = j->d;

	(void)status; /* a queued job is never cancelled */
	d->writing = false;
	d->jobs = j->next;
	if (!d->jobs)
		d->jobs_tail = NULL;
	for (size_t i = 0; i < j->n; i++)
		if (j->blocks[i].status == 0)
			set_lease(d, &j->blocks[i].key, j->lease);
	for (size_t i = 0; i < j->nkeys; i++)
		if (j->done_keys[i])
			set_lease(d, &j->keys[i], j->lease);
	if (j->done)
		j->done(j->arg, j->blocks ? 0 : j->status);
	job_free(j);
	run_next(d);
}

static void finalize(struct dirstore *d);

static void run_next(struct dirstore *d)
{
	struct dirstore_job *j = d->jobs;

	if (d->writing)
		return;
	if (!j) {
		if (d->closing)
			finalize(d);
		return;
	}
	d->writing = true;
	j->w.data = j;
	uv_queue_work(d->loop, &j->w, j->blocks ? put_work : lease_work, after_work);
}

static void enqueue(struct dirstore *d, struct dirstore_job *j)
{
	j->d = d;
	if (d->jobs_tail)
		d->jobs_tail->next = j;
	else
		d->jobs = j;
	d->jobs_tail = j;
	run_next(d);
}

static void ds_put(void *sink, struct pub_block *blocks, size_t n, uint64_t lease_until,
                   pub_done_fn done, void *arg)
{
	struct dirstore_job *j = xcalloc(1, sizeof(*j));
	j->blocks = blocks;
	j->n = n;
	j->lease = lease_until ? lease_until : cfs_wall_s() + DHASH_LEASE_DEFAULT_S;
	j->done = done;
	j->arg = arg;
	enqueue(sink, j);
}

static struct dirstore_job *lease_job(size_t n, uint64_t lease)
{
	struct dirstore_job *j = xcalloc(1, sizeof(*j));
	j->keys = xmalloc((n ? n : 1) * sizeof(*j->keys));
	j->done_keys = xcalloc(n ? n : 1, sizeof(*j->done_keys));
	j->lease = lease;
	return j;
}

/* A dir: store holds no coded volume (pub_publish refuses one): the code
 * is not used here. */
static void ds_refresh(void *sink, const struct cfs_id *keys, size_t n, uint8_t code_m,
                       uint8_t code_n, uint64_t lease_until, pub_done_fn done, void *arg)
{
	struct dirstore *d = sink;

	for (size_t i = 0; i < n; i++)
		if (!find_lease(d, &keys[i])) {
			complete_later(d, done, arg, -ENOENT);
			return;
		}
	struct dirstore_job *j = lease_job(n, lease_until);
	memcpy(j->keys, keys, n * sizeof(*keys));
	j->nkeys = n;
	j->done = done;
	j->arg = arg;
	enqueue(d, j);
}

/* Which blocks are here; those whose lease ends before lease_until get
 * the new one (like a refresh). */
static void ds_have(void *sink, const struct cfs_id *keys, size_t n, uint8_t code_m,
                    uint8_t code_n, uint64_t lease_until, bool *have, pub_done_fn done, void *arg)
{
	struct dirstore *d = sink;
	struct dirstore_job *j = NULL;

	for (size_t i = 0; i < n; i++) {
		const uint64_t *at = find_lease(d, &keys[i]);
		have[i] = at != NULL;
		if (!at || *at >= lease_until)
			continue;
		if (!j)
			j = lease_job(n, lease_until);
		j->keys[j->nkeys++] = keys[i];
	}
	if (!j) {
		complete_later(d, done, arg, 0);
		return;
	}
	j->done = done;
	j->arg = arg;
	enqueue(d, j);
}

static uint64_t ds_lease_granted(void *sink)
{
	return UINT64_MAX; /* a local store keeps what it is asked to */
}

/* ---- reading, and roots */

/* Store a root only if it verifies, sits under its own key and is newer
 * than (or identical in sequence to) the one held. */
static void ds_put_root(void *sink, const struct cfs_id *key, const uint8_t *p, size_t len,
                        uint64_t lease_until, pub_done_fn done, void *arg)
{
	struct dirstore *d = sink;
	struct sfsro_root new_root;
	struct bstore_meta old;
	struct cfs_id want;
	int r;

	if ((r = sfsro_root_decode(p, len, &new_root)) < 0)
		goto out;
	sfsro_root_key(&new_root.pk, &want);
	if (!cfs_id_eq(&want, key)) {
		r = -EBADMSG;
		goto out;
	}
	if (bstore_get(d->bs, key, &old, NULL) == 0 && old.kind == DHASH_KIND_ROOT && old.seq > new_root.seq) {
		r = -ESTALE;
		goto out;
	}
	struct bstore_op op = { .type = BSTORE_PUT, .key = *key, .data = p };
	op.meta.kind = DHASH_KIND_ROOT;
	op.meta.seq = new_root.seq;
	op.meta.len = (uint32_t)len;
	op.meta.lease_until = lease_until ? lease_until : cfs_wall_s() + DHASH_LEASE_DEFAULT_S;
	r = bstore_apply(d->bs, &op, 1);
	if (r == 0)
		r = op.status;
out:
	complete_later(d, done, arg, r);
}

/* A version root: immutable under its version key, once it verifies. */
static void ds_put_version(void *sink, const uint8_t *p, size_t len, uint64_t lease_until,
                           pub_done_fn done, void *arg)
{
	struct dirstore *d = sink;
	struct bstore_op op = { .type = BSTORE_PUT, .data = p };
	uint64_t seq;
	int r;

	if ((r = dhash_block_key(DHASH_KIND_VERSION, p, len, &op.key)) == 0 &&
	    (r = dhash_verify(DHASH_KIND_VERSION, &op.key, p, len, &seq)) == 0) {
		op.meta.kind = DHASH_KIND_VERSION;
		op.meta.seq = seq;
		op.meta.len = (uint32_t)len;
		op.meta.lease_until = lease_until ? lease_until : cfs_wall_s() + DHASH_LEASE_DEFAULT_S;
		r = bstore_apply(d->bs, &op, 1);
		if (r == 0)
			r = op.status;
	}
	complete_later(d, done, arg, r);
}

/* The source side: blocks and roots by key. */
static int ds_get(void *ctx, const struct cfs_id *key, uint8_t **ret, size_t *ret_len)
{
	struct dirstore *d = ctx;
	struct bstore_meta m;
	int r = bstore_get(d->bs, key, &m, ret);

	if (r == 0)
		*ret_len = m.len;
	return r == -EUCLEAN ? -EIO : r;
}

/* An asynchronous read, answered from the loop like every other call. */
struct read_req {
	pub_get_fn done;
	void *arg;
	uint8_t *p;
	size_t len;
};

static void read_answer(void *arg, int status)
{
	struct read_req *q = arg;
	q->done(q->arg, status, q->p, q->len);
	free(q->p);
	free(q);
}

static int ds_get_later(void *sink, const struct cfs_id *key, pub_get_fn done, void *arg)
{
	struct dirstore *d = sink;
	struct read_req *q = xcalloc(1, sizeof(*q));

	q->done = done;
	q->arg = arg;
	int r = ds_get(d, key, &q->p, &q->len);
	if (r < 0)
		q->p = NULL;
	complete_later(d, read_answer, q, r);
	return 0;
}

static const struct sfsro_source *ds_source(void *sink)
{
	return &((struct dirstore *)sink)->src;
}

static void on_idle_closed(uv_handle_t *h)
{
	struct dirstore *d = h->data;
	free(d->path);
	free(d);
}

static void finalize(struct dirstore *d)
{
	while (d->head) { /* answers nobody waits for any more */
		struct completion *c = d->head;
		d->head = c->next;
		free(c);
	}
	bstore_close(d->bs);
	free(d->leases);
	cfs_idmap_free(&d->map);
	uv_close((uv_handle_t *)&d->idle, on_idle_closed);
}

static void ds_free(void *sink)
{
	struct dirstore *d = sink;
	d->closing = true;
	if (!d->jobs) /* else the last job's completion finishes the close */
		finalize(d);
}

static const struct pub_sink_ops dirstore_ops = {
	.have = ds_have,
	.put = ds_put,
	.put_root = ds_put_root,
	.put_version = ds_put_version,
	.refresh = ds_refresh,
	.lease_granted = ds_lease_granted,
	.get = ds_get_later,
	.source = ds_source,
	.free = ds_free,
};

/* ---- opening */

/* Every content-hash block's lease, into memory (roots are asked for by
 * key, never in a "have"). */
static bool load_lease(void *arg, const struct cfs_id *key, const struct bstore_meta *m)
{
	if (m->kind == DHASH_KIND_CHASH)
		set_lease(arg, key, m->lease_until);
	return true;
}

static void load_leases(struct dirstore *d)
{
	cfs_htab_init(&d->map.t, CFS_ID_BYTES, sizeof(uint32_t));
	bstore_each(d->bs, load_lease, d);
}

static int dirstore_open(struct dirstore *d)
{
	struct stat st;
	char sub[4200];
	struct bstore_config cfg = { .mode = BSTORE_DURABLE, .what = "dir: store" };

	snprintf(sub, sizeof(sub), "%s/blocks", d->path);
	if (stat(sub, &st) == 0) {
		log_error("%s is a store in the old one-file-per-block layout; publish into a new "
		          "directory", d->path);
		return -EPROTO;
	}
	int r = bstore_open(d->path, &cfg, &d->bs);
	if (r < 0)
		return r == -EBUSY || r == -EPROTO ? r : log_error_errno(r, "cannot use %s as a store", d->path);
	load_leases(d);
	return 0;
}

/* A host name that does not resolve is not bad syntax. Each
 * HOST of a ring: list whose syntax is right (HOST:PORT, the port a
 * number) and which is not an IP literal is looked up here first, so that
 * the message names the lookup's failure; the syntax errors are left to
 * client_target_add. Returns -EADDRNOTAVAIL (logged) for a name that does
 * not resolve. */
static int check_host_names(const char *spec, const char *list)
{
	char buf[1024], *save = NULL;

	if (snprintf(buf, sizeof(buf), "%s", list) >= (int)sizeof(buf))
		return 0; /* too long: client_target_add says so */
	for (char *w = strtok_r(buf, ", \t\n", &save); w; w = strtok_r(NULL, ", \t\n", &save)) {
		char *colon = strrchr(w, ':'), *end;
		struct addrinfo hints = { .ai_socktype = SOCK_DGRAM }, *res = NULL;
		unsigned char ip[sizeof(struct in6_addr)];
		int e;

		if (w[0] == '[' || !colon || colon == w || strchr(w, ':') != colon)
			continue; /* a bracketed IPv6 literal, a bare port, or bad syntax */
		*colon = 0;
		unsigned long port = strtoul(colon + 1, &end, 10);
		if (!colon[1] || *end || port == 0 || port > 65535 || inet_pton(AF_INET, w, ip) == 1)
			continue;
		if ((e = getaddrinfo(w, NULL, &hints, &res)) != 0) {
			log_error("store '%s': cannot resolve the host name '%s': %s", spec, w,
			          e == EAI_SYSTEM ? strerror(errno) : gai_strerror(e));
			return -EADDRNOTAVAIL;
		}
		freeaddrinfo(res);
	}
	return 0;
}

/* The text forms, shared by both opens; create: a dir: store that does
 * not exist yet is made (else refused, -ENOENT). */
static int sink_open(uv_loop_t *loop, const char *spec, bool create, struct pub_sink *ret)
{
	struct dirstore *d;
	struct stat st;
	int r;

	static struct client_target t; /* large; one sink per process */
	memset(&t, 0, sizeof(t));
	if (strcmp(spec, "cfsd") == 0)
		return pub__cfsdsink_open(loop, &t, ret);
	if (strncmp(spec, "cfsd:", 5) == 0 && spec[5]) {
		if (snprintf(t.sock, sizeof(t.sock), "%s", spec + 5) >= (int)sizeof(t.sock))
			return log_error_errno(-ENAMETOOLONG, "store '%s': path too long", spec);
		return pub__cfsdsink_open(loop, &t, ret);
	}
	if (strncmp(spec, "ring:", 5) == 0 && spec[5]) {
		char from[1100];
		if ((r = check_host_names(spec, spec + 5)) < 0)
			return r;
		snprintf(from, sizeof(from), "store '%.1000s'", spec);
		if (client_target_add(&t, spec + 5, from) < 0)
			return -EINVAL;
		return pub__cfsdsink_open(loop, &t, ret);
	}
	if (strncmp(spec, "dir:", 4) != 0 || !spec[4]) {
		log_error("unknown store '%s': expected cfsd[:SOCKET], ring:HOST:PORT[,...] or dir:PATH",
		          spec);
		return -EINVAL;
	}
	if (strlen(spec) > 4000)
		return log_error_errno(-ENAMETOOLONG, "store path");
	if (!create) {
		/* A reader must not leave an empty store behind a typo. A store
		 * is a directory with a FORMAT file (or the old blocks/ layout,
		 * which dirstore_open names). */
		char f[4100];
		if (stat(spec + 4, &st) < 0) {
			log_error("no such store: %s does not exist", spec + 4);
			return -ENOENT;
		}
		snprintf(f, sizeof(f), "%s/FORMAT", spec + 4);
		if (stat(f, &st) < 0) {
			snprintf(f, sizeof(f), "%s/blocks", spec + 4);
			if (stat(f, &st) < 0) {
				log_error("no such store: %s is not a dir: store (it has no FORMAT file)",
				          spec + 4);
				return -ENOENT;
			}
		}
	}
	d = xcalloc(1, sizeof(*d));
	d->path = xstrdup(spec + 4);
	d->loop = loop;
	if ((r = dirstore_open(d)) < 0) {
		free(d->path);
		free(d);
		return r;
	}
	uv_idle_init(loop, &d->idle);
	d->idle.data = d;
	d->src = (struct sfsro_source){ ds_get, d };
	ret->ops = &dirstore_ops;
	ret->impl = d;
	return 0;
}

int pub_sink_open(uv_loop_t *loop, const char *spec, struct pub_sink *ret)
{
	return sink_open(loop, spec, true, ret);
}

int pub_sink_open_existing(uv_loop_t *loop, const char *spec, struct pub_sink *ret)
{
	return sink_open(loop, spec, false, ret);
}

void pub_sink_close(struct pub_sink *s)
{
	if (s->impl)
		s->ops->free(s->impl);
	s->impl = NULL;
}

int pub_store_of_data_dir(char *buf, size_t n, const char *dir)
{
	int r = snprintf(buf, n, "cfsd:%s/%s", dir, CLIENT_SOCKET_NAME);

	return r < 0 || (size_t)r >= n ? -ENAMETOOLONG : 0;
}
