/*
 * The mounted root version: the first fetch (before mounting, on the
 * mount's loop run from the top until it is answered), the
 * periodic check for a newer one, the switch, and the kernel cache
 * invalidations that follow it.
 *
 * Rollback protection: the highest sequence number ever accepted for a
 * volume is kept in STATE_DIR/<volume>.seq (written before the switch is
 * made), and a root below it, or an expired one, is refused — at mount
 * and on every later check — so a replaying server cannot make a reader go
 * back to an older version. The accepted root's own bytes are kept beside
 * it (rootcache.c): a mount with a disk cache starts from them at once and
 * checks the ring in the background, so it mounts, and reads what it read
 * before, while the ring or the daemon cannot be reached.
 *
 * A version asked for by number (VOLUME@SEQ, o.version) is fetched from
 * its version key, must carry that number, is never replaced and leaves
 * the recorded sequence alone: going back was the reader's explicit choice.
 *
 * Invalidations run on their own thread: fuse_lowlevel_notify_inval_entry
 * may wait for kernel locks held by requests that this process has not yet
 * answered, and the loop thread must stay free to answer them.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cfs-fuse/internal.h"

/* ------------------------------------------------------------ state */

static int default_state_dir(char *buf, size_t n)
{
	int r = cfs_user_dir(buf, n, "/var/lib/cfs/mounts", "XDG_STATE_HOME", ".local/state");

	if (r == -ENOENT)
		r = snprintf(buf, n, "/tmp/cfs-state-%u", (unsigned)geteuid()) < (int)n ? 0 : -ENAMETOOLONG;
	return r;
}

static uint64_t load_seq(const char *path)
{
	return cfs_num_load(path);
}

static int store_seq(const char *path, uint64_t seq)
{
	int r = cfs_num_store(path, seq);
	return r < 0 ? log_warn_errno(r, "cannot record the root sequence in %s", path) : 0;
}

/* The accepted root's bytes, kept after its sequence was recorded. */
static void keep_root(cfsfuse_t *fs, const uint8_t *p, size_t len, uint64_t seq)
{
	int r = fs__rootcache_store(fs->root_path, p, len);

	if (r < 0)
		(void)log_warn_errno(r, "cannot keep the root in %s", fs->root_path);
	else
		fs->root_kept_seq = seq;
}

/* The walker's root step, fed with what the ring gave (CFS 5.5: signed
 * by the volume's key, not older than a root seen, not expired). */
int fs__root_check(cfsfuse_t *fs, const struct dhash_get_result *g, struct sfsro_root *ret)
{
	sfsro_walker_t *w = sfsro_walker_new();
	struct sfsro_step s;
	int r;

	uint32_t kind = fs->o.version ? DHASH_KIND_VERSION : DHASH_KIND_ROOT;

	/* now 0: no expiry, when the reader chose to read an archive */
	if (fs->o.version)
		sfsro_walker_root_version(w, &fs->vol, fs->o.version, ret);
	else
		sfsro_walker_root(w, &fs->vol, fs->max_seq, fs->o.allow_expired ? 0 : cfs_wall_s(), ret);
	if ((r = sfsro_walker_step(w, &s)) == SFSRO_WALK_NEED) {
		int st = g->status == 0 && g->kind != kind ? -EBADMSG : g->status;
		(void)sfsro_walker_feed(w, &s.key, st, g->data, g->len, 0);
		r = sfsro_walker_step(w, &s);
	}
	sfsro_walker_free(w);
	if (r == 0)
		fs__root_warn_expired(fs, ret);
	if (r == -EKEYEXPIRED && g->status == 0) {
		struct sfsro_root rr;
		if (sfsro_root_decode(g->data, g->len, &rr) == 0)
			fs->expired_until = rr.valid_until;
	}
	return r;
}

/* Why a root is refused as expired: the publisher stopped refreshing it,
 * or this machine's clock is wrong. A plain client hears the servers'
 * clocks (version 5) and says which. */
