/*
 * cfs-hostile — a hostile ring member, for the tests of hostile members ("one
 * hostile member or one address cannot lose data or stall the ring").
 * It is a test tool: it is never built into the shipped daemon.
 *
 * It joins the ring honestly: a real transport and a real chord_t, so its
 * IDs hash from its address, it echoes AUTH nonces, stabilises, notifies
 * and answers GET_PRED / GET_SUCCS / PING truthfully, and honest members
 * keep it in their tables. Everything else it answers with lies, the
 * attacks of Sit and Morris (IPTPS 2002 §4: incorrect
 * lookup routing, storage and retrieval attacks):
 *
 *   FIND_NEXT, LOOKUP_FWD  "done, I hold the block", naming only itself
 *                          (--lookup self, the default), or "done", naming
 *                          itself then its own successors, which are far
 *                          from most keys (--lookup far); --lookup none
 *                          routes honestly (only the storage lies remain)
 *   STORE                  acknowledged with the lease asked for, dropped
 *   HAVE, REFRESH          every key "present" (REFRESH: at the lease asked)
 *   FETCH                  -ENOENT, or --fetch garbage: random bytes as a
 *                          content-hash block, which fail verification
 *   SYNC_DIGEST, SYNC_KEYS "I hold nothing": honest servers push copies,
 *                          which are acknowledged and dropped; it never
 *                          pushes or fetches anything itself
 *
 * On start it prints one line per virtual server to stdout:
 *   id HEX ADDR VINDEX
 * so a test can place it on the ring. SIGUSR1 logs the counts of lies told;
 * SIGTERM and SIGINT log them and stop at once (no LEAVE: a hostile node
 * owes nobody a goodbye).
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chord/chord.h"
#include "dhash/dhash.h"

enum lookup_lie { LIE_SELF, LIE_FAR, LIE_NONE };
enum fetch_lie { FETCH_ENOENT, FETCH_GARBAGE };

#define GARBAGE_BYTES 4096

static struct {
	uv_loop_t *loop;
	cfs_transport_t *tr;
	chord_t *chord;
	enum lookup_lie lookup;
	enum fetch_lie fetch;
	struct cfs_rng rng;
	struct cfs_msg msg; /* large (the node array): one, reused */
	uv_signal_t sigterm, sigint, sigusr1;
	/* lies told */
	uint64_t find_next, fwd, stores, store_bytes, haves, refreshes, fetches, syncs;
} H;

static const char usage[] =
	"usage: cfs-hostile --port P [--bind IP] [--bootstrap IP:PORT]... [--vnodes V]\n"
	"                   [--stabilize-ms MS] [--successors R] [--lookup self|far|none]\n"
	"                   [--fetch enoent|garbage] [--seed S]\n"
	"A hostile ring member for tests: joins honestly, then lies in lookups,\n"
	"acknowledges and drops stores, claims every block, serves none.\n";

static void die_usage(const char *why)
{
	fprintf(stderr, "cfs-hostile: %s\n%s", why, usage);
	exit(2);
}

static void log_counts(void)
{
	log_info("lies told: %lu find_next, %lu lookup_fwd, %lu stores dropped (%lu bytes), "
	         "%lu have keys and %lu refresh keys claimed, %lu fetches refused or answered with garbage, %lu sync requests",
	         (unsigned long)H.find_next, (unsigned long)H.fwd, (unsigned long)H.stores,
	         (unsigned long)H.store_bytes, (unsigned long)H.haves, (unsigned long)H.refreshes,
	         (unsigned long)H.fetches, (unsigned long)H.syncs);
}

/* ------------------------------------------------------------ lying in lookups */

/* Which of our virtual servers a request is addressed to (the first one
 * when it names none, as for a bootstrap query); -1 when none of ours. */
static int addressed_vnode(const struct cfs_msg *req)
{
	uint32_t n = chord_vnode_count(H.chord);

	if (!req->has_to)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		if (cfs_id_eq(&chord_vnode_self(H.chord, i)->id, &req->to_id))
			return (int)i;
	return -1;
}

