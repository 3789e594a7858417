/*
 * The message codec: every message of the system, defined once.
 *
 * A message is one msgpack array of nine items (version 4) or ten
 * (version 5, the sender's wall clock in ms after the body):
 *
 *   [version, type, flags, reqid, status, from, to, coord, body (, clock)]
 *
 * flags bit 0 marks a reply; from is nil or [vindex, id]; to is nil or an
 * id; coord is four floats; body is an array whose items are fixed by the
 * (type, direction) schema below. A reply with a nonzero (negative) status
 * has an empty body. docs/PROTOCOL.md is the prose version of this file.
 *
 * Decoding never trusts the bytes: a pre-scan walks the raw msgpack and
 * checks that every length and count fits in what is left of the buffer
 * (and refuses maps and extension types, which no message uses) before
 * msgpack-c builds its object tree, so the tree is at most a small multiple
 * of the datagram. msgpack_object never leaves this file.
 */
#include "common/cfs.h"

#include <math.h>
#include <msgpack.h>
#include <string.h>

enum fld {
	F_END,
	F_KEY, F_HI, F_NONCE, F_FLAGS, F_NSUCC, F_HOPS, F_KIND, F_COUNT, F_MODE,
	F_LOOKUP_ID, F_LEASE, F_PRED, F_NODE, F_NODES, F_DATA, F_BITMAP, F_TEXT,
	F_KEYS, F_TIMEOUTS,
};

#define MAX_FIELDS 7
struct schema {
	const char *name;
	uint8_t req[MAX_FIELDS];
	uint8_t rep[MAX_FIELDS];
};