static const char *expired_text(cfsfuse_t *fs, client_t *dh, char *buf, size_t n)
{
	char until[32] = "?", now[32];
	int64_t skew;
	uint32_t servers;
	time_t u = (time_t)fs->expired_until, t = (time_t)cfs_wall_s();
	struct tm tm;

	if (fs->expired_until)
		strftime(until, sizeof(until), "%Y-%m-%d %H:%M UTC", gmtime_r(&u, &tm));
	strftime(now, sizeof(now), "%Y-%m-%d %H:%M UTC", gmtime_r(&t, &tm));
	if (dh && client_clock_skew(dh, &skew, &servers) == 0 && (skew > 600000 || skew < -600000))
		snprintf(buf, n, "this machine's clock is wrong: it reads %s, %+.0f s off the median of %u "
		         "servers' clocks, and the root is valid until %s; set the clock right (NTP)",
		         now, (double)skew / 1000, servers, until);
	else
		snprintf(buf, n, "the root expired at %s and this machine's clock reads %s: the publisher "
		         "has not refreshed it (or this clock is wrong); --expired allow reads it anyway",
		         until, now);
	return buf;
}

static const char *root_error(int r)
{
	switch (r) {
	case -ENOENT: return "no server has a root for this volume";
	case -ESTALE: return "the root is older than one already seen (a replay?)";
	case -EKEYEXPIRED: return "the root has expired (the publisher has not refreshed it)";
	case -EBADMSG: case -EKEYREJECTED: return "the root does not verify";
	default: return strerror(-r);
	}
}

/* ------------------------------------------------------------ first fetch */

/*
 * The first root comes in two steps (docs/MOUNTING.md, "The first root"),
 * from a plain client or through cfsd (its interim reply): the first
 * root that verifies (one replica's word, dhash_get_root_early) is
 * accepted by the same rules as any other — the volume's signature, not
 * below the recorded sequence, not expired — and the mount starts with
 * it; the read quorum's answer, when it comes, is taken as a root
 * check's: a newer root is switched to, an older one is never gone back
 * to. From a store, or through a cfsd older than ctl_get_root, there is
 * one step; and for cfs-cat and cfs-get, which read one version and
 * never switch, the quorum's answer is the one.
 */
struct first {
	cfsfuse_t *fs;
	bool done;                /* the get's answer came */
	bool early;               /* an early root was accepted into fs->root */
	bool any;                 /* done or early: fs__root_initial may go on */
	bool served;              /* fs__root_initial returned with the early root: the
	                           * answer is the mount's and frees this */
	int status;
	uint8_t *bytes;           /* the accepted root's, to keep */
	size_t len;
};

static void switch_root(cfsfuse_t *fs, const struct sfsro_root *r);
static void keep_root(cfsfuse_t *fs, const uint8_t *p, size_t len, uint64_t seq);

static void first_early(void *arg, const struct dhash_get_result *g)
{
	struct first *f = arg;
	struct sfsro_root r;

	if (f->done || f->early || fs__root_check(f->fs, g, &r) != 0)
		return;
	f->fs->root = r;
	f->early = f->any = true;
	free(f->bytes);
	f->bytes = xmemdup(g->data, g->len);
	f->len = g->len;
	f->fs->start.root_lookup = g->lookup_us;
	f->fs->start.root_rpcs = g->rpcs;
	f->fs->start.early = fs__start_mark(f->fs);
}

/* The read quorum's answer after the mount started with an early root:
 * as a root check's (update_got), without asks to answer. */
