/* The message codec: every type round-trips; every malformed form is refused. */
#include <criterion/criterion.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfs.h"

static uint8_t blob[CFS_BLOCK_MAX];
static struct cfs_id keys[5];

static void make_node(struct cfs_node *n, int i)
{
	memset(n, 0, sizeof(*n));
	if (i % 2)
		cr_assert(cfs_addr_from_ip(&n->addr, "2001:db8::7", (uint16_t)(4000 + i)) == 0);
	else
		cr_assert(cfs_addr_from_ip(&n->addr, "10.1.2.3", (uint16_t)(4000 + i)) == 0);
	n->vindex = (uint32_t)i;
	cfs_node_id(&n->id, &n->addr, n->vindex);
	n->coord = (struct cfs_coord){ { 1.5f * (float)i, -2.0f, 3.25f }, 0.5f };
}

/* A message of `type` with every body field set. */
static void fill(struct cfs_msg *m, unsigned type, bool reply)
{
	cfs_msg_init(m, (enum cfs_msg_type)type);
	m->is_reply = reply;
	m->reqid = 0x0102030405060708ull;
	m->has_from = true;
	m->from_vindex = 3;
	memset(m->from_id.b, 0xab, 32);
	m->has_to = true;
	memset(m->to_id.b, 0xcd, 32);
	m->coord = (struct cfs_coord){ { 10, 20, 30 }, 4 };
	memset(m->key.b, 0x11, 32);
	memset(m->hi.b, 0x22, 32);
	memset(m->nonce, 0x33, sizeof(m->nonce));
	m->flags = 3;
	m->nsucc = 16;
	m->hops = 5;
	m->kind = 2;
	m->count = 77;
	m->timeouts = 6;
	m->mode = 1;
	m->lookup_id = UINT64_MAX;
	m->lease_until = 1900000000;
	m->has_pred = true;
	make_node(&m->pred, 9);
	make_node(&m->node, 8);
	m->n_nodes = 3;
	for (int i = 0; i < 3; i++)
		make_node(&m->nodes[i], i);
	m->data = (struct cfs_bytes){ blob, 100 };
	m->keys = keys;
	m->n_keys = 5;
}

static size_t enc(const struct cfs_msg *m, uint8_t *buf, size_t cap)
{
	size_t len = 0;
	int r = cfs_msg_encode(m, buf, cap, &len);
	cr_assert(r == 0, "encode %s: %d", cfs_msg_type_name(m->type), r);
	return len;
}

static uint8_t buf1[CFS_FRAME_MAX], buf2[CFS_FRAME_MAX];
static struct cfs_msg m1, m2;

Test(msg, every_type_roundtrips)
{
	unsigned types = 0;
	for (unsigned t = 0; t < 256; t++) {
		if (strcmp(cfs_msg_type_name(t), "?") == 0)
			continue;
		types++;
		for (int dir = 0; dir < 2; dir++) {
			const char *why = NULL;
			fill(&m1, t, dir);
			size_t n1 = enc(&m1, buf1, sizeof(buf1));
			int r = cfs_msg_decode(buf1, n1, &m2, &why);
			cr_assert(r == 0, "decode %s/%d: %d %s", cfs_msg_type_name(t), dir, r, why);
			cr_assert_eq(m2.type, t);
			cr_assert_eq(m2.is_reply, dir);
			cr_assert_eq(m2.reqid, m1.reqid);
			cr_assert(m2.has_from && m2.from_vindex == 3 && cfs_id_eq(&m2.from_id, &m1.from_id));
			cr_assert(m2.has_to && cfs_id_eq(&m2.to_id, &m1.to_id));
			cr_assert(memcmp(&m2.coord, &m1.coord, sizeof(m1.coord)) == 0);
			/* Canonical: re-encoding what was decoded gives the same bytes,
			 * so every field of the schema survived. */
			size_t n2 = enc(&m2, buf2, sizeof(buf2));
			cr_assert_eq(n1, n2, "%s/%d", cfs_msg_type_name(t), dir);
			cr_assert(memcmp(buf1, buf2, n1) == 0, "%s/%d", cfs_msg_type_name(t), dir);
		}
	}
	cr_assert_eq(types, CFS_MSG_TYPE_END - 1 - (CFS_MSG_CTL_STATUS - CFS_MSG_DIALBACK - 1));
}

