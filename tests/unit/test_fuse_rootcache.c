/* cfs-fuse: the last verified root kept on disk (rootcache.c), in a temp
 * dir: its exact bytes come back, and a mount starts from it only when it
 * passes the ring's rules again — a bad signature, another volume's key,
 * a sequence below the recorded one, an expired root (unless allowed), a
 * file that is not a root or too large are refused with a one-line
 * reason, and the mount is left as it was (it fetches the root then). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfs-fuse/internal.h"

static char dir[64];
static struct cfs_seckey sk;
static struct cfs_pubkey pk;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/cfs-unit-rootcache.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(cfs_crypto_init(), 0);
	cfs_sign_keypair(&pk, &sk);
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(fuse_rootcache, .init = setup, .fini = teardown);

/* A root of pk at seq, valid until valid_until, signed with sk. */
static size_t make_root(uint64_t seq, uint64_t valid_until, uint8_t *buf, size_t cap)
{
	struct sfsro_root r = { .pk = pk, .seq = seq, .issued = 1000, .valid_until = valid_until,
	                        .dir_mode = 0755, .mtime_s = 12345 };
	size_t len;

	memset(&r.root_dir, 0x42, sizeof(r.root_dir));
	cr_assert_eq(sfsro_root_encode(&r, &sk, buf, cap, &len), 0);
	return len;
}

static void path_of(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
}

Test(fuse_rootcache, keeps_the_exact_bytes_mode_0600)
{
	uint8_t root[1024], *back;
	size_t len = make_root(5, 2000, root, sizeof(root)), blen;
	char path[128];
	struct stat st;

	path_of(path, sizeof(path), "v.root");
	cr_assert_eq(fs__rootcache_read(path, &back, &blen), -ENOENT);
	cr_assert_eq(fs__rootcache_store(path, root, len), 0);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	cr_assert_eq(fs__rootcache_read(path, &back, &blen), 0);
	cr_assert_eq(blen, len);
	cr_assert_eq(memcmp(back, root, len), 0);
	free(back);
	/* replaced, not appended to */
	len = make_root(6, 2000, root, sizeof(root));
	cr_assert_eq(fs__rootcache_store(path, root, len), 0);
	cr_assert_eq(fs__rootcache_read(path, &back, &blen), 0);
	cr_assert_eq(blen, len);
	cr_assert_eq(memcmp(back, root, len), 0);
	free(back);
}

Test(fuse_rootcache, accepts_a_good_root_at_or_above_the_recorded_seq)
{
	uint8_t root[1024];
	size_t len = make_root(5, 2000, root, sizeof(root));
	struct sfsro_root r;

	cr_assert_eq(fs__rootcache_accept(root, len, &pk, 5, 1500, &r), 0);
	cr_assert_eq(r.seq, 5);
	cr_assert_eq(r.issued, 1000);
	cr_assert_eq(r.dir_mode, 0755);
	cr_assert_eq(fs__rootcache_accept(root, len, &pk, 0, 1500, &r), 0);
}

Test(fuse_rootcache, refuses_a_bad_signature)
{
	uint8_t root[1024];
	size_t len = make_root(5, 2000, root, sizeof(root));
	struct sfsro_root r;
	char why[200];

	root[len - 3] ^= 0x01; /* in the signature */
	int st = fs__rootcache_accept(root, len, &pk, 0, 1500, &r);
	cr_assert_eq(st, -EBADMSG);
	cr_assert_str_eq(fs__rootcache_why(st, &r, 0, why, sizeof(why)),
	                 "its signature does not verify (a damaged or altered file)");
	/* a flipped byte in the signed body is caught the same way */
	len = make_root(5, 2000, root, sizeof(root));
	root[40] ^= 0x01;
	st = fs__rootcache_accept(root, len, &pk, 0, 1500, &r);
	cr_assert(st == -EBADMSG || st == -EPROTO, "a damaged body accepted: %d", st);
}

Test(fuse_rootcache, refuses_a_root_below_the_recorded_seq)
{
	uint8_t root[1024];
	size_t len = make_root(5, 2000, root, sizeof(root));
	struct sfsro_root r;
	char why[200];

	int st = fs__rootcache_accept(root, len, &pk, 6, 1500, &r);
	cr_assert_eq(st, -ESTALE);
	cr_assert_eq(r.seq, 5);
	cr_assert_str_eq(fs__rootcache_why(st, &r, 6, why, sizeof(why)),
	                 "its sequence 5 is below 6, the highest already seen (a rollback)");
}

Test(fuse_rootcache, refuses_an_expired_root_unless_allowed)
{
	uint8_t root[1024];
	size_t len = make_root(5, 2000, root, sizeof(root));
	struct sfsro_root r;
	char why[200];

	int st = fs__rootcache_accept(root, len, &pk, 0, 2001, &r);
	cr_assert_eq(st, -EKEYEXPIRED);
	fs__rootcache_why(st, &r, 0, why, sizeof(why));
	cr_assert_str_eq(why, "it expired at 1970-01-01 00:33 UTC (--expired allow reads it anyway)");
	/* now 0: the reader chose to read an archive */
	cr_assert_eq(fs__rootcache_accept(root, len, &pk, 0, 0, &r), 0);
}

