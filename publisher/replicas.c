/*
 * cfs-fsck --replicas [--repair]: where are a volume's copies? Every block
 * (each once, publisher/blocks.c) is located on its k responsible servers
 * (dhash_locate: each asked for the block, its answer verified), up to
 * WINDOW at a time. A block with fewer than k good copies but one at
 * least can be repaired: its verified bytes are put again, and the key's
 * successor stores them and pushes them to the other k-1 (DHash's put),
 * which fills the holes; then it is located again to report the outcome.
 *
 * A coded volume's data blocks are no copies but n fragments (DHash++
 * 4.4): each is located on its n holders and two spares
 * (dhash_locate_coded: holder i asked for fragment i; one holding another
 * index, moved there by the ring's changes, counts for that index), and
 * reported as good/m/n, good being the distinct indices found; one below
 * n has lost fragments, one below m cannot be read. A repair stores each
 * missing index on a holder among the first n that has no fragment. Its
 * metadata blocks are whole and replicated, as in any volume.
 */
#include <stdlib.h>
#include <string.h>

#include "publisher/internal.h"

#define WINDOW 32

struct rep {
	uv_loop_t *loop;
	struct pub_sink *sink;
	FILE *out;
	struct pub_replica_stats *st;
	struct cfs_id *keys;
	size_t n, cap, next, inflight;
	uint8_t *good;            /* per key: 0 none, 1 some, 2 all k (or unknown: 3);
	                           * coded: 2 all n, 1 m or more, 4 below m */
	uint8_t *coded;           /* per key: a coded data block */
	uint8_t code_m, code_n;   /* the volume's code (0: whole blocks) */
	struct dhash_locate_result **loc; /* repair: a coded block's holders, when below n */
	size_t loc_n;
	uint32_t root_kind;       /* keys[0]'s: the newest root, or a version */
	size_t *origin;           /* repair: the index each re-located key came from */
	int error;
	bool woke;                /* a locate was answered */
};

static int collect(void *arg, const struct cfs_id *key, uint8_t btype)
{
	struct rep *rp = arg;

	if (rp->n == rp->cap) {
		rp->cap = rp->cap ? 2 * rp->cap : 1024;
		rp->keys = xrealloc(rp->keys, rp->cap * sizeof(*rp->keys));
		rp->coded = xrealloc(rp->coded, rp->cap);
	}
	rp->coded[rp->n] = rp->code_m && btype == SFSRO_B_DATA;
	rp->keys[rp->n++] = *key;
	return 0;
}

static const char *state_name(int8_t s)
{
	switch (s) {
	case DHASH_COPY_MISSING: return "missing";
	case DHASH_COPY_BAD: return "bad";
	case DHASH_COPY_STALE: return "stale";
	default: return "silent";
	}
}

struct loc_call {
	struct rep *rp;
	size_t i;
};

static void pump(struct rep *rp);

static void located(void *arg, const struct dhash_locate_result *r)
{
	struct loc_call *c = arg;
	struct rep *rp = c->rp;
	char h[65], a[CFS_ADDR_STRLEN];

	rp->inflight--;
	cfs_id_hex(&rp->keys[c->i], h);
	if (rp->coded[c->i] && (r->status == -EOPNOTSUPP || r->status == -ECONNRESET)) {
		/* a cfsd older than ctl_locate_coded drops the connection */
		if (!rp->error)
			rp->error = log_error_errno(-EOPNOTSUPP, "cannot locate coded blocks (%s): is the "
			                            "daemon older than this cfs-fsck? Upgrade it, or "
			                            "use --from ring:HOST:PORT", strerror(-r->status));
		rp->next = rp->n;
		rp->good[c->i] = 3;
	} else if (rp->coded[c->i] && r->status < 0) {
		fprintf(rp->out, "%s ?/%u/%u lookup failed: %s\n", h, rp->code_m, rp->code_n,
		        strerror(-r->status));
		rp->good[c->i] = 3;
	} else if (rp->coded[c->i]) {
		fprintf(rp->out, "%s %u/%u/%u", h, r->good, rp->code_m, rp->code_n);
		for (uint32_t j = 0; j < r->n; j++) {
			int x = dhash_copy_index(r->state[j], j);
			if (x >= 0 && (uint32_t)x != j) /* a fragment the ring's changes moved */
				fprintf(rp->out, " index-%d %s", x, cfs_addr_str(&r->nodes[j].addr, a));
			else if (x < 0 && j < rp->code_n) /* a spare past n owes nothing */
				fprintf(rp->out, " %s %s", state_name(r->state[j]),
				        cfs_addr_str(&r->nodes[j].addr, a));
		}
		fputc('\n', rp->out);
		rp->good[c->i] = r->good >= rp->code_n ? 2 : r->good >= rp->code_m ? 1 : 4;
		if (c->i < rp->loc_n && rp->good[c->i] == 1 && !rp->loc[c->i])
			rp->loc[c->i] = xmemdup(r, sizeof(*r));
	} else if (r->status < 0) {
		fprintf(rp->out, "%s ?/%u lookup failed: %s\n", h, rp->st->k, strerror(-r->status));
		rp->good[c->i] = 3;
	} else {
		fprintf(rp->out, "%s %u/%u", h, r->good, r->n);
		for (uint32_t j = 0; j < r->n; j++)
			if (r->state[j] != DHASH_COPY_GOOD)
				fprintf(rp->out, " %s %s", state_name(r->state[j]),
				        cfs_addr_str(&r->nodes[j].addr, a));
		fputc('\n', rp->out);
		/* fewer servers than k in a small ring: all of them is "all" */
		rp->good[c->i] = r->good == 0 ? 0 : r->good >= r->n && r->n > 0 ? 2 : 1;
		if (r->n > rp->st->k)
			rp->st->k = r->n;
	}
	free(c);
	rp->woke = true;
	pump(rp);
}