/* Both versions spoken: 0 encodes the oldest (9 items, no clock); 5 adds
 * the sender's clock as a tenth item; each decodes with its version; a
 * version outside the two is refused when encoding. */
Test(msg, two_versions)
{
	const char *why = NULL;

	fill(&m1, CFS_MSG_STORE, 0);
	size_t n4 = enc(&m1, buf1, sizeof(buf1));
	cr_assert_eq(buf1[0], 0x99, "a version 4 message is a 9-item array");
	cr_assert_eq(buf1[1], CFS_PROTO_VERSION_MIN);
	cr_assert_eq(cfs_msg_decode(buf1, n4, &m2, &why), 0);
	cr_assert_eq(m2.version, CFS_PROTO_VERSION_MIN);
	cr_assert_eq(m2.clock_ms, 0);

	m1.version = 5;
	m1.clock_ms = 1795000000123ull;
	size_t n5 = enc(&m1, buf1, sizeof(buf1));
	cr_assert_eq(buf1[0], 0x9a, "a version 5 message is a 10-item array");
	cr_assert_eq(buf1[1], 5);
	cr_assert_eq(cfs_msg_decode(buf1, n5, &m2, &why), 0, "%s", why);
	cr_assert_eq(m2.version, 5);
	cr_assert_eq(m2.clock_ms, 1795000000123ull);
	cr_assert_eq(n5, n4 + 9, "the clock costs 9 bytes");
	size_t n2 = enc(&m2, buf2, sizeof(buf2));
	cr_assert(n2 == n5 && !memcmp(buf1, buf2, n5), "canonical at version 5 too");

	/* a 9-item version 5 message, a 10-item version 4 one: refused */
	buf1[0] = 0x99;
	cr_assert_eq(cfs_msg_decode(buf1, n5, &m2, &why), -EPROTO);
	m1.version = 6;
	size_t len;
	cr_assert_eq(cfs_msg_encode(&m1, buf1, sizeof(buf1), &len), -EINVAL);
	m1.version = 3;
	cr_assert_eq(cfs_msg_encode(&m1, buf1, sizeof(buf1), &len), -EINVAL);
}

Test(msg, fields_decoded)
{
	const char *why;
	fill(&m1, CFS_MSG_FIND_NEXT, true);
	size_t n = enc(&m1, buf1, sizeof(buf1));
	cr_assert(cfs_msg_decode(buf1, n, &m2, &why) == 0);
	cr_assert_eq(m2.flags, 3);
	cr_assert_eq(m2.n_nodes, 3);
	for (int i = 0; i < 3; i++) {
		cr_assert(cfs_id_eq(&m2.nodes[i].id, &m1.nodes[i].id));
		cr_assert(cfs_addr_eq(&m2.nodes[i].addr, &m1.nodes[i].addr));
		cr_assert_eq(m2.nodes[i].vindex, (uint32_t)i);
	}

	fill(&m1, CFS_MSG_STORE, false);
	m1.data = (struct cfs_bytes){ blob, CFS_BLOCK_MAX };
	n = enc(&m1, buf1, CFS_MSG_MAX);
	cr_assert(n <= CFS_MSG_MAX, "a full block fits the largest message");
	cr_assert(cfs_msg_decode(buf1, n, &m2, &why) == 0);
	cr_assert_eq(m2.data.len, CFS_BLOCK_MAX);
	cr_assert(m2.data.p >= buf1 && m2.data.p + m2.data.len <= buf1 + n, "bytes borrow the buffer");
	cr_assert(memcmp(m2.data.p, blob, CFS_BLOCK_MAX) == 0);
	cr_assert_eq(m2.lease_until, 1900000000);

	fill(&m1, CFS_MSG_HAVE, false);
	n = enc(&m1, buf1, sizeof(buf1));
	cr_assert(cfs_msg_decode(buf1, n, &m2, &why) == 0);
	cr_assert_eq(m2.n_keys, 5);
	cr_assert(memcmp(m2.keys, keys, sizeof(keys)) == 0);

	fill(&m1, CFS_MSG_GET_PRED, true);
	m1.has_pred = false;
	n = enc(&m1, buf1, sizeof(buf1));
	cr_assert(cfs_msg_decode(buf1, n, &m2, &why) == 0);
	cr_assert(!m2.has_pred);

	/* error replies carry a status and no body */
	fill(&m1, CFS_MSG_STORE, true);
	m1.status = -EDQUOT;
	n = enc(&m1, buf1, sizeof(buf1));
	cr_assert(cfs_msg_decode(buf1, n, &m2, &why) == 0);
	cr_assert_eq(m2.status, -EDQUOT);

	/* a plain client has no sender id */
	fill(&m1, CFS_MSG_PING, false);
	m1.has_from = false;
	m1.has_to = false;
	n = enc(&m1, buf1, sizeof(buf1));
	cr_assert(cfs_msg_decode(buf1, n, &m2, &why) == 0);
	cr_assert(!m2.has_from && !m2.has_to);
}