static void first_after(cfsfuse_t *fs, const struct dhash_get_result *g)
{
	struct sfsro_root r;
	int st;

	if (g->status == -ECANCELED || fs->stopping || !fs->nodes)
		return;
	fs->start.root = fs__start_mark(fs);
	if ((st = fs__root_check(fs, g, &r)) < 0) {
		log_debug("volume %s: the first root's read quorum: %s; sequence %lu stands",
		          fs->volname, root_error(st), (unsigned long)fs->root.seq);
		return;
	}
	if (fs__first_moves(fs->root.seq, st, r.seq))
		switch_root(fs, &r);
	if (r.seq > fs->root_kept_seq)
		keep_root(fs, g->data, g->len, r.seq);
}

static void first_got(void *arg, const struct dhash_get_result *g)
{
	struct first *f = arg;
	struct sfsro_root r;

	if (f->served) {
		first_after(f->fs, g);
		free(f->bytes);
		free(f);
		return;
	}
	f->done = f->any = true;
	if (!f->early) {
		f->fs->start.root_lookup = g->lookup_us;
		f->fs->start.root_rpcs = g->rpcs;
	}
	f->status = fs__root_check(f->fs, g, &r);
	switch (fs__first_pick(f->early, f->fs->root.seq, f->status, r.seq)) {
	case FS_FIRST_QUORUM:
		f->fs->root = r;
		free(f->bytes);
		f->bytes = xmemdup(g->data, g->len);
		f->len = g->len;
		break;
	case FS_FIRST_EARLY: /* the early root stands: never back */
		f->status = 0;
		break;
	}
}

/* The root directory's top block, asked for as soon as the first root is
 * known: it comes while the kernel mount is made (and, with an early
 * root, while the read quorum is asked), and the first listing finds it
 * in the cache. */
static void rootdir_got(void *arg, const struct dhash_get_result *g)
{
	cfsfuse_t *fs = arg;

	fs->rootdir_pending = false;
	if (g->status != 0 || g->kind != DHASH_KIND_CHASH || fs->stopping)
		return;
	if (fs->blocks) {
		fs__blk_seed(fs->blocks, &fs->rootdir_key, g->data, g->len);
	} else {
		free(fs->rootdir_bytes);
		fs->rootdir_bytes = xmemdup(g->data, g->len ? g->len : 1);
		fs->rootdir_len = g->len;
	}
}

static void rootdir_ask(cfsfuse_t *fs)
{
	if (!fs->first_early || !fs->dh || fs->rootdir_pending)
		return;
	fs->rootdir_key = fs->root.root_dir;
	if (client_get(fs->dh, &fs->rootdir_key, rootdir_got, fs) == 0)
		fs->rootdir_pending = true;
}

/* The root from wherever this mount reads: its local store, else the ring
 * (the newest root from every replica; a version, immutable, from any). */
static int get_from(client_t *dh, struct fs_local *local, const struct cfs_id *key, bool version,
                    dhash_get_cb cb, void *arg)
{
	if (local)
		return fs__local_get(local, key, cb, arg);
	return version ? client_get(dh, key, cb, arg) : client_get_root(dh, key, cb, arg);
}

/* The key this mount's root is stored under. */
static void root_key(const cfsfuse_t *fs, struct cfs_id *key)
{
	if (fs->o.version)
		sfsro_root_version_key(&fs->vol, fs->o.version, key);
	else
		sfsro_root_key(&fs->vol, key);
}

int fs__source_open(cfsfuse_t *fs)
{
	if (fs->dh) /* the ring client that fetched the first root */
		return 0;
	if (fs->o.from_dir)
		return fs__local_open(fs->loop, fs->o.from_dir, &fs->local);
	return client_target_open(fs->loop, fs->o.target, fs->o.fetch_timeout_ms, &fs->dh);
}

/* The first root, from the ring (tried again while it may be on its way)
 * or from a local store (once). A ring client that got it stays open in
 * fs->dh for the reads (fs__source_open): a plain client has learned the
 * ring's servers and their round trips by now, and learning them again
 * costs wide-area round trips. Its sockets and timers live on fs->loop,
 * which the daemonizing fork hands to the child (uv_loop_fork). A local
 * store is closed again and opened anew after the fork. */
