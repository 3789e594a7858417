/*
 * sfsro-format — the volume's block formats (CFS 3 and 5.5, after SFSRO):
 * signed root, file inode, directory, indirect block, data block.
 *
 * Contract: pure functions, no I/O and no event loop. Encode, decode and
 * verify each block kind, byte-exact as docs/FORMAT.md states with test
 * vectors; build the block trees of a file or a directory deterministically
 * (the same input gives the same blocks); and walk a volume read-only from
 * any block source, verifying every block as it arrives.
 *
 * Errors: -EPROTO malformed block, -EBADMSG hash or signature mismatch,
 * -EKEYREJECTED a root of another key, -ESTALE a root older than one seen,
 * -EKEYEXPIRED an expired root, -ENOENT / -ENOTDIR / -EISDIR / -EINVAL on
 * paths as POSIX means them. Decoded byte fields borrow the input buffer.
 */
#ifndef CFS_SFSRO_H
#define CFS_SFSRO_H

#include "common/cfs.h"

#define SFSRO_VERSION 1
#define SFSRO_NAME_MAX 255
#define SFSRO_SYMLINK_MAX 4095
#define SFSRO_BLOCK_SIZE_DEFAULT 65536 /* docs/PUBLISHING.md, "Block size" */
#define SFSRO_BLOCK_SIZE_MIN 1024
#define SFSRO_BLOCK_SIZE_MAX (128 * 1024)
#define SFSRO_INLINE_MAX 1024   /* files this small live inside their inode */
#define SFSRO_HEIGHT_MAX 8

enum sfsro_type { SFSRO_T_FILE = 1, SFSRO_T_DIR = 2, SFSRO_T_SYMLINK = 3 };

/* The signed root of one version of a volume. */
struct sfsro_root {
	struct cfs_pubkey pk;
	uint64_t seq;          /* only grows */
	uint64_t issued;       /* wall-clock seconds */
	uint64_t valid_until;  /* wall-clock seconds */
	struct cfs_id root_dir;/* top directory block of / */
	uint32_t dir_mode;     /* permission bits of / */
	int64_t mtime_s;       /* mtime of / */
	uint32_t mtime_ns;
	/* Redundancy of the volume's data blocks: 0, 0 whole and replicated
	 * (a root of format 1); else stored as code_n fragments any code_m
	 * of which rebuild a block (a root of format 2, docs/FORMAT.md). */
	uint8_t code_m, code_n;
};
#define SFSRO_ROOT_VERSION_CODED 2 /* the root format that names a code */

/* A file inode: attributes and the top of its block tree. */
struct sfsro_inode {
	uint64_t size;
	uint32_t mode;         /* permission bits (07777) */
	int64_t mtime_s;
	uint32_t mtime_ns;
	uint32_t bsize;        /* data block payload size */
	uint32_t fanout;       /* keys per indirect block */
	uint32_t height;       /* 0: keys are data blocks; h: indirect of height h */
	uint32_t nkeys;
	const struct cfs_id *keys;
	struct cfs_bytes inline_data; /* whole content of a file <= SFSRO_INLINE_MAX */
};

/* A directory entry: everything `ls -l` shows. */
struct sfsro_entry {
	struct cfs_bytes name;
	uint8_t type;          /* enum sfsro_type */
	uint64_t size;         /* bytes; entries for a directory; target length for a link */
	uint32_t mode;
	int64_t mtime_s;
	uint32_t mtime_ns;
	struct cfs_id key;     /* inode (file) or top directory block (dir) */
	struct cfs_bytes target; /* symlink target */
};

/* An index item of a directory block of height > 0. */
struct sfsro_dir_child {
	struct cfs_bytes first; /* the first name in the child's subtree */
	struct cfs_id key;
};

/* A decoded directory block: entries (height 0) or children. */
struct sfsro_dir {
	uint32_t height;
	uint32_t n;
	struct sfsro_entry *entries;
	struct sfsro_dir_child *children;
};

/* ---- keys and verification */

/* The DHT key of pk's root: H("cfs.root-key.v1" ‖ pk). */
void sfsro_root_key(const struct cfs_pubkey *pk, struct cfs_id *ret);
/* The DHT key of version seq of pk's volume, where the same signed root is
 * kept for as long as its lease lasts: H("cfs.root-version.v1" ‖ pk ‖
 * seq as 8 bytes big-endian). */
