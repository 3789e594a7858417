/*
 * Reclaiming dead bytes: the compactor of a durable store and the
 * eviction of a cache.
 *
 * Compaction (WiscKey's value-log garbage collection, one pack at a
 * time): the pack with the smallest live share below the threshold (the
 * active one too, closed first, once it holds a MiB of dead bytes) is
 * read in order; each entry the index still names there is copied to the
 * active pack. At the end of each step the copies are flushed, then one
 * index batch repoints every record that still names the old place (a
 * block replaced or dropped meanwhile is left alone, its copy dead), and
 * once the whole pack is read and nothing names it, it is deleted. A
 * crash before the repointing leaves dead copies and the old pack intact;
 * after it, an old pack no record names, which the next open deletes.
 * Either way every record names flushed bytes. A step that cannot write
 * (a full disk) is undone to its start and tried again later.
 *
 * A cache drops its oldest pack when it needs room, copying forward the
 * blocks used recently (those in the youngest quarter of uses: a quarter
 * of the blocks at most, so making room always ends), so that the bound
 * holds in bytes on disk and hot blocks stay.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "blockstore/internal.h"

#define COPY_FLUSH (4u << 20)  /* copies repointed at least this often */
#define MIN_DEAD 4096          /* a pack with less dead is not worth a rewrite */
#define ACTIVE_MIN_DEAD (1u << 20) /* ... and the active pack, closed for it, with less */

void bstore__compact_free(bstore_t *s)
{
	free(s->moved);
	free(s->copy_buf);
	s->moved = NULL;
	s->copy_buf = NULL;
	s->nmoved = s->cap_moved = s->copy_len = s->copy_cap = 0;
}

/* Copy the entry at off of pack p (entry_len bytes, naming key) into the
 * copy buffer, to be appended and repointed by flush_moves. */
static int copy_entry(bstore_t *s, struct bstore__pack *p, const struct cfs_id *key, uint64_t off,
                      uint32_t entry_len)
{
	int fd = bstore__pack_fd(s, p);

	if (fd < 0)
		return fd;
	if (s->copy_len + entry_len > s->copy_cap) {
		s->copy_cap = (s->copy_len + entry_len) * 2;
		s->copy_buf = xrealloc(s->copy_buf, s->copy_cap);
	}
	if (pread(fd, s->copy_buf + s->copy_len, entry_len, (off_t)off) != (ssize_t)entry_len)
		return -EIO;
	if (s->nmoved == s->cap_moved) {
		s->cap_moved = s->cap_moved ? 2 * s->cap_moved : 64;
		s->moved = xrealloc(s->moved, s->cap_moved * sizeof(*s->moved));
	}
	s->moved[s->nmoved++] = (struct bstore__moved){ .key = *key, .from_pack = p->num, .from_off = off,
		                                          .to_off = s->copy_len, .entry_len = entry_len };
	s->copy_len += entry_len;
	return 0;
}

/* Append the copies, flushed, then repoint the records that still name
 * their old place (the top of the file). On error nothing is repointed. */
static int flush_moves(bstore_t *s)
{
	uint8_t k[1 + CFS_ID_BYTES], v[BSTORE__REC_BYTES];
	uint32_t pack;
	uint64_t off;
	int r = 0;

	if (!s->nmoved)
		return 0;
	struct iovec iov = { s->copy_buf, s->copy_len };
	bool *moved = xcalloc(s->nmoved, sizeof(*moved));
	if ((r = bstore__append(s, &iov, 1, s->copy_len, &pack, &off)) < 0)
		goto out;
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	for (size_t i = 0; i < s->nmoved; i++) {
		struct bstore__moved *m = &s->moved[i];
		struct bstore__rec rec;
		if (bstore__rec_read(s, &m->key, &rec) < 0 || rec.pack != m->from_pack || rec.off != m->from_off)
			continue;
		rec.pack = pack;
		rec.off = off + m->to_off;
		bstore__rec_key(k, &m->key);
		bstore__rec_encode(v, &rec);
		leveldb_writebatch_put(b, (const char *)k, sizeof(k), (const char *)v, sizeof(v));
		moved[i] = true;
	}
	r = bstore__index_write(s, b, true, "repoint compacted blocks");
	leveldb_writebatch_destroy(b);
	for (size_t i = 0; i < s->nmoved && r == 0; i++) {
		struct bstore__moved *m = &s->moved[i];
		struct bstore__pack *from = bstore__pack_find(s, m->from_pack), *to = bstore__pack_find(s, pack);
		if (!moved[i])
			continue;
		if (from)
			from->live -= m->entry_len < from->live ? m->entry_len : from->live;
		if (to)
			to->live += m->entry_len;
		s->st.compact_copied += m->entry_len;
	}
out:
	free(moved);
	s->nmoved = s->copy_len = 0;
	return r;
}

