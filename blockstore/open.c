/*
 * Opening a store: its format, its packs and its index; after a crash,
 * the recovery (the tails of packs cut back to what the index names, the
 * records of the last head replayed from the packs, every pack's live
 * bytes counted); and closing it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blockstore/internal.h"

#define PACK_MAX_DURABLE (256ull << 20)
#define FORMAT_NAME "FORMAT"

/* The records at open: count what is live in each pack; a record naming
 * bytes its pack does not have is dropped (after a crash that lost them,
 * or a pack cut short by hand). */
static int count_live(bstore_t *s)
{
	leveldb_iterator_t *it = leveldb_create_iterator(s->db, s->ro);
	leveldb_writebatch_t *drop = leveldb_writebatch_create();
	uint8_t lo = BSTORE__P_REC;
	uint64_t dropped = 0;
	int r = 0;

	memset(&s->st, 0, offsetof(struct bstore_stats, commits));
	for (size_t i = 0; i < s->npacks; i++)
		s->packs[i].live = 0;
	for (leveldb_iter_seek(it, (const char *)&lo, 1); leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);
		const uint8_t *v = (const uint8_t *)leveldb_iter_value(it, &vl);
		struct bstore__rec rec;
		if (kl < 1 || k[0] != BSTORE__P_REC)
			break;
		struct bstore__pack *p = NULL;
		bool ok = kl == 1 + CFS_ID_BYTES && bstore__rec_decode(v, vl, &rec) == 0 &&
		          (p = bstore__pack_find(s, rec.pack)) &&
		          rec.off + BSTORE__ENTRY_HDR + rec.meta.len <= p->size;
		if (!ok) {
			leveldb_writebatch_delete(drop, (const char *)k, kl);
			if (kl == 1 + CFS_ID_BYTES && bstore__rec_decode(v, vl, &rec) == 0 && rec.meta.lease_until) {
				uint8_t lk[9 + CFS_ID_BYTES];
				struct cfs_id id;
				memcpy(id.b, k + 1, CFS_ID_BYTES);
				bstore__lease_key(lk, rec.meta.lease_until, &id);
				leveldb_writebatch_delete(drop, (const char *)lk, sizeof(lk));
			}
			dropped++;
			continue;
		}
		p->live += BSTORE__ENTRY_HDR + rec.meta.len;
		s->st.blocks++;
		s->st.live_bytes += rec.meta.len;
		if (rec.tick > s->tick)
			s->tick = rec.tick;
	}
	leveldb_iter_destroy(it);
	if (dropped) {
		log_warn("%s %s: dropped %lu index records naming bytes past their pack's end",
		         s->cfg.what, s->dir, (unsigned long)dropped);
		r = bstore__index_write(s, drop, true, "drop records");
	}
	leveldb_writebatch_destroy(drop);
	s->st.records_dropped += dropped;
	return r;
}

/* The end of the last entry a record names in each pack: beyond it are
 * the unindexed bytes of an interrupted commit (or dead ones): cut them;
 * a pack no record names is deleted. */
static void cut_tails(bstore_t *s)
{
	uint64_t *end = xcalloc(s->npacks ? s->npacks : 1, sizeof(*end)), cut = 0, packs = 0;
	leveldb_iterator_t *it = leveldb_create_iterator(s->db, s->ro);
	uint8_t lo = BSTORE__P_REC;

	for (leveldb_iter_seek(it, (const char *)&lo, 1); leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);
		const uint8_t *v = (const uint8_t *)leveldb_iter_value(it, &vl);
		struct bstore__rec rec;
		if (kl < 1 || k[0] != BSTORE__P_REC)
			break;
		struct bstore__pack *p;
		if (bstore__rec_decode(v, vl, &rec) == 0 && (p = bstore__pack_find(s, rec.pack))) {
			uint64_t e = rec.off + BSTORE__ENTRY_HDR + rec.meta.len;
			size_t i = (size_t)(p - s->packs);
			end[i] = e > end[i] ? e : end[i];
		}
	}
	leveldb_iter_destroy(it);
	for (size_t i = s->npacks; i-- > 0;) {
		struct bstore__pack *p = &s->packs[i];
		char path[PATH_MAX];
		if (end[i] >= p->size)
			continue;
		cut += p->size - (end[i] ? end[i] : 0);
		packs++;
		if (end[i] == 0) {
			bstore__pack_unlink(s, p);
			continue;
		}
		bstore__pack_path(s, p->num, path, sizeof(path));
		if (truncate(path, (off_t)end[i]) == 0)
			p->size = end[i];
	}
	free(end);
	if (packs)
		log_warn("%s %s: cut %lu bytes of torn or unindexed pack tails (%lu packs)", s->cfg.what,
		         s->dir, (unsigned long)cut, (unsigned long)packs);
	s->st.torn_cut += cut;
}

