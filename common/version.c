/*
 * Protocol versions and clocks per peer.
 *
 * A process speaks CFS_PROTO_VERSION and the version before it. It sends
 * a peer the newest version the peer is known to speak, the older one
 * until then: so a ring runs two adjacent versions at once and upgrades
 * one daemon at a time (Cassandra's and Consul's rule). A peer is known to
 * speak the newer version once a message at that version came from its
 * address; to learn it, the first message to an address not known to
 * speak it is accompanied by a one-datagram hello at the newer version
 * (again at most every PROBE_EVERY_US), which a peer of the older version
 * drops as malformed and the transport of a newer one answers at the
 * newer version. Only proven news counts: the answer to our hello or to
 * one of our calls (it echoes a random 64-bit request ID), never a
 * request, whose source address anyone can forge. The knowledge lapses
 * KNOWN_US after the last such answer (a daemon replaced by an older one
 * is spoken to in the older version again).
 *
 * Version 5 messages carry the sender's wall clock: each proven one gives
 * the offset of the sender's clock from ours (its one-way delay is noise of
 * a round trip, nothing next to what a wrong clock does). Leases a peer
 * names are read on its clock (cfs_transport_peer_clock_offset_s), and
 * the median offset of the peers heard lately says whether our own clock
 * disagrees with the ring's (cfs_transport_clock_skew).
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "common/transport_int.h"

#define KNOWN_US (120ull * 1000000)      /* a newer peer is known this long after its last message */
#define PROBE_EVERY_US (30ull * 1000000) /* a peer not known newer is probed this often at most */
#define CLOCK_FRESH_US (600ull * 1000000)/* offsets heard within this count for the skew */
#define VERS_MAX 4096                    /* addresses remembered; when full, learnt again */
#define OFFSET_MAX_MS (10ll * 366 * 86400 * 1000) /* a clock ten years off is off enough */

struct peer_ver {
	uint64_t newer_until_us;  /* speaks CFS_PROTO_VERSION until then */
	uint64_t probed_us;       /* last probe sent, 0 never */
	uint64_t probe_reqid;     /* its request ID: the answer is no stray reply */
	int64_t offset_ms;        /* its clock minus ours */
	uint64_t offset_at_us;    /* when last measured, 0 never */
};

void cfs__ver_init(cfs_transport_t *t)
{
	cfs_htab_init(&t->vers, sizeof(struct peer_key), sizeof(struct peer_ver));
}

void cfs__ver_free(cfs_transport_t *t)
{
	cfs_htab_free(&t->vers);
}

static struct peer_ver *ver_get(cfs_transport_t *t, const struct cfs_addr *a, bool create)
{
	struct peer_key k;
	bool added;

	cfs__peer_key(&k, a);
	struct peer_ver *pv = cfs_htab_get(&t->vers, &k);
	if (pv || !create)
		return pv;
	if (cfs_htab_count(&t->vers) >= VERS_MAX)
		cfs_htab_clear(&t->vers);
	pv = cfs_htab_put(&t->vers, &k, &added);
	memset(pv, 0, sizeof(*pv));
	return pv;
}

void cfs__ver_heard(cfs_transport_t *t, const struct cfs_addr *from, const struct cfs_msg *m,
                    uint64_t now_us, uint64_t wall_ms)
{
	if (m->version < CFS_PROTO_VERSION)
		return;
	struct peer_ver *pv = ver_get(t, from, true);
	if (!pv->newer_until_us)
		t->st.peers_newer++;
	pv->newer_until_us = now_us + KNOWN_US;
	if (m->clock_ms) {
		/* a clock more than OFFSET_MAX_MS off is taken as that far off */
		uint64_t d = m->clock_ms > wall_ms ? m->clock_ms - wall_ms : wall_ms - m->clock_ms;
		int64_t off = d > OFFSET_MAX_MS ? OFFSET_MAX_MS : (int64_t)d;
		pv->offset_ms = m->clock_ms > wall_ms ? off : -off;
		pv->offset_at_us = now_us;
	}
}

