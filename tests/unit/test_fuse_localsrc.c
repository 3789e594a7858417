/* cfs-fuse: the local store source (cfs-mount --from dir:) over a real
 * blockstore in a temp dir: answers come from the loop, never inside the
 * call; only bytes that verify, with their kind; a missing block, bytes
 * under the wrong key, a missing store; cancellation at free. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "blockstore/blockstore.h"
#include "cfs-fuse/internal.h"

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/cfs-unit-flocal.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(cfs_crypto_init(), 0);
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

struct answer {
	bool done;
	int status;
	uint32_t kind;
	uint8_t data[2048];
	size_t len;
};

static void got(void *arg, const struct dhash_get_result *r)
{
	struct answer *a = arg;

	a->done = true;
	a->status = r->status;
	a->kind = r->kind;
	if (r->status == 0) {
		cr_assert_leq(r->len, sizeof(a->data));
		memcpy(a->data, r->data, r->len);
		a->len = r->len;
	}
}

/* The store: a content block, a signed root under its root key, and a
 * content block's bytes put under another key (a rotted entry). */
static void fill(struct cfs_id *ret_block, struct cfs_id *ret_root, struct cfs_id *ret_bad,
                 uint8_t *block, size_t blen)
{
	struct bstore_config cfg = { .mode = BSTORE_DURABLE, .what = "dir: store" };
	struct sfsro_root root = { .seq = 7, .issued = 1, .valid_until = 2 };
	struct cfs_seckey sk;
	uint8_t rbuf[1024];
	size_t rlen;
	bstore_t *bs;

	for (size_t i = 0; i < blen; i++)
		block[i] = (uint8_t)(i * 7);
	cfs_hash(ret_block, block, blen);
	cfs_sign_keypair(&root.pk, &sk);
	cr_assert_eq(sfsro_root_encode(&root, &sk, rbuf, sizeof(rbuf), &rlen), 0);
	sfsro_root_key(&root.pk, ret_root);
	memset(ret_bad, 0xab, sizeof(*ret_bad));
	struct bstore_op ops[3] = {
		{ .type = BSTORE_PUT, .key = *ret_block, .meta = { .kind = DHASH_KIND_CHASH, .len = (uint32_t)blen }, .data = block },
		{ .type = BSTORE_PUT, .key = *ret_root, .meta = { .kind = DHASH_KIND_ROOT, .len = (uint32_t)rlen }, .data = rbuf },
		{ .type = BSTORE_PUT, .key = *ret_bad, .meta = { .kind = DHASH_KIND_CHASH, .len = (uint32_t)blen }, .data = block },
	};
	cr_assert_eq(bstore_open(dir, &cfg, &bs), 0);
	cr_assert_eq(bstore_apply(bs, ops, 3), 0);
	bstore_close(bs);
}

TestSuite(fuse_localsrc, .init = setup, .fini = teardown);

Test(fuse_localsrc, answers_later_with_verified_bytes_only)
{
	uv_loop_t loop;
	struct fs_local *l;
	struct cfs_id kb, kr, kbad, kmissing;
	uint8_t block[1500];
	struct answer a[4] = { 0 };

	fill(&kb, &kr, &kbad, block, sizeof(block));
	memset(&kmissing, 0x11, sizeof(kmissing));
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(fs__local_open(&loop, dir, &l), 0);
	cr_assert_eq(fs__local_get(l, &kb, got, &a[0]), 0);
	cr_assert_eq(fs__local_get(l, &kr, got, &a[1]), 0);
	cr_assert_eq(fs__local_get(l, &kbad, got, &a[2]), 0);
	cr_assert_eq(fs__local_get(l, &kmissing, got, &a[3]), 0);
	for (int i = 0; i < 4; i++)
		cr_assert(!a[i].done, "answer %d came inside the call", i);
	while (!a[3].done)
		uv_run(&loop, UV_RUN_ONCE);
	cr_assert_eq(a[0].status, 0);
	cr_assert_eq(a[0].kind, DHASH_KIND_CHASH);
	cr_assert_eq(a[0].len, sizeof(block));
	cr_assert_eq(memcmp(a[0].data, block, sizeof(block)), 0);
	cr_assert_eq(a[1].status, 0);
	cr_assert_eq(a[1].kind, DHASH_KIND_ROOT);
	struct sfsro_root r;
	cr_assert_eq(sfsro_root_decode(a[1].data, a[1].len, &r), 0);
	cr_assert_eq(r.seq, 7);
	cr_assert_eq(a[2].status, -EBADMSG, "bytes under another key: %d", a[2].status);
	cr_assert_eq(a[3].status, -ENOENT);
	fs__local_free(l);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

Test(fuse_localsrc, free_cancels_what_is_pending)
{
	uv_loop_t loop;
	struct fs_local *l;
	struct cfs_id kb, kr, kbad;
	uint8_t block[100];
	struct answer a = { 0 };

	fill(&kb, &kr, &kbad, block, sizeof(block));
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(fs__local_open(&loop, dir, &l), 0);
	cr_assert_eq(fs__local_get(l, &kb, got, &a), 0);
	fs__local_free(l);
	cr_assert(a.done);
	cr_assert_eq(a.status, -ECANCELED);
	uv_run(&loop, UV_RUN_DEFAULT); /* the store closes; nothing more is answered */
	cr_assert_eq(uv_loop_close(&loop), 0);
}

Test(fuse_localsrc, a_missing_store_is_not_made)
{
	uv_loop_t loop;
	struct fs_local *l;
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), "%s/nowhere", dir);
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(fs__local_open(&loop, path, &l), -ENOENT);
	cr_assert_neq(stat(path, &st), 0);
	cr_assert_eq(uv_loop_close(&loop), 0);
}
