/* sfsro-format's private helpers, shared by its own files only. */
#ifndef CFS_SFSRO_INTERNAL_H
#define CFS_SFSRO_INTERNAL_H

#include "sfsro-format/sfsro.h"

/* ---- the walker's state, shared by walker.c (root, lookup, the API) and
 * walker_read.c (listings, reads, visits) */

#define VISIT_WINDOW 16           /* structural blocks asked for at once by a visit */
#define PATH_BYTES_MAX 4096       /* a path to resolve (PATH_MAX) */

enum op { OP_NONE, OP_ROOT, OP_LOOKUP, OP_READDIR, OP_READ, OP_VISIT };
/* A block wanted: not yet asked for, asked for (waiting), fed (a visit's,
 * to report). */
enum ask { A_NONE, A_ASK, A_ASKED, A_FED };
enum read_kind { R_READ, R_INODE, R_LOCATE };
enum dstate { D_DOWN, D_LEAF, D_END };

/* A name kept beyond the block it came from. */
struct name_buf {
	uint8_t b[SFSRO_NAME_MAX];
	struct cfs_bytes n;
};

struct want {
	struct cfs_id key;
	uint8_t btype, height, state;
};

struct sfsro__lookup {
	struct sfsro_node *ret;
	char *path;               /* a path op: its own copy; NULL for one name */
	const char *at;           /* the components still to resolve */
	struct name_buf name;     /* the one looked for in this directory */
	uint32_t height;          /* of the block wanted (UINT32_MAX: a top) */
	struct name_buf lo, hi;   /* its range (a top has none) */
	bool has_hi;
};

/* An index block on the way down to the leaf being listed. */
struct rlevel {
	uint8_t *bytes;           /* kept: its children's names bound the blocks below */
	size_t len;
	uint32_t i;               /* the child being read */
	struct cfs_bytes hi;      /* the block's own upper bound ... */
	bool has_hi;              /* ... if any */
};

/* An open listing: the index blocks from the top to the current leaf,
 * each with the child being read, and that leaf. */
struct rdir {
	struct cfs_id top;
	enum dstate state;
	struct rlevel path[SFSRO_HEIGHT_MAX + 1];
	uint32_t depth;
	uint32_t next_height;     /* D_DOWN: the block wanted's height (UINT32_MAX: the top) */
	struct cfs_bytes lo, hi;  /* and its range, borrowed from path[] */
	bool has_hi;
	struct name_buf last;     /* the last name of the leaves before */
	bool has_last;
	struct cfs_id hint;       /* the leaf after the one wanted */
	bool has_hint;
	uint8_t *leaf;            /* D_LEAF: its bytes, decoded in d */
	struct sfsro_dir d;
	uint64_t base;            /* the index of d's first entry */
	uint64_t pos;             /* the next entry to hand out */
};

/* The descent to one data block. */
struct rslot {
	struct cfs_id key;        /* the block to read next ... */
	uint32_t h;               /* ... its height (0: data) */
	uint8_t state;
	uint64_t b;               /* the data block's number in the file */
	uint64_t span;            /* data blocks under one key at height h */
	uint64_t rem;             /* b's position under key */
};

struct rdop {
	enum read_kind kind;
	uint64_t off;
	uint8_t *buf;
	size_t len;
	size_t *ret_n;
	struct sfsro_inode *ret_ino;
	uint8_t **ret_bytes;
	size_t *ret_len;
	struct cfs_id *ret_key;
	uint64_t size;            /* the inode's, once fed */
	uint32_t bsize, fanout;
	struct rslot *slots;
	uint32_t nslots, left;    /* slots, and those not done */
};

struct visit {
	struct sfsro_blockset set;
	struct {
		struct sfsro_bitem it;
		uint8_t state;
	} slot[VISIT_WINDOW];
};

struct sfsro_walker {
	enum op op;
	int error;                /* sticky */
	bool done;
	struct want one;          /* the one block a root, lookup, listing or read waits for */
	struct {
		struct cfs_pubkey pk;
		uint64_t min_seq, now;
		uint64_t version;     /* > 0: this version, from its version key */
		struct sfsro_root *ret;
	} root;
	struct sfsro__lookup lk;
	struct rdir rd;
	struct rdop r;
	struct visit v;
};

void sfsro__w_rdir_drop(struct rdir *rd);
void sfsro__w_rdir_rewind(sfsro_walker_t *w);
void sfsro__w_rdir_fed(sfsro_walker_t *w, const struct cfs_id *key, const uint8_t *p, size_t len);
int sfsro__w_rdir_step(sfsro_walker_t *w, struct sfsro_step *ret);
void sfsro__w_inode_fed(sfsro_walker_t *w, const struct cfs_id *key, const uint8_t *p, size_t len);
int sfsro__w_read_fed(sfsro_walker_t *w, const struct cfs_id *key, const uint8_t *p, size_t len);
int sfsro__w_read_step(sfsro_walker_t *w, struct sfsro_step *ret);
int sfsro__w_visit_step(sfsro_walker_t *w, struct sfsro_step *ret);
int sfsro__w_visit_fed(sfsro_walker_t *w, const struct cfs_id *key, const uint8_t *p, size_t len);
void sfsro__w_name_set(struct name_buf *nb, const struct cfs_bytes *from);
void sfsro__w_fail(sfsro_walker_t *w, int r);
void sfsro__w_refuse(sfsro_walker_t *w, const struct cfs_id *key, int r, const char *what, const char *why);
void sfsro__w_want_set(struct want *x, const struct cfs_id *key, uint8_t btype, uint8_t height);
int sfsro__w_want_step(struct want *x, struct sfsro_step *ret);
int sfsro__w_dir_take(sfsro_walker_t *w, const struct cfs_id *key, const uint8_t *p, size_t len,
                    uint32_t want_height, const struct cfs_bytes *lo, const struct cfs_bytes *hi,
                    struct sfsro_dir *d);

#endif
