/* cfsd's denylist: its lines, its entries and volumes, its bound, and its
 * file (written whole each time, read back the same). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cfsd/deny.h"

static char dir[64], path[128];

static void setup(void)
{
	cfs_log_init("test", CFS_LOG_ERROR);
	cr_assert_eq(cfs_crypto_init(), 0);
	snprintf(dir, sizeof(dir), "/tmp/cfs-unit-denylist.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/%s", dir, CFSD_DENY_FILE);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(denylist, .init = setup, .fini = teardown);

static struct cfs_id key(uint8_t x)
{
	struct cfs_id k;

	cfs_hash(&k, &x, 1);
	return k;
}

static struct cfs_pubkey vol(uint8_t x)
{
	struct cfs_pubkey pk;

	memset(pk.b, x, sizeof(pk.b));
	return pk;
}

static char *read_all(const char *p)
{
	FILE *f = fopen(p, "r");
	static char buf[65536];
	size_t n;

	cr_assert_not_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

Test(denylist, lines_parse_strictly)
{
	struct cfsd_deny_entry e;
	const char *why;
	char hex[65], name[CFS_NAME_LEN + 1], line[200];
	struct cfs_id k = key(1);
	struct cfs_pubkey pk = vol(7);

	cfs_id_hex(&k, hex);
	cfs_name_encode(name, pk.b);
	cr_assert_eq(cfsd_deny_parse_line(hex, &e, &why), 0);
	cr_assert(cfs_id_eq(&e.key, &k));
	cr_assert_not(e.has_volume);
	snprintf(line, sizeof(line), "  %s\t%s \n", hex, name);
	cr_assert_eq(cfsd_deny_parse_line(line, &e, &why), 0);
	cr_assert(e.has_volume);
	cr_assert_arr_eq(e.volume.b, pk.b, 32);
	/* comments and blank lines are nothing */
	cr_assert_eq(cfsd_deny_parse_line("# a comment\n", &e, &why), 1);
	cr_assert_eq(cfsd_deny_parse_line("\n", &e, &why), 1);
	cr_assert_eq(cfsd_deny_parse_line("", &e, &why), 1);
	/* anything else is refused, with a reason */
	cr_assert_eq(cfsd_deny_parse_line("abc", &e, &why), -EINVAL);
	cr_assert_not_null(why);
	snprintf(line, sizeof(line), "%.63sg", hex);
	cr_assert_eq(cfsd_deny_parse_line(line, &e, &why), -EINVAL);
	snprintf(line, sizeof(line), "%s0", hex); /* 65 digits */
	cr_assert_eq(cfsd_deny_parse_line(line, &e, &why), -EINVAL);
	snprintf(line, sizeof(line), "%s notavolume", hex);
	cr_assert_eq(cfsd_deny_parse_line(line, &e, &why), -EINVAL);
	snprintf(line, sizeof(line), "%s %s extra", hex, name);
	cr_assert_eq(cfsd_deny_parse_line(line, &e, &why), -EINVAL);
}

