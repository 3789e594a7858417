/*
 * cfs-testbed internals: many DHash nodes in one process (each its own UDP
 * socket, chord_t, LevelDB block store and client), a churn schedule that
 * starts and stops them, and workloads that record every operation.
 *
 * nodes.c     node lifetime, request dispatch, the ring's truth, convergence
 * workload.c  puts, gets at a rate, a hot block, a whole file, placement
 * cfs_testbed.c  options, the clock that replays the schedule, records, exit
 */
#ifndef CFS_TESTBED_H
#define CFS_TESTBED_H

#include <stdio.h>

#include "cfsd/frepair.h"
#include "dhash/dhash.h"
#include "tests/testbed/churn.h"

struct tb_node {
	uint32_t slot;
	bool alive;               /* started and not stopped */
	bool leaving;             /* a graceful leave in progress */
	uint16_t port;
	cfs_transport_t *tr;
	chord_t *chord;
	dhash_server_t *dh;
	dhash_client_t *cl;
	cfsd_frepair_t *fr;       /* its fragment repairer (--frag-repair-ms), or NULL */
	dhash_client_t *rcl;      /* the repairer's client, background class (as cfsd's) */
	struct cfs_wan_node wan;
	uint64_t joined_ms;       /* on the run's clock */
	char cache_dir[560];      /* its server's cache (the server keeps the pointer) */
};

struct tb {
	uv_loop_t *loop;
	/* configuration */
	const char *dir;          /* data directories, one per slot */
	uint16_t base_port;
	struct chord_config cc;
	struct dhash_config dc;
	uint32_t vnodes_list[16]; /* when set: slot i runs vnodes_list[i % n] */
	uint32_t nvnodes_list;
	uint32_t max_vnodes;      /* of all slots (sizes the ID array) */
	bool caching;             /* each node keeps a cache of others' blocks */
	bool frozen;              /* from time 0 no maintenance: every message is the workload's */
	bool has_wan;
	uint32_t code_m, code_n;  /* --code M/N: the workload's blocks coded (0: whole) */
	uint32_t frag_repair_ms;  /* each node's fragment repair round (cfsd's), 0: none */
	struct cfs_wan wan;
	struct cfs_wan wan_setup; /* the same without slow nodes, before time 0 */
	uint64_t seed;
	/* nodes, by slot */
	struct tb_node *n;
	uint32_t nslots;
	uint32_t nalive;
	uint64_t dgrams_gone;     /* sent by nodes since stopped (their transports are closed) */
	uint64_t bytes_gone;
	uint64_t learn_auths_gone; /* chord_learn_auths of nodes stopped */
	uint64_t learn_sweeps_gone; /* chord_learn_sweeps of nodes stopped */
	uint64_t repair_bytes_gone; /* tb_repair_bytes of nodes stopped */
	struct cfs_rng rng;
	/* the live virtual-server IDs, sorted (the truth lookups are checked against) */
	struct tb_vid { struct cfs_id id; uint32_t slot; } *ids;
	size_t nids;
	bool ids_stale;
	/* the clock */
	uint64_t t0_us;           /* time 0 of the schedule */
	bool interrupted;
	FILE *ops;                /* ops.csv */
	FILE *events;             /* events.csv */
};

extern struct tb TB;

/* ---- nodes.c */
/* A slot's own loopback IP (127.78.S/250.S%250+1; buf holds 32 bytes) and
 * its address (that IP, port base + slot). */
const char *tb_slot_ip(uint32_t slot, char buf[static 32]);
int tb_slot_addr(uint32_t slot, struct cfs_addr *ret);
int tb_node_start(uint32_t slot);
/* Graceful leave (chord_leave, then free) or crash (nothing told). A
 * crashed slot may start again on its data directory (a churn 'back'). */
void tb_node_stop(uint32_t slot, bool graceful);
/* Block bytes every node, live or stopped, moved to repair: replica
 * maintenance's pushes and fetches, and the fragment repairers' reads and
 * stores. */
uint64_t tb_repair_bytes(void);
void tb_nodes_stop_all(void);
/* A random live node, or NULL when none is. */
struct tb_node *tb_random_node(void);
/* The true successor of key among the live nodes (NULL: none live). */
const struct cfs_id *tb_true_succ(const struct cfs_id *key);
/* How many live virtual servers have a wrong successor or predecessor (or,
 * with settled, have not filled their fingers yet). */
uint32_t tb_ring_wrong(bool settled);
/* Run the loop for ms milliseconds (or until interrupted). */
void tb_run_ms(uint64_t ms);
/* Run until tb_ring_wrong(settled) is 0 (checked every 200 ms) or
 * timeout_s; true when it is. */
bool tb_wait_ring(bool settled, double timeout_s);
/* Milliseconds since time 0 of the schedule. */
uint64_t tb_now_ms(void);
/* The physical node (slot) owning a live virtual-server ID, or UINT32_MAX. */
uint32_t tb_owner(const struct cfs_id *id);
/* The oracle's get (OpenDHT Table 1): one round trip from `from` to the
 * nearest of the key's k replicas (its first k distinct live successors)
 * under the network model; 0 without one. */
uint64_t tb_oracle_us(const struct tb_node *from, const struct cfs_id *key, uint32_t k);
/* A coded get's (--code M/N): the RTT to the m-th nearest of its n holders. */
uint64_t tb_oracle_coded_us(const struct tb_node *from, const struct cfs_id *key, uint32_t m, uint32_t n);

/* ---- workload.c */
struct tb_workload {
	const char *kind;         /* gets | hot | file | placement | none */
	uint32_t blocks;          /* blocks put before the clock starts */
	uint32_t block_size;
	double rate;              /* gets per second while the schedule runs */
	uint32_t fetches;         /* hot: successive fetches */
	uint32_t windows[16];     /* file: prefetch windows to try */
	uint32_t nwindows;
	uint32_t repeat;          /* file: downloads per window */
	uint32_t gateways;        /* gets: nodes each get is issued from at once */
	uint32_t readers;         /* gets: issued only from this many nodes, chosen at the start (0: any) */
};
#define TB_READERS_MAX 64
#define TB_GATEWAYS_MAX 8
/* Put the workload's blocks (before time 0); -errno when too many fail. */
int tb_workload_prepare(const struct tb_workload *w);
/* Start what runs on the clock (gets at a rate). */
void tb_workload_start(const struct tb_workload *w);
void tb_workload_stop(void);
/* Run the workloads that are experiments of their own (hot, file,
 * placement) after time 0; prints their summaries. */
int tb_workload_run(const struct tb_workload *w);
/* Print the per-run summary of the gets as one JSON object. */
void tb_workload_summary(FILE *f);

#endif
