/*
 * common/msg.h — every node-to-node and client-to-daemon message as a typed
 * struct, its msgpack codec (common/msg.c: versioned, decoded strictly)
 * and the strict allocation-free msgpack reader the block formats use.
 * Part of common's public interface: included by common/cfs.h, which other
 * modules include instead.
 */
#ifndef CFS_COMMON_MSG_H
#define CFS_COMMON_MSG_H

#include "common/cfs.h" /* ids, addresses */

/* The newest protocol version this code speaks, and the oldest it still
 * speaks (the previous release's): a message is encoded at the version
 * its cfs_msg names (0: the oldest), and both decode. Version 5 adds the
 * sender's wall clock to the header. */
#define CFS_PROTO_VERSION 5
#define CFS_PROTO_VERSION_MIN 4
/* Largest UDP payload over IPv4; every datagram is checked against it
 * before anything is decoded or allocated. */
#define CFS_DGRAM_MAX 65507
/* Largest UDP payload any datagram carries: the size QUIC
 * assumes every path takes (RFC 9000 14), so real links never fragment
 * one. A message longer than this travels as pieces (common/xfer.h). */
#define CFS_DGRAM_SAFE 1200
/* Largest message over UDP, in pieces; checked before anything is
 * allocated for it. */
#define CFS_MSG_MAX (192 * 1024)
/* Largest frame on a local UNIX stream (status reports can be long). */
#define CFS_FRAME_MAX (1u << 20)
/* Largest block: the format's largest block size (128 KiB, sfsro-format)
 * plus the block's own header. It travels as pieces. */
#define CFS_BLOCK_MAX (128 * 1024 + 256)
#define CFS_MSG_MAX_NODES 64    /* successor lists, lookup answers */
#define CFS_MSG_MAX_KEYS 1024   /* keys in one HAVE / REFRESH / SYNC batch */
#define CFS_NONCE_BYTES 16
/* Virtual-server indexes are below this, so one IP holds at most this many
 * ring positions (CFS 4.4: "a small maximum"; = CHORD_VNODES_MAX). */
#define CFS_VNODE_INDEX_MAX 64

/* A Vivaldi coordinate: 3 Euclidean dimensions plus a height, in ms. */
struct cfs_coord { float v[3]; float h; };

/* A virtual server as others see it. */
struct cfs_node {
	struct cfs_id id;
	struct cfs_addr addr;
	uint32_t vindex;
	struct cfs_coord coord;
};

struct cfs_bytes { const uint8_t *p; size_t len; };

/*
 * Message types. A request and its reply share the type; the reply flag
 * tells them apart. Each (type, direction) has a fixed body: see
 * common/msg.c and docs/PROTOCOL.md.
 */