Test(fuse_rootcache, refuses_another_volume_and_what_is_no_root)
{
	uint8_t root[1024], junk[100];
	size_t len = make_root(5, 2000, root, sizeof(root));
	struct cfs_pubkey other;
	struct cfs_seckey osk;
	struct sfsro_root r;
	char why[200];

	cfs_sign_keypair(&other, &osk);
	int st = fs__rootcache_accept(root, len, &other, 0, 1500, &r);
	cr_assert_eq(st, -EKEYREJECTED);
	cr_assert_str_eq(fs__rootcache_why(st, &r, 0, why, sizeof(why)),
	                 "it is signed by another volume's key");
	memset(junk, 0x93, sizeof(junk));
	st = fs__rootcache_accept(junk, sizeof(junk), &pk, 0, 1500, &r);
	cr_assert_eq(st, -EPROTO);
	cr_assert_eq(fs__rootcache_accept(root, len / 2, &pk, 0, 1500, &r), -EPROTO);
	cr_assert_eq(fs__rootcache_accept(root, 0, &pk, 0, 1500, &r), -EPROTO);
	cr_assert_str_eq(fs__rootcache_why(st, &r, 0, why, sizeof(why)),
	                 "it is not a signed root (a damaged file)");
}

Test(fuse_rootcache, refuses_a_file_over_the_cap)
{
	static uint8_t big[FS_ROOT_FILE_MAX + 1];
	char path[128];
	uint8_t *back;
	size_t blen;

	path_of(path, sizeof(path), "big.root");
	cr_assert_eq(fs__rootcache_store(path, big, sizeof(big)), -EFBIG);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(big, 1, sizeof(big), f), sizeof(big));
	fclose(f);
	cr_assert_eq(fs__rootcache_read(path, &back, &blen), -EFBIG);
	/* exactly at the cap is read (and then refused as no root) */
	cr_assert_eq(truncate(path, FS_ROOT_FILE_MAX), 0);
	cr_assert_eq(fs__rootcache_read(path, &back, &blen), 0);
	cr_assert_eq(blen, FS_ROOT_FILE_MAX);
	free(back);
}

/* The mount's side: fs__root_from_cache sets the mounted root and says
 * offline only for a root that passes; otherwise fs->root is untouched. */
static cfsfuse_t *mount_for(uint64_t max_seq)
{
	cfsfuse_t *fs = xcalloc(1, sizeof(*fs));

	fs->vol = pk;
	cfs_name_encode(fs->volname, pk.b);
	path_of(fs->root_path, sizeof(fs->root_path), "vol.root");
	fs->max_seq = max_seq;
	return fs;
}

Test(fuse_rootcache, a_mount_starts_from_a_kept_root_that_passes)
{
	uint8_t root[1024];
	uint64_t now = cfs_wall_s();
	size_t len = make_root(5, now + 3600, root, sizeof(root));
	cfsfuse_t *fs = mount_for(5);

	cr_assert_eq(fs__root_from_cache(fs), -ENOENT);
	cr_assert_not(fs->root_from_cache);
	cr_assert_eq(fs__rootcache_store(fs->root_path, root, len), 0);
	cr_assert_eq(fs__root_from_cache(fs), 0);
	cr_assert_eq(fs->root.seq, 5);
	cr_assert(fs->root_from_cache);
	cr_assert(fs->offline, "nothing has answered yet: offline until a check does");
	cr_assert_eq(fs->root_kept_seq, 5);
	free(fs);
}

Test(fuse_rootcache, a_mount_refuses_a_stale_or_expired_kept_root)
{
	uint8_t root[1024];
	uint64_t now = cfs_wall_s();
	size_t len = make_root(5, now + 3600, root, sizeof(root));
	cfsfuse_t *fs = mount_for(6);

	cr_assert_eq(fs__rootcache_store(fs->root_path, root, len), 0);
	cr_assert_eq(fs__root_from_cache(fs), -ESTALE);
	cr_assert_eq(fs->root.seq, 0);
	cr_assert_not(fs->root_from_cache);
	cr_assert_not(fs->offline);
	free(fs);

	len = make_root(5, now - 10, root, sizeof(root));
	fs = mount_for(0);
	cr_assert_eq(fs__rootcache_store(fs->root_path, root, len), 0);
	cr_assert_eq(fs__root_from_cache(fs), -EKEYEXPIRED);
	cr_assert_not(fs->root_from_cache);
	fs->o.allow_expired = true;
	cr_assert_eq(fs__root_from_cache(fs), 0);
	cr_assert_eq(fs->root.seq, 5);
	cr_assert_eq(fs->expired_warned_seq, 5, "reading an expired root is warned about");
	free(fs);
}