static const struct schema schemas[CFS_MSG_TYPE_END] = {
	[CFS_MSG_PING]        = { "ping",        { F_END }, { F_END } },
	[CFS_MSG_AUTH]        = { "auth",        { F_NONCE }, { F_NONCE } },
	[CFS_MSG_GET_PRED]    = { "get_pred",    { F_END }, { F_PRED, F_NODES } },
	[CFS_MSG_GET_SUCCS]   = { "get_succs",   { F_END }, { F_NODES } },
	[CFS_MSG_NOTIFY]      = { "notify",      { F_NODE }, { F_END } },
	[CFS_MSG_LEAVE]       = { "leave",       { F_PRED, F_NODES, F_NONCE }, { F_FLAGS, F_NONCE } },
	[CFS_MSG_ALERT]       = { "alert",       { F_KEY }, { F_END } },
	[CFS_MSG_FIND_NEXT]   = { "find_next",   { F_KEY, F_NSUCC, F_FLAGS }, { F_FLAGS, F_COUNT, F_NODES } },
	[CFS_MSG_LOOKUP_FWD]  = { "lookup_fwd",  { F_KEY, F_LOOKUP_ID, F_NODE, F_HOPS, F_NSUCC, F_FLAGS },
	                                         { F_END } },
	[CFS_MSG_LOOKUP_DONE] = { "lookup_done", { F_KEY, F_LOOKUP_ID, F_HOPS, F_FLAGS, F_NODES },
	                                         { F_END } },
	[CFS_MSG_STORE]       = { "store",       { F_KIND, F_KEY, F_LEASE, F_FLAGS, F_NONCE, F_DATA },
	                                         { F_FLAGS, F_NONCE, F_LEASE } },
	[CFS_MSG_FETCH]       = { "fetch",       { F_KEY, F_FLAGS }, { F_KIND, F_LEASE, F_DATA } },
	[CFS_MSG_HAVE]        = { "have",        { F_KEYS }, { F_BITMAP } },
	[CFS_MSG_REFRESH]     = { "refresh",     { F_KEYS, F_LEASE, F_NONCE },
	                                         { F_BITMAP, F_LEASE, F_FLAGS, F_NONCE } },
	[CFS_MSG_SYNC_DIGEST] = { "sync_digest", { F_KEY, F_HI, F_NSUCC }, { F_KEYS } },
	[CFS_MSG_SYNC_KEYS]   = { "sync_keys",   { F_KEY, F_HI, F_COUNT }, { F_FLAGS, F_KEYS } },
	[CFS_MSG_HELLO]       = { "hello",       { F_END }, { F_END } },
	[CFS_MSG_REACH]       = { "reach",       { F_NONCE, F_NODE }, { F_NODE } },
	[CFS_MSG_DIALBACK]    = { "dialback",    { F_NONCE }, { F_END } },
	[CFS_MSG_CTL_STATUS]  = { "ctl_status",  { F_FLAGS }, { F_TEXT } },
	[CFS_MSG_CTL_LOOKUP]  = { "ctl_lookup",  { F_KEY, F_MODE, F_NSUCC, F_FLAGS },
	                                         { F_HOPS, F_COUNT, F_TIMEOUTS, F_NODES } },
	[CFS_MSG_CTL_GET]     = { "ctl_get",     { F_KEY }, { F_KIND, F_DATA } },
	[CFS_MSG_CTL_PUT]     = { "ctl_put",     { F_KIND, F_LEASE, F_DATA }, { F_KEY, F_LEASE } },
	[CFS_MSG_CTL_HAVE]    = { "ctl_have",    { F_KEYS }, { F_BITMAP } },
	[CFS_MSG_CTL_REFRESH] = { "ctl_refresh", { F_KEYS, F_LEASE }, { F_BITMAP, F_LEASE } },
	[CFS_MSG_CTL_KEYS]    = { "ctl_keys",    { F_FLAGS, F_KEY }, { F_FLAGS, F_KEYS } },
	[CFS_MSG_CTL_PIN]     = { "ctl_pin",     { F_KEY }, { F_END } },
	[CFS_MSG_CTL_UNPIN]   = { "ctl_unpin",   { F_KEY }, { F_END } },
	[CFS_MSG_CTL_PINS]    = { "ctl_pins",    { F_FLAGS }, { F_TEXT } },
	[CFS_MSG_CTL_LOCATE]  = { "ctl_locate",  { F_KEY }, { F_NODES, F_DATA } },
	[CFS_MSG_CTL_DENY]    = { "ctl_deny",    { F_FLAGS, F_KEY }, { F_FLAGS, F_TEXT } },
	[CFS_MSG_CTL_LEAVE]   = { "ctl_leave",   { F_FLAGS }, { F_FLAGS, F_TEXT } },
	[CFS_MSG_CTL_PIN_VERSIONS] = { "ctl_pin_versions", { F_KEY, F_COUNT }, { F_END } },
	[CFS_MSG_CTL_GET_CODED] = { "ctl_get_coded", { F_KEY, F_COUNT }, { F_KIND, F_DATA } },
	[CFS_MSG_CTL_PUT_CODED] = { "ctl_put_coded", { F_COUNT, F_LEASE, F_DATA }, { F_KEY, F_LEASE } },
	[CFS_MSG_CTL_LOCATE_CODED] = { "ctl_locate_coded", { F_KEY, F_COUNT }, { F_NODES, F_DATA } },
	[CFS_MSG_CTL_REPAIR_CODED] = { "ctl_repair_coded",
	                               { F_KEY, F_COUNT, F_FLAGS, F_LEASE, F_NODES, F_DATA },
	                               { F_KEY, F_LEASE } },
	[CFS_MSG_CTL_GET_ROOT] = { "ctl_get_root", { F_KEY, F_FLAGS }, { F_FLAGS, F_KIND, F_DATA } },
	[CFS_MSG_CTL_REFRESH_CODED] = { "ctl_refresh_coded", { F_KEYS, F_LEASE, F_COUNT },
	                                { F_BITMAP, F_LEASE } },
};

#define BITMAP_MAX (CFS_MSG_MAX_KEYS / 8)
#define TEXT_MAX (CFS_FRAME_MAX - 1024)
#define HDR_ITEMS 9

static const struct schema *schema_of(unsigned type)
{
	if (type >= CFS_MSG_TYPE_END || !schemas[type].name)
		return NULL;
	return &schemas[type];
}

const char *cfs_msg_type_name(unsigned type)
{
	const struct schema *s = schema_of(type);
	return s ? s->name : "?";
}

void cfs_msg_init(struct cfs_msg *m, enum cfs_msg_type type)
{
	memset(m, 0, offsetof(struct cfs_msg, nodes));
	m->type = (uint8_t)type;
}

/* ------------------------------------------------------------ encoding */

struct wbuf {
	uint8_t *p;
	size_t len, cap;
	bool overflow;
};