enum cfs_msg_type {
	CFS_MSG_PING = 1,        /* liveness and RTT sample */
	CFS_MSG_AUTH,            /* CFS 4.4 / 5.4: echo a nonce from the claimed address */
	CFS_MSG_GET_PRED,        /* -> pred (0 or 1 node), nodes: successor list */
	CFS_MSG_GET_SUCCS,       /* -> nodes: successor list */
	CFS_MSG_NOTIFY,          /* node: "I might be your predecessor" */
	CFS_MSG_LEAVE,           /* graceful leave: pred and nodes (succs) to splice */
	CFS_MSG_ALERT,           /* key: a node ID found dead */
	CFS_MSG_FIND_NEXT,       /* iterative step (CFS Fig. 5): key, nsucc, flags -> flags, nodes */
	CFS_MSG_LOOKUP_FWD,      /* recursive step (DHash++ Fig. 10) */
	CFS_MSG_LOOKUP_DONE,     /* recursive answer, straight to the originator */
	CFS_MSG_STORE,           /* put a block: kind, key, lease, flags, data */
	CFS_MSG_FETCH,           /* get a block: key, flags -> kind, lease, data */
	CFS_MSG_HAVE,            /* which of keys are stored -> bitmap */
	CFS_MSG_REFRESH,         /* extend leases of keys -> bitmap of found */
	CFS_MSG_SYNC_DIGEST,     /* Merkle digests of [key, hi) in nsucc parts */
	CFS_MSG_SYNC_KEYS,       /* the keys stored in [key, hi), at most count */
	CFS_MSG_HELLO,           /* at the newest version: which version do you speak? The
	                          * transport answers it at the request's version */
	CFS_MSG_REACH,           /* nonce, node: dial me back there -> node: where you
	                          * saw this request come from */
	CFS_MSG_DIALBACK,        /* nonce: the dial-back, from a fresh socket; no reply */
	CFS_MSG_CTL_STATUS = 32, /* local: flags -> status report as text or JSON */
	CFS_MSG_CTL_LOOKUP,      /* local: look a key up in a given mode */
	CFS_MSG_CTL_GET,         /* local: DHash get */
	CFS_MSG_CTL_PUT,         /* local: DHash put -> key */
	CFS_MSG_CTL_HAVE,        /* local: does each key's successor hold it -> bitmap */
	CFS_MSG_CTL_REFRESH,     /* local: extend each key's lease on its replicas -> bitmap */
	CFS_MSG_CTL_KEYS,        /* local: a page of the stored keys after key -> flags, keys */
	CFS_MSG_CTL_PIN,         /* local: keep the volume whose public key is key alive */
	CFS_MSG_CTL_UNPIN,       /* local: stop keeping it (-ENOENT: not pinned) */
	CFS_MSG_CTL_PINS,        /* local: flags -> the pins and their last rounds, text or JSON */
	CFS_MSG_CTL_LOCATE,      /* local: which of key's k servers hold a good copy
	                          * -> nodes, one state byte each (dhash_copy_state) */
	CFS_MSG_CTL_DENY,        /* local: flags, key: deny a key or a volume, lift
	                          * one, or list -> flags, text */
	CFS_MSG_CTL_LEAVE,       /* local: flags (CFS_CTL_LEAVE_F_*) -> flags, text;
	                          * then the daemon leaves the ring and exits */
	CFS_MSG_CTL_PIN_VERSIONS,/* local: as CTL_PIN, keeping the newest count versions */
	CFS_MSG_CTL_GET_CODED,   /* local: coded get of key, count = m << 8 | n -> kind, data */
	CFS_MSG_CTL_PUT_CODED,   /* local: coded put of data, count = m << 8 | n -> key, lease */
	CFS_MSG_CTL_LOCATE_CODED,/* local: which of coded key's n holders hold their
	                          * fragment, count = m << 8 | n -> nodes, states */
	CFS_MSG_CTL_REPAIR_CODED,/* local: store the fragments flags (a bit mask) names
	                          * of data on nodes, count = m << 8 | n -> key, lease */
	CFS_MSG_CTL_GET_ROOT,    /* local: flags, a signed root's get -> flags, kind, data;
	                          * with CFS_GET_ROOT_F_EARLY an interim reply first */
	CFS_MSG_CTL_REFRESH_CODED,/* local: as CTL_REFRESH, for coded keys on their n
	                          * holders, count = m << 8 | n -> bitmap */
	CFS_MSG_TYPE_END
};

/* LEAVE reply flags. A LEAVE takes effect only when its nonce is a cookie
 * the receiver gave the leaving node's address (QUIC Retry, DNS cookies). */
#define CFS_LEAVE_F_COOKIE 0x1u /* reply: not applied; resend with this nonce */

/* CTL_LEAVE flags. */
#define CFS_CTL_LEAVE_F_DRAIN 0x1u /* first push every held block to its holders-to-be */
#define CFS_CTL_LEAVE_F_INCOMPLETE 0x2u /* reply: the drain did not hand every copy over */

