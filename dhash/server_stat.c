/*
 * The DHash server's status (dhash_server_status and the numbers behind
 * it): its counters described once as a cfs_stat table, filled from the
 * server, its store and its cache; what it holds and how far replica
 * maintenance is behind; and the one warning that the ring has fewer
 * server addresses than k.
 */
#include <string.h>

#include "dhash/internal.h"

#define EXPIRING_MAX 1000000 /* leases counted at most, per status */

/* The server's counters, described once (cfs_stat); dhash__sync_status and
 * dhash__scrub_status add theirs. Cache hit rate: of the FETCHes for blocks this
 * server holds no replica of, the share its cache answered. */
struct server_snap {
	uint64_t blocks, bytes, denied, deny_dropped, stores, refused_total, refused[9];
	uint32_t k, ring_servers, skew_peers;
	double skew_s;
	bool clock_off;
	uint64_t expiry_skipped;
	uint64_t fetches, fetch_misses, fetch_denied, haves, refreshes, pushed, push_failed, expired;
	uint64_t frag_kept;
	uint64_t capacity, quota, challenges, day, week;
	uint64_t admit_ok, admit_stranger, admit_far, refresh_over_quota, admit_parked;
	uint64_t c_capacity, c_blocks, c_bytes, c_evicted, c_stores, c_hits, c_path_hits;
	double c_rate;
	struct bstore_stats disk;
	uint64_t c_disk, c_dead;
};