static int wbuf_write(void *data, const char *buf, size_t len)
{
	struct wbuf *w = data;
	if (w->overflow || len > w->cap - w->len) {
		w->overflow = true;
		return -1;
	}
	if (len) /* an empty field may come with no buffer at all */
		memcpy(w->p + w->len, buf, len);
	w->len += len;
	return 0;
}

static void pack_bin(msgpack_packer *pk, const void *p, size_t len)
{
	msgpack_pack_bin(pk, len);
	msgpack_pack_bin_body(pk, p, len);
}

static bool coord_ok(const struct cfs_coord *c)
{
	for (int i = 0; i < 3; i++)
		if (!isfinite(c->v[i]) || fabsf(c->v[i]) > 1e7f)
			return false;
	return isfinite(c->h) && c->h >= 0 && c->h <= 1e7f;
}

static int pack_coord(msgpack_packer *pk, const struct cfs_coord *c)
{
	if (!coord_ok(c))
		return -EINVAL;
	msgpack_pack_array(pk, 4);
	for (int i = 0; i < 3; i++)
		msgpack_pack_float(pk, c->v[i]);
	msgpack_pack_float(pk, c->h);
	return 0;
}

static int pack_node(msgpack_packer *pk, const struct cfs_node *n)
{
	const uint8_t *ip;
	size_t iplen;

	if (n->addr.sa.sa_family != AF_INET && n->addr.sa.sa_family != AF_INET6)
		return -EINVAL;
	if (cfs_addr_port(&n->addr) == 0 || n->vindex >= CFS_VNODE_INDEX_MAX)
		return -EINVAL;
	iplen = cfs_addr_ip_bytes(&n->addr, &ip);
	msgpack_pack_array(pk, 5);
	pack_bin(pk, n->id.b, CFS_ID_BYTES);
	pack_bin(pk, ip, iplen);
	msgpack_pack_uint16(pk, cfs_addr_port(&n->addr));
	msgpack_pack_uint32(pk, n->vindex);
	return pack_coord(pk, &n->coord);
}

static int pack_field(msgpack_packer *pk, const struct cfs_msg *m, enum fld f)
{
	int r;

	switch (f) {
	case F_KEY: pack_bin(pk, m->key.b, CFS_ID_BYTES); return 0;
	case F_HI: pack_bin(pk, m->hi.b, CFS_ID_BYTES); return 0;
	case F_NONCE: pack_bin(pk, m->nonce, CFS_NONCE_BYTES); return 0;
	case F_FLAGS: msgpack_pack_uint32(pk, m->flags); return 0;
	case F_NSUCC: msgpack_pack_uint32(pk, m->nsucc); return 0;
	case F_HOPS: msgpack_pack_uint32(pk, m->hops); return 0;
	case F_KIND: msgpack_pack_uint32(pk, m->kind); return 0;
	case F_COUNT: msgpack_pack_uint32(pk, m->count); return 0;
	case F_TIMEOUTS: msgpack_pack_uint32(pk, m->timeouts); return 0;
	case F_MODE: msgpack_pack_uint32(pk, m->mode); return 0;
	case F_LOOKUP_ID: msgpack_pack_uint64(pk, m->lookup_id); return 0;
	case F_LEASE: msgpack_pack_uint64(pk, m->lease_until); return 0;
	case F_PRED:
		msgpack_pack_array(pk, m->has_pred ? 1 : 0);
		return m->has_pred ? pack_node(pk, &m->pred) : 0;
	case F_NODE: return pack_node(pk, &m->node);
	case F_NODES:
		if (m->n_nodes > CFS_MSG_MAX_NODES)
			return -EINVAL;
		msgpack_pack_array(pk, m->n_nodes);
		for (uint32_t i = 0; i < m->n_nodes; i++)
			if ((r = pack_node(pk, &m->nodes[i])) < 0)
				return r;
		return 0;
	case F_DATA:
	case F_BITMAP:
		if (m->data.len > (f == F_DATA ? CFS_BLOCK_MAX : BITMAP_MAX) ||
		    (m->data.len && !m->data.p))
			return -EINVAL;
		pack_bin(pk, m->data.p, m->data.len);
		return 0;
	case F_TEXT:
		if (m->data.len > TEXT_MAX || (m->data.len && !m->data.p))
			return -EINVAL;
		msgpack_pack_str(pk, m->data.len);
		msgpack_pack_str_body(pk, m->data.p, m->data.len);
		return 0;
	case F_KEYS:
		if (m->n_keys > CFS_MSG_MAX_KEYS || (m->n_keys && !m->keys))
			return -EINVAL;
		pack_bin(pk, m->keys, (size_t)m->n_keys * CFS_ID_BYTES);
		return 0;
	case F_END:
		break;
	}
	return -EINVAL;
}

