/*
 * common — the shared lower layer of CFS: everything chord/, dhash/, the
 * daemon and the file-system tools stand on.
 *
 *   - 256-bit identifiers and ring arithmetic modulo 2^256
 *   - BLAKE2b-256 hashing and Ed25519 signatures (libsodium only)
 *   - the canonical text form of keys and volume names
 *   - leveled logging to stderr, monotonic time, a seeded RNG, histograms
 *   - the message codec: every node-to-node and client-to-daemon message,
 *     msgpack-encoded, versioned, decoded strictly
 *   - the UDP RPC transport (request IDs, timeouts, STP window) and the
 *     length-prefixed framing for local UNIX-socket clients
 *
 * The message structs and codec live in common/msg.h, the evaluation-only
 * network models in common/netmodel.h; this header includes both, and is
 * the one other modules include.
 *
 * Errors are negative errno values; see docs/PROTOCOL.md for the wire format.
 * Nothing here knows about the ring, blocks or file systems.
 */
#ifndef CFS_COMMON_H
#define CFS_COMMON_H

#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <uv.h>

#define CFS_WUR __attribute__((warn_unused_result))

/* The release every program's --version prints ("PROGRAM VERSION"). */
#define CFS_VERSION "0.1.0"

/* Defined in common/msg.h and common/netmodel.h (included below), named
 * here so that a file including one of those first still compiles. */
struct cfs_msg;
struct cfs_coord;
struct cfs_netmodel;

#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif
#define CFS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------ memory */

/* Allocate or abort: out of memory is not an error callers handle. */
void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
void *xmemdup(const void *p, size_t n);

/* Make directory path and any missing parents (mode for each one made);
 * 0 when it exists afterwards, else a negative errno. */
int cfs_mkdir_p(const char *path, unsigned mode);
/* path made absolute against the working directory (unchanged when it
 * is already), in place; -ENAMETOOLONG, or -errno of getcwd. A daemonized
 * process changes directory, so relative paths from its command line are
 * resolved before that. */
int cfs_abs_path(char *path, size_t n);
/* This process's resident memory in KiB (0 when /proc cannot tell). */
uint64_t cfs_rss_kib(void);

/* A per-user directory of ours after the XDG rule: as root, as_root (when
 * not NULL); else $<xdg_var>/cfs; else $HOME/<home_sub>/cfs (home_sub
 * e.g. ".cache"). -ENOENT when neither variable is set, -ENAMETOOLONG. */
int cfs_user_dir(char *buf, size_t n, const char *as_root, const char *xdg_var,
                 const char *home_sub);

/* A number kept in a one-line file (a volume's highest root sequence):
 * load gives 0 when the file is missing or unreadable; store writes a
 * temporary file, syncs and renames it, so a crash leaves the old value
 * or the new one. */
uint64_t cfs_num_load(const char *path);
int cfs_num_store(const char *path, uint64_t v) CFS_WUR;
/* Replace path by len bytes, atomically and durably: a temporary file
 * (mode), flushed, renamed into place, its directory flushed. */
int cfs_write_file_atomic(const char *path, const void *p, size_t len, unsigned mode) CFS_WUR;