Test(msg, encode_refuses_invalid)
{
	size_t n;
	fill(&m1, CFS_MSG_GET_SUCCS, true);
	m1.n_nodes = CFS_MSG_MAX_NODES + 1;
	cr_assert(cfs_msg_encode(&m1, buf1, sizeof(buf1), &n) == -EINVAL);
	fill(&m1, CFS_MSG_STORE, false);
	m1.data.len = CFS_BLOCK_MAX + 1;
	cr_assert(cfs_msg_encode(&m1, buf1, sizeof(buf1), &n) == -EINVAL);
	fill(&m1, CFS_MSG_STORE, false);
	cr_assert(cfs_msg_encode(&m1, buf1, 50, &n) == -EMSGSIZE);
	fill(&m1, CFS_MSG_PING, false);
	m1.status = -EIO;
	cr_assert(cfs_msg_encode(&m1, buf1, sizeof(buf1), &n) == -EINVAL, "requests carry no status");
	m1.status = 0;
	m1.type = 200;
	cr_assert(cfs_msg_encode(&m1, buf1, sizeof(buf1), &n) == -EINVAL);
	fill(&m1, CFS_MSG_NOTIFY, false);
	m1.node.coord.v[0] = 0.0f / 0.0f;
	cr_assert(cfs_msg_encode(&m1, buf1, sizeof(buf1), &n) == -EINVAL);
}

Test(msg, every_truncation_rejected)
{
	const char *why;
	for (unsigned t = CFS_MSG_PING; t <= CFS_MSG_SYNC_KEYS; t++) {
		fill(&m1, t, t % 2);
		size_t n = enc(&m1, buf1, sizeof(buf1));
		for (size_t cut = 0; cut < n; cut++) {
			uint8_t *copy = malloc(cut ? cut : 1); /* exact size: ASan sees overreads */
			memcpy(copy, buf1, cut);
			int r = cfs_msg_decode(copy, cut, &m2, &why);
			cr_assert(r == -EPROTO, "%s cut at %zu/%zu: %d", cfs_msg_type_name(t), cut, n, r);
			free(copy);
		}
	}
}

Test(msg, trailing_bytes_and_oversize_rejected)
{
	const char *why = NULL;
	fill(&m1, CFS_MSG_PING, false);
	size_t n = enc(&m1, buf1, sizeof(buf1));
	buf1[n] = 0xc0;
	cr_assert(cfs_msg_decode(buf1, n + 1, &m2, &why) == -EPROTO);
	cr_assert(strstr(why, "trailing"));
	cr_assert(cfs_msg_decode(buf1, CFS_FRAME_MAX + 1, &m2, &why) == -EMSGSIZE);
}

/* ---- hand-built messages, to reach every branch of the strict decoder */

struct pk { msgpack_sbuffer sb; msgpack_packer pk; };

static void pk_init(struct pk *p)
{
	msgpack_sbuffer_init(&p->sb);
	msgpack_packer_init(&p->pk, &p->sb, msgpack_sbuffer_write);
}

static void pk_bin(struct pk *p, const void *d, size_t n)
{
	msgpack_pack_bin(&p->pk, n);
	msgpack_pack_bin_body(&p->pk, d, n);
}

static void pk_coord(struct pk *p)
{
	msgpack_pack_array(&p->pk, 4);
	for (int i = 0; i < 4; i++)
		msgpack_pack_float(&p->pk, 1.0f);
}