/* A ring message from virtual server vi, as an honest member stamps it. */
static void ring_msg(enum cfs_msg_type type, uint32_t vi)
{
	const struct cfs_node *self = chord_vnode_self(H.chord, vi);

	cfs_msg_init(&H.msg, type);
	H.msg.has_from = true;
	H.msg.from_id = self->id;
	H.msg.from_vindex = self->vindex;
}

/* The lie's flags and nodes into H.msg: ourselves first (with our
 * coordinate, so the liar looks near), then for --lookup far our own
 * successors up to nsucc. */
static void lie_answer(uint32_t vi, uint32_t nsucc)
{
	struct cfs_node self = *chord_vnode_self(H.chord, vi);
	const struct cfs_node *succs[CHORD_SUCC_MAX];
	uint32_t ns = chord_vnode_succs(H.chord, vi, succs), n = 0;

	if (nsucc < 1)
		nsucc = 1;
	if (nsucc > CFS_MSG_MAX_NODES)
		nsucc = CFS_MSG_MAX_NODES;
	self.coord = *chord_coord(H.chord);
	H.msg.nodes[n++] = self;
	if (H.lookup == LIE_FAR) {
		H.msg.flags = CFS_LOOKUP_F_DONE;
		for (uint32_t i = 0; i < ns && n < nsucc; i++)
			if (!cfs_id_eq(&succs[i]->id, &self.id))
				H.msg.nodes[n++] = *succs[i];
	} else {
		H.msg.flags = CFS_LOOKUP_F_DONE | CFS_LOOKUP_F_HAS_BLOCK;
	}
	H.msg.n_nodes = n;
}

static void ignore_reply(void *arg, int status, const struct cfs_msg *reply,
                         const struct cfs_rpc_result *res)
{
}

static void lie_find_next(const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	int vi = addressed_vnode(req);

	if (vi < 0) {
		(void)cfs_transport_reply_error(H.tr, from, -ESRCH);
		return;
	}
	H.find_next++;
	uint32_t nsucc = req->nsucc;
	ring_msg(CFS_MSG_FIND_NEXT, (uint32_t)vi);
	lie_answer((uint32_t)vi, nsucc);
	(void)cfs_transport_reply(H.tr, from, &H.msg);
}

/* DHash++ Fig. 10, perverted: take the query, then tell the originator
 * straight away that the search ends here. */
static void lie_fwd(const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	int vi = addressed_vnode(req);

	if (vi < 0) {
		(void)cfs_transport_reply_error(H.tr, from, -ESRCH);
		return;
	}
	H.fwd++;
	struct cfs_node origin = req->node;
	struct cfs_id key = req->key;
	uint64_t lookup_id = req->lookup_id;
	uint32_t hops = req->hops, nsucc = req->nsucc;

	ring_msg(CFS_MSG_LOOKUP_FWD, (uint32_t)vi);
	(void)cfs_transport_reply(H.tr, from, &H.msg);
	ring_msg(CFS_MSG_LOOKUP_DONE, (uint32_t)vi);
	H.msg.has_to = true;
	H.msg.to_id = origin.id;
	H.msg.key = key;
	H.msg.lookup_id = lookup_id;
	H.msg.hops = hops;
	lie_answer((uint32_t)vi, nsucc);
	(void)chord_call(H.chord, &origin, &H.msg, 0, ignore_reply, NULL);
}

/* ------------------------------------------------------------ lying about blocks */

/* DHash replies carry no sender, as an honest server's do. */
static void block_reply(const struct cfs_reply_to *from)
{
	(void)cfs_transport_reply(H.tr, from, &H.msg);
}

static void lie_store(const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	H.stores++;
	H.store_bytes += req->data.len;
	cfs_msg_init(&H.msg, CFS_MSG_STORE);
	H.msg.lease_until = req->lease_until ? req->lease_until : (uint64_t)time(NULL) + 30 * 86400;
	block_reply(from);
}