#define S(kind, field, name, label, unit) CFS_STAT(kind, struct server_snap, field, name, label, unit)
static const struct cfs_stat server_stats[] = {
	CFS_STAT_BEGIN(NULL, "store"),
	S(U64, blocks, "blocks", "blocks", NULL),
	S(U64, bytes, "bytes", "bytes", NULL),
	S(U32, k, "replicas_k", "k", NULL),
	S(U32, ring_servers, "ring_servers", "servers, in a ring of fewer than k (0: k or more)", NULL),
	S(U64, capacity, "capacity", "capacity", "bytes"),
	S(U64, quota, "quota", "quota per client IP", "bytes"),
	S(U64, challenges, "challenges", "nonce challenges", NULL),
	S(U64, denied, "denied_keys", "denied keys (cfsctl deny)", NULL),
	S(U64, deny_dropped, "denied_deleted", "copies deleted when denied", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN("clock", "clock"),
	CFS_STAT_D(struct server_snap, skew_s, 1, "skew_s", "ours minus the peers' median", "s"),
	S(U32, skew_peers, "peers", "peers heard", NULL),
	S(BOOL, clock_off, "expiry_suspended", "lease expiry suspended", NULL),
	S(U64, expiry_skipped, "expiry_rounds_skipped", "collector rounds skipped", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN(NULL, "traffic"),
	S(U64, stores, "stores", "stores accepted", NULL),
	S(U64, frag_kept, "frag_kept", "of them fragments held already (kept)", NULL),
	S(U64, refused_total, "refused_total", "refused", NULL),
	S(U64, fetches, "fetches", "fetches", NULL),
	S(U64, fetch_misses, "fetch_misses", "misses", NULL),
	S(U64, fetch_denied, "fetch_denied", "of them denied", NULL),
	S(U64, haves, "have_keys", "have keys", NULL),
	S(U64, refreshes, "refreshed_keys", "refreshed keys", NULL),
	S(U64, pushed, "pushed", "copies pushed", NULL),
	S(U64, push_failed, "push_failed", "failed", NULL),
	S(U64, expired, "expired", "leases expired", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN("refused", "refused"),
	S(U64, refused[0], "bad_hash", "bad hash", NULL),
	S(U64, refused[1], "bad_signature", "bad signature", NULL),
	S(U64, refused[2], "stale_root", "stale root", NULL),
	S(U64, refused[3], "bad_kind", "bad kind", NULL),
	S(U64, refused[4], "disk_full", "disk full", NULL),
	S(U64, refused[5], "store_error", "store error", NULL),
	S(U64, refused[6], "over_quota", "over quota", NULL),
	S(U64, refused[7], "other", "other", NULL),
	S(U64, refused[8], "denied", "denied", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN("admission", "replica copies"),
	S(U64, admit_ok, "admitted", "admitted", NULL),
	S(U64, admit_parked, "waited", "waited for their sender's check", NULL),
	S(U64, admit_stranger, "refused_not_member", "refused: not a member", NULL),
	S(U64, admit_far, "refused_far", "refused: far from the key", NULL),
	S(U64, refresh_over_quota, "refresh_over_quota", "refreshes over quota", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN("disk", "on disk"),
	S(U64, disk.live_bytes, "live_bytes", "live", "bytes"),
	S(U64, disk.dead_bytes, "dead_bytes", "dead (to reclaim)", "bytes"),
	S(U64, disk.disk_bytes, "pack_bytes", "in packs", "bytes"),
	S(U32, disk.packs, "packs", "packs", NULL),
	S(U64, disk.written_bytes, "written_bytes", "written since start", "bytes"),
	S(U64, disk.commits, "commits", "group commits", NULL),
	S(U64, disk.flushes, "flushes", "pack flushes", NULL),
	S(U64, disk.compactions, "compactions", "packs compacted", NULL),
	S(U64, disk.compact_copied, "compact_copied", "bytes copied forward", NULL),
	S(U64, disk.compact_reclaimed, "compact_reclaimed", "bytes reclaimed", NULL),
	S(U32, disk.compacting_pack, "compacting_pack", "compacting pack", NULL),
	S(U64, disk.compacting_done, "compacting_done", "read of it", "bytes"),
	S(U64, disk.compacting_size, "compacting_size", "of", "bytes"),
	S(U64, disk.torn_cut, "torn_cut", "torn tails cut at open", "bytes"),
	S(U64, disk.records_dropped, "records_dropped", "records dropped at open", NULL),
	S(U64, disk.damaged, "damaged", "damaged entries read", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN("leases_expiring", "leases"),
	S(U64, day, "day", "ending within a day", NULL),
	S(U64, week, "week", "within a week", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN("cache", "cache"),
	S(U64, c_capacity, "capacity", "capacity", "bytes"),
	S(U64, c_blocks, "blocks", "blocks", NULL),
	S(U64, c_bytes, "bytes", "bytes", NULL),
	S(U64, c_evicted, "evicted", "evicted", NULL),
	S(U64, c_disk, "pack_bytes", "in packs", "bytes"),
	S(U64, c_dead, "dead_bytes", "dead", "bytes"),
	S(U64, c_stores, "stores", "copies taken", NULL),
	S(U64, c_hits, "fetch_hits", "fetches answered", NULL),
	CFS_STAT_D(struct server_snap, c_rate, 4, "hit_rate", "hit rate", NULL),
	S(U64, c_path_hits, "path_hits", "lookups answered", NULL),
	CFS_STAT_CLOSE,
};
#undef S

uint32_t dhash__note_ring_size(dhash_server_t *s)
{
	uint32_t n = chord_ring_addresses(s->chord), k = s->cfg.replicas;

	if (n > 0 && n < k && n != s->ring_servers_said) {
		log_warn("the ring has %u server address%s, fewer than k = %u: each block is kept on "
		         "all of them and a put needs a majority of %u", n, n == 1 ? "" : "es", k, n);
		s->ring_servers_said = n;
	} else if ((n == 0 || n >= k) && s->ring_servers_said) {
		log_info("the ring has k = %u server addresses or more again", k);
		s->ring_servers_said = 0;
	}
	return n;
}

static void server_snap_fill(dhash_server_t *s, struct server_snap *n)
{
	uint64_t now = dhash__wall_now(), asked = s->cache_hits + s->fetch_misses;

	dhash_store_totals(s->store, &n->blocks, &n->bytes);
	dhash_store_stats(s->store, &n->disk);
	n->k = s->cfg.replicas;
	n->ring_servers = dhash__note_ring_size(s);
	(void)dhash__clock_ok(s);
	n->skew_s = (double)s->skew_ms / 1000;
	n->skew_peers = s->skew_peers;
	n->clock_off = s->clock_off;
	n->expiry_skipped = s->expiry_skipped;
	if (n->ring_servers >= n->k)
		n->ring_servers = 0;
	n->stores = s->stores;
	for (int i = 0; i < 9; i++)
		n->refused_total += n->refused[i] = s->refused[i];
	n->denied = dhash_server_denied_count(s);
	n->deny_dropped = s->deny_dropped;
	n->fetches = s->fetches;
	n->fetch_misses = s->fetch_misses;
	n->fetch_denied = s->fetch_denied;
	n->haves = s->haves;
	n->refreshes = s->refreshes;
	n->pushed = s->pushed;
	n->push_failed = s->push_failed;
	n->expired = s->expired;
	n->frag_kept = s->frag_kept;
	n->capacity = s->cfg.capacity_bytes;
	n->quota = s->cfg.quota_bytes;
	n->challenges = s->challenges;
	n->admit_ok = s->admit_ok;
	n->admit_stranger = s->admit_stranger;
	n->admit_parked = s->admit_parked;
	n->admit_far = s->admit_far;
	n->refresh_over_quota = s->refresh_over_quota;
	/* Leases ending within a day and a week (a walk of the lease index,
	 * bounded so that status stays cheap on a huge store). */
	n->day = dhash_store_expiring(s->store, now + 86400, EXPIRING_MAX);
	n->week = dhash_store_expiring(s->store, now + 7 * 86400, EXPIRING_MAX);
	if (s->cache) {
		dhash_cache_totals(s->cache, &n->c_blocks, &n->c_bytes, &n->c_evicted);
		dhash_cache_disk(s->cache, &n->c_disk, &n->c_dead);
		n->c_capacity = s->cfg.cache_bytes;
	}
	n->c_stores = s->cache_stores;
	n->c_hits = s->cache_hits;
	n->c_rate = asked ? (double)s->cache_hits / (double)asked : 0;
	n->c_path_hits = s->path_hits;
}

void dhash_server_usage(dhash_server_t *s, uint64_t *ret_bytes, uint64_t *ret_capacity)
{
	uint64_t blocks;

	dhash_store_totals(s->store, &blocks, ret_bytes);
	*ret_capacity = s->cfg.capacity_bytes;
}

void dhash_server_debt(dhash_server_t *s, uint64_t *ret_last, uint64_t *ret_round)
{
	*ret_last = s->sync.debt_last;
	*ret_round = s->sync.debt_round;
}

void dhash_server_sync_bytes(dhash_server_t *s, uint64_t *ret_pushed, uint64_t *ret_fetched)
{
	*ret_pushed = s->sync.pushed_bytes;
	*ret_fetched = s->sync.fetched_bytes;
}

void dhash_server_status(dhash_server_t *s, struct cfs_sbuf *b, bool json)
{
	struct server_snap n = { 0 };
	bool first = true;

	server_snap_fill(s, &n);
	if (json)
		cfs_sb_printf(b, "{");
	cfs_stat_render(b, json, server_stats, CFS_ARRAY_SIZE(server_stats), &n, &first);
	dhash__sync_status(s, b, json);
	dhash__scrub_status(s, b, json);
	if (json)
		cfs_sb_printf(b, "}");
}