int fs__root_initial(cfsfuse_t *fs)
{
	char dir[4000];
	struct cfs_id key;
	client_t *dh = NULL;
	struct fs_local *local = NULL;
	int r;

	if (fs->o.state_dir)
		snprintf(dir, sizeof(dir), "%s", fs->o.state_dir);
	else if ((r = default_state_dir(dir, sizeof(dir))) < 0)
		return log_error_errno(r, "state directory");
	(void)cfs_mkdir_p(dir, 0700); /* a failure shows when the state is written */
	snprintf(fs->seq_path, sizeof(fs->seq_path), "%s/%s.seq", dir, fs->volname);
	snprintf(fs->root_path, sizeof(fs->root_path), "%s/%s.root", dir, fs->volname);
	fs->max_seq = load_seq(fs->seq_path);
	/* With a disk cache the blocks read before are on this machine: the
	 * kept root mounts them at once, ring or not (a check follows at
	 * once, fs__root_start_updates). Without one, a mount the ring
	 * cannot serve would only answer EIO: it fails here instead. The kept
	 * root is the newest's: a version asked for by number is fetched. */
	if (fs->o.disk_cache && !fs->o.from_dir && !fs->o.version && fs__root_from_cache(fs) == 0) {
		if (fs->root.seq > fs->max_seq) {
			fs->max_seq = fs->root.seq;
			(void)store_seq(fs->seq_path, fs->max_seq);
		}
		return 0;
	}

	root_key(fs, &key);
	if (fs->o.from_dir)
		r = fs__local_open(fs->loop, fs->o.from_dir, &local);
	else
		r = client_target_open(fs->loop, fs->o.target, fs->o.fetch_timeout_ms, &dh);
	if (r < 0)
		return r;
	uint8_t *bytes = NULL;
	size_t len = 0;
	bool served = false;
	for (uint32_t attempt = 0;; attempt++) {
		struct first *f = xcalloc(1, sizeof(*f));
		f->fs = fs;
		if (local)
			r = fs__local_get(local, &key, first_got, f);
		else if (fs->o.version)
			r = client_get(dh, &key, first_got, f);
		else if (fs->first_early)
			r = client_get_root_early(dh, &key, first_early, first_got, f);
		else
			r = client_get_root(dh, &key, first_got, f);
		if (r == 0 && (r = cfs_loop_run_until(fs->loop, &f->any)) == 0)
			r = f->status;
		free(bytes);
		bytes = f->bytes;
		len = f->len;
		f->bytes = NULL;
		if (r == 0 && f->early && !f->done) {
			f->served = true; /* its answer comes to the mount (first_after) */
			served = true;
		} else if (r == 0 || !f->early) {
			free(f);
		}
		/* A stale root: the replicas that hold the newest may be back, or
		 * repaired by replica maintenance, at the next try. */
		if (r == 0 || r == -EKEYEXPIRED || (r == -ENOENT && attempt > 0) ||
		    r == -ECONNREFUSED || attempt >= fs->o.retries || local)
			break;
		usleep(200000u * (attempt + 1));
	}
	if (r < 0) {
		free(bytes);
		bytes = NULL;
	}
	char eb[320];
	if (r == -EKEYEXPIRED)
		(void)expired_text(fs, dh, eb, sizeof(eb)); /* while dh still knows the servers' clocks */
	if (r == 0 && dh) {
		fs->dh = dh;
		dh = NULL;
	}
	if (dh || local) {
		client_free(dh);
		fs__local_free(local);
		cfs_loop_run(fs->loop); /* until the client or store has closed */
	}
	if (fs->o.from_dir && r < 0) {
		log_error("cannot %s volume %s from the store %s: %s", fs->doing ? fs->doing : "mount",
		          fs->volname, fs->o.from_dir,
		          r == -ENOENT ? (fs->o.version ? "the store holds no such version of this volume"
		                          : "the store holds no root for this volume")
		          : r == -EKEYEXPIRED ? eb : root_error(r));
		return r;
	}
	const struct client_target *t = fs->o.target;
	if (t->nboot == 0 && r == -ECONNREFUSED && access(t->sock, F_OK) != 0) {
		(void)log_error_errno(-ENOENT, "no cfsd control socket at %s: start cfsd, or give "
		                      "--bootstrap HOST:PORT (or $CFS_BOOTSTRAP)", t->sock);
		return r;
	}
	if (t->nboot == 0 && r == -ECONNREFUSED)
		return log_error_errno(r, "no cfsd answers at %s", t->sock);
	if (t->nboot > 0 && r == -EHOSTUNREACH) {
		char name[256];
		return log_error_errno(r, "cannot reach %s: no bootstrap address answered",
		                       client_target_name(t, name, sizeof(name)));
	}
	if (r < 0 && r == -ENOENT && fs->o.version)
		log_error("cannot %s volume %s@%lu: no server has that version (never published, or "
		          "its lease ended and nobody pins it; cfsctl history lists what is left)",
		          fs->doing ? fs->doing : "mount", fs->volname, (unsigned long)fs->o.version);
	else if (r < 0)
		log_error("cannot %s volume %s: %s", fs->doing ? fs->doing : "mount", fs->volname,
		          r == -EKEYEXPIRED ? eb : root_error(r));
	if (r < 0)
		return r;
	if (!fs->o.version && fs->root.seq > fs->max_seq) {
		fs->max_seq = fs->root.seq;
		(void)store_seq(fs->seq_path, fs->max_seq);
	}
	if (bytes && !fs->o.version)
		keep_root(fs, bytes, len, fs->root.seq);
	free(bytes);
	if (!served)
		fs->start.root = fs__start_mark(fs);
	rootdir_ask(fs);
	return 0;
}