int cfs_msg_encode(const struct cfs_msg *m, uint8_t *buf, size_t cap, size_t *ret_len)
{
	const struct schema *s = schema_of(m->type);
	struct wbuf w = { .p = buf, .cap = cap };
	msgpack_packer pk;
	const uint8_t *fields;
	unsigned nf = 0;
	int r;

	if (!s || m->status > 0 || (m->status && !m->is_reply))
		return -EINVAL;
	if (m->has_from && m->from_vindex >= CFS_VNODE_INDEX_MAX)
		return -EINVAL;
	fields = m->is_reply ? s->rep : s->req;
	if (m->status == 0)
		while (nf < MAX_FIELDS && fields[nf] != F_END)
			nf++;

	uint8_t ver = m->version ? m->version : CFS_PROTO_VERSION_MIN;
	if (ver < CFS_PROTO_VERSION_MIN || ver > CFS_PROTO_VERSION)
		return -EINVAL;
	msgpack_packer_init(&pk, &w, wbuf_write);
	msgpack_pack_array(&pk, ver >= 5 ? HDR_ITEMS + 1 : HDR_ITEMS);
	msgpack_pack_uint8(&pk, ver);
	msgpack_pack_uint8(&pk, m->type);
	msgpack_pack_uint8(&pk, m->is_reply ? 1 : 0);
	msgpack_pack_uint64(&pk, m->reqid);
	msgpack_pack_int32(&pk, m->status);
	if (m->has_from) {
		msgpack_pack_array(&pk, 2);
		msgpack_pack_uint32(&pk, m->from_vindex);
		pack_bin(&pk, m->from_id.b, CFS_ID_BYTES);
	} else {
		msgpack_pack_nil(&pk);
	}
	if (m->has_to)
		pack_bin(&pk, m->to_id.b, CFS_ID_BYTES);
	else
		msgpack_pack_nil(&pk);
	if ((r = pack_coord(&pk, &m->coord)) < 0)
		return r;
	msgpack_pack_array(&pk, nf);
	for (unsigned i = 0; i < nf; i++)
		if ((r = pack_field(&pk, m, (enum fld)fields[i])) < 0)
			return r;
	if (ver >= 5)
		msgpack_pack_uint64(&pk, m->clock_ms);
	if (w.overflow)
		return -EMSGSIZE;
	*ret_len = w.len;
	return 0;
}

/* ------------------------------------------------------------ pre-scan */

/*
 * Walk the raw msgpack: every object's header must be complete, every
 * string/binary fit in what is left, every array count be at most the bytes
 * left (each element takes at least one), nesting at most SCAN_DEPTH deep
 * (messages need 5). Maps, extension types and 0xc1 are refused. Exactly
 * one top-level object, no trailing bytes.
 */