/* Header with the given version/type/flags/status and `nbody` body items to follow. */
static void pk_header(struct pk *p, unsigned items, uint64_t ver, uint64_t type,
                      uint64_t flags, int64_t status, unsigned nbody)
{
	msgpack_pack_array(&p->pk, items);
	msgpack_pack_uint64(&p->pk, ver);
	if (items < 2)
		return;
	msgpack_pack_uint64(&p->pk, type);
	msgpack_pack_uint64(&p->pk, flags);
	msgpack_pack_uint64(&p->pk, 7);
	msgpack_pack_int64(&p->pk, status);
	msgpack_pack_nil(&p->pk);
	msgpack_pack_nil(&p->pk);
	pk_coord(p);
	msgpack_pack_array(&p->pk, nbody);
}

static int dec(struct pk *p, const char **why)
{
	/* copy to an exact-size buffer so ASan catches any overread */
	uint8_t *b = malloc(p->sb.size);
	memcpy(b, p->sb.data, p->sb.size);
	int r = cfs_msg_decode(b, p->sb.size, &m2, why);
	free(b);
	msgpack_sbuffer_destroy(&p->sb);
	return r;
}

Test(msg, header_checks)
{
	struct pk p;
	const char *why;
	uint8_t id[32] = { 0 };

	pk_init(&p); /* baseline: a valid ping */
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_PING, 0, 0, 0);
	cr_assert(dec(&p, &why) == 0);

	pk_init(&p);
	pk_header(&p, 9, CFS_PROTO_VERSION + 1, CFS_MSG_PING, 0, 0, 0);
	cr_assert(dec(&p, &why) == -EPROTONOSUPPORT, "unknown version");
	pk_init(&p);
	msgpack_pack_array(&p.pk, 2);
	msgpack_pack_uint8(&p.pk, 99);
	msgpack_pack_nil(&p.pk);
	cr_assert(dec(&p, &why) == -EPROTONOSUPPORT, "a future version may change the header");

	pk_init(&p);
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, 200, 0, 0, 0);
	cr_assert(dec(&p, &why) == -ENOMSG, "unknown type");
	pk_init(&p);
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, 0, 0, 0, 0);
	cr_assert(dec(&p, &why) == -ENOMSG, "type 0");
	pk_init(&p);
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, 20, 0, 0, 0);
	cr_assert(dec(&p, &why) == -ENOMSG, "a gap in the numbering");

	pk_init(&p);
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_PING, 2, 0, 0);
	cr_assert(dec(&p, &why) == -EPROTO, "unknown flag bits");
	pk_init(&p);
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_PING, 0, -5, 0);
	cr_assert(dec(&p, &why) == -EPROTO, "status in a request");
	pk_init(&p);
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_PING, 1, 5, 0);
	cr_assert(dec(&p, &why) == -EPROTO, "positive status");
	pk_init(&p);
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_FETCH, 1, -ENOENT, 0);
	cr_assert(dec(&p, &why) == 0 && m2.status == -ENOENT, "an error reply has no body");
	pk_init(&p);
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_FETCH, 1, -ENOENT, 1);
	msgpack_pack_uint8(&p.pk, 1);
	cr_assert(dec(&p, &why) == -EPROTO, "an error reply with a body");

	pk_init(&p); /* 10 header items */
	msgpack_pack_array(&p.pk, 10);
	for (int i = 0; i < 10; i++)
		msgpack_pack_uint8(&p.pk, i == 0 ? CFS_PROTO_VERSION : 1);
	cr_assert(dec(&p, &why) == -EPROTO);

	pk_init(&p); /* a sender that is neither nil nor [vindex, id] */
	msgpack_pack_array(&p.pk, 9);
	msgpack_pack_uint8(&p.pk, CFS_PROTO_VERSION);
	msgpack_pack_uint8(&p.pk, CFS_MSG_PING);
	msgpack_pack_uint8(&p.pk, 0);
	msgpack_pack_uint8(&p.pk, 0);
	msgpack_pack_uint8(&p.pk, 0);
	msgpack_pack_array(&p.pk, 2);
	msgpack_pack_uint32(&p.pk, CFS_VNODE_INDEX_MAX); /* index out of range */
	pk_bin(&p, id, 32);
	msgpack_pack_nil(&p.pk);
	pk_coord(&p);
	msgpack_pack_array(&p.pk, 0);
	cr_assert(dec(&p, &why) == -EPROTO);

	pk_init(&p); /* a destination id of 31 bytes */
	msgpack_pack_array(&p.pk, 9);
	msgpack_pack_uint8(&p.pk, CFS_PROTO_VERSION);
	msgpack_pack_uint8(&p.pk, CFS_MSG_PING);
	msgpack_pack_uint8(&p.pk, 0);
	msgpack_pack_uint8(&p.pk, 0);
	msgpack_pack_uint8(&p.pk, 0);
	msgpack_pack_nil(&p.pk);
	pk_bin(&p, id, 31);
	pk_coord(&p);
	msgpack_pack_array(&p.pk, 0);
	cr_assert(dec(&p, &why) == -EPROTO);

	pk_init(&p); /* a NaN coordinate */
	msgpack_pack_array(&p.pk, 9);
	msgpack_pack_uint8(&p.pk, CFS_PROTO_VERSION);
	msgpack_pack_uint8(&p.pk, CFS_MSG_PING);
	for (int i = 0; i < 3; i++)
		msgpack_pack_uint8(&p.pk, 0);
	msgpack_pack_nil(&p.pk);
	msgpack_pack_nil(&p.pk);
	msgpack_pack_array(&p.pk, 4);
	msgpack_pack_double(&p.pk, 0.0 / 0.0);
	for (int i = 0; i < 3; i++)
		msgpack_pack_float(&p.pk, 1.0f);
	msgpack_pack_array(&p.pk, 0);
	cr_assert(dec(&p, &why) == -EPROTO);

	pk_init(&p); /* not an array at all */
	msgpack_pack_uint8(&p.pk, 1);
	cr_assert(dec(&p, &why) == -EPROTO);
}

