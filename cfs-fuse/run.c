/*
 * The mount's loop (cfsfuse_run): /dev/fuse is polled by the libuv loop
 * that also carries the DHash client, a bounded number of requests read
 * per wake-up and handed to the operations (ops.c). Start-up fetches the
 * root before mounting, opens the block source and the caches, and goes
 * into the background if asked; SIGTERM and SIGINT unmount and stop.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfs-fuse/internal.h"

#define READS_PER_WAKEUP 64

static void on_closed(uv_handle_t *h)
{
}

static void fs_stop(cfsfuse_t *fs)
{
	if (fs->stopping)
		return;
	fs->stopping = true;
	uv_poll_stop(&fs->poll);
	uv_close((uv_handle_t *)&fs->poll, on_closed);
	uv_close((uv_handle_t *)&fs->sigterm, on_closed);
	uv_close((uv_handle_t *)&fs->sigint, on_closed);
	uv_close((uv_handle_t *)&fs->update_timer, on_closed);
	fs__census_close(fs->census);
	fs__dirpf_close(fs->dirpf);
	client_free(fs->dh);
	fs->dh = NULL;
	fs__local_free(fs->local);
	fs->local = NULL;
	fs__root_update_answer(fs, -ESHUTDOWN);
}

/* Give the mount a 1 MiB read-ahead (the kernel's default for FUSE is
 * 128 KiB): root can raise its backing device's setting in sysfs. The
 * device number comes from mountinfo, since a stat of the mountpoint would
 * wait for this very process to answer. */
static void raise_readahead(const char *mountpoint)
{
	char real[4096], line[8192], dev[32] = "", path[128];
	FILE *f;

	if (geteuid() != 0 || !realpath(mountpoint, real) || !(f = fopen("/proc/self/mountinfo", "r")))
		return;
	while (fgets(line, sizeof(line), f)) {
		char d[32], mp[4096];
		if (sscanf(line, "%*s %*s %31s %*s %4095s", d, mp) == 2 && strcmp(mp, real) == 0)
			snprintf(dev, sizeof(dev), "%s", d); /* the last one is on top */
	}
	fclose(f);
	if (!dev[0])
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, "1024", 4) != 4)
			log_debug("could not raise read-ahead at %s", path);
		close(fd);
	}
}

static void on_fuse(uv_poll_t *p, int status, int events)
{
	cfsfuse_t *fs = p->data;

	for (int i = 0; i < READS_PER_WAKEUP && !fs->stopping; i++) {
		int r = fuse_session_receive_buf(fs->se, &fs->buf);
		if (r == -EINTR)
			continue;
		if (r == -EAGAIN)
			return;
		if (r <= 0 || fuse_session_exited(fs->se)) {
			if (r < 0)
				log_error_errno(r, "reading /dev/fuse");
			log_info("%s was unmounted", fs->volname);
			fs_stop(fs);
			return;
		}
		fuse_session_process_buf(fs->se, &fs->buf);
		if (fs->inited && !fs->readahead_set) {
			/* the INIT reply has just set the kernel's value */
			fs->readahead_set = true;
			raise_readahead(fs->mountpoint);
		}
	}
}

static void on_signal(uv_signal_t *s, int signum)
{
	cfsfuse_t *fs = s->data;

	log_info("signal %d: unmounting", signum);
	fuse_session_unmount(fs->se);
	fs_stop(fs);
}

/* The volume's block cache on disk, when asked for; a mount goes on
 * without one it cannot open (another mount of the volume holds it). */
static dhash_cache_t *open_disk_cache(cfsfuse_t *fs)
{
	char dir[4096];
	dhash_cache_t *c;

	if (!fs->o.disk_cache || !fs->o.disk_cache_bytes)
		return NULL;
	if (snprintf(dir, sizeof(dir), "%s/%s", fs->o.disk_cache, fs->volname) >= (int)sizeof(dir)) {
		log_warn("disk cache path too long; going on without one");
		return NULL;
	}
	int r = dhash_cache_open(dir, fs->o.disk_cache_bytes, &c);
	if (r < 0) {
		log_warn("cannot use the disk cache %s (%s); going on without one", dir,
		         r == -EBUSY ? "another mount of this volume uses it" : strerror(-r));
		return NULL;
	}
	uint64_t blocks, bytes, evicted;
	dhash_cache_totals(c, &blocks, &bytes, &evicted);
	log_info("disk cache %s: %lu blocks, %lu MiB (bound %lu MiB)", dir, (unsigned long)blocks,
	         (unsigned long)(bytes >> 20), (unsigned long)(fs->o.disk_cache_bytes >> 20));
	return c;
}

uint64_t fs__start_mark(const cfsfuse_t *fs)
{
	uint64_t d = cfs_now_us() - fs->start.t0;
	return d ? d : 1;
}

int cfsfuse_expired_arg(const char *val)
{
	return !strcmp(val, "allow") ? 1 : !strcmp(val, "refuse") ? 0 : -1;
}

void cfsfuse_options_default(struct cfsfuse_options *o)
{
	memset(o, 0, sizeof(*o));
	o->cache_bytes = 64u << 20;
	o->fetch_timeout_ms = 10000;
	o->retries = 2;
	o->max_fetches = 24;
	o->disk_cache_bytes = 1ull << 30;
	o->prefetch_init = 4;
	o->prefetch_max = 64;
	o->update_s = 60;
}

