/* cfs-get's rules (cfs-fuse/getplan.c): which names may be created, when
 * a file already in place is skipped, the temporary names and their
 * leftovers, where a single entry goes, and a local file's content key. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfs-fuse/internal.h"

static bool safe(const char *s)
{
	return fs__get_name_is_safe((const uint8_t *)s, strlen(s));
}

Test(getplan, unsafe_names_are_refused)
{
	char longname[SFSRO_NAME_MAX + 2];

	cr_assert(!safe(""));
	cr_assert(!safe("."));
	cr_assert(!safe(".."));
	cr_assert(!safe("a/b"));
	cr_assert(!safe("/"));
	cr_assert(!safe("../etc"));
	cr_assert(!fs__get_name_is_safe((const uint8_t *)"a\0b", 3));
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	cr_assert(!safe(longname));
	longname[SFSRO_NAME_MAX] = 0;
	cr_assert(safe(longname));
	cr_assert(safe("..."));
	cr_assert(safe(".hidden"));
	cr_assert(safe("a b\nc"));
	cr_assert(safe("caf\xe9"));
}

static struct stat file_st(mode_t type, off_t size, time_t s, long ns)
{
	struct stat st = { 0 };
	st.st_mode = type | 0644;
	st.st_size = size;
	st.st_mtim.tv_sec = s;
	st.st_mtim.tv_nsec = ns;
	return st;
}

Test(getplan, skip_needs_a_regular_file_of_the_same_size_and_mtime)
{
	struct sfsro_entry e = { .type = SFSRO_T_FILE, .size = 5000, .mtime_s = 1700000000, .mtime_ns = 123 };
	struct stat st = file_st(S_IFREG, 5000, 1700000000, 123);

	cr_assert_eq(fs__get_decide(NULL, &e, false), FS_GET_COPY);
	cr_assert_eq(fs__get_decide(&st, &e, false), FS_GET_SKIP);
	cr_assert_eq(fs__get_decide(&st, &e, true), FS_GET_CHECK);
	st = file_st(S_IFREG, 4999, 1700000000, 123);
	cr_assert_eq(fs__get_decide(&st, &e, false), FS_GET_COPY);
	st = file_st(S_IFREG, 5000, 1700000001, 123);
	cr_assert_eq(fs__get_decide(&st, &e, false), FS_GET_COPY);
	st = file_st(S_IFREG, 5000, 1700000000, 124); /* a nanosecond off */
	cr_assert_eq(fs__get_decide(&st, &e, true), FS_GET_COPY);
	st = file_st(S_IFLNK, 5000, 1700000000, 123);
	cr_assert_eq(fs__get_decide(&st, &e, false), FS_GET_COPY);
	st = file_st(S_IFDIR, 5000, 1700000000, 123);
	cr_assert_eq(fs__get_decide(&st, &e, false), FS_GET_COPY);
}

Test(getplan, temporary_names_and_only_they_are_leftovers)
{
	char t[FS_GET_TEMP_LEN];

	fs__get_temp_name(t, 4242, 0);
	cr_assert_str_eq(t, ".cfs-get-4242-0.part");
	cr_assert(fs__get_is_temp_name(t));
	fs__get_temp_name(t, 2147483647, UINT64_MAX);
	cr_assert(fs__get_is_temp_name(t));
	cr_assert(strlen(t) < FS_GET_TEMP_LEN);
	cr_assert(!fs__get_is_temp_name(".cfs-get-notes"));
	cr_assert(!fs__get_is_temp_name(".cfs-get-12.part"));
	cr_assert(!fs__get_is_temp_name(".cfs-get--1.part"));
	cr_assert(!fs__get_is_temp_name(".cfs-get-1-.part"));
	cr_assert(!fs__get_is_temp_name(".cfs-get-1-2-3.part"));
	cr_assert(!fs__get_is_temp_name(".cfs-get-1-2.partx"));
	cr_assert(!fs__get_is_temp_name(".cfs-get-1-2.part/x"));
	cr_assert(!fs__get_is_temp_name("x.cfs-get-1-2.part"));
	cr_assert(!fs__get_is_temp_name(".part"));
	cr_assert(!fs__get_is_temp_name(""));
}

