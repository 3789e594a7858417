/*
 * common/netmodel.h — the evaluation-only network models: the hook on the
 * transport's send path (cfs_netmodel), a simple loss-and-delay model and
 * the wide-area model (common/netmodel.c). Part of common's public
 * interface: included by common/cfs.h, which other modules include instead.
 */
#ifndef CFS_COMMON_NETMODEL_H
#define CFS_COMMON_NETMODEL_H

#include "common/cfs.h" /* addresses, the RNG */

/*
 * Evaluation-only network model: the one place on the send path where a
 * wide-area latency/loss/slow-node model hooks in. on_send decides each
 * outgoing datagram's fate: return true to drop it, or set *ret_delay_us.
 */
struct cfs_netmodel {
	bool (*on_send)(void *ctx, const struct cfs_addr *to, size_t len, uint64_t *ret_delay_us);
	void *ctx;
};
/* A simple model: drop with probability loss, delay every datagram. */
struct cfs_netmodel_simple {
	double loss;
	uint64_t delay_us;
	struct cfs_rng rng;
};
void cfs_netmodel_simple_init(struct cfs_netmodel_simple *s, double loss,
                              uint64_t delay_us, uint64_t seed);
struct cfs_netmodel cfs_netmodel_simple_ops(struct cfs_netmodel_simple *s);

/*
 * The wide-area model (common/netmodel.c; evaluation only, DESIGN §7), so
 * that the DHash++ and OpenDHT experiments can be re-run on one machine.
 * Every address (IP and port) gets a place from hash(seed, address) alone,
 * so separate processes agree on every RTT without sharing anything:
 * either a point in a synthetic plane of continents plus an access-link
 * height (Vivaldi's height model), RTT = |xa - xb| + ha + hb, scaled so the
 * median over random pairs is median_rtt_ms with a King-like long tail; or
 * a row of a measured latency matrix. A fraction of the addresses are slow
 * (OpenDHT's slow PlanetLab nodes): every datagram they send waits a
 * long-tailed extra delay.
 */
#define CFS_WAN_MEDIAN_MS_DEFAULT 130.0 /* DHash++ Fig. 3: King median 134 ms */
#define CFS_WAN_SLOW_MS_DEFAULT 500.0
#define CFS_WAN_MATRIX_MAX 4096         /* rows of a latency matrix */
#define CFS_WAN_LAN_RTT_US 1000u        /* two addresses on one matrix row */
#define CFS_WAN_PATH_MAX 256

/* A square latency matrix, symmetrised: rtt_us[i * n + j] == rtt_us[j * n + i]. */
struct cfs_wan_matrix {
	uint32_t n;
	uint32_t median_us; /* median over the pairs i < j, for the logs */
	uint32_t *rtt_us;
};

struct cfs_wan {
	uint64_t seed;        /* seed=N (default 1) */
	double median_rtt_ms; /* median-rtt=MS: synthetic model only */
	double loss;          /* loss=FRAC: each datagram is dropped with it */
	double slow;          /* slow=FRAC: the fraction of slow addresses */
	double slow_ms;       /* slow-ms=MS: mean extra delay per slow datagram */
	struct cfs_wan_matrix *matrix; /* matrix=PATH; NULL: synthetic. Owned. */
	char matrix_path[CFS_WAN_PATH_MAX];
};

/* Parse "key=value,..." (keys above; "" gives every default) into *ret,
 * loading the matrix file if one is named. 0, or -EINVAL with the reason
 * in err (and *ret untouched). Release with cfs_wan_free. */
int cfs_wan_parse(const char *spec, struct cfs_wan *ret, char *err, size_t errlen) CFS_WUR;
/* Free what *w owns (its matrix); w itself is the caller's. */
void cfs_wan_free(struct cfs_wan *w);
/* Parse matrix text: one row per line, RTTs in ms separated by blanks, '#'
 * to the end of a line is a comment; as many rows as columns. 0, or
 * -EINVAL with "line N: why" in err. Free *ret with cfs_wan_matrix_free. */
int cfs_wan_matrix_parse(const char *text, size_t len, struct cfs_wan_matrix **ret,
                         char *err, size_t errlen) CFS_WUR;
/* The same from a file; err names the file. */
int cfs_wan_matrix_load(const char *path, struct cfs_wan_matrix **ret, char *err,
                        size_t errlen) CFS_WUR;
void cfs_wan_matrix_free(struct cfs_wan_matrix *m);
/* The modelled RTT between a and b: symmetric, 0 from an address to itself. */
uint64_t cfs_wan_rtt_us(const struct cfs_wan *w, const struct cfs_addr *a,
                        const struct cfs_addr *b);
/* Whether a is one of the slow addresses. */
bool cfs_wan_is_slow(const struct cfs_wan *w, const struct cfs_addr *a);
/* The matrix row of a (0 without a matrix). */
uint32_t cfs_wan_row(const struct cfs_wan *w, const struct cfs_addr *a);
/* One line describing the model, for logs and the evaluation notes. */
void cfs_wan_describe(const struct cfs_wan *w, char *buf, size_t n);

/* One sender's model: its address and the random stream for its losses and
 * slow delays. wan is borrowed and must outlive the node. */
struct cfs_wan_node {
	const struct cfs_wan *wan;
	struct cfs_addr self;
	struct cfs_rng rng;
};
/* The stream is seeded from seed and self, so nodes given one seed differ. */
void cfs_wan_node_init(struct cfs_wan_node *n, const struct cfs_wan *w,
                       const struct cfs_addr *self, uint64_t seed);
/* The hook for cfs_transport_set_model: drop with probability loss, else
 * delay by half the RTT to the destination, plus a slow sender's extra. */
struct cfs_netmodel cfs_wan_ops(struct cfs_wan_node *n);

#endif