/* HAVE and REFRESH: one bit per key (bit i of byte i/8), every bit set. */
static void lie_keys(const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	uint8_t bits[CFS_MSG_MAX_KEYS / 8];
	uint32_t n = req->n_keys;

	memset(bits, 0xff, sizeof(bits));
	if (n % 8)
		bits[n / 8] = (uint8_t)((1u << (n % 8)) - 1);
	if (req->type == CFS_MSG_REFRESH)
		H.refreshes += n;
	else
		H.haves += n;
	cfs_msg_init(&H.msg, (enum cfs_msg_type)req->type);
	H.msg.data = (struct cfs_bytes){ bits, (n + 7) / 8 };
	if (req->type == CFS_MSG_REFRESH)
		H.msg.lease_until = req->lease_until;
	block_reply(from);
}

static void lie_fetch(const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	static uint8_t junk[GARBAGE_BYTES];

	H.fetches++;
	if (H.fetch == FETCH_ENOENT) {
		(void)cfs_transport_reply_error(H.tr, from, -ENOENT);
		return;
	}
	for (size_t i = 0; i < sizeof(junk); i += 8) {
		uint64_t x = cfs_rng_next(&H.rng);
		memcpy(junk + i, &x, 8);
	}
	cfs_msg_init(&H.msg, CFS_MSG_FETCH);
	H.msg.kind = DHASH_KIND_CHASH;
	H.msg.lease_until = (uint64_t)time(NULL) + 86400;
	H.msg.data = (struct cfs_bytes){ junk, sizeof(junk) };
	block_reply(from);
}

/* Replica maintenance: "I hold nothing" (all-zero digests are an empty
 * range's, and an empty listing), so we are sent copies to drop. */
static void lie_sync(const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	static const struct cfs_id zero[CFS_MSG_MAX_NODES];

	H.syncs++;
	cfs_msg_init(&H.msg, (enum cfs_msg_type)req->type);
	if (req->type == CFS_MSG_SYNC_DIGEST) {
		if (req->nsucc > CFS_MSG_MAX_NODES) {
			(void)cfs_transport_reply_error(H.tr, from, -EINVAL);
			return;
		}
		H.msg.keys = zero;
		H.msg.n_keys = req->nsucc;
	}
	block_reply(from);
}

/* ------------------------------------------------------------ dispatch */

static void on_request(void *arg, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	switch (req->type) {
	case CFS_MSG_FIND_NEXT:
		if (H.lookup != LIE_NONE) {
			lie_find_next(req, from);
			return;
		}
		break;
	case CFS_MSG_LOOKUP_FWD:
		if (H.lookup != LIE_NONE) {
			lie_fwd(req, from);
			return;
		}
		break;
	case CFS_MSG_STORE:
		lie_store(req, from);
		return;
	case CFS_MSG_HAVE:
	case CFS_MSG_REFRESH:
		lie_keys(req, from);
		return;
	case CFS_MSG_FETCH:
		lie_fetch(req, from);
		return;
	case CFS_MSG_SYNC_DIGEST:
	case CFS_MSG_SYNC_KEYS:
		lie_sync(req, from);
		return;
	default:
		break;
	}
	/* Ring maintenance, AUTH, PING, LEAVE, ALERT: honest, so we stay in
	 * everyone's tables. */
	if (!chord_handle_request(H.chord, req, from))
		(void)cfs_transport_reply_error(H.tr, from, -EOPNOTSUPP);
}

static void on_signal(uv_signal_t *h, int sig)
{
	log_counts();
	if (sig == SIGUSR1)
		return;
	fflush(stdout);
	_exit(0);
}

/* ------------------------------------------------------------ main */