/* The pack with the least live share below the threshold, or NULL. */
static struct bstore__pack *pick_victim(bstore_t *s)
{
	struct bstore__pack *best = NULL;
	double best_share = 2;

	for (size_t i = 0; i < s->npacks; i++) {
		struct bstore__pack *p = &s->packs[i];
		uint64_t payload = p->size > BSTORE__PACK_HDR ? p->size - BSTORE__PACK_HDR : 0;
		if (p->stuck || bstore__dead(p) < (p->num == s->active ? ACTIVE_MIN_DEAD : MIN_DEAD) ||
		    p->live * 100 >= (uint64_t)s->cfg.compact_live_pct * payload)
			continue;
		double share = payload ? (double)p->live / (double)payload : 0;
		if (share < best_share) {
			best = p;
			best_share = share;
		}
	}
	return best;
}

/* Read the entry header at off of p: 0 with its key and total length,
 * or -EUCLEAN when there is no whole entry there. */
static int entry_at(bstore_t *s, struct bstore__pack *p, uint64_t off, struct cfs_id *key,
                    uint32_t *entry_len)
{
	uint8_t hdr[BSTORE__ENTRY_HDR];
	struct bstore_meta m;
	int fd = bstore__pack_fd(s, p);

	if (fd < 0)
		return fd;
	if (pread(fd, hdr, sizeof(hdr), (off_t)off) != (ssize_t)sizeof(hdr) ||
	    bstore__entry_parse(hdr, sizeof(hdr), key, &m) < 0 || off + BSTORE__ENTRY_HDR + m.len > p->size)
		return -EUCLEAN;
	*entry_len = BSTORE__ENTRY_HDR + m.len;
	return 0;
}

/* The victim is read to its end: delete it if nothing names it now. */
static void finish_victim(bstore_t *s, struct bstore__pack *p)
{
	if (p->live == 0) {
		s->st.compactions++;
		s->st.compact_reclaimed += p->size;
		bstore__pack_unlink(s, p);
	} else {
		p->stuck = true;
		log_warn("%s %s: pack %u still holds %lu live bytes after compaction; left in place",
		         s->cfg.what, s->dir, p->num, (unsigned long)p->live);
	}
	s->victim = 0;
}

bool bstore_compact_step(bstore_t *s, uint64_t budget)
{
	uint64_t done = 0;

	pthread_mutex_lock(&s->mu);
	if (s->cfg.mode != BSTORE_DURABLE || bstore__writable(s) < 0) {
		pthread_mutex_unlock(&s->mu);
		return s->cfg.mode == BSTORE_DURABLE;
	}
	struct bstore__pack *p = s->victim ? bstore__pack_find(s, s->victim) : NULL;
	if (!p && (p = pick_victim(s))) {
		s->victim = p->num;
		s->scan_off = BSTORE__PACK_HDR;
		if (p->num == s->active) /* a server that writes little would never close it */
			bstore__active_close(s);
	}
	if (!p) {
		s->victim = 0;
		pthread_mutex_unlock(&s->mu);
		return false;
	}
	uint64_t start = s->scan_off;
	while (done < budget && p->live > 0 && s->scan_off < p->size) {
		struct cfs_id key;
		struct bstore__rec rec;
		uint32_t elen;
		if (entry_at(s, p, s->scan_off, &key, &elen) < 0) {
			log_warn("%s %s: pack %u has no entry at %lu: compaction leaves it", s->cfg.what,
			         s->dir, p->num, (unsigned long)s->scan_off);
			p->stuck = true;
			break;
		}
		done += BSTORE__ENTRY_HDR;
		if (bstore__rec_read(s, &key, &rec) == 0 && rec.pack == p->num && rec.off == s->scan_off &&
		    rec.meta.len + BSTORE__ENTRY_HDR == elen) {
			if (copy_entry(s, p, &key, s->scan_off, elen) < 0) {
				p->stuck = true;
				break;
			}
			done += 2 * (uint64_t)elen; /* read and written */
		}
		s->scan_off += elen;
		if (s->copy_len >= COPY_FLUSH)
			break;
	}
	uint32_t num = p->num;
	bool stuck = p->stuck;
	int fr = flush_moves(s);
	p = bstore__pack_find(s, num); /* the copies may have opened a pack: p moved */
	if (fr < 0) {
		s->scan_off = start; /* undone: tried again from here */
	} else if (stuck) {
		s->victim = 0;
	} else if (p->live == 0 || s->scan_off >= p->size) {
		finish_victim(s, p);
	}
	bool more = s->victim || pick_victim(s);
	pthread_mutex_unlock(&s->mu);
	return more;
}

