/*
 * Walking a volume read-only from a block source. Every content-hash block
 * is checked against its key before it is decoded, and the root against
 * its signature, so a source (a local store, the DHT) is never trusted.
 *
 * A directory's blocks are checked against the key range their index gives
 * them, too: a child's first name is its index item's name and its last is
 * below the next item's. Honest directories always agree; an index that
 * names one child many times (a few blocks listing millions of entries)
 * does not, so every walk of a directory reads each of its blocks at most
 * once and a lie is -EPROTO.
 */
#include "sfsro-format/internal.h"

#include <stdlib.h>
#include <string.h>

/* Fetch key and check the bytes hash to it. */
static int fetch(const struct sfsro_source *src, const struct cfs_id *key, uint8_t **ret, size_t *ret_len)
{
	int r = src->get(src->ctx, key, ret, ret_len);
	if (r < 0)
		return r;
	if ((r = sfsro_verify_hash(key, *ret, *ret_len)) < 0) {
		char h[9];
		log_warn("block %s: bytes do not match the key", cfs_id_short(key, h));
		free(*ret);
		*ret = NULL;
	}
	return r;
}

int sfsro_walk_root(const struct sfsro_source *src, const struct cfs_pubkey *pk,
                    uint64_t min_seq, uint64_t now, struct sfsro_root *ret)
{
	struct cfs_id key;
	uint8_t *p;
	size_t len;
	int r;

	sfsro_root_key(pk, &key);
	if ((r = src->get(src->ctx, &key, &p, &len)) < 0)
		return r;
	r = sfsro_root_decode(p, len, ret);
	free(p);
	return r < 0 ? r : sfsro_root_check(ret, pk, min_seq, now);
}

void sfsro_walk_rootnode(const struct sfsro_root *root, struct sfsro_node *ret)
{
	memset(&ret->e, 0, sizeof(ret->e));
	ret->name[0] = '/';
	ret->e.name = (struct cfs_bytes){ ret->name, 1 };
	ret->e.type = SFSRO_T_DIR;
	ret->e.mode = root->dir_mode;
	ret->e.mtime_s = root->mtime_s;
	ret->e.mtime_ns = root->mtime_ns;
	ret->e.key = root->root_dir;
}

static const struct cfs_bytes *first_name(const struct sfsro_dir *d, uint32_t i)
{
	return d->height ? &d->children[i].first : &d->entries[i].name;
}

/* Does the block fit the range its index gives it: its first name lo
 * (NULL: the top, any) and every name below hi (NULL: no bound)? */
static int check_range(const struct cfs_id *key, const struct sfsro_dir *d, const struct cfs_bytes *lo,
                       const struct cfs_bytes *hi)
{
	if (sfsro_dir_in_range(d, lo, hi))
		return 0;
	char h[9];
	log_warn("directory block %s is not where its index puts it (named twice, or out of order)",
	         cfs_id_short(key, h));
	return -EPROTO;
}

/* A name kept across blocks (the one it came from is freed). */
struct name_buf {
	uint8_t b[SFSRO_NAME_MAX];
	struct cfs_bytes n;
};

static const struct cfs_bytes *name_set(struct name_buf *nb, const struct cfs_bytes *from)
{
	memcpy(nb->b, from->p, from->len);
	nb->n = (struct cfs_bytes){ nb->b, from->len };
	return &nb->n;
}

static void node_copy(struct sfsro_node *n, const struct sfsro_entry *e)
{
	n->e = *e;
	memcpy(n->name, e->name.p, e->name.len);
	n->name[e->name.len] = 0;
	n->e.name.p = n->name;
	memcpy(n->target, e->target.p, e->target.len);
	n->target[e->target.len] = 0;
	n->e.target.p = n->target;
}