void sfsro_root_version_key(const struct cfs_pubkey *pk, uint64_t seq, struct cfs_id *ret);
/* 0 if key is the BLAKE2b-256 of the bytes as given, else -EBADMSG. */
int sfsro_verify_hash(const struct cfs_id *key, const uint8_t *p, size_t len) CFS_WUR;
/* The order of names in a directory: bytewise, a prefix first. */
int sfsro_name_cmp(const struct cfs_bytes *a, const struct cfs_bytes *b);
/* Is name a representable entry name? 0, or -EINVAL with *why. */
int sfsro_check_name(const uint8_t *name, size_t len, const char **why) CFS_WUR;

/* ---- encoding (cap: the buffer; -EMSGSIZE if it does not fit) */

int sfsro_root_encode(const struct sfsro_root *r, const struct cfs_seckey *sk,
                      uint8_t *buf, size_t cap, size_t *ret_len) CFS_WUR;
int sfsro_data_encode(const uint8_t *p, size_t len, uint8_t *buf, size_t cap, size_t *ret_len) CFS_WUR;
int sfsro_indirect_encode(uint32_t height, const struct cfs_id *keys, uint32_t n,
                          uint8_t *buf, size_t cap, size_t *ret_len) CFS_WUR;
int sfsro_inode_encode(const struct sfsro_inode *ino, uint8_t *buf, size_t cap, size_t *ret_len) CFS_WUR;
int sfsro_dir_encode(const struct sfsro_dir *d, uint8_t *buf, size_t cap, size_t *ret_len) CFS_WUR;
/* Bytes one entry adds to a directory block. */
size_t sfsro_entry_size(const struct sfsro_entry *e);
/* Keys per indirect block (and per inode) for a block size. */
uint32_t sfsro_fanout(uint32_t bsize);

/* ---- decoding (strict; signatures and structure checked) */

/* Decode and verify the signature: -EBADMSG if it does not verify,
 * -EPROTONOSUPPORT for a root of a format newer than this reader's. */
int sfsro_root_decode(const uint8_t *p, size_t len, struct sfsro_root *ret) CFS_WUR;
/* Accept r as the root of pk: -EKEYREJECTED another key, -ESTALE seq below
 * min_seq, -EKEYEXPIRED valid_until before now. */
int sfsro_root_check(const struct sfsro_root *r, const struct cfs_pubkey *pk,
                     uint64_t min_seq, uint64_t now) CFS_WUR;
int sfsro_data_decode(const uint8_t *p, size_t len, struct cfs_bytes *ret) CFS_WUR;
int sfsro_indirect_decode(const uint8_t *p, size_t len, uint32_t *ret_height,
                          const struct cfs_id **ret_keys, uint32_t *ret_n) CFS_WUR;
/* Also checks that size, block size, fanout, height and key count agree. */
int sfsro_inode_decode(const uint8_t *p, size_t len, struct sfsro_inode *ret) CFS_WUR;
/* Allocates ret's arrays (free with sfsro_dir_clear); names must be valid
 * and strictly increasing. */
int sfsro_dir_decode(const uint8_t *p, size_t len, struct sfsro_dir *ret) CFS_WUR;
void sfsro_dir_clear(struct sfsro_dir *d);
/* Does directory block d sit where its parent's index puts it: its first
 * name is lo (NULL: the top block, any) and every name is below hi (NULL:
 * no bound)? A hostile index that names one block twice, or blocks out of
 * order, fails this at the first wrong block. */
bool sfsro_dir_in_range(const struct sfsro_dir *d, const struct cfs_bytes *lo,
                        const struct cfs_bytes *hi);

/* ---- building trees (deterministic; blocks go to emit) */

/* Called for every block built: its key and bytes (valid during the call).
 * A negative return stops the build and is returned. */
typedef int (*sfsro_emit_fn)(void *arg, const struct cfs_id *key, const uint8_t *p, size_t len);

/* Build the indirect levels over a file's data keys and encode its inode;
 * *ret_key gets the inode's key. data_keys may be NULL for inline files. */
int sfsro_build_file(struct sfsro_inode *ino, const struct cfs_id *data_keys, uint64_t nblocks,
                     sfsro_emit_fn emit, void *arg, struct cfs_id *ret_key) CFS_WUR;
/* Build a directory from entries sorted by name: leaf blocks filled up to
 * bsize, then index levels; *ret_key gets the top block's key. */
int sfsro_build_dir(const struct sfsro_entry *entries, uint32_t n, uint32_t bsize,
                    sfsro_emit_fn emit, void *arg, struct cfs_id *ret_key) CFS_WUR;
/* Sort entries by name, the order directories use (bytewise). */
void sfsro_sort_entries(struct sfsro_entry *entries, size_t n);

