/* Fragments of coded blocks (kind FRAG) as a DHash server keeps them: a
 * real server (one-node ring on loopback, a real store in a temp dir)
 * asked over UDP by a client transport, as a coded put and get would. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dhash/internal.h"
#include "dhash/sync_sm.h"
#include "sfsro-format/sfsro.h"

#define M 2
#define N 4
#define BLEN 3000

static uv_loop_t loop;
static cfs_transport_t *srv_tr, *cli;
static chord_t *chord;
static dhash_server_t *srv;
static struct cfs_addr srv_addr;
static char dir[64];
static uint8_t block[BLEN], frag_mem[N][2048], *frags[N];
static size_t flen;
static struct cfs_id key;

static void on_request(void *arg, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	if (chord && chord_handle_request(chord, req, from))
		return;
	if (srv && dhash_handle_request(srv, req, from))
		return;
	(void)cfs_transport_reply_error(srv_tr, from, -EOPNOTSUPP);
}

static void encode(void)
{
	for (size_t i = 0; i < BLEN; i++)
		block[i] = (uint8_t)(i * 7 + 3);
	for (int i = 0; i < N; i++)
		frags[i] = frag_mem[i];
	flen = sfsro_frag_len(BLEN, M, N);
	cr_assert_leq(flen, sizeof(frag_mem[0]));
	cr_assert_eq(sfsro_code_encode(block, BLEN, M, N, &key, frags), 0);
}

static void setup(void)
{
	struct cfs_transport_config tc;
	struct chord_config cc;
	struct dhash_config dc;
	char blocks[96];

	cfs_log_init("test", CFS_LOG_ERROR);
	cr_assert_eq(cfs_crypto_init(), 0);
	encode();
	uv_loop_init(&loop);
	cfs_transport_config_default(&tc);
	tc.host = "127.0.0.1";
	cr_assert_eq(cfs_transport_new(&loop, &tc, on_request, NULL, &srv_tr), 0);
	cr_assert_eq(cfs_transport_new(&loop, &tc, NULL, NULL, &cli), 0);
	cr_assert_eq(cfs_transport_local_addr(srv_tr, &srv_addr), 0);
	chord_config_default(&cc);
	cr_assert_eq(chord_new(&loop, srv_tr, &srv_addr, &cc, &chord), 0);
	snprintf(dir, sizeof(dir), "/tmp/cfs-unit-frag.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(blocks, sizeof(blocks), "%s/blocks", dir);
	dhash_config_default(&dc);
	dc.sync_ms = 0;
	dc.quota_bytes = 0; /* no nonce round trip for the client's STOREs */
	cr_assert_eq(dhash_server_new(&loop, chord, blocks, &dc, &srv), 0);
	chord_start(chord, NULL, 0);
}