int sfsro_walk_lookup(const struct sfsro_source *src, const struct cfs_id *dir_key,
                      const uint8_t *name, size_t len, struct sfsro_node *ret)
{
	struct cfs_id key = *dir_key;
	uint32_t want_height = UINT32_MAX;
	const struct cfs_bytes want = { name, len };
	struct name_buf lo_buf, hi_buf;
	const struct cfs_bytes *lo = NULL, *hi = NULL; /* the range the index gives key */
	struct sfsro_dir d;
	uint8_t *p;
	size_t plen;
	int r;

	for (;;) {
		if ((r = fetch(src, &key, &p, &plen)) < 0)
			return r;
		r = sfsro_dir_decode(p, plen, &d);
		if (r == 0 && want_height != UINT32_MAX && d.height != want_height)
			r = -EPROTO;
		if (r < 0) {
			sfsro_dir_clear(&d);
			free(p);
			return r == -EPROTO ? log_warn_errno(r, "malformed directory block") : r;
		}
		if ((r = check_range(&key, &d, lo, hi)) < 0) { /* logged */
			sfsro_dir_clear(&d);
			free(p);
			return r;
		}
		/* binary search: the last item whose name is <= the one wanted */
		uint32_t at = 0, top = d.n;
		while (at < top) {
			uint32_t mid = at + (top - at) / 2;
			if (sfsro_name_cmp(&want, first_name(&d, mid)) >= 0)
				at = mid + 1;
			else
				top = mid;
		}
		r = -ENOENT;
		if (at > 0) {
			if (d.height == 0) {
				if (sfsro_name_cmp(&want, &d.entries[at - 1].name) == 0) {
					node_copy(ret, &d.entries[at - 1]);
					r = 0;
				}
			} else {
				key = d.children[at - 1].key;
				want_height = d.height - 1;
				lo = name_set(&lo_buf, &d.children[at - 1].first);
				if (at < d.n)
					hi = name_set(&hi_buf, &d.children[at].first);
				r = 1;
			}
		}
		sfsro_dir_clear(&d);
		free(p);
		if (r <= 0)
			return r;
	}
}

int sfsro_walk_path(const struct sfsro_source *src, const struct sfsro_root *root,
                    const char *path, struct sfsro_node *ret)
{
	const char *s = path;
	int r;

	if (*s != '/')
		return -EINVAL;
	sfsro_walk_rootnode(root, ret);
	while (*s) {
		while (*s == '/')
			s++;
		if (!*s)
			break;
		size_t n = strcspn(s, "/");
		if (ret->e.type != SFSRO_T_DIR)
			return -ENOTDIR;
		struct cfs_id dir = ret->e.key;
		if ((r = sfsro_walk_lookup(src, &dir, (const uint8_t *)s, n, ret)) < 0)
			return r;
		s += n;
	}
	return 0;
}

/* One block of a directory and, depth first, the blocks under it. lo and
 * hi: the range the parent's index gives it (borrowed from the parent's
 * bytes, which outlive this call). */
static int readdir_block(const struct sfsro_source *src, const struct cfs_id *key, uint32_t want_height,
                         const struct cfs_bytes *lo, const struct cfs_bytes *hi,
                         int (*fn)(void *arg, const struct sfsro_entry *e), void *arg)
{
	struct sfsro_dir d;
	uint8_t *p;
	size_t len;
	int r;

	if ((r = fetch(src, key, &p, &len)) < 0)
		return r;
	if ((r = sfsro_dir_decode(p, len, &d)) == 0 && want_height != UINT32_MAX && d.height != want_height)
		r = -EPROTO;
	if (r == 0)
		r = check_range(key, &d, lo, hi);
	for (uint32_t i = 0; r == 0 && i < d.n; i++)
		r = d.height ? readdir_block(src, &d.children[i].key, d.height - 1, &d.children[i].first,
		                             i + 1 < d.n ? &d.children[i + 1].first : hi, fn, arg)
		             : fn(arg, &d.entries[i]);
	sfsro_dir_clear(&d);
	free(p);
	return r;
}

int sfsro_walk_readdir(const struct sfsro_source *src, const struct cfs_id *dir_key,
                       int (*fn)(void *arg, const struct sfsro_entry *e), void *arg)
{
	return readdir_block(src, dir_key, UINT32_MAX, NULL, NULL, fn, arg);
}