#define SCAN_DEPTH 8
int cfs_msgpack_prescan(const uint8_t *p, size_t len, const char **why)
{
	size_t off = 0, pending[SCAN_DEPTH + 1];
	unsigned depth = 0;

	pending[0] = 1;
	for (;;) {
		while (pending[depth] == 0) {
			if (depth == 0)
				goto end;
			depth--;
		}
		pending[depth]--;

		size_t left = len - off, hdr = 1;
		uint64_t body = 0, items = 0;
		bool array = false;
		uint8_t c;

		if (left == 0) {
			*why = "truncated";
			return -EPROTO;
		}
		c = p[off];
		if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3) {
			/* fixint, nil, bool */
		} else if (c >= 0x90 && c <= 0x9f) {
			items = c & 0x0f;
			array = true;
		} else if (c >= 0xa0 && c <= 0xbf) {
			body = c & 0x1f;
		} else {
			switch (c) {
			case 0xca: body = 4; break;
			case 0xcb: body = 8; break;
			case 0xcc: case 0xd0: body = 1; break;
			case 0xcd: case 0xd1: body = 2; break;
			case 0xce: case 0xd2: body = 4; break;
			case 0xcf: case 0xd3: body = 8; break;
			case 0xc4: case 0xd9: hdr = 2; break;
			case 0xc5: case 0xda: hdr = 3; break;
			case 0xc6: case 0xdb: hdr = 5; break;
			case 0xdc: hdr = 3; array = true; break;
			case 0xdd: hdr = 5; array = true; break;
			default:
				*why = (c >= 0x80 && c <= 0x8f) || c == 0xde || c == 0xdf
				       ? "maps are not used in messages"
				       : "unsupported msgpack type (extension or reserved)";
				return -EPROTO;
			}
			if (hdr > 1) {
				if (left < hdr) {
					*why = "truncated";
					return -EPROTO;
				}
				uint64_t n = cfs_get_be_n(p + off + 1, (unsigned)hdr - 1);
				if (array)
					items = n;
				else
					body = n;
			}
		}
		if (body > left - hdr) {
			*why = "truncated";
			return -EPROTO;
		}
		off += hdr + (size_t)body;
		if (array) {
			if (items > len - off) {
				*why = "array count exceeds the message size";
				return -EPROTO;
			}
			if (depth == SCAN_DEPTH) {
				*why = "nested too deeply";
				return -EPROTO;
			}
			pending[++depth] = (size_t)items;
		}
	}
end:
	if (off != len) {
		*why = "trailing bytes after the message";
		return -EPROTO;
	}
	return 0;
}

/* ------------------------------------------------------------ decoding */

#define BAD(msg) do { *why = (msg); return -EPROTO; } while (0)

static int get_uint(const msgpack_object *o, uint64_t max, uint64_t *ret, const char **why)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		BAD("expected an unsigned integer");
	if (o->via.u64 > max)
		BAD("integer out of range");
	*ret = o->via.u64;
	return 0;
}

static int get_u32(const msgpack_object *o, uint32_t *ret, const char **why)
{
	uint64_t v;
	int r = get_uint(o, UINT32_MAX, &v, why);
	if (r == 0)
		*ret = (uint32_t)v;
	return r;
}

static int get_bin(const msgpack_object *o, size_t min, size_t max,
                   struct cfs_bytes *ret, const char **why)
{
	if (o->type != MSGPACK_OBJECT_BIN)
		BAD("expected binary");
	if (o->via.bin.size < min || o->via.bin.size > max)
		BAD("binary field has the wrong length");
	ret->p = (const uint8_t *)o->via.bin.ptr;
	ret->len = o->via.bin.size;
	return 0;
}

static int get_fixed(const msgpack_object *o, void *out, size_t n, const char **why)
{
	struct cfs_bytes b;
	int r = get_bin(o, n, n, &b, why);
	if (r == 0)
		memcpy(out, b.p, n);
	return r;
}

static int get_coord(const msgpack_object *o, struct cfs_coord *c, const char **why)
{
	float v[4];

	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 4)
		BAD("a coordinate is an array of 4 floats");
	for (int i = 0; i < 4; i++) {
		const msgpack_object *e = &o->via.array.ptr[i];
		if (e->type != MSGPACK_OBJECT_FLOAT32 && e->type != MSGPACK_OBJECT_FLOAT64)
			BAD("a coordinate is an array of 4 floats");
		v[i] = (float)e->via.f64;
	}
	memcpy(c->v, v, sizeof(c->v));
	c->h = v[3];
	if (!coord_ok(c))
		BAD("coordinate not finite or out of range");
	return 0;
}