static void pump(struct rep *rp)
{
	while (rp->inflight < WINDOW && rp->next < rp->n) {
		struct loc_call *c = xmalloc(sizeof(*c));
		*c = (struct loc_call){ rp, rp->next++ };
		int r = rp->coded[c->i]
		        ? rp->sink->ops->locate_coded(rp->sink->impl, &rp->keys[c->i], rp->code_m,
		                                      rp->code_n, located, c)
		        : rp->sink->ops->locate(rp->sink->impl, &rp->keys[c->i], located, c);
		if (r < 0) {
			free(c);
			if (!rp->error)
				rp->error = log_error_errno(r, "cannot ask where the blocks are");
			rp->next = rp->n;
			break;
		}
		rp->inflight++;
	}
}

/* Locate every key of rp->keys[from..], printing a line per block. */
static int locate_all(struct rep *rp, size_t from)
{
	rp->next = from;
	pump(rp);
	while (rp->inflight) {
		rp->woke = false;
		if (cfs_loop_run_until(rp->loop, &rp->woke) < 0)
			return log_error_errno(-EIO, "locates were lost");
	}
	return rp->error;
}

struct restore_wait {
	bool done;
	int status;
};

static void restored(void *arg, int status)
{
	struct restore_wait *w = arg;
	w->done = true;
	w->status = status;
}

/* A coded block with m good fragments or more but fewer than n: read it
 * (m fragments, decoded), encode it again and store each missing index
 * on a holder among the first n that the locate found without any
 * fragment (a holder keeps the first fragment it is sent: one holding
 * another index, or a bad one, is not sent another). */
static int repair_coded(struct rep *rp, size_t i, uint64_t lease_until)
{
	const struct dhash_locate_result *l = rp->loc[i];
	struct restore_wait w = { 0 };
	struct cfs_node to[SFSRO_CODE_N_MAX];
	uint32_t mask = dhash_coded_assign(l, rp->code_n, to);
	uint8_t *b;
	size_t len;
	char h[65];
	int r;

	cfs_id_hex(&rp->keys[i], h);
	if (!mask) /* fewer holders than n, or none without a fragment: nobody to store on */
		return log_error_errno(-EHOSTUNREACH, "repair: %s has no holder without a fragment among "
		                       "its %u", h, l->n < rp->code_n ? l->n : rp->code_n);
	if ((r = pub__get_coded(rp->loop, rp->sink, &rp->keys[i], rp->code_m, rp->code_n, &b, &len)) < 0)
		return log_error_errno(r, "repair: cannot read %s from its fragments", h);
	r = rp->sink->ops->repair_coded(rp->sink->impl, &rp->keys[i], rp->code_m, rp->code_n, b, len,
	                                to, rp->code_n, mask, lease_until, restored, &w);
	if (r == 0)
		r = cfs_loop_run_until(rp->loop, &w.done);
	free(b);
	if (r == 0)
		r = w.status;
	if (r < 0)
		return log_error_errno(r, "repair: storing the fragments of %s again failed", h);
	return 0;
}

/* A whole block: put again from a good copy. */
static int restore_whole(struct rep *rp, size_t i, uint64_t lease_until)
{
	uint8_t *b;
	size_t len;
	char h[65];
	struct restore_wait w = { 0 };
	int r = pub__get_block(rp->loop, rp->sink, &rp->keys[i], i == 0, &b, &len); /* keys[0]: the root */
	if (r < 0)
		return log_error_errno(r, "repair: cannot read a good copy of %s", cfs_id_hex(&rp->keys[i], h));
	uint32_t kind = i == 0 ? rp->root_kind : DHASH_KIND_CHASH; /* keys[0]: the root */
	r = rp->sink->ops->restore(rp->sink->impl, kind, b, len, lease_until, restored, &w);
	if (r == 0)
		r = cfs_loop_run_until(rp->loop, &w.done);
	free(b);
	if (r == 0)
		r = w.status;
	if (r < 0)
		return log_error_errno(r, "repair: storing %s again failed", cfs_id_hex(&rp->keys[i], h));
	return 0;
}