/* CTL_STATUS (and CTL_PINS) flags. */
#define CFS_STATUS_F_JSON 0x1u
#define CFS_STATUS_F_HEALTH 0x2u /* one line: "healthy: ..." or "unhealthy: ..." */

/* CTL_DENY flags. Request: key is a block key, or with VOLUME a volume's
 * public key; REMOVE lifts it instead; LIST (key unused) asks for the list,
 * as JSON with JSON. Reply: PARTIAL when a volume's walk could not reach
 * every block (the text says what was denied). */
#define CFS_DENY_F_VOLUME  0x1u
#define CFS_DENY_F_REMOVE  0x2u
#define CFS_DENY_F_LIST    0x4u
#define CFS_DENY_F_JSON    0x8u
#define CFS_DENY_R_PARTIAL 0x1u

/* CTL_GET_ROOT flags. Request: EARLY asks for an interim reply with the
 * first root that verifies (one server's word) before the final one (the
 * read quorum's), on the same request ID. Reply: INTERIM marks that one.
 * A daemon that speaks CTL_GET_ROOT answers a PING on its control socket
 * with status 0 (an older one with -EOPNOTSUPP). */
#define CFS_GET_ROOT_F_EARLY   0x1u
#define CFS_GET_ROOT_R_INTERIM 0x1u

/* CTL_KEYS flags. */
#define CFS_KEYS_F_AFTER 0x1u /* request: the keys after key (else from the first) */
#define CFS_KEYS_F_MORE  0x1u /* reply: more keys follow the last one */

/* FIND_NEXT / LOOKUP flags. */
#define CFS_LOOKUP_F_CHECK_BLOCK 0x1u /* request: say if you hold the key's block */
#define CFS_LOOKUP_F_DONE        0x1u /* reply: nodes are the key's successors */
#define CFS_LOOKUP_F_HAS_BLOCK   0x2u /* reply: this node holds a copy */
#define CFS_LOOKUP_F_SELECT(f)   (((f) >> 8) & 0xfu) /* lookup_fwd: next-hop rule */
#define CFS_LOOKUP_F_VERIFY      0x4u /* ctl request: ping the answer's first
                                       * successors until one is alive */
#define CFS_LOOKUP_F_PARTIAL     0x10u /* find_next reply: nodes[0..count) are
                                        * candidates, the rest the key's first
                                        * successors (fewer than asked) */
#define CFS_LOOKUP_F_TO_PRED     0x20u /* request: answer only as the key's
                                        * predecessor, not early from a
                                        * successor list that covers it */
#define CFS_LOOKUP_F_WRAP_OK     0x40u /* request: the asker takes an answer
                                        * that wraps through the answerer
                                        * (it speaks version 5), whatever
                                        * version the request came at */

/*
 * One decoded (or to-be-encoded) message. The header fields are always
 * meaningful; of the body fields only those of the message's schema are.
 * Byte and key-list fields borrow the buffer they were decoded from.
 */
struct cfs_msg {
	/* header */
	uint8_t version;          /* encode: 0 (the oldest spoken) or a version spoken; decode: its version */
	uint64_t clock_ms;        /* version 5: the sender's wall clock at sending (ms since 1970), 0 unknown */
	uint8_t type;             /* enum cfs_msg_type */
	bool is_reply;
	int32_t status;           /* replies: 0 or a negative errno (then no body) */
	uint64_t reqid;           /* set by the transport */
	bool has_from;            /* sender is a ring member (else a plain client) */
	uint32_t from_vindex;
	struct cfs_id from_id;
	bool has_to;              /* addressed to one virtual server */
	struct cfs_id to_id;
	struct cfs_coord coord;   /* sender's Vivaldi coordinate */

