/*
 * The last verified root of a volume, kept on disk: STATE_DIR/<volume>.root
 * holds the signed root's exact bytes, beside STATE_DIR/<volume>.seq (the
 * rollback state, root.c). It is written after a root was verified and
 * accepted, and after its sequence was recorded, so the file never names a
 * version above the recorded one.
 *
 * A mount with a disk cache starts from it at once (and without the ring:
 * the blocks it read before are on disk) and asks the ring for a newer
 * root in the background. The file is trusted no more than a server: its
 * bytes go through the same checks as a root from the ring — signed by
 * the volume's key, a sequence not below the recorded one, not expired
 * unless the reader allowed it — and a root that fails them is not used:
 * the mount fetches one from the ring as it does without the file.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cfs-fuse/internal.h"

int fs__rootcache_store(const char *path, const uint8_t *p, size_t len)
{
	if (len == 0 || len > FS_ROOT_FILE_MAX)
		return -EFBIG;
	return cfs_write_file_atomic(path, p, len, 0600);
}

int fs__rootcache_read(const char *path, uint8_t **ret_p, size_t *ret_len)
{
	uint8_t *buf;
	size_t len = 0;
	int fd, r = 0;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	/* one byte more than the cap tells a file over it from one at it */
	buf = xmalloc(FS_ROOT_FILE_MAX + 1);
	while (len <= FS_ROOT_FILE_MAX) {
		ssize_t n = read(fd, buf + len, FS_ROOT_FILE_MAX + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (r == 0 && len > FS_ROOT_FILE_MAX)
		r = -EFBIG;
	if (r < 0) {
		free(buf);
		return r;
	}
	*ret_p = buf;
	*ret_len = len;
	return 0;
}

int fs__rootcache_accept(const uint8_t *p, size_t len, const struct cfs_pubkey *vol,
                         uint64_t min_seq, uint64_t now, struct sfsro_root *ret)
{
	int r;

	memset(ret, 0, sizeof(*ret));
	/* the walker's root step (sfsro_walker_root): decode with the
	 * signature over the bytes as stored, then CFS 5.5's rules */
	if ((r = sfsro_root_decode(p, len, ret)) < 0)
		return r == -EBADMSG ? r : -EPROTO;
	return sfsro_root_check(ret, vol, min_seq, now);
}

const char *fs__rootcache_why(int r, const struct sfsro_root *rr, uint64_t min_seq, char *buf,
                              size_t n)
{
	char until[32];
	time_t u = (time_t)rr->valid_until;
	struct tm tm;

	switch (r) {
	case -EBADMSG:
		snprintf(buf, n, "its signature does not verify (a damaged or altered file)");
		break;
	case -EPROTO:
		snprintf(buf, n, "it is not a signed root (a damaged file)");
		break;
	case -EFBIG:
		snprintf(buf, n, "it is larger than any root (%u bytes at most)", FS_ROOT_FILE_MAX);
		break;
	case -EKEYREJECTED:
		snprintf(buf, n, "it is signed by another volume's key");
		break;
	case -ESTALE:
		snprintf(buf, n, "its sequence %lu is below %lu, the highest already seen (a rollback)",
		         (unsigned long)rr->seq, (unsigned long)min_seq);
		break;
	case -EKEYEXPIRED:
		strftime(until, sizeof(until), "%Y-%m-%d %H:%M UTC", gmtime_r(&u, &tm));
		snprintf(buf, n, "it expired at %s (--expired allow reads it anyway)", until);
		break;
	default:
		snprintf(buf, n, "%s", strerror(-r));
	}
	return buf;
}

/* Shared with the roots fetched (root.c). */
void fs__root_warn_expired(cfsfuse_t *fs, const struct sfsro_root *r)
{
	if (!fs->o.allow_expired || fs->o.version || r->valid_until >= cfs_wall_s() ||
	    r->seq == fs->expired_warned_seq)
		return;
	char until[32];
	time_t u = (time_t)r->valid_until;
	struct tm tm;
	strftime(until, sizeof(until), "%Y-%m-%d %H:%M UTC", gmtime_r(&u, &tm));
	log_warn("volume %s: root sequence %lu expired at %s; read anyway (--expired allow): "
	         "nobody is refreshing it, and it may be gone from the ring when its blocks' "
	         "leases end", fs->volname, (unsigned long)r->seq, until);
	fs->expired_warned_seq = r->seq;
}

int fs__root_from_cache(cfsfuse_t *fs)
{
	struct sfsro_root rr;
	uint8_t *p;
	size_t len;
	char why[200];
	int r;

	if ((r = fs__rootcache_read(fs->root_path, &p, &len)) == -ENOENT)
		return r; /* never kept: fetch it, as without the file */
	memset(&rr, 0, sizeof(rr));
	if (r == 0) {
		/* now 0: no expiry, when the reader chose to read an archive */
		r = fs__rootcache_accept(p, len, &fs->vol, fs->max_seq,
		                         fs->o.allow_expired ? 0 : cfs_wall_s(), &rr);
		free(p);
	}
	if (r < 0) {
		log_warn("volume %s: not starting from the cached root %s: %s; asking the ring",
		         fs->volname, fs->root_path, fs__rootcache_why(r, &rr, fs->max_seq, why, sizeof(why)));
		return r;
	}
	fs->root = rr;
	fs->root_kept_seq = rr.seq;
	fs->root_from_cache = true;
	/* nothing has answered this mount yet: offline until a check does */
	fs->offline = true;
	fs__root_warn_expired(fs, &rr);
	uint64_t now = cfs_wall_s();
	log_info("volume %s: starting from the cached root (sequence %lu, issued %lu s ago); "
	         "asking the ring for a newer one", fs->volname, (unsigned long)rr.seq,
	         (unsigned long)(now > rr.issued ? now - rr.issued : 0));
	return 0;
}