/* The walk down one file tree, keeping the last block of every level so a
 * sequential read fetches each indirect block once. */
struct reader {
	const struct sfsro_source *src;
	struct sfsro_inode ino;
	struct cfs_id cached_key[SFSRO_HEIGHT_MAX + 1];
	uint8_t *cached[SFSRO_HEIGHT_MAX + 1]; /* raw blocks, by height */
	size_t cached_len[SFSRO_HEIGHT_MAX + 1];
};

static int get_cached(struct reader *rd, uint32_t h, const struct cfs_id *key, uint8_t **ret, size_t *ret_len)
{
	int r;
	if (!rd->cached[h] || !cfs_id_eq(&rd->cached_key[h], key)) {
		free(rd->cached[h]);
		rd->cached[h] = NULL;
		if ((r = fetch(rd->src, key, &rd->cached[h], &rd->cached_len[h])) < 0)
			return r;
		rd->cached_key[h] = *key;
	}
	*ret = rd->cached[h];
	*ret_len = rd->cached_len[h];
	return 0;
}

/* The payload of data block b of the file. */
static int data_block(struct reader *rd, uint64_t b, struct cfs_bytes *ret)
{
	const struct sfsro_inode *ino = &rd->ino;
	uint64_t span = 1;
	const struct cfs_id *keys = ino->keys;
	uint32_t nkeys = ino->nkeys;
	uint8_t *p;
	size_t len;
	int r;

	for (uint32_t h = 0; h < ino->height; h++)
		span *= ino->fanout;
	for (uint32_t h = ino->height;; h--) {
		uint64_t idx = b / span;
		if (idx >= nkeys)
			return -EPROTO;
		if ((r = get_cached(rd, h, &keys[idx], &p, &len)) < 0)
			return r;
		b %= span;
		if (h == 0)
			break;
		uint32_t got_h;
		if (sfsro_indirect_decode(p, len, &got_h, &keys, &nkeys) < 0 || got_h != h)
			return -EPROTO;
		span /= ino->fanout;
	}
	if ((r = sfsro_data_decode(p, len, ret)) < 0)
		return r;
	return 0;
}

int sfsro_walk_read(const struct sfsro_source *src, const struct cfs_id *ino_key,
                    uint64_t off, uint8_t *buf, size_t len, size_t *ret_n)
{
	struct reader rd = { .src = src };
	uint8_t *ip;
	size_t ilen, done = 0;
	int r;

	*ret_n = 0;
	if ((r = fetch(src, ino_key, &ip, &ilen)) < 0)
		return r;
	if ((r = sfsro_inode_decode(ip, ilen, &rd.ino)) < 0)
		goto out;
	if (off >= rd.ino.size)
		goto out;
	if (len > rd.ino.size - off)
		len = (size_t)(rd.ino.size - off);
	if (rd.ino.inline_data.len || rd.ino.size <= SFSRO_INLINE_MAX) {
		memcpy(buf, rd.ino.inline_data.p + off, len);
		done = len;
		goto out;
	}
	while (done < len) {
		uint64_t pos = off + done, b = pos / rd.ino.bsize;
		uint64_t start = b * rd.ino.bsize;
		uint64_t want = rd.ino.size - start < rd.ino.bsize ? rd.ino.size - start : rd.ino.bsize;
		struct cfs_bytes data;
		if ((r = data_block(&rd, b, &data)) < 0)
			break;
		if (data.len != want) { /* every block but the last is full */
			r = -EPROTO;
			break;
		}
		size_t n = (size_t)(start + want - pos);
		if (n > len - done)
			n = len - done;
		memcpy(buf + done, data.p + (pos - start), n);
		done += n;
	}
out:
	for (int h = 0; h <= SFSRO_HEIGHT_MAX; h++)
		free(rd.cached[h]);
	free(ip);
	*ret_n = done;
	return r;
}