static int get_node(const msgpack_object *o, struct cfs_node *n, const char **why)
{
	const msgpack_object *a;
	struct cfs_bytes ip;
	uint64_t port, vindex;
	int r;

	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 5)
		BAD("a node is an array of 5 items");
	a = o->via.array.ptr;
	if ((r = get_fixed(&a[0], n->id.b, CFS_ID_BYTES, why)) < 0 ||
	    (r = get_bin(&a[1], 4, 16, &ip, why)) < 0 ||
	    (r = get_uint(&a[2], 65535, &port, why)) < 0 ||
	    (r = get_uint(&a[3], CFS_VNODE_INDEX_MAX - 1, &vindex, why)) < 0 ||
	    (r = get_coord(&a[4], &n->coord, why)) < 0)
		return r;
	if (port == 0)
		BAD("node port is zero");
	memset(&n->addr, 0, sizeof(n->addr));
	if (ip.len == 4) {
		n->addr.in4.sin_family = AF_INET;
		memcpy(&n->addr.in4.sin_addr, ip.p, 4);
		n->addr.in4.sin_port = htons((uint16_t)port);
	} else if (ip.len == 16) {
		n->addr.in6.sin6_family = AF_INET6;
		memcpy(&n->addr.in6.sin6_addr, ip.p, 16);
		n->addr.in6.sin6_port = htons((uint16_t)port);
	} else {
		BAD("node address is neither 4 nor 16 bytes");
	}
	n->vindex = (uint32_t)vindex;
	return 0;
}

static int get_field(const msgpack_object *o, struct cfs_msg *m, enum fld f, const char **why)
{
	struct cfs_bytes b;
	uint64_t v;
	int r;

	switch (f) {
	case F_KEY: return get_fixed(o, m->key.b, CFS_ID_BYTES, why);
	case F_HI: return get_fixed(o, m->hi.b, CFS_ID_BYTES, why);
	case F_NONCE: return get_fixed(o, m->nonce, CFS_NONCE_BYTES, why);
	case F_FLAGS: return get_u32(o, &m->flags, why);
	case F_NSUCC: return get_u32(o, &m->nsucc, why);
	case F_HOPS: return get_u32(o, &m->hops, why);
	case F_KIND: return get_u32(o, &m->kind, why);
	case F_COUNT: return get_u32(o, &m->count, why);
	case F_TIMEOUTS: return get_u32(o, &m->timeouts, why);
	case F_MODE: return get_u32(o, &m->mode, why);
	case F_LOOKUP_ID: return get_uint(o, UINT64_MAX, &m->lookup_id, why);
	case F_LEASE: return get_uint(o, UINT64_MAX, &m->lease_until, why);
	case F_PRED:
		if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > 1)
			BAD("a predecessor is an array of 0 or 1 node");
		m->has_pred = o->via.array.size == 1;
		return m->has_pred ? get_node(&o->via.array.ptr[0], &m->pred, why) : 0;
	case F_NODE: return get_node(o, &m->node, why);
	case F_NODES:
		if (o->type != MSGPACK_OBJECT_ARRAY)
			BAD("expected a node list");
		if (o->via.array.size > CFS_MSG_MAX_NODES)
			BAD("node list too long");
		for (uint32_t i = 0; i < o->via.array.size; i++)
			if ((r = get_node(&o->via.array.ptr[i], &m->nodes[i], why)) < 0)
				return r;
		m->n_nodes = o->via.array.size;
		return 0;
	case F_DATA:
		return get_bin(o, 0, CFS_BLOCK_MAX, &m->data, why);
	case F_BITMAP:
		return get_bin(o, 0, BITMAP_MAX, &m->data, why);
	case F_TEXT:
		if (o->type != MSGPACK_OBJECT_STR)
			BAD("expected text");
		if (o->via.str.size > TEXT_MAX)
			BAD("text too long");
		m->data.p = (const uint8_t *)o->via.str.ptr;
		m->data.len = o->via.str.size;
		return 0;
	case F_KEYS:
		if ((r = get_bin(o, 0, (size_t)CFS_MSG_MAX_KEYS * CFS_ID_BYTES, &b, why)) < 0)
			return r;
		if (b.len % CFS_ID_BYTES)
			BAD("key list length is not a multiple of 32");
		m->keys = (const struct cfs_id *)b.p;
		m->n_keys = (uint32_t)(b.len / CFS_ID_BYTES);
		return 0;
	case F_END:
		break;
	}
	(void)v;
	BAD("unknown field");
}