static int scan_packs(bstore_t *s)
{
	DIR *d = opendir(s->pack_dir);
	struct dirent *e;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		unsigned num;
		char tail;
		struct stat st;
		if (sscanf(e->d_name, "%8u.pac%c", &num, &tail) != 2 || tail != 'k' || num == 0 ||
		    fstatat(dirfd(d), e->d_name, &st, 0) < 0)
			continue;
		bstore__pack_add(s, num, (uint64_t)st.st_size);
		if (num >= s->next_pack)
			s->next_pack = num + 1;
	}
	closedir(d);
	return 0;
}

/* Index one entry found by the replay: its header's meta, but the longer
 * lease and the first owner of a record the key has already (a record
 * that may be newer than the entry: a refresh, or a compaction's copy). */
static void replay_entry(bstore_t *s, leveldb_writebatch_t *b, const struct cfs_id *key,
                         const struct bstore_meta *m, uint32_t pack, uint64_t off)
{
	struct bstore__rec cur, nw = { .pack = pack, .off = off, .meta = *m };
	uint8_t k[1 + CFS_ID_BYTES], v[BSTORE__REC_BYTES], lk[9 + CFS_ID_BYTES];
	bool had = bstore__rec_read(s, key, &cur) == 0;

	if (had) {
		if (cur.meta.lease_until > nw.meta.lease_until)
			nw.meta.lease_until = cur.meta.lease_until;
		memcpy(nw.meta.owner, cur.meta.owner, 16);
		nw.tick = cur.tick;
		if (cur.meta.lease_until && cur.meta.lease_until != nw.meta.lease_until) {
			bstore__lease_key(lk, cur.meta.lease_until, key);
			leveldb_writebatch_delete(b, (const char *)lk, sizeof(lk));
		}
	}
	bstore__rec_key(k, key);
	bstore__rec_encode(v, &nw);
	leveldb_writebatch_put(b, (const char *)k, sizeof(k), (const char *)v, sizeof(v));
	if (nw.meta.lease_until && !s->cfg.no_lease_index) {
		bstore__lease_key(lk, nw.meta.lease_until, key);
		leveldb_writebatch_put(b, (const char *)lk, sizeof(lk), "", 0);
	}
}

/* The puts after the last flushed head: their entries were flushed before
 * they were acknowledged, their records perhaps not (a crash of the
 * machine). Every whole entry from the head on, in its pack and the later
 * ones, is indexed again, in order; the first that is not whole ends it
 * (a torn tail, cut next). */