uint8_t cfs__ver_for(cfs_transport_t *t, const struct cfs_addr *dst, uint64_t now_us, bool *ret_probe)
{
	struct peer_ver *pv = ver_get(t, dst, true);

	*ret_probe = false;
	if (pv->newer_until_us > now_us)
		return CFS_PROTO_VERSION;
	if (!pv->probed_us || now_us - pv->probed_us >= PROBE_EVERY_US) {
		pv->probed_us = now_us;
		*ret_probe = true;
	}
	return CFS_PROTO_VERSION_MIN;
}

/* Send dst a hello at the newer version (one datagram, not a call). */
void cfs__ver_probe(cfs_transport_t *t, const struct cfs_addr *dst, uint64_t now_us)
{
	struct cfs_msg m;
	uint8_t buf[256];
	size_t len;

	cfs_msg_init(&m, CFS_MSG_HELLO);
	m.version = CFS_PROTO_VERSION;
	m.clock_ms = cfs_wall_ms();
	randombytes_buf(&m.reqid, sizeof(m.reqid));
	if (t->coord)
		m.coord = *t->coord;
	if (cfs_msg_encode(&m, buf, sizeof(buf), &len) < 0)
		return;
	struct peer_ver *pv = ver_get(t, dst, true);
	pv->probe_reqid = m.reqid;
	t->st.version_probes++;
	cfs__links_send_raw(&t->links, dst, buf, len, now_us);
}

bool cfs__ver_probe_answer(cfs_transport_t *t, const struct cfs_addr *from, uint64_t reqid)
{
	struct peer_ver *pv = ver_get(t, from, false);

	return pv && pv->probe_reqid && pv->probe_reqid == reqid;
}

int cfs_transport_peer_version(cfs_transport_t *t, const struct cfs_addr *a)
{
	struct peer_ver *pv = ver_get(t, a, false);

	return pv && pv->newer_until_us > cfs_now_us() ? CFS_PROTO_VERSION : CFS_PROTO_VERSION_MIN;
}

int64_t cfs_transport_peer_clock_offset_s(cfs_transport_t *t, const struct cfs_addr *a)
{
	struct peer_ver *pv = ver_get(t, a, false);

	if (!pv || !pv->offset_at_us || cfs_now_us() - pv->offset_at_us >= CLOCK_FRESH_US)
		return 0; /* not heard lately: its clock may have been set right since */
	return pv->offset_ms >= 0 ? (pv->offset_ms + 500) / 1000 : -((-pv->offset_ms + 500) / 1000);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

int cfs_transport_clock_skew(cfs_transport_t *t, int64_t *ret_skew_ms, uint32_t *ret_peers)
{
	int64_t *off = xmalloc((cfs_htab_count(&t->vers) + 1) * sizeof(*off));
	uint64_t now = cfs_now_us();
	uint32_t n = 0;
	size_t pos = 0;
	const void *k;
	void *v;

	/* one sample per IP address: one machine may answer from many ports */
	struct peer_key *ips = xmalloc((cfs_htab_count(&t->vers) + 1) * sizeof(*ips));
	while (cfs_htab_next(&t->vers, &pos, &k, &v)) {
		const struct peer_ver *pv = v;
		const struct peer_key *pk = k;
		bool dup = false;
		if (!pv->offset_at_us || now - pv->offset_at_us >= CLOCK_FRESH_US)
			continue;
		for (uint32_t i = 0; i < n && !dup; i++)
			dup = ips[i].family == pk->family && !memcmp(ips[i].ip, pk->ip, sizeof(pk->ip));
		if (dup)
			continue;
		ips[n] = *pk;
		off[n++] = pv->offset_ms;
	}
	free(ips);
	*ret_peers = n;
	if (n == 0) {
		free(off);
		*ret_skew_ms = 0;
		return -ENODATA;
	}
	qsort(off, n, sizeof(*off), cmp_i64);
	/* Our clock minus the ring's: the opposite of the peers' median offset. */
	*ret_skew_ms = -(n % 2 ? off[n / 2] : (off[n / 2 - 1] + off[n / 2]) / 2);
	free(off);
	return 0;
}