Test(denylist, volumes_and_keys_are_counted_and_lifted_apart)
{
	cfsd_denylist_t *l = cfsd_denylist_new(NULL, 100);
	struct cfs_id a[3] = { key(1), key(2), key(3) }, b[2] = { key(3), key(4) }, k5 = key(5);
	struct cfs_pubkey va = vol(1), vb = vol(2);
	struct cfs_id *freed;
	uint32_t fresh, n;

	cr_assert_eq(cfsd_denylist_add(l, a, 3, &va, &fresh), 0);
	cr_assert_eq(fresh, 3);
	cr_assert_eq(cfsd_denylist_add(l, b, 2, &vb, &fresh), 0);
	cr_assert_eq(fresh, 1); /* key 3 is A's too */
	cr_assert_eq(cfsd_denylist_add(l, &k5, 1, NULL, &fresh), 0);
	cr_assert_eq(cfsd_denylist_add(l, &a[0], 1, NULL, &fresh), 0);
	cr_assert_eq(fresh, 0);
	cr_assert_eq(cfsd_denylist_entries(l), 7);
	cr_assert_eq(cfsd_denylist_keys(l), 5);
	/* the same again adds nothing */
	cr_assert_eq(cfsd_denylist_add(l, a, 3, &va, &fresh), 0);
	cr_assert_eq(cfsd_denylist_entries(l), 7);

	/* lifting A frees only what no other entry names: key 2 (1 is
	 * denied alone too, 3 is B's) */
	cr_assert_eq(cfsd_denylist_remove(l, NULL, &va, &freed, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert(cfs_id_eq(&freed[0], &a[1]));
	free(freed);
	cr_assert(cfsd_denylist_has(l, &a[0]));
	cr_assert_not(cfsd_denylist_has(l, &a[1]));
	cr_assert(cfsd_denylist_has(l, &a[2]));
	cr_assert_eq(cfsd_denylist_remove(l, NULL, &va, &freed, &n), -ENOENT);
	/* a key lifted by itself goes whatever named it */
	cr_assert_eq(cfsd_denylist_remove(l, &b[0], NULL, &freed, &n), 0);
	cr_assert_eq(n, 1);
	free(freed);
	cr_assert_not(cfsd_denylist_has(l, &b[0]));
	cr_assert_eq(cfsd_denylist_remove(l, &a[1], NULL, &freed, &n), -ENOENT);

	struct cfs_sbuf r = { 0 };
	cfsd_denylist_report(l, &r);
	char name[CFS_NAME_LEN + 1], hex[65], want[200];
	cfs_name_encode(name, vb.b);
	snprintf(want, sizeof(want), "volume %s 1 key\n", name);
	cr_assert_not_null(strstr(r.p, want), "%s", r.p);
	snprintf(want, sizeof(want), "key %s\n", cfs_id_hex(&k5, hex));
	cr_assert_not_null(strstr(r.p, want), "%s", r.p);
	cr_assert_not_null(strstr(r.p, "3 keys denied: 1 volume, 3 entries of at most 100\n"), "%s", r.p);
	free(r.p);
	cfsd_denylist_free(l);
}

Test(denylist, a_full_list_refuses_the_whole_addition)
{
	cfsd_denylist_t *l = cfsd_denylist_new(path, 4);
	struct cfs_id k[6];
	struct cfs_pubkey v = vol(9);
	uint32_t fresh;

	for (int i = 0; i < 6; i++)
		k[i] = key((uint8_t)i);
	cr_assert_eq(cfsd_denylist_add(l, k, 3, NULL, &fresh), 0);
	cr_assert_eq(cfsd_denylist_add(l, k + 3, 2, &v, &fresh), -ENOSPC);
	cr_assert_eq(cfsd_denylist_entries(l), 3); /* nothing of it */
	cr_assert_not(cfsd_denylist_has(l, &k[3]));
	/* what is there already costs no room */
	cr_assert_eq(cfsd_denylist_add(l, k, 3, NULL, &fresh), 0);
	cr_assert_eq(cfsd_denylist_add(l, k + 3, 1, &v, &fresh), 0);
	cr_assert_eq(cfsd_denylist_add(l, k + 4, 1, NULL, &fresh), -ENOSPC);
	cfsd_denylist_free(l);
	/* the file holds the four */
	l = cfsd_denylist_new(path, 100);
	cr_assert_eq(cfsd_denylist_load(l), 0);
	cr_assert_eq(cfsd_denylist_entries(l), 4);
	cfsd_denylist_free(l);
}

Test(denylist, the_file_is_written_whole_and_read_back_the_same)
{
	cfsd_denylist_t *l = cfsd_denylist_new(path, 100);
	struct cfs_id k[4] = { key(1), key(2), key(3), key(4) }, *freed;
	struct cfs_pubkey v = vol(3);
	uint32_t fresh, n;
	struct stat sb;

	cr_assert_eq(cfsd_denylist_load(l), 0); /* no file: empty */
	cr_assert_eq(cfsd_denylist_entries(l), 0);
	cr_assert_eq(cfsd_denylist_add(l, k, 3, &v, &fresh), 0);
	cr_assert_eq(cfsd_denylist_add(l, &k[3], 1, NULL, &fresh), 0);
	char first[65536];
	snprintf(first, sizeof(first), "%s", read_all(path));
	cr_assert_eq(stat(path, &sb), 0);
	cr_assert_eq(sb.st_mode & 0777, 0600);
	cfsd_denylist_free(l);

	/* one entry a line: a comment, then KEY alone, then KEY VOLUME */
	char hex[65], name[CFS_NAME_LEN + 1], line[200];
	cfs_name_encode(name, v.b);
	snprintf(line, sizeof(line), "\n%s\n", cfs_id_hex(&k[3], hex));
	cr_assert_not_null(strstr(first, line), "%s", first);
	snprintf(line, sizeof(line), "%s %s\n", cfs_id_hex(&k[0], hex), name);
	cr_assert_not_null(strstr(first, line), "%s", first);
	cr_assert_eq(first[0], '#');

	l = cfsd_denylist_new(path, 100);
	cr_assert_eq(cfsd_denylist_load(l), 0);
	cr_assert_eq(cfsd_denylist_entries(l), 4);
	cr_assert_eq(cfsd_denylist_keys(l), 4);
	for (int i = 0; i < 4; i++)
		cr_assert(cfsd_denylist_has(l, &k[i]));
	/* a change rewrites it; the same list is the same file */
	cr_assert_eq(cfsd_denylist_add(l, &k[3], 1, NULL, &fresh), 0);
	cr_assert_eq(cfsd_denylist_remove(l, NULL, &v, &freed, &n), 0);
	free(freed);
	cr_assert_eq(cfsd_denylist_add(l, k, 3, &v, &fresh), 0);
	cr_assert_str_eq(read_all(path), first);
	/* no temporary file is left behind */
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "test $(ls -A %s | wc -l) -eq 1", dir);
	cr_assert_eq(system(cmd), 0);
	cfsd_denylist_free(l);
}

Test(denylist, bad_lines_are_skipped_and_the_bound_holds_at_load)
{
	cfsd_denylist_t *l = cfsd_denylist_new(NULL, 2);
	char hex[3][65], text[600];
	uint32_t bad;

	for (int i = 0; i < 3; i++) {
		struct cfs_id k = key((uint8_t)(10 + i));
		cfs_id_hex(&k, hex[i]);
	}
	snprintf(text, sizeof(text), "# list\n%s\nnot a key\n\n%s\n%s", hex[0], hex[1], hex[2]);
	cfsd_denylist_load_text(l, text, strlen(text), &bad);
	cr_assert_eq(bad, 2); /* the line that is no entry, and the third beyond the bound */
	cr_assert_eq(cfsd_denylist_entries(l), 2);
	cfsd_denylist_free(l);
}

Test(denylist, a_list_that_cannot_be_written_does_not_change)
{
	char p[200];
	snprintf(p, sizeof(p), "%s/no/such/dir/denylist", dir);
	cfsd_denylist_t *l = cfsd_denylist_new(p, 10);
	struct cfs_id k = key(1);
	uint32_t fresh;

	cr_assert_eq(cfsd_denylist_add(l, &k, 1, NULL, &fresh), -EIO);
	cr_assert_eq(cfsd_denylist_entries(l), 0);
	cr_assert_not(cfsd_denylist_has(l, &k));
	cfsd_denylist_free(l);
}