/* ------------------------------------------------------------ invalidation */

static void *inval_main(void *arg)
{
	cfsfuse_t *fs = arg;

	pthread_mutex_lock(&fs->inval_lock);
	for (;;) {
		while (!fs->inval_head && !fs->inval_stop)
			pthread_cond_wait(&fs->inval_cond, &fs->inval_lock);
		if (fs->inval_stop)
			break;
		struct inval *v = fs->inval_head;
		fs->inval_head = v->next;
		if (!fs->inval_head)
			fs->inval_tail = &fs->inval_head;
		pthread_mutex_unlock(&fs->inval_lock);
		if (v->name)
			(void)fuse_lowlevel_notify_inval_entry(fs->se, v->parent, v->name, strlen(v->name));
		if (v->ino)
			(void)fuse_lowlevel_notify_inval_inode(fs->se, v->ino, 0, 0);
		free(v->name);
		free(v);
		pthread_mutex_lock(&fs->inval_lock);
	}
	pthread_mutex_unlock(&fs->inval_lock);
	return NULL;
}

void fs__inval_start(cfsfuse_t *fs)
{
	pthread_mutex_init(&fs->inval_lock, NULL);
	pthread_cond_init(&fs->inval_cond, NULL);
	fs->inval_tail = &fs->inval_head;
	fs->inval_started = pthread_create(&fs->inval_thread, NULL, inval_main, fs) == 0;
}

void fs__inval_stop(cfsfuse_t *fs)
{
	if (!fs->inval_started)
		return;
	pthread_mutex_lock(&fs->inval_lock);
	fs->inval_stop = true;
	pthread_cond_signal(&fs->inval_cond);
	pthread_mutex_unlock(&fs->inval_lock);
	pthread_join(fs->inval_thread, NULL);
	for (struct inval *v = fs->inval_head, *next; v; v = next) {
		next = v->next;
		free(v->name);
		free(v);
	}
	for (struct inval *v = fs->negatives, *next; v; v = next) {
		next = v->next;
		free(v->name);
		free(v);
	}
	pthread_mutex_destroy(&fs->inval_lock);
	pthread_cond_destroy(&fs->inval_cond);
}

