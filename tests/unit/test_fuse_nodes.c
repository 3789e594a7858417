/* cfs-fuse: the node table (inode numbers per parent and name). */
#include <criterion/criterion.h>
#include <string.h>

#include "cfs-fuse/internal.h"

static struct sfsro_entry entry(const char *name, uint8_t type, uint8_t keybyte)
{
	struct sfsro_entry e = { .name = { (const uint8_t *)name, strlen(name) }, .type = type,
	                         .size = 1, .mode = 0644 };
	memset(e.key.b, keybyte, sizeof(e.key.b));
	return e;
}

Test(fuse_nodes, same_name_same_number_and_forget_frees)
{
	struct fs_nodes *t = fs__nodes_new();
	struct sfsro_entry a = entry("a", SFSRO_T_FILE, 1);
	struct fnode *n = fs__node_enter(t, 1, &a, 1);

	cr_assert_geq(n->ino, 2);
	n->nlookup = 2;
	cr_assert_eq(fs__node_enter(t, 1, &a, 1), n);
	cr_assert_eq(fs__node_get(t, n->ino), n);
	struct sfsro_entry a2 = entry("a", SFSRO_T_FILE, 1);
	cr_assert_neq(fs__node_enter(t, 7, &a2, 1), n, "another parent, another node");
	uint64_t ino = n->ino;
	fs__node_forget(t, ino, 1);
	cr_assert_eq(fs__node_get(t, ino), n);
	fs__node_forget(t, ino, 1);
	cr_assert_null(fs__node_get(t, ino));
	cr_assert_not_null(fs__node_get(t, 1), "the root is never forgotten");
	fs__node_forget(t, 1, 100);
	cr_assert_not_null(fs__node_get(t, 1));
	fs__nodes_free(t);
}

Test(fuse_nodes, changed_file_gets_a_new_number_directory_keeps_its_own)
{
	struct fs_nodes *t = fs__nodes_new();
	struct sfsro_entry f1 = entry("f", SFSRO_T_FILE, 1), f2 = entry("f", SFSRO_T_FILE, 2);
	struct sfsro_entry d1 = entry("d", SFSRO_T_DIR, 3), d2 = entry("d", SFSRO_T_DIR, 4);
	struct fnode *old = fs__node_enter(t, 1, &f1, 1);
	old->nlookup = 1;
	struct fnode *dir = fs__node_enter(t, 1, &d1, 1);
	dir->nlookup = 1;

	struct fnode *nw = fs__node_enter(t, 1, &f2, 2);
	cr_assert_neq(nw, old);
	cr_assert_neq(nw->ino, old->ino);
	cr_assert_eq(fs__node_get(t, old->ino), old, "the old version lives until forgotten");
	cr_assert(cfs_id_eq(&old->key, &f1.key));
	cr_assert_eq(fs__node_enter(t, 1, &f2, 2), nw, "the name now finds the new version");
	uint64_t old_ino = old->ino;
	fs__node_forget(t, old_ino, 1);
	cr_assert_null(fs__node_get(t, old_ino), "forgotten (old is freed now)");
	cr_assert_eq(fs__node_enter(t, 1, &d2, 2), dir);
	cr_assert(cfs_id_eq(&dir->key, &d2.key), "a directory's key follows the newer root");
	fs__nodes_free(t);
}

Test(fuse_nodes, many_nodes_survive_growth)
{
	struct fs_nodes *t = fs__nodes_new();
	char name[32];
	uint64_t inos[5000];

	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "entry-%d", i);
		struct sfsro_entry e = entry(name, SFSRO_T_FILE, (uint8_t)i);
		struct fnode *n = fs__node_enter(t, 1 + (uint64_t)(i % 3), &e, 1);
		n->nlookup = 1;
		inos[i] = n->ino;
	}
	cr_assert_eq(fs__nodes_count(t), 5001);
	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "entry-%d", i);
		struct sfsro_entry e = entry(name, SFSRO_T_FILE, (uint8_t)i);
		cr_assert_eq(fs__node_enter(t, 1 + (uint64_t)(i % 3), &e, 1)->ino, inos[i]);
	}
	fs__nodes_free(t);
}
