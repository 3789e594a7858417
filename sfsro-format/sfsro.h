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
#define SFSRO_BLOCK_SIZE_DEFAULT 8192
#define SFSRO_BLOCK_SIZE_MIN 1024
#define SFSRO_BLOCK_SIZE_MAX (60 * 1024)
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
};

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

/* Decode and verify the signature: -EBADMSG if it does not verify. */
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

/* ---- walking a volume from a block source */

/* Fetch key's bytes into a malloc'd *ret (freed by the caller): 0, or
 * -ENOENT and friends. The walker verifies what it gets. */
struct sfsro_source {
	int (*get)(void *ctx, const struct cfs_id *key, uint8_t **ret, size_t *ret_len);
	void *ctx;
};

/* An entry with its own copies of name and target. */
struct sfsro_node {
	struct sfsro_entry e;
	uint8_t name[SFSRO_NAME_MAX + 1];
	uint8_t target[SFSRO_SYMLINK_MAX + 1];
};

/* Fetch, verify and accept pk's root (sfsro_root_check's rules). */
int sfsro_walk_root(const struct sfsro_source *src, const struct cfs_pubkey *pk,
                    uint64_t min_seq, uint64_t now, struct sfsro_root *ret) CFS_WUR;
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

/* What a block is, as far as the walk knows (the values leave room for a
 * caller's own kinds below SFSRO_B_DIR: cfsd's pins add the root). */
enum sfsro_btype { SFSRO_B_DIR = 2, SFSRO_B_INODE, SFSRO_B_INDIRECT, SFSRO_B_DATA };
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

#endif