#define NEGATIVES_MAX 65536

bool fs__negative_add(cfsfuse_t *fs, uint64_t parent, const char *name)
{
	if (fs->nnegatives >= NEGATIVES_MAX)
		return false;
	struct inval *v = xcalloc(1, sizeof(*v));
	v->parent = parent;
	v->name = xstrdup(name);
	v->next = fs->negatives;
	fs->negatives = v;
	fs->nnegatives++;
	return true;
}

static void queue_inval(void *arg, struct fnode *n)
{
	cfsfuse_t *fs = arg;
	struct inval *v = xcalloc(1, sizeof(*v));

	v->parent = n->parent;
	v->name = xstrdup((const char *)n->name);
	v->ino = n->ino;
	*fs->inval_tail = v;
	fs->inval_tail = &v->next;
}

/* ------------------------------------------------------------ updates */

static void switch_root(cfsfuse_t *fs, const struct sfsro_root *r)
{
	struct fnode *root = fs__node_get(fs->nodes, 1);
	uint64_t old = fs->root.seq;

	fs->max_seq = r->seq;
	(void)store_seq(fs->seq_path, r->seq);
	fs->root = *r;
	root->key = r->root_dir;
	root->mode = r->dir_mode;
	root->mtime_s = r->mtime_s;
	root->mtime_ns = r->mtime_ns;
	root->seq = r->seq;
	fs->st.root_switches++;
	log_info("volume %s: now at sequence %lu (was %lu)", fs->volname, (unsigned long)r->seq,
	         (unsigned long)old);
	fs__census_start(fs->census);
	/* Every name the kernel knows is looked up again, in the new tree;
	 * open files keep the inode they opened. */
	pthread_mutex_lock(&fs->inval_lock);
	struct inval *v = xcalloc(1, sizeof(*v));
	v->ino = 1;
	*fs->inval_tail = v;
	fs->inval_tail = &v->next;
	fs__nodes_each(fs->nodes, queue_inval, fs);
	if (fs->negatives) {
		struct inval *last = fs->negatives;
		while (last->next)
			last = last->next;
		*fs->inval_tail = fs->negatives;
		fs->inval_tail = &last->next;
		fs->negatives = NULL;
		fs->nnegatives = 0;
	}
	pthread_cond_signal(&fs->inval_cond);
	pthread_mutex_unlock(&fs->inval_lock);
}

static void answer(cfsfuse_t *fs, const fuse_req_t *reqs, const uint64_t *before, uint32_t n,
                   int status)
{
	for (uint32_t i = 0; i < n; i++) {
		struct cfs_update_reply out = { .seq_before = before[i], .seq_now = fs->root.seq,
		                                .status = status };
		fuse_reply_ioctl(reqs[i], 0, &out, sizeof(out));
	}
}

void fs__root_update_answer(cfsfuse_t *fs, int status)
{
	fuse_req_t reqs[FS_UPDATE_WAITERS_MAX];
	uint64_t before[FS_UPDATE_WAITERS_MAX];
	uint32_t n = fs__updq_take_all(&fs->upd, reqs, before);

	answer(fs, reqs, before, n, status);
}

static int update_start(cfsfuse_t *fs);

/* A check ended with status: answer the asks it was for, and start the
 * next for those that came while it ran. */
static void update_end(cfsfuse_t *fs, int status)
{
	fuse_req_t reqs[FS_UPDATE_WAITERS_MAX];
	uint64_t before[FS_UPDATE_WAITERS_MAX];
	uint32_t n;
	int r;

	bool again = fs__updq_end(&fs->upd, reqs, before, &n);
	answer(fs, reqs, before, n, status);
	if (again && (r = update_start(fs)) < 0)
		fs__root_update_answer(fs, r);
}