/* Listen to the kernel, the signals and the root's update timer. */
static void start_serving(cfsfuse_t *fs)
{
	int fd = fuse_session_fd(fs->se);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	uv_poll_init(fs->loop, &fs->poll, fd);
	fs->poll.data = fs;
	uv_poll_start(&fs->poll, UV_READABLE, on_fuse);
	uv_signal_init(fs->loop, &fs->sigterm);
	uv_signal_init(fs->loop, &fs->sigint);
	fs->sigterm.data = fs->sigint.data = fs;
	uv_signal_start(&fs->sigterm, on_signal, SIGTERM);
	uv_signal_start(&fs->sigint, on_signal, SIGINT);
	uv_timer_init(fs->loop, &fs->update_timer);
	fs->update_timer.data = fs;
	fs__inval_start(fs);
	fs__root_start_updates(fs);
	fs__census_start(fs->census);
}

/* Mount, then serve until a signal. The root is fetched before anything is
 * mounted (a volume that cannot be found leaves no mount behind) on the
 * same loop that serves later, which fuse_daemonize's fork hands to the
 * child; the labels at the end unwind in the reverse order of setting up. */
int cfsfuse_run(const struct cfs_pubkey *vol, const char *mountpoint,
                const struct cfsfuse_options *o, int fuse_argc, char **fuse_argv)
{
	cfsfuse_t *fs = xcalloc(1, sizeof(*fs));
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	char opts[512];
	int rc = 1;

	fs->start.t0 = cfs_now_us();
	fs->o = *o;
	fs->vol = *vol;
	cfs_name_encode(fs->volname, vol->b);
	fs->window = o->prefetch_init ? o->prefetch_init : 1;
	fs->loop = uv_default_loop();
	fs->first_early = true;
	if (fs__root_initial(fs) < 0)
		goto out_free;

	snprintf(opts, sizeof(opts), "default_permissions,fsname=cfs:%.16s,subtype=cfs", fs->volname);
	fuse_opt_add_arg(&args, "cfs-mount");
	fuse_opt_add_arg(&args, "-o");
	fuse_opt_add_arg(&args, opts);
	if (o->debug)
		fuse_opt_add_arg(&args, "-d");
	for (int i = 0; i < fuse_argc; i++)
		fuse_opt_add_arg(&args, fuse_argv[i]);
	/* last, so that no "rw" given before can undo it: libfuse applies the
	 * mount flags in order */
	fuse_opt_add_arg(&args, "-o");
	fuse_opt_add_arg(&args, "ro");
	if (!(fs->se = fuse_session_new(&args, &fs__ops, sizeof(fs__ops), fs))) {
		log_error("bad FUSE options");
		goto out_args;
	}
	if (fuse_session_mount(fs->se, mountpoint) != 0) {
		log_error("cannot mount at %s (is /dev/fuse there, the directory empty and ours?)",
		          mountpoint);
		goto out_session;
	}
	fs->mountpoint = mountpoint;
	fs->start.mounted = fs__start_mark(fs);
	printf("%s\n", mountpoint);
	fflush(stdout);
	log_info("mounted volume %s (sequence %lu) at %s", fs->volname, (unsigned long)fs->root.seq,
	         mountpoint);
	if (fuse_daemonize(o->foreground) != 0)
		goto out_unmount;
	if (!o->foreground)
		fs__log_to_syslog("cfs-mount");
	/* the root was fetched on this loop before the fork, and its ring
	 * client (a UDP socket, timers, FETCHes to replicas beyond the
	 * root's read quorum still out) lives on it: the child takes the
	 * loop's kernel state over and goes on where the parent stopped */
	if (!o->foreground && uv_loop_fork(fs->loop) != 0)
		log_warn("cannot reinitialise the event loop after daemonizing");

	if (fs__source_open(fs) < 0)
		goto out_unmount;
	/* a local store is a disk already: no cache of it on disk */
	fs->blocks = fs__blocks_new(fs->loop, fs->dh, fs->local, o,
	                            fs->local ? NULL : open_disk_cache(fs));
	if (fs->rootdir_bytes) { /* the top directory came while mounting */
		fs__blk_seed(fs->blocks, &fs->rootdir_key, fs->rootdir_bytes, fs->rootdir_len);
		free(fs->rootdir_bytes);
		fs->rootdir_bytes = NULL;
	}
	fs->nodes = fs__nodes_new();
	fs->census = fs__census_new(fs);
	fs->dirpf = fs__dirpf_new(fs);
	struct fnode *root = fs__node_get(fs->nodes, 1);
	root->key = fs->root.root_dir;
	root->mode = fs->root.dir_mode;
	root->mtime_s = fs->root.mtime_s;
	root->mtime_ns = fs->root.mtime_ns;
	root->seq = fs->root.seq;

	start_serving(fs);
	cfs_loop_run(fs->loop);
	rc = 0;

	fs__inval_stop(fs);
	fs__census_free(fs->census);
	fs__dirpf_close(fs->dirpf);
	fs__blocks_free(fs->blocks);
	fs__dirpf_free(fs->dirpf);
	fs__nodes_free(fs->nodes);
	free(fs->buf.mem);
	uv_loop_close(fs->loop);
out_unmount:
	fuse_session_unmount(fs->se);
out_session:
	fuse_session_destroy(fs->se);
out_args:
	fuse_opt_free_args(&args);
out_free:
	if (fs->dh && !fs->stopping) { /* the first root's client, never served from */
		client_free(fs->dh);
		cfs_loop_run(fs->loop);
	}
	free(fs->rootdir_bytes);
	free(fs);
	return rc;
}