static int decode_tree(const msgpack_object *top, struct cfs_msg *m, const char **why)
{
	const msgpack_object *h, *body;
	const struct schema *s;
	const uint8_t *fields;
	uint64_t v;
	unsigned nf = 0;
	int r;

	if (top->type != MSGPACK_OBJECT_ARRAY || top->via.array.size < 2)
		BAD("a message is an array");
	h = top->via.array.ptr;
	if (h[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		BAD("version is not an unsigned integer");
	if (h[0].via.u64 < CFS_PROTO_VERSION_MIN || h[0].via.u64 > CFS_PROTO_VERSION) {
		*why = "unsupported protocol version";
		return -EPROTONOSUPPORT;
	}
	uint8_t ver = (uint8_t)h[0].via.u64;
	if (top->via.array.size != (ver >= 5 ? HDR_ITEMS + 1 : HDR_ITEMS))
		BAD(ver >= 5 ? "a version 5 message has exactly 10 items" : "a message has exactly 9 header items");
	if ((r = get_uint(&h[1], 255, &v, why)) < 0)
		return r;
	if (!(s = schema_of((unsigned)v))) {
		*why = "unknown message type";
		return -ENOMSG;
	}
	cfs_msg_init(m, (enum cfs_msg_type)v);
	m->version = ver;
	if (ver >= 5 && (r = get_uint(&h[9], UINT64_MAX, &m->clock_ms, why)) < 0)
		return r;
	if ((r = get_uint(&h[2], 1, &v, why)) < 0)
		return r;
	m->is_reply = v & 1;
	if ((r = get_uint(&h[3], UINT64_MAX, &m->reqid, why)) < 0)
		return r;
	if (h[4].type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		if (h[4].via.u64 != 0)
			BAD("status is zero or negative");
	} else if (h[4].type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		if (h[4].via.i64 < -4095)
			BAD("status out of range");
		if (!m->is_reply)
			BAD("a request carries no status");
		m->status = (int32_t)h[4].via.i64;
	} else {
		BAD("status is not an integer");
	}
	if (h[5].type == MSGPACK_OBJECT_ARRAY && h[5].via.array.size == 2) {
		m->has_from = true;
		if ((r = get_uint(&h[5].via.array.ptr[0], CFS_VNODE_INDEX_MAX - 1, &v, why)) < 0 ||
		    (r = get_fixed(&h[5].via.array.ptr[1], m->from_id.b, CFS_ID_BYTES, why)) < 0)
			return r;
		m->from_vindex = (uint32_t)v;
	} else if (h[5].type != MSGPACK_OBJECT_NIL) {
		BAD("sender is nil or [vindex, id]");
	}
	if (h[6].type != MSGPACK_OBJECT_NIL) {
		if ((r = get_fixed(&h[6], m->to_id.b, CFS_ID_BYTES, why)) < 0)
			return r;
		m->has_to = true;
	}
	if ((r = get_coord(&h[7], &m->coord, why)) < 0)
		return r;

	body = &h[8];
	if (body->type != MSGPACK_OBJECT_ARRAY)
		BAD("body is not an array");
	fields = m->is_reply ? s->rep : s->req;
	if (m->status == 0)
		while (nf < MAX_FIELDS && fields[nf] != F_END)
			nf++;
	if (body->via.array.size < nf)
		BAD("missing body fields");
	if (body->via.array.size > nf)
		BAD("extra body fields");
	for (unsigned i = 0; i < nf; i++)
		if ((r = get_field(&body->via.array.ptr[i], m, (enum fld)fields[i], why)) < 0)
			return r;
	return 0;
}

int cfs_msg_decode(const uint8_t *buf, size_t len, struct cfs_msg *ret, const char **ret_why)
{
	const char *why_dummy, **why = ret_why ? ret_why : &why_dummy;
	msgpack_zone zone;
	msgpack_object top;
	size_t off = 0;
	int r;

	if (len > CFS_FRAME_MAX) {
		*why = "message larger than the maximum";
		return -EMSGSIZE;
	}
	if ((r = cfs_msgpack_prescan(buf, len, why)) < 0)
		return r;
	if (!msgpack_zone_init(&zone, 2048))
		abort();
	switch (msgpack_unpack((const char *)buf, len, &off, &zone, &top)) {
	case MSGPACK_UNPACK_SUCCESS:
		r = decode_tree(&top, ret, why);
		break;
	default: /* the pre-scan makes this unreachable; still an error, not a crash */
		*why = "msgpack parse error";
		r = -EPROTO;
		break;
	}
	msgpack_zone_destroy(&zone);
	return r;
}