static void parse(int argc, char **argv, struct cfs_transport_config *tc, struct chord_config *cc,
                  struct cfs_addr *boot, size_t *nboot, uint64_t *seed)
{
	static const struct option opts[] = {
		{ "bind", required_argument, NULL, 'b' },
		{ "port", required_argument, NULL, 'p' },
		{ "bootstrap", required_argument, NULL, 'B' },
		{ "vnodes", required_argument, NULL, 'v' },
		{ "stabilize-ms", required_argument, NULL, 's' },
		{ "successors", required_argument, NULL, 'r' },
		{ "lookup", required_argument, NULL, 'l' },
		{ "fetch", required_argument, NULL, 'f' },
		{ "seed", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "b:p:B:v:s:r:l:f:S:h", opts, NULL)) != -1) {
		switch (c) {
		case 'b': tc->host = optarg; break;
		case 'p': tc->port = (uint16_t)atoi(optarg); break;
		case 'B':
			if (*nboot >= 8)
				die_usage("at most 8 --bootstrap servers");
			if (cfs_addr_parse(&boot[*nboot], optarg) < 0)
				die_usage("--bootstrap wants IP:PORT");
			(*nboot)++;
			break;
		case 'v': cc->vnodes = (uint32_t)atoi(optarg); break;
		case 's': cc->stabilize_ms = (uint32_t)atoi(optarg); break;
		case 'r': cc->nsucc = (uint32_t)atoi(optarg); break;
		case 'l':
			if (!strcmp(optarg, "self"))
				H.lookup = LIE_SELF;
			else if (!strcmp(optarg, "far"))
				H.lookup = LIE_FAR;
			else if (!strcmp(optarg, "none"))
				H.lookup = LIE_NONE;
			else
				die_usage("--lookup wants self, far or none");
			break;
		case 'f':
			if (!strcmp(optarg, "enoent"))
				H.fetch = FETCH_ENOENT;
			else if (!strcmp(optarg, "garbage"))
				H.fetch = FETCH_GARBAGE;
			else
				die_usage("--fetch wants enoent or garbage");
			break;
		case 'S': *seed = strtoull(optarg, NULL, 0); break;
		case 'h': fputs(usage, stdout); exit(0);
		default: die_usage("unknown option");
		}
	}
	if (optind < argc)
		die_usage("no arguments besides options");
	if (!tc->port)
		die_usage("--port is required");
}

int main(int argc, char **argv)
{
	struct cfs_transport_config tc;
	struct chord_config cc;
	struct cfs_addr boot[8], self;
	size_t nboot = 0;
	uint64_t seed = 0;
	char a[CFS_ADDR_STRLEN], hex[65];

	cfs_log_init("cfs-hostile", getenv("CFS_HOSTILE_DEBUG") ? CFS_LOG_DEBUG : CFS_LOG_INFO);
	cfs_transport_config_default(&tc);
	tc.host = "127.0.0.1";
	chord_config_default(&cc);
	parse(argc, argv, &tc, &cc, boot, &nboot, &seed);
	cfs_rng_seed(&H.rng, seed ? seed : cfs_now_us());
	cc.seed = seed;

	H.loop = uv_default_loop();
	if (cfs_transport_new(H.loop, &tc, on_request, NULL, &H.tr) < 0) {
		fprintf(stderr, "cfs-hostile: cannot bind %s:%u\n", tc.host, tc.port);
		return 1;
	}
	if (cfs_addr_from_ip(&self, tc.host, tc.port) < 0)
		return 1;
	if (chord_new(H.loop, H.tr, &self, &cc, &H.chord) < 0)
		return 1;
	for (uint32_t i = 0; i < chord_vnode_count(H.chord); i++) {
		const struct cfs_node *n = chord_vnode_self(H.chord, i);
		printf("id %s %s %u\n", cfs_id_hex(&n->id, hex), cfs_addr_str(&n->addr, a), n->vindex);
	}
	fflush(stdout);
	uv_signal_init(H.loop, &H.sigterm);
	uv_signal_init(H.loop, &H.sigint);
	uv_signal_init(H.loop, &H.sigusr1);
	uv_signal_start(&H.sigterm, on_signal, SIGTERM);
	uv_signal_start(&H.sigint, on_signal, SIGINT);
	uv_signal_start(&H.sigusr1, on_signal, SIGUSR1);
	chord_start(H.chord, boot, nboot);
	log_info("hostile member on %s with %u virtual server%s: lookups %s, fetches %s",
	         cfs_addr_str(&self, a), cc.vnodes, cc.vnodes == 1 ? "" : "s",
	         H.lookup == LIE_SELF ? "end here, \"I hold it\"" :
	         H.lookup == LIE_FAR ? "end here, with far-away successors" : "honest",
	         H.fetch == FETCH_ENOENT ? "refused" : "answered with garbage");
	cfs_loop_run(H.loop);
	return 0;
}
