/*
 * cfs-get's rules, apart from its I/O so that unit tests reach them: which
 * names may be created, what a file already at the destination means (skip
 * it, check it, or copy it again), the temporary names and how leftovers
 * of an interrupted run are recognised, where a single entry goes, and the
 * content key of a local file as cfs-publish would compute it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfs-fuse/internal.h"

/* A verified directory cannot hold such a name (the format refuses it),
 * but the name becomes a path on this machine, so it is checked again:
 * nothing may climb out of the directory it is written into. */
bool fs__get_name_is_safe(const uint8_t *name, size_t len)
{
	if (len == 0 || len > SFSRO_NAME_MAX)
		return false;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return false;
	return !memchr(name, '/', len) && !memchr(name, 0, len);
}

/* Size and mtime (to the nanosecond, as cfs-get sets it) are the cheap
 * test rsync and make use; a file rewritten since with the same size in
 * the same nanosecond is what --check is for. Anything but a regular file
 * (a directory, a link, a FIFO) is never taken for the file: copying it
 * again replaces a link or fails on a directory, with its own message. */
int fs__get_decide(const struct stat *st, const struct sfsro_entry *e, bool check)
{
	if (!st || !S_ISREG(st->st_mode))
		return FS_GET_COPY;
	if ((uint64_t)st->st_size != e->size || st->st_mtim.tv_sec != e->mtime_s ||
	    (uint32_t)st->st_mtim.tv_nsec != e->mtime_ns)
		return FS_GET_COPY;
	return check ? FS_GET_CHECK : FS_GET_SKIP;
}

#define TEMP_PREFIX ".cfs-get-"
#define TEMP_SUFFIX ".part"

void fs__get_temp_name(char buf[static FS_GET_TEMP_LEN], long pid, uint64_t n)
{
	snprintf(buf, FS_GET_TEMP_LEN, TEMP_PREFIX "%ld-%llu" TEMP_SUFFIX, pid, (unsigned long long)n);
}

/* Exactly what fs__get_temp_name makes: the prefix, digits, '-', digits,
 * the suffix. A user's own ".cfs-get-notes" is not one. */
bool fs__get_is_temp_name(const char *name)
{
	size_t pl = strlen(TEMP_PREFIX), sl = strlen(TEMP_SUFFIX), len = strlen(name);
	const char *p = name + pl, *end = name + len - sl;
	int digits = 0, dashes = 0;

	if (len < pl + sl + 3 || strncmp(name, TEMP_PREFIX, pl) != 0 || strcmp(end, TEMP_SUFFIX) != 0)
		return false;
	for (; p < end; p++) {
		if (*p >= '0' && *p <= '9') {
			digits++;
		} else if (*p == '-' && digits && !dashes) {
			dashes++;
			digits = 0;
		} else {
			return false;
		}
	}
	return dashes == 1 && digits > 0;
}

/* cp's rule: into DEST when it is a directory (or is written as one, with
 * a trailing '/'), else as DEST. */
int fs__get_dest_path(const char *dest, bool dest_is_dir, const char *name, char *buf, size_t n)
{
	size_t dl = strlen(dest);
	int r;

	if (dl == 0)
		return -EINVAL;
	if (dest_is_dir || dest[dl - 1] == '/')
		r = snprintf(buf, n, "%s%s%s", dest, dest[dl - 1] == '/' ? "" : "/", name);
	else
		r = snprintf(buf, n, "%s", dest);
	return r < 0 || (size_t)r >= n ? -ENAMETOOLONG : 0;
}

static int no_emit(void *arg, const struct cfs_id *key, const uint8_t *p, size_t len)
{
	return 0;
}

/* cfs-publish's own steps (publisher/publish.c): data blocks of bsize
 * bytes, each key the hash of the encoded block, then the indirect levels
 * and the inode, all deterministic. With the volume's mode, mtime and
 * block size, the key equals the entry's exactly when the bytes do. */
int fs__get_local_key(int fd, const struct sfsro_inode *like, struct cfs_id *ret)
{
	struct sfsro_inode ino = { .size = like->size, .mode = like->mode, .mtime_s = like->mtime_s,
	                           .mtime_ns = like->mtime_ns, .bsize = like->bsize };
	uint32_t bs = like->bsize ? like->bsize : SFSRO_BLOCK_SIZE_DEFAULT;
	uint64_t nblocks = 0, off = 0;
	struct cfs_id *keys = NULL;
	uint8_t *chunk, *enc;
	int r = 0;

	if (bs > SFSRO_BLOCK_SIZE_MAX)
		return -EINVAL;
	ino.bsize = bs;
	chunk = xmalloc(bs);
	enc = xmalloc((size_t)bs + 64); /* a data block's encoding beyond its payload: under 64 */
	if (ino.size > SFSRO_INLINE_MAX)
		keys = xmalloc((ino.size / bs + 1) * sizeof(*keys));
	while (off < ino.size) {
		size_t want = ino.size - off < bs ? (size_t)(ino.size - off) : bs, got = 0, len;
		while (got < want) {
			ssize_t k = pread(fd, chunk + got, want - got, (off_t)(off + got));
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				r = k < 0 ? -errno : -ESTALE; /* shorter than its size */
				goto out;
			}
			got += (size_t)k;
		}
		off += got;
		if (ino.size <= SFSRO_INLINE_MAX) {
			ino.inline_data = (struct cfs_bytes){ chunk, got };
			continue;
		}
		if ((r = sfsro_data_encode(chunk, got, enc, (size_t)bs + 64, &len)) < 0)
			goto out;
		cfs_hash(&keys[nblocks++], enc, len);
	}
	r = sfsro_build_file(&ino, keys, nblocks, no_emit, NULL, ret);
out:
	free(keys);
	free(enc);
	free(chunk);
	return r;
}