static void teardown(void)
{
	char cmd[128];

	dhash_server_free(srv);
	srv = NULL;
	chord_free(chord);
	chord = NULL;
	cfs_transport_close(srv_tr);
	cfs_transport_close(cli);
	cfs_loop_run(&loop);
	uv_loop_close(&loop);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(dhash_frag, .init = setup, .fini = teardown);

struct answer {
	bool done;
	int status;
	uint32_t kind;
	uint8_t data[2048];
	size_t len;
	struct cfs_id keys[DHASH_SYNC_PARTS];
	uint32_t nkeys;
};

static void on_reply(void *arg, int status, const struct cfs_msg *reply, const struct cfs_rpc_result *res)
{
	struct answer *a = arg;

	a->done = true;
	a->status = status;
	if (status == 0 && reply) {
		a->kind = reply->kind;
		a->len = reply->data.len < sizeof(a->data) ? reply->data.len : sizeof(a->data);
		if (a->len)
			memcpy(a->data, reply->data.p, a->len);
		a->nkeys = reply->n_keys < DHASH_SYNC_PARTS ? reply->n_keys : DHASH_SYNC_PARTS;
		if (a->nkeys)
			memcpy(a->keys, reply->keys, a->nkeys * sizeof(a->keys[0]));
	}
}

static int ask(struct cfs_msg *m, struct answer *a)
{
	struct cfs_call_opts o = { .timeout_ms = 2000 };

	memset(a, 0, sizeof(*a));
	cr_assert_eq(cfs_transport_call(cli, &srv_addr, m, &o, on_reply, a), 0);
	(void)cfs_loop_run_until(&loop, &a->done);
	return a->status;
}

static int store(const struct cfs_id *k, const uint8_t *p, size_t len)
{
	struct cfs_msg m;
	struct answer a;

	cfs_msg_init(&m, CFS_MSG_STORE);
	m.kind = DHASH_KIND_FRAG;
	m.key = *k;
	m.flags = DHASH_STORE_F_PRIMARY;
	m.data = (struct cfs_bytes){ p, len };
	return ask(&m, &a);
}

static int fetch(const struct cfs_id *k, struct answer *a)
{
	struct cfs_msg m;

	cfs_msg_init(&m, CFS_MSG_FETCH);
	m.key = *k;
	return ask(&m, a);
}

/* Fragments verify alone against the coded key, whatever their index; a
 * byte changed, a fragment cut short or another key is refused. */
Test(dhash_frag, verify_and_key)
{
	uint64_t seq = 9;
	struct cfs_id k, other = key;

	for (int i = 0; i < N; i++) {
		cr_assert_eq(dhash_verify(DHASH_KIND_FRAG, &key, frags[i], flen, &seq), 0);
		cr_assert_eq(seq, 0);
		cr_assert_eq(dhash_block_key(DHASH_KIND_FRAG, frags[i], flen, &k), 0);
		cr_assert(cfs_id_eq(&k, &key), "fragment %d names another key", i);
	}
	other.b[0] ^= 1;
	cr_assert_eq(dhash_verify(DHASH_KIND_FRAG, &other, frags[1], flen, &seq), -EBADMSG);
	cr_assert_eq(dhash_verify(DHASH_KIND_FRAG, &key, frags[1], flen - 1, &seq), -EBADMSG);
	frags[3][SFSRO_FRAG_HDR + 5] ^= 0x40;
	cr_assert_eq(dhash_verify(DHASH_KIND_FRAG, &key, frags[3], flen, &seq), -EBADMSG);
	/* a content-hash block is not a fragment */
	cr_assert_eq(dhash_block_key(DHASH_KIND_FRAG, block, BLEN, &k), -EBADMSG);
}

/* A server stores a fragment that verifies and answers a FETCH with it
 * as kind FRAG; one that does not verify is refused and not stored. */
Test(dhash_frag, stored_fetched_and_a_bad_one_refused)
{
	struct answer a;
	uint8_t bad[2048];
	struct cfs_id k2 = key;

	memcpy(bad, frags[2], flen);
	bad[flen - 1] ^= 1; /* in the proof */
	cr_assert_eq(store(&key, bad, flen), -EBADMSG);
	cr_assert_eq(fetch(&key, &a), -ENOENT);
	k2.b[31] ^= 1;
	cr_assert_eq(store(&k2, frags[2], flen), -EBADMSG, "a fragment under another key");
	cr_assert_eq(store(&key, frags[2], flen), 0);
	cr_assert_eq(fetch(&key, &a), 0);
	cr_assert_eq(a.kind, DHASH_KIND_FRAG);
	cr_assert_eq(a.len, flen);
	cr_assert_arr_eq(a.data, frags[2], flen);
	cr_assert_eq(srv->refused[0], 2, "counted as bad hashes");
}

/* One fragment per key: a second STORE, of another index, is answered ok
 * and the first stays; nothing is pushed to other servers. */
Test(dhash_frag, the_first_fragment_is_kept)
{
	struct answer a;

	cr_assert_eq(store(&key, frags[1], flen), 0);
	cr_assert_eq(store(&key, frags[3], flen), 0);
	cr_assert_eq(fetch(&key, &a), 0);
	cr_assert_arr_eq(a.data, frags[1], flen);
	cr_assert_eq(srv->frag_kept, 1);
	cr_assert_eq(srv->pushed, 0);
	uint64_t blocks, bytes;
	dhash_store_totals(srv->store, &blocks, &bytes);
	cr_assert_eq(blocks, 1);
	cr_assert_eq(bytes, flen);
}

/* Replica maintenance compares whole blocks only: a fragment is in no
 * SYNC_KEYS listing and no SYNC_DIGEST, so a peer never sees it to fetch,
 * and ranges that differ only by their fragments agree. */
Test(dhash_frag, left_out_of_sync_listings_and_digests)
{
	struct cfs_msg m;
	struct answer a;
	struct cfs_id empty[DHASH_SYNC_PARTS], block_key;
	const char *text = "a whole block";

	cfs_msg_init(&m, CFS_MSG_SYNC_DIGEST);
	memset(&m.key, 0, sizeof(m.key));
	memset(&m.hi, 0xff, sizeof(m.hi));
	m.nsucc = DHASH_SYNC_PARTS;
	cr_assert_eq(ask(&m, &a), 0);
	cr_assert_eq(a.nkeys, DHASH_SYNC_PARTS);
	memcpy(empty, a.keys, sizeof(empty));
	cr_assert_eq(store(&key, frags[0], flen), 0);
	cr_assert_eq(ask(&m, &a), 0);
	cr_assert_arr_eq(a.keys, empty, sizeof(empty), "a fragment changed a digest");

	cfs_msg_init(&m, CFS_MSG_STORE);
	m.kind = DHASH_KIND_CHASH;
	cfs_hash(&block_key, text, strlen(text));
	m.key = block_key;
	m.flags = DHASH_STORE_F_PRIMARY;
	m.data = (struct cfs_bytes){ (const uint8_t *)text, strlen(text) };
	cr_assert_eq(ask(&m, &a), 0);

	cfs_msg_init(&m, CFS_MSG_SYNC_KEYS);
	memset(&m.key, 0, sizeof(m.key));
	memset(&m.hi, 0xff, sizeof(m.hi));
	m.count = 100;
	cr_assert_eq(ask(&m, &a), 0);
	cr_assert_eq(a.nkeys, 1, "listed %u keys", a.nkeys);
	cr_assert(cfs_id_eq(&a.keys[0], &block_key), "the whole block, not the fragment");
	/* a page of one: the fragment after the block is skipped, not a page */
	m.count = 1;
	cr_assert_eq(ask(&m, &a), 0);
	cr_assert_eq(a.nkeys, 1);
	cr_assert(cfs_id_eq(&a.keys[0], &block_key));
}