/* An entry with its own copies of name and target. */
struct sfsro_node {
	struct sfsro_entry e;
	uint8_t name[SFSRO_NAME_MAX + 1];
	uint8_t target[SFSRO_SYMLINK_MAX + 1];
};

/* What a block is, as far as a walk knows: a signed root, or a block of
 * the tree under it. */
enum sfsro_btype { SFSRO_B_ROOT = 1, SFSRO_B_DIR, SFSRO_B_INODE, SFSRO_B_INDIRECT, SFSRO_B_DATA };

/* ---- the volume walker (walker.c): one resumable walk, no I/O
 *
 * Every read of a volume — the signed root, a path, a directory listing, a
 * byte range of a file, every block once — is one walker: start an
 * operation, then step it. A step never fetches; it answers NEED (feed me
 * this block, then step again), WAIT (every block I need is asked for),
 * an ENTRY of a listing, a BLOCK visited, or DONE, or a negative errno
 * (sticky: the walk is over). The caller fetches however it likes — a
 * synchronous store, a libuv fetch whose callback feeds — and feeds bytes
 * or an error; the walker verifies what it is fed (the content hash, or a
 * root's signature; then each block's height and place in its parent's
 * key range), so the source is never trusted. Hostile shapes end: a child
 * is always one level lower than its parent, a directory's ranges must
 * increase, and a visit meets every key once.
 *
 * A read and a visit may ask for several blocks before any is fed (step
 * again after a NEED); feed them in any order. The others ask for one at
 * a time. A feed for a key not asked for is ignored (-ENOENT).
 *
 * Errors at step: -EBADMSG bytes that do not hash to their key (or a root
 * whose signature fails), -EPROTO a block malformed or out of place, the
 * status fed for a block that could not be fetched, the root's and the
 * paths' errors as above.
 */
typedef struct sfsro_walker sfsro_walker_t;

enum sfsro_walk_result {
	SFSRO_WALK_DONE = 0,      /* the operation is complete: its results are set */
	SFSRO_WALK_NEED,          /* feed step.key (of kind btype, height) */
	SFSRO_WALK_WAIT,          /* nothing to do until a block asked for is fed */
	SFSRO_WALK_HINT,          /* step.key will likely be needed soon: prefetch it if you like */
	SFSRO_WALK_ENTRY,         /* a directory entry: step.entry, at step.index */
	SFSRO_WALK_BLOCK,         /* a visit met step.key (data blocks are never fetched) */
};

/* What one step gives; borrowed until the next call on the walker. */
struct sfsro_step {
	struct cfs_id key;
	uint8_t btype;            /* enum sfsro_btype */
	uint8_t height;           /* an indirect block's */
	const struct sfsro_entry *entry;
	uint64_t index;           /* the entry's position in its directory (0: the first) */
};

/* The bytes fed were checked against the key already (a verifying cache):
 * skip the hash. Everything else is checked still. */
#define SFSRO_FEED_VERIFIED 1u

sfsro_walker_t *sfsro_walker_new(void);
void sfsro_walker_free(sfsro_walker_t *w);

/* Each start abandons whatever the walker did before. Result pointers
 * (ret*) are the caller's and must live until DONE. */

/* Fetch pk's signed root and accept it (sfsro_root_check's rules). */
void sfsro_walker_root(sfsro_walker_t *w, const struct cfs_pubkey *pk, uint64_t min_seq,
                       uint64_t now, struct sfsro_root *ret);
/* Fetch version seq of pk's volume from its version key (seq > 0; 0 is
 * sfsro_walker_root with no bound): signed by pk and numbered seq, else
 * -EBADMSG. A version asked for by number is the reader's explicit
 * choice, so neither the rollback bound nor expiry applies to it. */
void sfsro_walker_root_version(sfsro_walker_t *w, const struct cfs_pubkey *pk, uint64_t seq,
                               struct sfsro_root *ret);
/* Find name in the directory whose top block is dir_key. */
void sfsro_walker_lookup(sfsro_walker_t *w, const struct cfs_id *dir_key, const uint8_t *name,
                         size_t len, struct sfsro_node *ret);
/* Resolve path ("/a/b", "a/b"; empty components skipped, symlinks not
 * followed) from root's top directory: -ENOENT, -ENOTDIR, -ENAMETOOLONG. */
void sfsro_walker_path(sfsro_walker_t *w, const struct sfsro_root *root, const char *path,
                       struct sfsro_node *ret);
/* List the directory whose top block is dir_key: one ENTRY per entry in
 * name order, then DONE. Memory: the leaf being listed and the index
 * blocks above it. */