static int replay(bstore_t *s)
{
	char *err = NULL;
	size_t hl;
	uint32_t head_pack = 0;
	uint64_t head_end = 0, n = 0;
	char *h = leveldb_get(s->db, s->ro, (const char[]){ BSTORE__P_HEAD }, 1, &hl, &err);

	if (err)
		return bstore__db_error(s, err, "read its head");
	if (h && hl == 12) {
		head_pack = cfs_get_be32((const uint8_t *)h);
		head_end = cfs_get_be64((const uint8_t *)h + 4);
	}
	leveldb_free(h);
	if (head_pack >= s->next_pack) /* the head's pack was deleted: never its number again */
		s->next_pack = head_pack + 1;
	for (size_t i = 0; i < s->npacks; i++) {
		struct bstore__pack *p = &s->packs[i];
		uint64_t off = p->num == head_pack ? head_end : BSTORE__PACK_HDR;
		int fd;
		if (p->num < head_pack || (fd = bstore__pack_fd(s, p)) < 0)
			continue;
		while (off + BSTORE__ENTRY_HDR <= p->size) {
			uint8_t hdr[BSTORE__ENTRY_HDR];
			struct bstore_meta m;
			struct cfs_id key;
			if (pread(fd, hdr, sizeof(hdr), (off_t)off) != (ssize_t)sizeof(hdr) ||
			    bstore__entry_parse(hdr, sizeof(hdr), &key, &m) < 0 ||
			    off + BSTORE__ENTRY_HDR + m.len > p->size)
				break;
			leveldb_writebatch_t *b = leveldb_writebatch_create();
			replay_entry(s, b, &key, &m, p->num, off);
			leveldb_write(s->db, s->wo_async, b, &err); /* flushed once, below */
			s->unsynced = true;
			leveldb_writebatch_destroy(b);
			if (err)
				return bstore__db_error(s, err, "replay");
			off += BSTORE__ENTRY_HDR + m.len;
			n++;
		}
	}
	if (!n)
		return 0;
	log_info("%s %s: %lu puts indexed again from their packs (their index records were not "
	         "flushed before a crash)", s->cfg.what, s->dir, (unsigned long)n);
	s->st.replayed += n;
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	int r = bstore__index_write(s, b, true, "replay"); /* the head moves past them */
	leveldb_writebatch_destroy(b);
	return r;
}

static bool indexes_in_memory;

void bstore_keep_indexes_in_memory(void)
{
	indexes_in_memory = true;
}

int bstore__db_open(bstore_t *s, bool at_start)
{
	char *err = NULL;

	s->db = leveldb_open(s->opt, s->db_dir, &err);
	if (err) {
		s->db = NULL;
		if (strstr(err, "lock")) {
			log_error("%s %s is in use by another process: %s", s->cfg.what, s->dir, err);
			leveldb_free(err);
			return -EBUSY;
		}
		return bstore__db_error(s, err, "cannot open its index");
	}
	int r = s->cfg.mode == BSTORE_DURABLE && at_start ? replay(s) : 0;
	return r < 0 ? r : count_live(s);
}

static bool exists(const char *dir, const char *name)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

/* An old cache (blocks inside LevelDB) is only discarded. */
static void discard_old_cache(bstore_t *s)
{
	DIR *d = opendir(s->dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (!strcmp(e->d_name, "CURRENT") || !strcmp(e->d_name, "LOCK") ||
		    !strncmp(e->d_name, "LOG", 3) || !strncmp(e->d_name, "MANIFEST-", 9) ||
		    strstr(e->d_name, ".ldb") || strstr(e->d_name, ".log"))
			(void)unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	log_info("%s %s: discarded a cache of the earlier format", s->cfg.what, s->dir);
}

/* The directory's format: 0 (ours, or new), or -EPROTO, logged with what
 * to do. */
static int check_format(bstore_t *s)
{
	char path[PATH_MAX], buf[64] = "";
	unsigned v = 0;

	snprintf(path, sizeof(path), "%s/%s", s->dir, FORMAT_NAME);
	FILE *f = fopen(path, "re");
	if (f) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		buf[n] = 0;
		fclose(f);
		if (sscanf(buf, "cfs-blockstore %u", &v) == 1 && v == BSTORE_FORMAT_VERSION)
			return 0;
		log_error("%s %s has format '%.*s'; this program reads cfs-blockstore %u. Use the "
		          "program that wrote it, or move the directory aside (docs/OPERATIONS.md, "
		          "\"Data directory formats\")", s->cfg.what, s->dir, (int)strcspn(buf, "\n"), buf,
		          BSTORE_FORMAT_VERSION);
		return -EPROTO;
	}
	bool old_db = exists(s->dir, "CURRENT"), old_dir = exists(s->dir, "index");
	if (old_db && s->cfg.mode == BSTORE_CACHE) {
		discard_old_cache(s);
		old_db = false;
	}
	if (old_db || old_dir) {
		log_error("%s %s holds the format of CFS before the pack engine (%s); this program "
		          "cannot read it. Move it aside and start with an empty directory: a server's "
		          "replicas come back from the ring, a dir: store is published again "
		          "(docs/OPERATIONS.md, \"Data directory formats\")", s->cfg.what, s->dir,
		          old_db ? "blocks inside LevelDB" : "a 64-byte record index file");
		return -EPROTO;
	}
	snprintf(buf, sizeof(buf), "cfs-blockstore %u\n", BSTORE_FORMAT_VERSION);
	return cfs_write_file_atomic(path, buf, strlen(buf), 0644);
}

