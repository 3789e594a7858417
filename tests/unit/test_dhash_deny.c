/* The denylist as a DHash server applies it: a real server (one-node ring
 * on loopback, a real store in a temp dir) asked over UDP by a client
 * transport, as a peer or a publisher would. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dhash/internal.h"
#include "sfsro-format/sfsro.h"

static uv_loop_t loop;
static cfs_transport_t *srv_tr, *cli;
static chord_t *chord;
static dhash_server_t *srv;
static struct cfs_addr srv_addr;
static char dir[64], cache_dir[96];

static void on_request(void *arg, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	if (chord && chord_handle_request(chord, req, from))
		return;
	if (srv && dhash_handle_request(srv, req, from))
		return;
	(void)cfs_transport_reply_error(srv_tr, from, -EOPNOTSUPP);
}

static void setup(void)
{
	struct cfs_transport_config tc;
	struct chord_config cc;
	struct dhash_config dc;
	char blocks[96];

	cfs_log_init("test", CFS_LOG_ERROR);
	cr_assert_eq(cfs_crypto_init(), 0);
	uv_loop_init(&loop);
	cfs_transport_config_default(&tc);
	tc.host = "127.0.0.1";
	cr_assert_eq(cfs_transport_new(&loop, &tc, on_request, NULL, &srv_tr), 0);
	cr_assert_eq(cfs_transport_new(&loop, &tc, NULL, NULL, &cli), 0);
	cr_assert_eq(cfs_transport_local_addr(srv_tr, &srv_addr), 0);
	chord_config_default(&cc);
	cr_assert_eq(chord_new(&loop, srv_tr, &srv_addr, &cc, &chord), 0);
	snprintf(dir, sizeof(dir), "/tmp/cfs-unit-deny.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(blocks, sizeof(blocks), "%s/blocks", dir);
	snprintf(cache_dir, sizeof(cache_dir), "%s/cache", dir);
	dhash_config_default(&dc);
	dc.cache_dir = cache_dir;
	dc.cache_bytes = 1 << 20;
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

TestSuite(dhash_deny, .init = setup, .fini = teardown);

/* One request to the server, run until its answer. */
struct answer {
	bool done;
	int status;
	uint32_t kind, flags;
	uint8_t data[256];
	size_t len;
};