	/* body */
	struct cfs_id key;        /* a key, a lookup target, a failed node, a range start */
	struct cfs_id hi;         /* a range end */
	uint8_t nonce[CFS_NONCE_BYTES];
	uint32_t flags;
	uint32_t nsucc;           /* successors wanted; parts of a digest range */
	uint32_t hops;
	uint32_t kind;            /* block kind (dhash) */
	uint32_t count;           /* a limit, or an RPC count */
	uint32_t timeouts;        /* RPC timeouts (lookup reports) */
	uint32_t mode;            /* lookup mode */
	uint64_t lookup_id;
	uint64_t lease_until;     /* wall-clock seconds */
	bool has_pred;
	struct cfs_node pred;
	struct cfs_node node;     /* notify target, lookup originator */
	struct cfs_bytes data;    /* block bytes, a bitmap, JSON text */
	const struct cfs_id *keys;/* borrowed, n_keys entries */
	uint32_t n_keys;
	uint32_t n_nodes;
	struct cfs_node nodes[CFS_MSG_MAX_NODES]; /* keep last: not cleared */
};

/* Reset header and body to empty (cheap: the node array is not wiped). */
void cfs_msg_init(struct cfs_msg *m, enum cfs_msg_type type);
/* The type's name, "?" when unknown. */
const char *cfs_msg_type_name(unsigned type);

/* Encode m into buf; *ret_len receives the length. -EMSGSIZE when it does
 * not fit in cap, -EINVAL when m is not a valid message of its type. */
int cfs_msg_encode(const struct cfs_msg *m, uint8_t *buf, size_t cap, size_t *ret_len) CFS_WUR;
/*
 * Decode exactly len bytes into ret. Strict: -EMSGSIZE over CFS_FRAME_MAX,
 * -EPROTONOSUPPORT for another version, -ENOMSG for an unknown type, -EPROTO
 * for anything else malformed (truncated, trailing bytes, wrong types,
 * missing or extra fields, values or lists out of range). *ret_why (if not
 * NULL) gets a static description. Never allocates more than a small
 * multiple of len. ret's byte fields point into buf.
 */
int cfs_msg_decode(const uint8_t *buf, size_t len, struct cfs_msg *ret, const char **ret_why) CFS_WUR;

/* Check raw msgpack before msgpack-c sees it: one complete top-level
 * value, no trailing bytes, every string/binary/array length within the
 * bytes left, nesting at most 8, no maps or extension types. 0, or -EPROTO
 * with *why set. Every decoder of untrusted msgpack calls this first. */
int cfs_msgpack_prescan(const uint8_t *p, size_t len, const char **why) CFS_WUR;

/*
 * A strict, allocation-free msgpack reader over a byte buffer, for formats
 * whose layout is fixed (the block formats). Each call reads one value of
 * the named kind at the cursor or fails with -EPROTO (cursor unchanged),
 * never reading past len. Strings and binaries borrow the buffer.
 */
struct cfs_mpr {
	const uint8_t *p;
	size_t len, off;
};
void cfs_mpr_init(struct cfs_mpr *r, const uint8_t *p, size_t len);
/* An array header; *ret_n is its item count (checked against bytes left). */
int cfs_mpr_array(struct cfs_mpr *r, uint32_t *ret_n) CFS_WUR;
/* An array of exactly n items. */
int cfs_mpr_array_n(struct cfs_mpr *r, uint32_t n) CFS_WUR;
int cfs_mpr_uint(struct cfs_mpr *r, uint64_t max, uint64_t *ret) CFS_WUR;
int cfs_mpr_int(struct cfs_mpr *r, int64_t *ret) CFS_WUR;
int cfs_mpr_bin(struct cfs_mpr *r, size_t min, size_t max, struct cfs_bytes *ret) CFS_WUR;
int cfs_mpr_str(struct cfs_mpr *r, size_t min, size_t max, struct cfs_bytes *ret) CFS_WUR;
/* The string s exactly. */
int cfs_mpr_expect_str(struct cfs_mpr *r, const char *s) CFS_WUR;
/* 0 when the cursor is at the end of the buffer. */
int cfs_mpr_end(const struct cfs_mpr *r) CFS_WUR;

#endif