/* Put the blocks with some good copies but fewer than k again (a coded
 * block: its missing fragments); the ones repaired go to the end of
 * rp->keys to be located once more. */
static int repair(struct rep *rp, uint64_t lease_until)
{
	size_t n = rp->n;
	char h[65];

	for (size_t i = 0; i < n; i++) {
		if (rp->good[i] == 4)
			log_error("repair: %s has fewer than %u good fragments: it cannot be rebuilt",
			          cfs_id_hex(&rp->keys[i], h), rp->code_m);
		if (rp->good[i] != 1)
			continue;
		if (rp->coded[i] ? !rp->loc || !rp->loc[i] || repair_coded(rp, i, lease_until) < 0
		    : restore_whole(rp, i, lease_until) < 0)
			continue;
		rp->st->repaired++;
		rp->origin = xrealloc(rp->origin, (rp->n - n + 1) * sizeof(*rp->origin));
		rp->origin[rp->n - n] = i;
		struct cfs_id key = rp->keys[i]; /* collect may move rp->keys */
		collect(rp, &key, rp->coded[i] ? SFSRO_B_DATA : SFSRO_B_INODE); /* as it was */
	}
	if (rp->n > n) {
		rp->good = xrealloc(rp->good, rp->n);
		memset(rp->good + n, 3, rp->n - n);
	}
	return 0;
}

static void count(struct rep *rp, size_t from, size_t to)
{
	struct pub_replica_stats *st = rp->st;

	st->at_k = st->below_k = st->at_zero = st->unknown = 0;
	st->coded = st->coded_at_n = st->below_n = st->below_m = 0;
	for (size_t i = from; i < to; i++) {
		if (rp->coded[i]) {
			st->coded++;
			st->coded_at_n += rp->good[i] == 2;
			st->below_n += rp->good[i] == 1 || rp->good[i] == 4;
			st->below_m += rp->good[i] == 4;
		}
		if (rp->good[i] == 4)
			st->below_k++;
		else if (rp->good[i] == 2)
			st->at_k++;
		else if (rp->good[i] == 1)
			st->below_k++;
		else if (rp->good[i] == 0)
			st->at_zero++;
		else
			st->unknown++;
	}
}

int pub_replicas(uv_loop_t *loop, struct pub_sink *sink, const struct cfs_pubkey *pk, uint64_t seq,
                 bool do_repair, FILE *out, struct pub_replica_stats *ret)
{
	struct rep rp = { .loop = loop, .sink = sink, .out = out, .st = ret };
	struct sfsro_root root;
	struct cfs_id root_key;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (!sink->ops->locate)
		return log_error_errno(-EOPNOTSUPP, "--replicas needs the ring (--from cfsd or ring:), "
		                       "not a local store");
	if ((r = pub__read_root(loop, sink, pk, seq, &root)) < 0)
		return pub_sink_said_unreachable() ? r : log_error_errno(r, "cannot read the volume's root");
	if (root.code_m && !sink->ops->locate_coded)
		return log_error_errno(-EOPNOTSUPP, "--replicas of a coded volume (rs:%u/%u) needs "
		                       "the ring", root.code_m, root.code_n);
	rp.code_m = root.code_m;
	rp.code_n = root.code_n;
	ret->code_m = root.code_m;
	ret->code_n = root.code_n;
	rp.root_kind = seq ? DHASH_KIND_VERSION : DHASH_KIND_ROOT;
	if (seq)
		sfsro_root_version_key(pk, seq, &root_key);
	else
		sfsro_root_key(pk, &root_key);
	collect(&rp, &root_key, SFSRO_B_ROOT);
	if ((r = pub__walk_blocks(loop, sink, &root.root_dir, collect, &rp)) < 0)
		goto out;
	ret->blocks = rp.n;
	rp.good = xmalloc(rp.n ? rp.n : 1);
	memset(rp.good, 3, rp.n);
	if (do_repair && root.code_m && sink->ops->repair_coded)
		rp.loc = xcalloc(rp.loc_n = rp.n ? rp.n : 1, sizeof(*rp.loc));
	if ((r = locate_all(&rp, 0)) < 0)
		goto out;
	count(&rp, 0, rp.n);
	if (do_repair && ret->below_k) {
		size_t before = rp.n;
		uint64_t lease = root.valid_until > cfs_wall_s() ? root.valid_until : 0;
		if ((r = repair(&rp, lease)) < 0)
			goto out;
		fprintf(out, "# after repair\n");
		if ((r = locate_all(&rp, before)) < 0)
			goto out;
		for (size_t i = before; i < rp.n; i++) /* the new state replaces the old */
			rp.good[rp.origin[i - before]] = rp.good[i];
		rp.n = before;
		count(&rp, 0, before);
	}
	r = ret->at_k == ret->blocks ? 0 : -EBADMSG;
out:
	free(rp.keys);
	free(rp.good);
	free(rp.coded);
	free(rp.origin);
	for (size_t i = 0; i < rp.loc_n; i++)
		free(rp.loc[i]);
	free(rp.loc);
	return r;
}