void sfsro_walker_readdir(sfsro_walker_t *w, const struct cfs_id *dir_key);
/* Go on listing from entry index (a readdir only): on within the current
 * leaf costs nothing, backwards starts again from the top. */
void sfsro_walker_seek(sfsro_walker_t *w, uint64_t index);
/* Read up to len bytes at off of the file whose inode is ino_key into buf;
 * *ret_n gets the count at DONE (short only at the end of the file). */
void sfsro_walker_read(sfsro_walker_t *w, const struct cfs_id *ino_key, uint64_t off, uint8_t *buf,
                       size_t len, size_t *ret_n);
/* Fetch the inode block ino_key: at DONE *ret_bytes is a malloc'd copy of
 * it (*ret_len bytes; the caller frees) and *ret the inode decoded from
 * that copy. */
void sfsro_walker_inode(sfsro_walker_t *w, const struct cfs_id *ino_key, struct sfsro_inode *ret,
                        uint8_t **ret_bytes, size_t *ret_len);
/* The key of data block b of the file ino_key, through its indirect blocks. */
void sfsro_walker_locate(sfsro_walker_t *w, const struct cfs_id *ino_key, uint64_t b,
                         struct cfs_id *ret);
/* Every block under the directory top (itself included), each once: a
 * BLOCK for each, structural blocks after they were fed and verified. */
void sfsro_walker_visit(sfsro_walker_t *w, const struct cfs_id *top);

/* The next thing to do, or the result: an enum sfsro_walk_result, or a
 * negative errno. */
int sfsro_walker_step(sfsro_walker_t *w, struct sfsro_step *ret) CFS_WUR;
/* Hand the walker key's bytes (status 0; borrowed for the call) or the
 * error its fetch ended with (status < 0). 0, or -ENOENT when key was not
 * asked for (nothing changes). */
int sfsro_walker_feed(sfsro_walker_t *w, const struct cfs_id *key, int status, const uint8_t *p,
                      size_t len, unsigned flags);

/* ---- walking a volume from a synchronous block source (walk.c: loops
 * over the walker) */

/* Fetch key's bytes into a malloc'd *ret (freed by the caller): 0, or
 * -ENOENT and friends. The walker verifies what it gets. */
struct sfsro_source {
	int (*get)(void *ctx, const struct cfs_id *key, uint8_t **ret, size_t *ret_len);
	void *ctx;
};

/* Fetch, verify and accept pk's root (sfsro_root_check's rules). */
int sfsro_walk_root(const struct sfsro_source *src, const struct cfs_pubkey *pk,
                    uint64_t min_seq, uint64_t now, struct sfsro_root *ret) CFS_WUR;
/* Fetch version seq of pk's volume (sfsro_walker_root_version's rules). */
int sfsro_walk_root_version(const struct sfsro_source *src, const struct cfs_pubkey *pk,
                            uint64_t seq, struct sfsro_root *ret) CFS_WUR;
/* The node for "/" of root. */
void sfsro_walk_rootnode(const struct sfsro_root *root, struct sfsro_node *ret);
/* Find name in the directory whose top block is dir_key. */
int sfsro_walk_lookup(const struct sfsro_source *src, const struct cfs_id *dir_key,
                      const uint8_t *name, size_t len, struct sfsro_node *ret) CFS_WUR;
/* Resolve an absolute path ("/", "/a/b"); symlinks are not followed. */
int sfsro_walk_path(const struct sfsro_source *src, const struct sfsro_root *root,
                    const char *path, struct sfsro_node *ret) CFS_WUR;
/* Call fn for every entry of a directory, in name order; a nonzero return
 * from fn stops the walk and is returned. */
int sfsro_walk_readdir(const struct sfsro_source *src, const struct cfs_id *dir_key,
                       int (*fn)(void *arg, const struct sfsro_entry *e), void *arg) CFS_WUR;
/* Read up to len bytes at off of the file whose inode is ino_key; *ret_n
 * gets the count (short only at end of file). */
int sfsro_walk_read(const struct sfsro_source *src, const struct cfs_id *ino_key,
                    uint64_t off, uint8_t *buf, size_t len, size_t *ret_n) CFS_WUR;

/* ---- every block of a tree, each once (blockset.c; no I/O) */

struct sfsro_bitem {
	struct cfs_id key;
	uint8_t btype;            /* enum sfsro_btype */
	uint8_t height;           /* an indirect block's height */
};
/* The blocks still to visit (a stack: depth first) and every key met.
 * Zero-initialise; sfsro_blockset_free releases it. */