Test(msg, body_checks)
{
	struct pk p;
	const char *why;
	uint8_t id[32] = { 0 }, nonce[16] = { 0 };

	pk_init(&p); /* valid auth */
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_AUTH, 0, 0, 1);
	pk_bin(&p, nonce, 16);
	cr_assert(dec(&p, &why) == 0);

	pk_init(&p);
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_AUTH, 0, 0, 0);
	cr_assert(dec(&p, &why) == -EPROTO && strstr(why, "missing"), "missing field");
	pk_init(&p);
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_AUTH, 0, 0, 2);
	pk_bin(&p, nonce, 16);
	pk_bin(&p, nonce, 16);
	cr_assert(dec(&p, &why) == -EPROTO && strstr(why, "extra"), "extra field");
	pk_init(&p);
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_AUTH, 0, 0, 1);
	pk_bin(&p, nonce, 15);
	cr_assert(dec(&p, &why) == -EPROTO, "short nonce");
	pk_init(&p);
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_AUTH, 0, 0, 1);
	msgpack_pack_str(&p.pk, 16);
	msgpack_pack_str_body(&p.pk, nonce, 16);
	cr_assert(dec(&p, &why) == -EPROTO, "string where binary belongs");

	pk_init(&p); /* find_next with a negative nsucc */
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_FIND_NEXT, 0, 0, 3);
	pk_bin(&p, id, 32);
	msgpack_pack_int32(&p.pk, -1);
	msgpack_pack_uint32(&p.pk, 0);
	cr_assert(dec(&p, &why) == -EPROTO, "negative where unsigned belongs");
	pk_init(&p); /* flags over 32 bits */
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_FIND_NEXT, 0, 0, 3);
	pk_bin(&p, id, 32);
	msgpack_pack_uint32(&p.pk, 1);
	msgpack_pack_uint64(&p.pk, 1ull << 40);
	cr_assert(dec(&p, &why) == -EPROTO, "integer out of range");
	pk_init(&p); /* bool where integer belongs */
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_FIND_NEXT, 0, 0, 3);
	pk_bin(&p, id, 32);
	msgpack_pack_true(&p.pk);
	msgpack_pack_uint32(&p.pk, 0);
	cr_assert(dec(&p, &why) == -EPROTO);

	pk_init(&p); /* a successor list one too long */
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_GET_SUCCS, 1, 0, 1);
	msgpack_pack_array(&p.pk, CFS_MSG_MAX_NODES + 1);
	for (int i = 0; i < CFS_MSG_MAX_NODES + 1; i++) {
		msgpack_pack_array(&p.pk, 5);
		pk_bin(&p, id, 32);
		pk_bin(&p, "\x7f\0\0\1", 4);
		msgpack_pack_uint16(&p.pk, 4000);
		msgpack_pack_uint8(&p.pk, 0);
		pk_coord(&p);
	}
	cr_assert(dec(&p, &why) == -EPROTO && strstr(why, "too long"));

	static const struct { const char *ip; size_t iplen; unsigned port; unsigned vindex; } bad_nodes[] = {
		{ "\x7f\0\0\1", 4, 0, 0 },          /* port 0 */
		{ "\x7f\0\0\1", 4, 70000, 0 },      /* port out of range */
		{ "\x7f\0\0\1\0", 5, 4000, 0 },     /* 5-byte address */
		{ "\x7f\0\0\1", 4, 4000, 5000 },    /* vnode index out of range */
	};
	for (size_t i = 0; i < CFS_ARRAY_SIZE(bad_nodes); i++) {
		pk_init(&p);
		pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_NOTIFY, 0, 0, 1);
		msgpack_pack_array(&p.pk, 5);
		pk_bin(&p, id, 32);
		pk_bin(&p, bad_nodes[i].ip, bad_nodes[i].iplen);
		msgpack_pack_uint32(&p.pk, bad_nodes[i].port);
		msgpack_pack_uint32(&p.pk, bad_nodes[i].vindex);
		pk_coord(&p);
		cr_assert(dec(&p, &why) == -EPROTO, "bad node %zu", i);
	}

	pk_init(&p); /* key list not a multiple of 32 */
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_HAVE, 0, 0, 1);
	pk_bin(&p, blob, 33);
	cr_assert(dec(&p, &why) == -EPROTO);
	pk_init(&p); /* too many keys */
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_HAVE, 0, 0, 1);
	uint8_t *many = calloc(CFS_MSG_MAX_KEYS + 1, 32);
	pk_bin(&p, many, (CFS_MSG_MAX_KEYS + 1) * 32);
	free(many);
	cr_assert(dec(&p, &why) == -EPROTO);
	pk_init(&p); /* a block over the limit */
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_FETCH, 1, 0, 3);
	msgpack_pack_uint8(&p.pk, 1);
	msgpack_pack_uint8(&p.pk, 0);
	uint8_t *big = calloc(1, CFS_BLOCK_MAX + 1);
	pk_bin(&p, big, CFS_BLOCK_MAX + 1);
	free(big);
	cr_assert(dec(&p, &why) == -EPROTO);
	pk_init(&p); /* a predecessor list of two */
	pk_header(&p, 9, CFS_PROTO_VERSION_MIN, CFS_MSG_GET_PRED, 1, 0, 2);
	msgpack_pack_array(&p.pk, 2);
	msgpack_pack_nil(&p.pk);
	msgpack_pack_nil(&p.pk);
	msgpack_pack_array(&p.pk, 0);
	cr_assert(dec(&p, &why) == -EPROTO);
}