/* ---- caches */

static uint64_t disk_bytes(const bstore_t *s)
{
	uint64_t n = 0;
	for (size_t i = 0; i < s->npacks; i++)
		n += s->packs[i].size;
	return n;
}

/* Drop the oldest pack p, copying forward its young blocks when rescue. */
static void evict_pack(bstore_t *s, struct bstore__pack *p, bool rescue)
{
	uint8_t k[1 + CFS_ID_BYTES];
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	uint64_t off = BSTORE__PACK_HDR, dropped_blocks = 0, dropped_bytes = 0;
	uint32_t num = p->num; /* p moves when the copies open a new pack */

	while (off < p->size) {
		struct cfs_id key;
		struct bstore__rec rec;
		uint32_t elen;
		if (entry_at(s, p, off, &key, &elen) < 0)
			break; /* records naming the rest are dropped when read */
		if (bstore__rec_read(s, &key, &rec) == 0 && rec.pack == p->num && rec.off == off) {
			bool young = s->tick - rec.tick <= s->st.blocks / 4;
			if (!(young && rescue && copy_entry(s, p, &key, off, elen) == 0)) {
				bstore__rec_key(k, &key);
				leveldb_writebatch_delete(b, (const char *)k, sizeof(k));
				dropped_blocks++;
				dropped_bytes += rec.meta.len;
			}
		}
		off += elen;
	}
	if (bstore__index_write(s, b, false, "evict") == 0) {
		s->st.blocks -= dropped_blocks < s->st.blocks ? dropped_blocks : s->st.blocks;
		s->st.live_bytes -= dropped_bytes < s->st.live_bytes ? dropped_bytes : s->st.live_bytes;
		s->st.evicted += dropped_blocks;
	}
	leveldb_writebatch_destroy(b);
	(void)flush_moves(s);
	/* Whatever still names this pack is gone with it: reads of it fail
	 * (-EUCLEAN) and are dropped by the caller. */
	bstore__pack_unlink(s, bstore__pack_find(s, num));
}

void bstore__make_room(bstore_t *s, uint64_t need)
{
	uint32_t first_new = s->next_pack;

	while (s->npacks && disk_bytes(s) + need > s->cfg.cap_bytes) {
		if (s->packs[0].num == s->active) {
			if (s->npacks > 1 || s->packs[0].size <= BSTORE__PACK_HDR)
				break;
			bstore__active_close(s); /* only the active pack is left: it goes next */
		}
		/* A pack written since this call began holds blocks copied
		 * forward by it: they go now, so making room always ends. */
		evict_pack(s, &s->packs[0], s->packs[0].num < first_new);
	}
}

void bstore_trim(bstore_t *s, uint64_t bytes)
{
	pthread_mutex_lock(&s->mu);
	uint64_t cap = s->cfg.cap_bytes;
	s->cfg.cap_bytes = bytes;
	if (s->cfg.mode == BSTORE_CACHE)
		bstore__make_room(s, 0);
	s->cfg.cap_bytes = cap;
	pthread_mutex_unlock(&s->mu);
}