/* A growing text buffer (status reports, JSON). */
struct cfs_sbuf {
	char *p;
	size_t len, cap;
};
void cfs_sb_printf(struct cfs_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal: quotes, backslashes and control bytes escaped. */
void cfs_sb_json_str(struct cfs_sbuf *b, const char *s);

/* ------------------------------------------------------------ byte order */

/* Big-endian (network order) integers in byte buffers: the one copy of
 * these for the wire, the on-disk indexes and the hash inputs. */
static inline void cfs_put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void cfs_put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void cfs_put_be64(uint8_t *p, uint64_t v)
{
	cfs_put_be32(p, (uint32_t)(v >> 32));
	cfs_put_be32(p + 4, (uint32_t)v);
}

static inline uint16_t cfs_get_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t cfs_get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t cfs_get_be64(const uint8_t *p)
{
	return (uint64_t)cfs_get_be32(p) << 32 | cfs_get_be32(p + 4);
}

/* The n-byte big-endian unsigned integer at p, n <= 8 (msgpack's 1-, 2-,
 * 4- and 8-byte lengths and integers). */
static inline uint64_t cfs_get_be_n(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* ------------------------------------------------------------ status */

/*
 * A module's status, described once: a table of entries, each a value in
 * a snapshot struct the module fills (its offset, kind and unit) with its
 * JSON key and its text label. One renderer walks the table for both
 * `cfsctl status` and `status --json`, so the two cannot drift apart.
 *
 * CFS_STAT_GROUP opens a group: in JSON an object under name (or, name
 * NULL, nothing: its members go to the enclosing object), in text a new
 * line headed by label. CFS_STAT_END closes it. Text lines read
 * "HEADING     label value unit, label value unit, ...".
 */
enum cfs_stat_kind {
	CFS_STAT_U64, CFS_STAT_U32, CFS_STAT_DBL, CFS_STAT_STR, CFS_STAT_BOOL,
	CFS_STAT_GROUP, CFS_STAT_END
};
struct cfs_stat {
	const char *name;        /* JSON key */
	const char *label;       /* text label (a group's: the line heading) */
	uint8_t kind;            /* enum cfs_stat_kind */
	uint8_t prec;            /* CFS_STAT_DBL: digits after the point */
	uint16_t off;            /* offsetof the value in the snapshot */
	const char *unit;        /* text only: "us", "bytes", ... or NULL */
};
#define CFS_STAT(kind, snap, field, name, label, unit) \
	{ name, label, CFS_STAT_##kind, 0, (uint16_t)offsetof(snap, field), unit }
#define CFS_STAT_D(snap, field, prec, name, label, unit) \
	{ name, label, CFS_STAT_DBL, prec, (uint16_t)offsetof(snap, field), unit }
#define CFS_STAT_BEGIN(name, label) { name, label, CFS_STAT_GROUP, 0, 0, NULL }
#define CFS_STAT_CLOSE { NULL, NULL, CFS_STAT_END, 0, 0, NULL }

/* Render the n entries of table over snap into b. JSON: members of an
 * object the caller opened, a comma before the first one unless *first
 * (cleared as members are written). Text: whole lines. */
void cfs_stat_render(struct cfs_sbuf *b, bool json, const struct cfs_stat *table, size_t n,
                     const void *snap, bool *first);

/*
 * Human units for text reports (JSON keeps the raw numbers). The text
 * renderer applies them by unit: "bytes" (and a unit-less entry whose
 * name contains "bytes") as B/KiB/MiB/GiB/TiB, "bytes/s" likewise per
 * second, "us" and "ms" as us/ms/s, "s" as a duration (3d 4h, 5m 2s).
 * Each writes a NUL-terminated string into buf and returns it.
 */
#define CFS_HUMAN_LEN 24
const char *cfs_human_bytes(char buf[static CFS_HUMAN_LEN], double bytes);
const char *cfs_human_us(char buf[static CFS_HUMAN_LEN], double us);
const char *cfs_human_duration(char buf[static CFS_HUMAN_LEN], uint64_t seconds);

/* ------------------------------------------------------------ logging */

enum cfs_log_level { CFS_LOG_ERROR, CFS_LOG_WARN, CFS_LOG_INFO, CFS_LOG_DEBUG };

/* Set the program name and threshold; CFS_LOG_LEVEL in the environment
 * (error, warn, info, debug) overrides the level given here. */
void cfs_log_init(const char *progname, enum cfs_log_level level);
void cfs_log_set_level(enum cfs_log_level level);
enum cfs_log_level cfs_log_get_level(void);
/* Parse "error", "warn", "info" or "debug"; -EINVAL otherwise. */
int cfs_log_parse_level(const char *s, enum cfs_log_level *ret);
void cfs_log(enum cfs_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Log "msg: strerror(-r)" at `level` and return r, so call sites can write
 * `return log_error_errno(r, "...")`. */
int cfs_log_errno(enum cfs_log_level level, int r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* For command-line tools: print "PROG: reason" and the usage line to
 * stderr, and exit 2. PROG is the name given to cfs_log_init. */
_Noreturn void cfs_usage_error(const char *usage, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A lease in days ("30", "0.5", "0.0002"), from more than 0 up to 3650,
 * as whole seconds (at least 1) in *ret_s: 0, or -EINVAL. */
int cfs_parse_days(const char *s, uint64_t *ret_s) CFS_WUR;

#define log_error(...) cfs_log(CFS_LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  cfs_log(CFS_LOG_WARN, __VA_ARGS__)
#define log_info(...)  cfs_log(CFS_LOG_INFO, __VA_ARGS__)
#define log_debug(...) \
	do { if (cfs_log_get_level() >= CFS_LOG_DEBUG) cfs_log(CFS_LOG_DEBUG, __VA_ARGS__); } while (0)
#define log_error_errno(r, ...) cfs_log_errno(CFS_LOG_ERROR, (r), __VA_ARGS__)
#define log_warn_errno(r, ...)  cfs_log_errno(CFS_LOG_WARN, (r), __VA_ARGS__)

/* ------------------------------------------------------------ progress */

/*
 * The progress bar of the tools that move a tree (cfs-publish, cfs-get),
 * drawn on stderr: files and bytes done of the totals, a percentage (of
 * bytes; of files for a tree of empty files), the rate since the mark and
 * an ETA from it. The caller owns the counters and sets the mark
 * (rate_us, rate_bytes) when the transfer proper starts.
 */
struct cfs_progress {
	bool on;                  /* draw at all: stderr is a terminal, no --quiet */
	uint64_t total_files, total_bytes;
	uint64_t done_files, done_bytes;
	uint64_t rate_us, rate_bytes; /* the rate is measured from here (0: not yet) */
	uint64_t drawn_us;        /* the last draw (0: never) */
};
/* Bytes in decimal units, as the transfer tools' summary lines give them
 * ("12.3 MB"; cfs_human_bytes above is binary, for status reports). */
const char *cfs_decimal_bytes(uint64_t n, char buf[static 16]);
/* The bar's text at now_us into buf (n bytes); returns its length. */
size_t cfs_progress_line(const struct cfs_progress *p, uint64_t now_us, char *buf, size_t n);
/* Redraw the bar when on, at most every 100 ms. */
void cfs_progress_draw(struct cfs_progress *p, uint64_t now_us);
/* Erase the bar (if one was drawn), for the summary line that follows. */
void cfs_progress_clear(struct cfs_progress *p);

/* ------------------------------------------------------------ time, rng */

/* Monotonic clock, never goes back; for timeouts and RTTs. */
uint64_t cfs_now_us(void);
uint64_t cfs_now_ms(void);
/* Wall-clock seconds (ms) since the epoch; for issue and expiry times
 * only. Both add the process's test offset (cfs_wall_set_offset_s, or
 * the environment's CFS_TEST_CLOCK_OFFSET_S: a program whose clock is
 * wrong, for tests; 0 otherwise). */
uint64_t cfs_wall_s(void);
uint64_t cfs_wall_ms(void);
void cfs_wall_set_offset_s(int64_t s);

/* xoshiro256** — fast, seedable, reproducible: same seed, same sequence.
 * Not for secrets (use randombytes_buf for nonces and keys). */
struct cfs_rng { uint64_t s[4]; };
void cfs_rng_seed(struct cfs_rng *r, uint64_t seed);
uint64_t cfs_rng_next(struct cfs_rng *r);
/* Uniform in [0, 1). */
double cfs_rng_double(struct cfs_rng *r);

/* ------------------------------------------------------------ running a loop (loop.c) */

/* Every uv_run goes through these, from the top of a program only: a call
 * made from inside a callback of a running loop is a bug (it asserts). */
/* Run the loop until *done is set: 0, or -EDEADLK when nothing is left
 * on the loop that could set it. */
int cfs_loop_run_until(uv_loop_t *loop, const bool *done);
/* Run the loop until nothing is active on it (UV_RUN_DEFAULT). */
void cfs_loop_run(uv_loop_t *loop);
/* Handle what is ready now without blocking (UV_RUN_NOWAIT). */
void cfs_loop_poll(uv_loop_t *loop);
/* Is a loop running under one of the calls above on this thread? */
bool cfs_loop_is_running(void);

/* ------------------------------------------------------------ histogram */

/* Log-linear histogram of non-negative integers (e.g. microseconds):
 * 16 sub-buckets per power of two, so quantiles are within ~6 %. */
#define CFS_HIST_BUCKETS (16 * 44)
struct cfs_hist {
	uint64_t count, sum, min, max;
	uint64_t b[CFS_HIST_BUCKETS];
};
void cfs_hist_reset(struct cfs_hist *h);
void cfs_hist_add(struct cfs_hist *h, uint64_t v);
/* The value at quantile q in [0, 1] (upper edge of its bucket, capped at
 * max); 0 when empty. */
uint64_t cfs_hist_quantile(const struct cfs_hist *h, double q);
double cfs_hist_mean(const struct cfs_hist *h);

/* ------------------------------------------------------------ identifiers */

#define CFS_ID_BYTES 32
#define CFS_ID_BITS 256

/* A point on the identifier circle, big-endian: b[0] is most significant. */
struct cfs_id { uint8_t b[CFS_ID_BYTES]; };

int cfs_id_cmp(const struct cfs_id *a, const struct cfs_id *b);
bool cfs_id_eq(const struct cfs_id *a, const struct cfs_id *b);
bool cfs_id_is_zero(const struct cfs_id *a);
/* ret = a + b mod 2^256 (ret may alias a or b). */
void cfs_id_add(struct cfs_id *ret, const struct cfs_id *a, const struct cfs_id *b);
/* ret = a - b mod 2^256. */
void cfs_id_sub(struct cfs_id *ret, const struct cfs_id *a, const struct cfs_id *b);
/* ret = clockwise distance from `from` to `to`: to - from mod 2^256. */
void cfs_id_distance(struct cfs_id *ret, const struct cfs_id *from, const struct cfs_id *to);
/* ret = a + 2^i mod 2^256, 0 <= i < 256 (the start of finger i+1). */
void cfs_id_add_pow2(struct cfs_id *ret, const struct cfs_id *a, unsigned i);
/* a / 2^bits (bits >= 256 gives 0). */
void cfs_id_shr(struct cfs_id *ret, const struct cfs_id *a, unsigned bits);
/*
 * Interval membership on the circle, walking clockwise from a to b.
 * When a == b the interval wraps the whole circle: (a, a) is every point but
 * a, (a, a] and [a, a) are every point. This is the Chord convention: a lone
 * node is the successor of every key. An empty interval is (a, a+1).
 */
bool cfs_id_in_oo(const struct cfs_id *x, const struct cfs_id *a, const struct cfs_id *b);
bool cfs_id_in_oc(const struct cfs_id *x, const struct cfs_id *a, const struct cfs_id *b);
bool cfs_id_in_co(const struct cfs_id *x, const struct cfs_id *a, const struct cfs_id *b);
/* The id as a fraction of the circle, in [0, 1). */
double cfs_id_to_unit(const struct cfs_id *a);
/* First 8 hex digits, for logs: buf must hold 9 bytes. Returns buf. */
const char *cfs_id_short(const struct cfs_id *a, char buf[static 9]);
/* All 64 hex digits: buf must hold 65 bytes. Returns buf. */
const char *cfs_id_hex(const struct cfs_id *a, char buf[static 65]);
/* Parse exactly 64 hex digits (either case); -EINVAL otherwise. */
int cfs_id_from_hex(struct cfs_id *ret, const char *s) CFS_WUR;

/* ------------------------------------------------------------ hash table */

/*
 * The one growable hash table (common/htab.c): fixed-size entries, a key
 * of key_len bytes compared as bytes and a value of val_len bytes, both
 * stored in the table; open addressing, at most 3/4 full, no tombstones.
 * Values are aligned for any integer or pointer of their size. A pointer
 * returned by get or put stays valid until the next put, del, filter or
 * free on the table. Give a table its sizes with cfs_htab_init first.
 */
struct cfs_htab {
	uint8_t *e;              /* cap entries of esize bytes */
	uint8_t *used;           /* cap flags */
	size_t cap, n;
	uint32_t key_len, val_len, val_off, esize;
};
typedef bool (*cfs_htab_keep_fn)(void *ctx, const void *key, void *val);

/* A seeded 64-bit hash of n bytes (the table's; not for anything kept). */
uint64_t cfs_hash64(const void *p, size_t n);
/* Make t an empty table of key_len-byte keys and val_len-byte values. */
void cfs_htab_init(struct cfs_htab *t, size_t key_len, size_t val_len);
/* The value stored under key, or NULL. */
void *cfs_htab_get(const struct cfs_htab *t, const void *key);
/* The value under key, added (zeroed; *ret_added true) if it was not there. */
void *cfs_htab_put(struct cfs_htab *t, const void *key, bool *ret_added);
/* Remove key, copying its value to ret_val (if not NULL); false if absent. */
bool cfs_htab_del(struct cfs_htab *t, const void *key, void *ret_val);
size_t cfs_htab_count(const struct cfs_htab *t);
/* Walk the entries: *pos starts at 0; false once they are all seen. No put
 * or del during a walk (use cfs_htab_filter). */
bool cfs_htab_next(const struct cfs_htab *t, size_t *pos, const void **ret_key, void **ret_val);
/* Keep only the entries keep() says yes to; returns how many were dropped.
 * keep may release what a dropped value owns. */
size_t cfs_htab_filter(struct cfs_htab *t, cfs_htab_keep_fn keep, void *ctx);
/* Remove every entry, keeping the memory. */
void cfs_htab_clear(struct cfs_htab *t);
/* Release the table's memory (not what its values point to). */
void cfs_htab_free(struct cfs_htab *t);

/* A map from ids to 32-bit values: a cfs_htab sized for them.
 * Zero-initialise to use. */
struct cfs_idmap {
	struct cfs_htab t;
};

/* true and *ret (if not NULL) set when k is in the map. */
bool cfs_idmap_get(const struct cfs_idmap *m, const struct cfs_id *k, uint32_t *ret);
/* Insert k or replace its value. */
void cfs_idmap_put(struct cfs_idmap *m, const struct cfs_id *k, uint32_t v);
void cfs_idmap_free(struct cfs_idmap *m);

/* ------------------------------------------------------------ action queue */

/*
 * The one queue of actions that a state machine doing no I/O returns to
 * its driver (common/actq.c): entries of one fixed size (the machine's
 * action struct), first in first out, grown on demand. Zero-initialise to
 * use; every push and pop names the entry size, always the same one. A
 * pointer from push or peek stays valid until the next push or free.
 */
struct cfs_actq {
	uint8_t *a;              /* cap entries of size bytes */
	size_t size;
	uint32_t head, n, cap;   /* entries [head, n) are queued */
};

/* Queue a zeroed entry of size bytes and return it for the caller to fill. */
void *cfs_actq_push(struct cfs_actq *q, size_t size);
/* Take the oldest entry into ret (size bytes); false when none is left. */
bool cfs_actq_pop(struct cfs_actq *q, void *ret, size_t size);
/* The oldest entry without taking it, or NULL when none is left. */
const void *cfs_actq_peek(const struct cfs_actq *q);
/* Release the queue's memory; it is empty and usable again. */
void cfs_actq_free(struct cfs_actq *q);

/* ------------------------------------------------------------ fan-in */

/*
 * One operation that fans out into requests and finishes when the last
 * one has ended (common/fanin.c): the count of requests out and the first
 * error any ended with. Zero-initialise; cfs_fanin_add before starting each
 * request, cfs_fanin_end when it ends (or at once, when it could not
 * start). A caller starting several adds one for itself first and ends it
 * last, so that no early answer finishes the whole while it is still
 * starting requests.
 */
struct cfs_fanin {
	uint32_t out;            /* requests not ended yet (a starter's hold included) */
	int status;              /* the first negative status any ended with, else 0 */
};

/* Count one more request out. */
void cfs_fanin_add(struct cfs_fanin *f);
/* End one request with status, keeping the first error; true when it was
 * the last one out: the caller finishes the whole now, with f->status. */
bool cfs_fanin_end(struct cfs_fanin *f, int status);

/* ------------------------------------------------------------ crypto */

#define CFS_HASH_BYTES 32
#define CFS_PUBKEY_BYTES 32
#define CFS_SECKEY_BYTES 64
#define CFS_SIG_BYTES 64

struct cfs_pubkey { uint8_t b[CFS_PUBKEY_BYTES]; };
struct cfs_seckey { uint8_t b[CFS_SECKEY_BYTES]; };

/* Initialise libsodium; call once before anything below. 0 or -EIO. */
int cfs_crypto_init(void);

/* BLAKE2b-256 of the bytes as given. */
void cfs_hash(struct cfs_id *ret, const void *data, size_t len);
/* Incremental BLAKE2b-256, for hashes over several pieces. */
struct cfs_hasher { uint8_t opaque[384] __attribute__((aligned(64))); };
void cfs_hasher_init(struct cfs_hasher *h);
void cfs_hasher_update(struct cfs_hasher *h, const void *data, size_t len);
void cfs_hasher_final(struct cfs_hasher *h, struct cfs_id *ret);

/* Make an Ed25519 key pair from the system's CSPRNG. */
void cfs_sign_keypair(struct cfs_pubkey *ret_pk, struct cfs_seckey *ret_sk);
/* Make the key pair determined by a 32-byte seed (test vectors, key files). */
void cfs_sign_seed_keypair(const uint8_t seed[static 32], struct cfs_pubkey *ret_pk,
                           struct cfs_seckey *ret_sk);
/* Derive the public key held inside a secret key. */
void cfs_seckey_pubkey(const struct cfs_seckey *sk, struct cfs_pubkey *ret_pk);
/* Sign msg; sig receives CFS_SIG_BYTES bytes. */
void cfs_sign(uint8_t sig[static CFS_SIG_BYTES], const void *msg, size_t len,
              const struct cfs_seckey *sk);
/* 0 if sig is pk's signature of msg, -EBADMSG otherwise. */
int cfs_verify(const uint8_t sig[static CFS_SIG_BYTES], const void *msg, size_t len,
               const struct cfs_pubkey *pk) CFS_WUR;
/* Wipe a secret key (sodium_memzero). */
void cfs_seckey_wipe(struct cfs_seckey *sk);
/* Wipe any secret bytes; never optimised away. */
void cfs_wipe(void *p, size_t n);

/* ------------------------------------------------------------ text names */

/*
 * The one canonical text form of a 32-byte key or volume name: lowercase
 * RFC 4648 base32, unpadded, exactly 52 characters, the 4 unused low bits
 * of the last character zero. Every tool prints and accepts only this.
 */
#define CFS_NAME_LEN 52
/* Encode; out receives CFS_NAME_LEN characters and a NUL. */
void cfs_name_encode(char out[static CFS_NAME_LEN + 1], const uint8_t in[static 32]);
/* Decode s; -EINVAL with *ret_why (a static string) for anything but the
 * canonical form: wrong length, a character outside a-z2-7, padding,
 * uppercase, nonzero trailing bits. */
int cfs_name_decode(uint8_t out[static 32], const char *s, const char **ret_why) CFS_WUR;
/* Decode a volume as readers name it: NAME, NAME@latest or NAME@SEQ,
 * then, where ret_path is given, an optional /path (*ret_path points at
 * its '/', or at the empty string). *ret_seq: the version asked for, 0 for
 * the newest. -EINVAL with *ret_why otherwise (a path where ret_path is
 * NULL, @0, a number with a leading zero or over 19 digits). */
int cfs_volume_spec_parse(const char *s, uint8_t out[static 32], uint64_t *ret_seq,
                          const char **ret_path, const char **ret_why) CFS_WUR;

/* ------------------------------------------------------------ mounts */

/*
 * A mounted volume shows in /proc/self/mountinfo as type fuse.cfs with
 * source cfs:<the volume name's first 16 characters>. cfs_mounts_each
 * calls cb with each such mount point (unescaped) whose source matches
 * volume (NULL: every cfs mount); cb returns false to stop. Returns the
 * number of calls, or -errno when mountinfo cannot be read.
 */
int cfs_mounts_each(const char *volume, bool (*cb)(void *arg, const char *mnt, const char *src),
                    void *arg);

/*
 * "Check for a newer root now": an ioctl on a mount's root directory
 * (cfsctl update). The mount answers once the check is done, with the
 * version it served before and the one it serves now; status is 0 or a
 * negative errno of the check (the ring could not be asked, the root it
 * gave was refused).
 */
struct cfs_update_reply {
	uint64_t seq_before, seq_now;
	int32_t status;
	uint32_t reserved;
};
#define CFS_IOC_UPDATE _IOR('c', 0x55, struct cfs_update_reply)

/* ------------------------------------------------------------ addresses */

/* A UDP endpoint, IPv4 or IPv6. */
struct cfs_addr {
	union {
		struct sockaddr sa;
		struct sockaddr_in in4;
		struct sockaddr_in6 in6;
	};
};
/* Parse "HOST:PORT", "[V6]:PORT" or a bare "PORT" (loopback), numeric
 * hosts and names ("localhost"). -EINVAL (bad syntax) or -EADDRNOTAVAIL (a
 * name that does not resolve), with a message logged, otherwise. */
int cfs_addr_parse(struct cfs_addr *ret, const char *s) CFS_WUR;
/* Build from an IP literal and a port; -EINVAL if host is not a literal. */
int cfs_addr_from_ip(struct cfs_addr *ret, const char *ip, uint16_t port) CFS_WUR;
/* "1.2.3.4:5" or "[::1]:5"; buf must hold CFS_ADDR_STRLEN bytes. */
#define CFS_ADDR_STRLEN 64
const char *cfs_addr_str(const struct cfs_addr *a, char buf[static CFS_ADDR_STRLEN]);
bool cfs_addr_eq(const struct cfs_addr *a, const struct cfs_addr *b);
uint16_t cfs_addr_port(const struct cfs_addr *a);
socklen_t cfs_addr_len(const struct cfs_addr *a);
/* The raw IP bytes (4 or 16) of a, for hashing and the wire. */
size_t cfs_addr_ip_bytes(const struct cfs_addr *a, const uint8_t **ret_ip);
/* The same IP address, whatever the ports (one address, one vote). */
bool cfs_addr_same_ip(const struct cfs_addr *a, const struct cfs_addr *b);

/* CFS 4.4: a virtual server's ID is H(IP ‖ index), the IP as 4 or 16 raw
 * bytes and the index (below CFS_VNODE_INDEX_MAX) as 4 bytes big-endian.
 * The port is not hashed: every process on one IP shares its indexes, so
 * one address holds at most CFS_VNODE_INDEX_MAX ring positions. */
void cfs_node_id(struct cfs_id *ret, const struct cfs_addr *a, uint32_t vindex);

/* ------------------------------------------------------------ messages */

/* The message bodies and their codec: common/msg.h. */
#include "common/msg.h"

/* ------------------------------------------------------------ transport */

/*
 * The UDP RPC transport: one socket per process, requests matched to
 * replies by request ID, a timeout per request that is reported to the
 * caller (who decides where to try again: a call that failed is never
 * sent again here; within its timeout, a lost datagram of it is), and
 * STP window control (DHash++ 5.2): w grows by 1/w per reply and halves per
 * timeout, and at most 3w requests are in flight; the rest wait in order.
 * All callbacks run on the loop, never inside the call that started them.
 */
typedef struct cfs_transport cfs_transport_t;

struct cfs_transport_config {
	const char *host;        /* bind address literal; NULL = "::" (dual stack) */
	uint16_t port;           /* 0 = any */
	double window_init;      /* STP w at start (default 4) */
	double window_max;       /* cap on w (default 256) */
	uint32_t timeout_ms;     /* RTO when nothing is known (default 1000) */
	uint32_t timeout_max_ms; /* cap on any computed RTO (default 5000) */
	uint32_t timeout_min_ms; /* floor of any computed RTO (default CFS_RTO_MIN_MS;
	                          * 0: eq. (2) alone); fixed timeouts are kept */
	/* Messages longer than CFS_DGRAM_SAFE travel as pieces. */
	uint32_t xfer_inflight_max;  /* bytes of pieces in flight, every peer (default 4 MiB) */
	uint32_t reasm_peer_max;     /* bytes being reassembled from one peer (default 8 MiB) */
	uint32_t reasm_total_max;    /* ... from every peer (default 64 MiB) */
	uint32_t reasm_idle_ms;      /* a reassembly with no piece for this long is dropped
	                              * (default 10000) */
	uint32_t ledbat_target_ms;   /* queueing delay background transfers allow (default 25) */
	uint32_t validation_slots;   /* addresses whose proof (or budget) is kept (default 4096) */
	/* The upload cap: bytes a second of every datagram sent (0: none).
	 * Pieces wait for it, the background class behind the foreground;
	 * whole datagrams are sent at once and counted, so that pieces make
	 * up for them. */
	uint64_t upload_bytes_per_s;
};
/* The default RTO floor: a busy peer's loop, not the wire, sets the round
 * trip on one machine. */
#define CFS_RTO_MIN_MS 200
void cfs_transport_config_default(struct cfs_transport_config *c);

/* Per-call options; NULL means defaults. */
struct cfs_call_opts {
	uint32_t timeout_ms;       /* fixed timeout; 0 = computed RTO */
	uint32_t predicted_rtt_us; /* Vivaldi prediction v; 0 = use the smoothed RTT */
	/* Background work (node authentication): sent at once outside the
	 * window and never moving it, so its timeouts cannot slow client
	 * calls; the caller bounds how many it has in flight. */
	bool background;
	/* The background class (repair, sync, cache pushes): the
	 * request's pieces and the reply's yield to other traffic (LEDBAT). */
	bool low_priority;
	/* The answer may be longer than three times the request (a lookup's):
	 * to a peer that may not hold our address proven, padding goes first
	 * (cfs__links_pad), so that the answer needs no token round trip. */
	bool pad;
};

/* Where a request came from: copy it to reply later. */
struct cfs_reply_to {
	struct cfs_addr addr;
	uint64_t reqid;
	uint8_t type;
	bool has_to;                   /* the request named a node: the reply names it */
	struct cfs_id to_id;
	bool low_priority;             /* asked in the background class: so is the reply */
	uint32_t in_len;               /* the request's length (bounds answers to strangers) */
	uint8_t version;               /* the request's protocol version: the reply's */
};

struct cfs_rpc_result {
	uint64_t rtt_us;               /* measured round trip, 0 unless a reply */
	const struct cfs_addr *from;   /* who answered (== destination) */
};

/* A reply arrived (status 0 or the reply's own negative status, reply set)
 * or the call ended without one: -ETIMEDOUT, -ECANCELED (reply NULL). The
 * reply is valid only during the callback. */
typedef void (*cfs_reply_cb)(void *arg, int status, const struct cfs_msg *reply,
                             const struct cfs_rpc_result *res);
/* A request arrived. req is valid only during the callback; answer now or
 * later with cfs_transport_reply(from). */
typedef void (*cfs_request_cb)(void *arg, const struct cfs_msg *req,
                               const struct cfs_reply_to *from);

/* The evaluation-only network models (cfs_netmodel, cfs_wan): common/netmodel.h. */
#include "common/netmodel.h"

struct cfs_transport_stats {
	uint64_t calls;          /* requests accepted by cfs_transport_call */
	uint64_t replies;        /* ... that ended with a reply */
	uint64_t timeouts;       /* ... that timed out */
	uint64_t timeouts_deferred; /* deadlines moved on: the peer was busy answering earlier calls */
	uint64_t cancelled;      /* ... cancelled by close */
	uint64_t requests_in;    /* requests received */
	uint64_t replies_out;    /* replies sent */
	uint64_t malformed;      /* datagrams dropped as malformed */
	uint64_t unmatched;      /* replies to no pending call (late, forged) */
	uint64_t send_errors;
	uint64_t model_dropped;  /* datagrams dropped by the network model */
	uint64_t bytes_in, bytes_out;
	uint64_t datagrams_out;   /* sent (requests, retransmissions, replies) */
	uint32_t inflight, queued;
	double window;           /* STP w */
	double rtt_err_us;       /* STP alpha: mean |rtt - prediction| */
	double srtt_us;          /* smoothed RTT over all calls */
	struct cfs_hist rtt_us;  /* every reply's RTT */
	/* Replies that came after their call had timed out (a
	 * subset of unmatched; their RTT counts in rtt_us and srtt), and the
	 * most any of them was late by */
	uint64_t late_replies;
	uint64_t late_by_us_max;
	/* A whole request with no answer is sent again, up to
	 * three times within its timeout, on the peer's round trip */
	uint64_t retransmits;
	uint64_t dup_requests;            /* copies of a request still being answered */
	uint64_t version_probes;          /* hellos at the newer version to peers not known to speak it */
	uint64_t hellos_in;               /* hellos answered */
	uint64_t answers_refused;         /* answers in pieces over a peer's bound, not sent */
	uint64_t answers_dropped_silent;  /* answers dropped: their peer acknowledged nothing */
	uint64_t peers_newer;             /* peers found to speak the newer version */
	/* Messages as pieces */
	uint64_t xfers_out, xfers_in;     /* messages sent / received as pieces */
	uint64_t xfers_abandoned;         /* sends given up (peer silent) */
	uint64_t pieces_out, pieces_resent, pieces_in, pieces_dup;
	uint64_t acks_out, acks_in;
	uint64_t reasm_dropped;           /* pieces refused: memory bounds, no such call */
	uint64_t reasm_expired;           /* reassemblies dropped as stale */
	uint64_t reasm_evicted;           /* ... dropped for room (the least progress first) */
	uint64_t gso_sends;               /* sendmsg calls carrying several pieces */
	uint64_t cwnd_bytes;              /* sum of the peers' windows (at get_stats) */
	uint32_t links;                   /* peers with a window */
	/* address validation (anti-amplification) */
	uint64_t retries_sent;            /* answers withheld for a token */
	uint64_t retries_in;              /* tokens we were asked to show */
	uint64_t validated;               /* addresses proven by a token */
	uint64_t bad_tokens;
	uint64_t padding_out;             /* padding sent before a long answer's request */
	uint64_t padding_in;              /* padding received */
	uint64_t budget_held;             /* pieces held back by the 3x budget */
	uint64_t upload_held;             /* times pieces waited for the upload cap */
};

/* Bind the socket and start receiving. on_request may be NULL (client). */
int cfs_transport_new(uv_loop_t *loop, const struct cfs_transport_config *c,
                      cfs_request_cb on_request, void *arg,
                      cfs_transport_t **ret) CFS_WUR;
/* Cancel every pending call (callbacks get -ECANCELED), close the socket;
 * memory is released once the loop has run the close callbacks. */
void cfs_transport_close(cfs_transport_t *t);
/* The bound address (with the real port when 0 was asked for). */
int cfs_transport_local_addr(cfs_transport_t *t, struct cfs_addr *ret);
/* Send req to dst; req->reqid and the reply flag are set here. 0 means cb
 * will be called exactly once, later; a negative errno means it will not. */
int cfs_transport_call(cfs_transport_t *t, const struct cfs_addr *dst, struct cfs_msg *req,
                       const struct cfs_call_opts *opts, cfs_reply_cb cb, void *arg);
/* Answer a request; reply's type, reqid and reply flag are set here. */
int cfs_transport_reply(cfs_transport_t *t, const struct cfs_reply_to *to, struct cfs_msg *reply);
/* Answer a request with only an error status. */
int cfs_transport_reply_error(cfs_transport_t *t, const struct cfs_reply_to *to, int status);
/* Send m (a request at the newest version) as one datagram from a socket
 * opened for it and closed at once: a packet no NAT or firewall on dst's
 * side has seen a flow for (a reachability dial-back). */
int cfs_transport_send_fresh(cfs_transport_t *t, const struct cfs_addr *dst, struct cfs_msg *m);
/* The protocol version a is spoken to in now (CFS_PROTO_VERSION once it
 * is known to speak it, else CFS_PROTO_VERSION_MIN). */
int cfs_transport_peer_version(cfs_transport_t *t, const struct cfs_addr *a);
/* a's wall clock minus ours, in seconds, from its last newer-version
 * message; 0 when unknown. A time a names is ours after subtracting it. */
int64_t cfs_transport_peer_clock_offset_s(cfs_transport_t *t, const struct cfs_addr *a);
/* Our wall clock minus the median of the peers heard in the last 10
 * minutes (ms), and how many they are; -ENODATA when none. */
int cfs_transport_clock_skew(cfs_transport_t *t, int64_t *ret_skew_ms, uint32_t *ret_peers);
/* The smoothed round trip to a measured from answers to our calls (µs),
 * or 0 when none was measured yet. */
uint64_t cfs_transport_peer_srtt_us(const cfs_transport_t *t, const struct cfs_addr *a);
void cfs_transport_get_stats(cfs_transport_t *t, struct cfs_transport_stats *ret);
/* The event loop the transport runs on (for timers of its users). */
uv_loop_t *cfs_transport_loop(const cfs_transport_t *t);
/* Stamp *coord (the owner's Vivaldi coordinate, read at each send) on every
 * outgoing request and reply; NULL stops stamping. */
void cfs_transport_set_coord(cfs_transport_t *t, const struct cfs_coord *coord);
/* Install (or with NULL remove) the network model. m is copied. */
void cfs_transport_set_model(cfs_transport_t *t, const struct cfs_netmodel *m);
/* STP (DHash++ eq. 2): RTO = v + 6·alpha + 15 ms, in microseconds. */
uint64_t cfs_stp_rto_us(uint64_t predicted_us, double alpha_us);

/* ------------------------------------------------------------ local streams */

/*
 * Framing for local clients over a UNIX stream socket: each frame is a
 * 4-byte big-endian length and that many bytes of one encoded message.
 * A frame over CFS_FRAME_MAX closes the stream with -EMSGSIZE.
 */
typedef struct cfs_stream cfs_stream_t;
typedef struct cfs_listener cfs_listener_t;

/* A whole frame arrived; it is valid only during the callback. */
typedef void (*cfs_frame_cb)(void *arg, cfs_stream_t *s, const uint8_t *frame, size_t len);
/* The stream ended: 0 at EOF, a negative errno on error. Free it now or later. */
typedef void (*cfs_stream_end_cb)(void *arg, cfs_stream_t *s, int status);
typedef void (*cfs_accept_cb)(void *arg, cfs_stream_t *s);
typedef void (*cfs_connect_cb)(void *arg, int status, cfs_stream_t *s);

/* Listen on path. A stale socket file (nobody answers) is replaced; a live
 * one gives -EADDRINUSE. The file is created 0600 unless mode says more. */
int cfs_listener_new(uv_loop_t *loop, const char *path, unsigned mode,
                     cfs_accept_cb on_accept, void *arg, cfs_listener_t **ret) CFS_WUR;
/* Stop listening, unlink the socket file, free once closed. */
void cfs_listener_close(cfs_listener_t *l);
/* Connect to path; cb gets the stream or a negative errno. */
int cfs_stream_connect(uv_loop_t *loop, const char *path, cfs_connect_cb cb, void *arg);
/* Start delivering frames. */
void cfs_stream_start(cfs_stream_t *s, cfs_frame_cb on_frame, cfs_stream_end_cb on_end, void *arg);
/* Queue one frame (copied). */
int cfs_stream_write(cfs_stream_t *s, const void *frame, size_t len);
/* Encode m and queue it as one frame. */
int cfs_stream_write_msg(cfs_stream_t *s, const struct cfs_msg *m);
/* Close the stream; memory is released after the close callback. No more
 * callbacks are made for it. */
void cfs_stream_close(cfs_stream_t *s);

/* Bounds on a listener's streams: connections at once, how long
 * a frame may stay half sent, and the reply bytes queued unread beyond
 * which a stream is not read until they drain. 0: the default. */
#define CFS_CTL_CONNS_DEFAULT 64
#define CFS_CTL_IDLE_MS_DEFAULT 10000
#define CFS_CTL_QUEUE_DEFAULT (4u << 20)
struct cfs_listener_limits {
	uint32_t max_conns;
	uint32_t idle_ms;
	size_t queue_bytes;
};
void cfs_listener_set_limits(cfs_listener_t *l, const struct cfs_listener_limits *lim);
/* Streams open now; connections refused, streams ended half sent, and
 * times a stream was paused for its unread replies. */
void cfs_listener_stats(const cfs_listener_t *l, uint32_t *ret_conns, uint64_t *ret_refused,
                        uint64_t *ret_timed_out, uint64_t *ret_paused);

#endif