Test(msg, hostile_encodings)
{
	const char *why;
	/* An array claiming 2^32-1 items in 5 bytes: refused before any allocation. */
	static const uint8_t bomb[] = { 0xdd, 0xff, 0xff, 0xff, 0xff };
	cr_assert(cfs_msg_decode(bomb, sizeof(bomb), &m2, &why) == -EPROTO);
	cr_assert(strstr(why, "exceeds"), "why: %s", why);
	/* A binary claiming 4 GiB. */
	static const uint8_t binbomb[] = { 0x91, 0xc6, 0xff, 0xff, 0xff, 0xff, 0 };
	cr_assert(cfs_msg_decode(binbomb, sizeof(binbomb), &m2, &why) == -EPROTO);
	/* Maps and extension types are never used. */
	static const uint8_t map[] = { 0x81, 0x01, 0x02 };
	cr_assert(cfs_msg_decode(map, sizeof(map), &m2, &why) == -EPROTO);
	static const uint8_t ext[] = { 0xd4, 0x01, 0x02 };
	cr_assert(cfs_msg_decode(ext, sizeof(ext), &m2, &why) == -EPROTO);
	static const uint8_t reserved[] = { 0xc1 };
	cr_assert(cfs_msg_decode(reserved, sizeof(reserved), &m2, &why) == -EPROTO);
	/* Deep nesting is refused by the pre-scan. */
	uint8_t deep[4000];
	memset(deep, 0x91, sizeof(deep) - 1);
	deep[sizeof(deep) - 1] = 0xc0;
	cr_assert(cfs_msg_decode(deep, sizeof(deep), &m2, &why) == -EPROTO);
	cr_assert(strstr(why, "deep"), "why: %s", why);
	/* Empty input. */
	cr_assert(cfs_msg_decode(deep, 0, &m2, &why) == -EPROTO);
}