Test(getplan, a_single_entry_goes_into_a_directory_or_becomes_dest)
{
	char p[32];

	cr_assert_eq(fs__get_dest_path("out", true, "f", p, sizeof(p)), 0);
	cr_assert_str_eq(p, "out/f");
	cr_assert_eq(fs__get_dest_path("out/", false, "f", p, sizeof(p)), 0);
	cr_assert_str_eq(p, "out/f");
	cr_assert_eq(fs__get_dest_path("out/", true, "f", p, sizeof(p)), 0);
	cr_assert_str_eq(p, "out/f");
	cr_assert_eq(fs__get_dest_path("/", true, "f", p, sizeof(p)), 0);
	cr_assert_str_eq(p, "/f");
	cr_assert_eq(fs__get_dest_path("new-name", false, "f", p, sizeof(p)), 0);
	cr_assert_str_eq(p, "new-name");
	cr_assert_eq(fs__get_dest_path("", true, "f", p, sizeof(p)), -EINVAL);
	cr_assert_eq(fs__get_dest_path("a-directory-with-a-long-name", true, "file", p, sizeof(p)),
	             -ENAMETOOLONG);
}

static int emit_none(void *arg, const struct cfs_id *key, const uint8_t *p, size_t len)
{
	return 0;
}

static int temp_file(const uint8_t *p, size_t n)
{
	char path[] = "/tmp/cfs-getplan-XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	unlink(path);
	cr_assert_eq(write(fd, p, n), (ssize_t)n);
	return fd;
}

/* The key is cfs-publish's: data blocks of bsize, hashed as encoded, then
 * the inode over them. Built here from the parts, it must match; one byte
 * changed changes it; a file shorter than its size is -ESTALE. */
Test(getplan, local_key_is_the_published_key)
{
	enum { BS = 1024, SIZE = 3 * BS + 100 };
	uint8_t buf[SIZE], enc[BS + 64];
	struct cfs_id keys[4], want, got;
	struct sfsro_inode ino = { .size = SIZE, .mode = 0640, .mtime_s = 1234567890, .mtime_ns = 5,
	                           .bsize = BS };
	size_t len;

	for (size_t i = 0; i < SIZE; i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	for (int b = 0; b < 4; b++) {
		size_t n = b < 3 ? BS : 100;
		cr_assert_eq(sfsro_data_encode(buf + b * BS, n, enc, sizeof(enc), &len), 0);
		cfs_hash(&keys[b], enc, len);
	}
	struct sfsro_inode built = ino;
	cr_assert_eq(sfsro_build_file(&built, keys, 4, emit_none, NULL, &want), 0);

	int fd = temp_file(buf, SIZE);
	cr_assert_eq(fs__get_local_key(fd, &ino, &got), 0);
	cr_assert(cfs_id_eq(&got, &want));
	cr_assert_eq(pwrite(fd, "!", 1, 2000), 1);
	cr_assert_eq(fs__get_local_key(fd, &ino, &got), 0);
	cr_assert(!cfs_id_eq(&got, &want));
	cr_assert_eq(ftruncate(fd, SIZE - 1), 0);
	cr_assert_eq(fs__get_local_key(fd, &ino, &got), -ESTALE);
	close(fd);
}

/* A small file lives inside its inode: the key is the inode's alone. */
Test(getplan, local_key_of_an_inline_file)
{
	const char *text = "a small file, inline in its inode\n";
	struct sfsro_inode ino = { .size = strlen(text), .mode = 0600, .mtime_s = 1, .bsize = 65536 };
	struct sfsro_inode built = ino;
	struct cfs_id want, got;

	built.inline_data = (struct cfs_bytes){ (const uint8_t *)text, strlen(text) };
	cr_assert_eq(sfsro_build_file(&built, NULL, 0, emit_none, NULL, &want), 0);
	int fd = temp_file((const uint8_t *)text, strlen(text));
	cr_assert_eq(fs__get_local_key(fd, &ino, &got), 0);
	cr_assert(cfs_id_eq(&got, &want));
	ino.mode = 0644; /* the mode is part of the inode, hence of the key */
	cr_assert_eq(fs__get_local_key(fd, &ino, &got), 0);
	cr_assert(!cfs_id_eq(&got, &want));
	close(fd);
}