struct sfsro_blockset {
	struct cfs_idmap seen;
	struct sfsro_bitem *v;
	size_t n, cap;
	uint64_t pushed;          /* distinct blocks met */
};
/* Add a block to visit; false (nothing added) when its key was met before. */
bool sfsro_blockset_push(struct sfsro_blockset *s, const struct cfs_id *key, uint8_t btype,
                         uint8_t height);
/* The next block to visit; false when none is left. */
bool sfsro_blockset_pop(struct sfsro_blockset *s, struct sfsro_bitem *ret);
/* Push the blocks a directory, inode or indirect block names, given its
 * bytes (verified by the caller); data blocks name none. A negative errno
 * when the bytes do not decode as what the item says they are. */
int sfsro_blockset_expand(struct sfsro_blockset *s, const struct sfsro_bitem *it, const uint8_t *p,
                          size_t len) CFS_WUR;
void sfsro_blockset_free(struct sfsro_blockset *s);


/* ---- erasure-coded data blocks (coded.c; docs/FORMAT.md "Coded blocks")
 *
 * A data block of B bytes as n fragments, any m of which rebuild it
 * (Reed-Solomon over GF(2^8), Cauchy matrix, ISA-L). The block's key
 * commits to m, n, B, a hash tree over the fragments and the block's hash,
 * so each fragment is checked alone against the key (sfsro_frag_verify),
 * and the decoded block against its hash. */
#define SFSRO_CODE_M_MAX 16
#define SFSRO_CODE_N_MAX 32
/* The largest block that can be coded: a data block of the largest
 * payload with its framing (sfsro_data_encode adds at most 16 bytes). Its
 * widest fragment (m = 1, n = 32: 40 + B + 5 x 32 bytes) still fits a
 * STORE (CFS_BLOCK_MAX). */
#define SFSRO_CODED_BLOCK_MAX (SFSRO_BLOCK_SIZE_MAX + 32)
#define SFSRO_FRAG_VERSION 1
#define SFSRO_FRAG_HDR 40 /* version, m, n, index, B (be32), the block's hash */

struct sfsro_frag {
	uint8_t m, n, index;
	uint32_t block_len;
	struct cfs_id block_hash;
	const uint8_t *data;      /* ceil(B/m) bytes, borrowed */
	size_t data_len;
	const uint8_t *proof;     /* ceil(log2 n) sibling hashes, leaf first */
};

bool sfsro_code_valid(uint32_t m, uint32_t n);
/* One fragment's payload, and its whole encoded size. */
size_t sfsro_frag_data_len(uint32_t block_len, uint32_t m);
size_t sfsro_frag_len(uint32_t block_len, uint32_t m, uint32_t n);
/* Encode block into n fragments: frags[i] must hold sfsro_frag_len bytes.
 * -EINVAL for a code outside 1 <= m < n <= 32, m <= 16, or an empty or
 * oversized block. */
int sfsro_code_encode(const uint8_t *block, size_t len, uint32_t m, uint32_t n, struct cfs_id *ret_key,
                      uint8_t *const *frags) CFS_WUR;
/* The coded key of block (it encodes the block and keeps only the key);
 * -EINVAL as sfsro_code_encode. */
int sfsro_code_key(const uint8_t *block, size_t len, uint32_t m, uint32_t n, struct cfs_id *ret_key) CFS_WUR;
/* The fields of a well-formed fragment (-EPROTO), unchecked. */
int sfsro_frag_parse(const uint8_t *f, size_t len, struct sfsro_frag *ret) CFS_WUR;
/* The key a well-formed fragment belongs under (-EPROTO malformed): its
 * leaf folded up its proof, hashed with its header. ret (may be NULL)
 * borrows f. */
int sfsro_frag_key(const uint8_t *f, size_t len, struct cfs_id *ret_key, struct sfsro_frag *ret) CFS_WUR;
/* A fragment checked against key: -EPROTO malformed, -EBADMSG not the
 * key's. ret (may be NULL) borrows f. */
int sfsro_frag_verify(const struct cfs_id *key, const uint8_t *f, size_t len, struct sfsro_frag *ret) CFS_WUR;
/* The block from the first m fragments of frags[0..nfrags) that verify
 * (NULL entries skipped). -ENODATA fewer than m given, -EBADMSG fewer
 * than m verify or the block is not the one the key names, -ENOBUFS
 * cap too small. */
int sfsro_code_decode(const struct cfs_id *key, const uint8_t *const *frags, const size_t *lens,
                      uint32_t nfrags, uint8_t *out, size_t cap, size_t *ret_len) CFS_WUR;

#endif