static void config_defaults(struct bstore_config *c)
{
	if (!c->what)
		c->what = c->mode == BSTORE_CACHE ? "block cache" : "block store";
	if (!c->compact_live_pct)
		c->compact_live_pct = 50;
	if (!c->pack_max && c->mode == BSTORE_CACHE) {
		uint64_t p = c->cap_bytes / 8; /* a tiny cache: a pack per block */
		c->pack_max = p < 1 ? 1 : p > (64u << 20) ? (64u << 20) : p;
	}
	if (!c->pack_max)
		c->pack_max = PACK_MAX_DURABLE;
	if (c->mode == BSTORE_CACHE)
		c->no_lease_index = true;
}

int bstore_open(const char *dir, const struct bstore_config *cfg, bstore_t **ret)
{
	bstore_t *s = xcalloc(1, sizeof(*s));
	char path[PATH_MAX];
	int r;

	pthread_mutex_init(&s->mu, NULL);
	s->cfg = *cfg;
	config_defaults(&s->cfg);
	s->dir = xstrdup(dir);
	snprintf(path, sizeof(path), "%s/db", dir);
	s->db_dir = xstrdup(path);
	snprintf(path, sizeof(path), "%s/packs", dir);
	s->pack_dir = xstrdup(path);
	s->active_fd = -1;
	s->next_pack = 1;
	s->opt = leveldb_options_create();
	s->bloom = leveldb_filterpolicy_create_bloom(10); /* most lookups of a cache miss */
	leveldb_options_set_filter_policy(s->opt, s->bloom);
	leveldb_options_set_create_if_missing(s->opt, 1);
	s->ro = leveldb_readoptions_create();
	s->wo = leveldb_writeoptions_create();
	leveldb_writeoptions_set_sync(s->wo, s->cfg.mode == BSTORE_DURABLE);
	s->wo_async = leveldb_writeoptions_create();
	leveldb_env_t *mem = indexes_in_memory ? bstore__mem_env() : NULL;
	if (indexes_in_memory && !mem) {
		log_error("%s %s: this LevelDB cannot keep an index in memory", s->cfg.what, dir);
		bstore_close(s);
		return -ENOTSUP;
	}
	if (mem)
		leveldb_options_set_env(s->opt, mem);
	if ((r = cfs_mkdir_p(dir, 0700)) < 0 || (r = check_format(s)) < 0 ||
	    (r = cfs_mkdir_p(s->db_dir, 0700)) < 0 || (r = cfs_mkdir_p(s->pack_dir, 0700)) < 0 ||
	    (r = scan_packs(s)) < 0 || (r = bstore__db_open(s, true)) < 0) {
		if (r == -1)
			r = -errno;
		bstore_close(s);
		return r;
	}
	cut_tails(s);
	if (s->cfg.mode == BSTORE_CACHE)
		bstore__make_room(s, 0); /* the bound may have been lowered since */
	*ret = s;
	return 0;
}

void bstore_close(bstore_t *s)
{
	if (!s)
		return;
	bstore__compact_free(s);
	bstore__active_close(s);
	bstore__close_reads(s);
	if (s->db)
		leveldb_close(s->db);
	leveldb_readoptions_destroy(s->ro);
	leveldb_writeoptions_destroy(s->wo);
	leveldb_writeoptions_destroy(s->wo_async);
	leveldb_options_destroy(s->opt);
	leveldb_filterpolicy_destroy(s->bloom);
	pthread_mutex_destroy(&s->mu);
	free(s->packs);
	free(s->dir);
	free(s->db_dir);
	free(s->pack_dir);
	free(s);
}

const char *bstore_dir(const bstore_t *s)
{
	return s->dir;
}