/* Whether a check with status st reached anyone (user.cfs.offline): a
 * root came back, accepted or refused. Anything else (no daemon, no answer, no root
 * anywhere) leaves the mount offline: it serves on from its caches, and
 * a block neither cache holds is EIO after the usual bound. */
static void note_reach(cfsfuse_t *fs, int st)
{
	bool off = !(st == 0 || st == -ESTALE || st == -EKEYEXPIRED || st == -EBADMSG ||
	             st == -EKEYREJECTED);

	if (fs->local) /* a dir: store on this machine: nothing to reach */
		return;
	if (off && (!fs->offline || !fs->reach_known))
		log_warn("volume %s: offline: the root check reached nobody (%s); serving sequence %lu "
		         "from the caches", fs->volname, root_error(st), (unsigned long)fs->root.seq);
	else if (!off && fs->offline)
		log_info("volume %s: online: the root check was answered", fs->volname);
	fs->offline = off;
	fs->reach_known = true;
}

static void update_got(void *arg, const struct dhash_get_result *g)
{
	cfsfuse_t *fs = arg;
	struct sfsro_root r;
	int st;

	if (g->status == -ECANCELED || fs->stopping) {
		fs->upd.checking = false;
		fs__root_update_answer(fs, -ESHUTDOWN);
		return;
	}
	st = fs__root_check(fs, g, &r);
	note_reach(fs, st);
	if (st < 0) {
		char eb[320];
		if (st == -ESTALE || st == -EKEYEXPIRED || st == -EBADMSG || st == -EKEYREJECTED)
			log_warn("volume %s: refusing the root the ring gave: %s", fs->volname,
			         st == -EKEYEXPIRED ? expired_text(fs, fs->dh, eb, sizeof(eb)) : root_error(st));
		else
			log_debug("volume %s: root check failed: %s", fs->volname, root_error(st));
		update_end(fs, st);
		return;
	}
	if (r.seq > fs->root.seq)
		switch_root(fs, &r);
	if (r.seq > fs->root_kept_seq && !fs->o.version)
		keep_root(fs, g->data, g->len, r.seq);
	update_end(fs, 0);
}

/* Start a check unless one is out; 0, or a negative errno (then the asks
 * it was for are still waiting: the caller answers them). */
static int update_start(cfsfuse_t *fs)
{
	struct cfs_id key;
	int r;

	if (fs->stopping)
		return -ESHUTDOWN;
	if (!fs__updq_begin(&fs->upd))
		return 0;
	root_key(fs, &key);
	if ((r = get_from(fs->dh, fs->local, &key, fs->o.version != 0, update_got, fs)) < 0) {
		fs->upd.checking = false;
		fs->upd.ncur = 0;
		note_reach(fs, r);
	}
	return r;
}

static void on_update(uv_timer_t *t)
{
	(void)update_start(t->data);
}

void fs__root_update_now(cfsfuse_t *fs, fuse_req_t req)
{
	int r;

	switch (fs__updq_add(&fs->upd, req, fs->root.seq)) {
	case FS_UPDQ_FULL:
		fuse_reply_err(req, EBUSY);
		return;
	case FS_UPDQ_WAIT: /* the check that runs may predate this ask: the next answers it */
		return;
	}
	if ((r = update_start(fs)) < 0)
		fs__root_update_answer(fs, r);
}

/* A mount started from the kept root checks at once, --update 0 or not:
 * the root the ring has now is the one a mount without the kept root
 * would have fetched before mounting. */
void fs__root_start_updates(cfsfuse_t *fs)
{
	if (fs->o.version) /* a version asked for by number never changes */
		return;
	uint64_t period = (uint64_t)fs->o.update_s * 1000;

	if (period || fs->root_from_cache)
		uv_timer_start(&fs->update_timer, on_update, fs->root_from_cache ? 0 : period, period);
}