static void on_reply(void *arg, int status, const struct cfs_msg *reply, const struct cfs_rpc_result *res)
{
	struct answer *a = arg;

	a->done = true;
	a->status = status;
	if (status == 0 && reply) {
		a->kind = reply->kind;
		a->flags = reply->flags;
		a->len = reply->data.len < sizeof(a->data) ? reply->data.len : sizeof(a->data);
		if (a->len)
			memcpy(a->data, reply->data.p, a->len);
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

static int store(const char *text, uint32_t flags)
{
	struct cfs_msg m;
	struct answer a;

	cfs_msg_init(&m, CFS_MSG_STORE);
	m.kind = DHASH_KIND_CHASH;
	cfs_hash(&m.key, text, strlen(text));
	m.flags = flags;
	m.data = (struct cfs_bytes){ (const uint8_t *)text, strlen(text) };
	int r = ask(&m, &a);
	cr_assert(r < 0 || !(a.flags & DHASH_STORE_R_CHALLENGE)); /* stored, not challenged */
	return r;
}

static int fetch(const char *text)
{
	struct cfs_msg m;
	struct answer a;

	cfs_msg_init(&m, CFS_MSG_FETCH);
	cfs_hash(&m.key, text, strlen(text));
	int r = ask(&m, &a);
	if (r == 0)
		cr_assert(a.len == strlen(text) && !memcmp(a.data, text, a.len));
	return r;
}

static struct cfs_id key_of(const char *text)
{
	struct cfs_id k;

	cfs_hash(&k, text, strlen(text));
	return k;
}

static uint32_t stored(void)
{
	struct cfs_id keys[16];
	bool more;

	return dhash_server_keys(srv, NULL, keys, 16, &more);
}

Test(dhash_deny, a_denied_key_is_deleted_refused_and_not_served)
{
	struct cfs_id k = key_of("hello, denied block"), other = key_of("another block");

	cr_assert_eq(store("hello, denied block", DHASH_STORE_F_PRIMARY), 0);
	cr_assert_eq(store("another block", DHASH_STORE_F_PRIMARY), 0);
	cr_assert_eq(stored(), 2);
	cr_assert_eq(fetch("hello, denied block"), 0);

	cr_assert_eq(dhash_server_deny(srv, &k, 1), 1); /* its one copy deleted */
	cr_assert(dhash_server_is_denied(srv, &k));
	cr_assert_not(dhash_server_is_denied(srv, &other));
	cr_assert_eq(dhash_server_denied_count(srv), 1);
	cr_assert_eq(stored(), 1);
	cr_assert_not(dhash_store_has(srv->store, &k));

	/* not served: as by a server without a copy */
	cr_assert_eq(fetch("hello, denied block"), -ENOENT);
	cr_assert_eq(srv->fetch_denied, 1);
	cr_assert_eq(fetch("another block"), 0);
	/* refused, with its own status, in every role */
	cr_assert_eq(store("hello, denied block", DHASH_STORE_F_PRIMARY), DHASH_DENIED);
	cr_assert_eq(store("hello, denied block", DHASH_STORE_F_CACHE), DHASH_DENIED);
	cr_assert_eq(store("hello, denied block", 0), DHASH_DENIED); /* a replica's push */
	cr_assert_eq(srv->refused[8], 3);
	cr_assert_eq(stored(), 1);
	cr_assert_str_eq(dhash_strerror(DHASH_DENIED), "the server's operator denies this key (cfsctl deny)");

	/* lifted: stored again when someone sends it */
	dhash_server_allow(srv, &k);
	cr_assert_not(dhash_server_is_denied(srv, &k));
	cr_assert_eq(dhash_server_denied_count(srv), 0);
	cr_assert_eq(fetch("hello, denied block"), -ENOENT);
	cr_assert_eq(store("hello, denied block", DHASH_STORE_F_PRIMARY), 0);
	cr_assert_eq(fetch("hello, denied block"), 0);
}

Test(dhash_deny, a_cached_copy_is_deleted_and_not_served)
{
	struct cfs_id k = key_of("a cached copy");

	cr_assert_eq(store("a cached copy", DHASH_STORE_F_CACHE), 0);
	cr_assert_eq(stored(), 0);
	cr_assert_eq(fetch("a cached copy"), 0); /* from the cache */
	cr_assert_eq(dhash_server_deny(srv, &k, 1), 1);
	cr_assert_not(dhash_cache_has(srv->cache, &k));
	cr_assert_eq(fetch("a cached copy"), -ENOENT);
}

Test(dhash_deny, status_reports_the_denied_keys)
{
	struct cfs_id keys[3] = { key_of("a"), key_of("b"), key_of("c") };
	struct cfs_sbuf b = { 0 };

	(void)dhash_server_deny(srv, keys, 3);
	(void)dhash_server_deny(srv, keys, 1); /* again: still three */
	cr_assert_eq(dhash_server_denied_count(srv), 3);
	cr_assert_eq(store("a", DHASH_STORE_F_PRIMARY), DHASH_DENIED);
	dhash_server_status(srv, &b, true);
	cr_assert_not_null(strstr(b.p, "\"denied_keys\":3"), "%s", b.p);
	cr_assert_not_null(strstr(b.p, "\"denied\":1"), "%s", b.p);
	free(b.p);
}

/* A signed root of version seq of the volume of seed, under its version key. */
static size_t version_block(uint8_t seed, uint64_t seq, uint8_t *buf, size_t cap, struct cfs_id *key,
                            struct cfs_pubkey *pk)
{
	struct cfs_seckey sk;
	uint8_t s[32];
	size_t len;

	memset(s, seed, sizeof(s));
	cfs_sign_seed_keypair(s, pk, &sk);
	struct sfsro_root r = { .pk = *pk, .seq = seq, .issued = 1, .valid_until = UINT64_MAX,
	                        .dir_mode = 0755 };
	cr_assert(sfsro_root_encode(&r, &sk, buf, cap, &len) == 0);
	sfsro_root_version_key(pk, seq, key);
	return len;
}

static int store_kind(uint32_t kind, const struct cfs_id *key, const uint8_t *p, size_t len)
{
	struct cfs_msg m;
	struct answer a;

	cfs_msg_init(&m, CFS_MSG_STORE);
	m.kind = kind;
	m.key = *key;
	m.flags = DHASH_STORE_F_PRIMARY;
	m.data = (struct cfs_bytes){ p, len };
	return ask(&m, &a);
}

static int fetch_key(const struct cfs_id *key)
{
	struct cfs_msg m;
	struct answer a;

	cfs_msg_init(&m, CFS_MSG_FETCH);
	m.key = *key;
	return ask(&m, &a);
}

Test(dhash_deny, a_denied_volume_s_versions_are_refused_and_not_served)
{
	uint8_t v1[512], v2[512], w1[512];
	struct cfs_id k1, k2, kw, root_key;
	struct cfs_pubkey pk, pw;
	size_t l1 = version_block(7, 1, v1, sizeof(v1), &k1, &pk);
	size_t l2 = version_block(7, 2, v2, sizeof(v2), &k2, &pk);
	size_t lw = version_block(8, 1, w1, sizeof(w1), &kw, &pw);

	cr_assert_eq(store_kind(DHASH_KIND_VERSION, &k1, v1, l1), 0);
	cr_assert_eq(store_kind(DHASH_KIND_VERSION, &kw, w1, lw), 0);
	cr_assert_eq(fetch_key(&k1), 0);
	/* the operator denies the volume: its root key */
	sfsro_root_key(&pk, &root_key);
	(void)dhash_server_deny(srv, &root_key, 1);
	cr_assert_eq(fetch_key(&k1), -ENOENT, "a version already held is not served");
	cr_assert_eq(store_kind(DHASH_KIND_VERSION, &k2, v2, l2), DHASH_DENIED);
	cr_assert_eq(fetch_key(&kw), 0, "another volume's version is served");
	dhash_server_allow(srv, &root_key);
	cr_assert_eq(fetch_key(&k1), 0);
}
