/*
 * The backend with no daemon: a plain client of the ring (not a member)
 * with its own UDP transport, a chord client (chord_client_new) that
 * reaches the ring through bootstrap addresses, and a DHash client over
 * it. Each request is one DHash operation, the same one the daemon runs
 * for the matching control request (cfsd/serve.c): dhash_get (or
 * dhash_get_root), dhash_put, dhash_locate, dhash_have_many,
 * dhash_refresh_many. So a program sees the same answers, and the same
 * errors, whichever backend it has.
 *
 * An operation can outlive its request (the request timed out in the
 * table, or the handle is being freed): its callback then finds no
 * request under its ID and is dropped, and the handle's memory stays
 * until the last one is back (client__hold).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"

/* The longest the first requests wait for a kept contact to answer. */
#define CONTACT_WAIT_MS 150

struct client__plain {
	cfs_transport_t *tr;
	chord_t *chord;
	dhash_client_t *dc;
	char *contacts_path;      /* the saved contacts (NULL: none) */
	/* requests held until a kept contact answered (contact_wait) */
	uv_timer_t wait;
	bool waiting, wait_live;
	uint64_t wait_until_us;
	uint64_t *held;           /* their request IDs */
	uint32_t nheld, held_cap;
};

/* A DHash operation started for request id. */
struct pcall {
	client_t *c;
	uint64_t id;
};

/* The request an operation's answer belongs to, or NULL (timed out,
 * cancelled: then the handle may be gone on return). */
static struct client__req *pcall_end(struct pcall *k)
{
	client_t *c = k->c;
	struct client__req *q = c->closing ? NULL : client__req_find(c, k->id);

	free(k);
	client__release(c);
	return q;
}

static void on_got(void *arg, const struct dhash_get_result *r)
{
	client_t *c = ((struct pcall *)arg)->c;
	struct client__req *q = pcall_end(arg);

	if (q)
		client__answer_get(c, q, r);
}

/* dhash_get_root_early's first verified root: passed on while the get's
 * request is still waiting (it ends with on_got). */
static void on_early(void *arg, const struct dhash_get_result *r)
{
	struct pcall *k = arg;
	client_t *c = k->c;
	struct client__req *q = c->closing ? NULL : client__req_find(c, k->id);

	if (q && q->early_cb) {
		dhash_get_cb early = q->early_cb;
		q->early_cb = NULL;
		early(q->arg, r);
	}
}

static void on_put(void *arg, int status, const struct cfs_id *key, uint64_t lease)
{
	client_t *c = ((struct pcall *)arg)->c;
	struct client__req *q = pcall_end(arg);

	if (q)
		client__answer_put(c, q, status, lease);
}

static void on_located(void *arg, const struct dhash_locate_result *r)
{
	client_t *c = ((struct pcall *)arg)->c;
	struct client__req *q = pcall_end(arg);

	if (q)
		client__answer_locate(c, q, r);
}

static void on_bits(void *arg, int status, const uint8_t *bits, uint32_t n, uint64_t lease)
{
	client_t *c = ((struct pcall *)arg)->c;
	struct client__req *q = pcall_end(arg);

	if (q)
		client__answer_bits(c, q, status, bits, lease);
}

static void plain_start(client_t *c, struct client__req *q);

/*
 * A lookup started before any contact of this run has answered starts at
 * a bootstrap address (chord/client.c), which may be an ocean away, and
 * walks the ring from there; the contacts kept by the last run are being
 * pinged meanwhile, and the nearest answers within its round trip. So
 * while they are pinged the first requests wait, until one of them has
 * answered or CONTACT_WAIT_MS have passed: a cold root lookup from eu
 * through a us-east bootstrap took 12 RPCs and 320 ms on the wide-area
 * bed, while the nearest kept contact answers in 10.
 */
static void contact_wait_end(client_t *c)
{
	struct client__plain *p = c->plain;
	uint64_t *held = p->held;
	uint32_t n = p->nheld;

	p->waiting = false;
	uv_timer_stop(&p->wait);
	p->held = NULL;
	p->nheld = p->held_cap = 0;
	for (uint32_t i = 0; i < n && !c->closing; i++) {
		struct client__req *q = client__req_find(c, held[i]);
		if (q)
			plain_start(c, q);
	}
	free(held);
}

static void on_contact_wait(uv_timer_t *t)
{
	client_t *c = t->data;
	struct client__plain *p = c->plain;

	if (chord_client_addresses(p->chord) > 0 || cfs_now_us() >= p->wait_until_us)
		contact_wait_end(c);
}

static void contact_wait_start(client_t *c)
{
	struct client__plain *p = c->plain;

	if (uv_timer_init(c->loop, &p->wait) < 0)
		return;
	p->wait.data = c;
	p->wait_live = true;
	p->waiting = true;
	p->wait_until_us = cfs_now_us() + CONTACT_WAIT_MS * 1000ull;
	uv_timer_start(&p->wait, on_contact_wait, 2, 2);
}

static void on_wait_closed(uv_handle_t *h)
{
	client__release(h->data);
}

/* Start q's DHash operation; one that cannot start fails q from the sweep.
 * One case per request type the client module sends: a switch, long
 * because the types are many, each case one call into dhash. */
static void plain_start(client_t *c, struct client__req *q)
{
	struct client__plain *p = c->plain;

	if (p->waiting) {
		if (p->nheld == p->held_cap) {
			p->held_cap = p->held_cap ? 2 * p->held_cap : 16;
			p->held = xrealloc(p->held, p->held_cap * sizeof(*p->held));
		}
		p->held[p->nheld++] = q->id;
		return;
	}
	dhash_client_t *dc = p->dc;
	const struct cfs_id *keys = (const struct cfs_id *)q->data;
	struct pcall *k = xmalloc(sizeof(*k));
	int r;

	*k = (struct pcall){ c, q->id };
	client__hold(c);
	switch (q->type) {
	case CFS_MSG_CTL_GET:
		if (q->root && q->early_cb)
			r = dhash_get_root_early(dc, &q->key, on_early, on_got, k);
		else
			r = (q->root ? dhash_get_root : dhash_get)(dc, &q->key, on_got, k);
		break;
	case CFS_MSG_CTL_LOCATE:
		r = dhash_locate(dc, &q->key, on_located, k);
		break;
	case CFS_MSG_CTL_REPAIR_CODED:
		r = dhash_repair_coded(dc, &q->key, q->code_m, q->code_n, q->data, q->len, q->nodes,
		                       q->n_nodes, q->mask, q->lease_until, on_put, k);
		break;
	case CFS_MSG_CTL_LOCATE_CODED:
		r = dhash_locate_coded(dc, &q->key, q->code_m, q->code_n, on_located, k);
		break;
	case CFS_MSG_CTL_GET_CODED:
		r = dhash_get_coded(dc, &q->key, q->code_m, q->code_n, on_got, k);
		break;
	case CFS_MSG_CTL_PUT_CODED:
		r = dhash_put_coded(dc, q->code_m, q->code_n, q->data, q->len, q->lease_until, on_put, k);
		break;
	case CFS_MSG_CTL_PUT:
		r = dhash_put(dc, q->kind, q->data, q->len, q->lease_until, on_put, k);
		break;
	case CFS_MSG_CTL_REFRESH:
		r = dhash_refresh_many(dc, keys, q->n_keys, q->lease_until, on_bits, k);
		break;
	case CFS_MSG_CTL_REFRESH_CODED:
		r = dhash_refresh_coded_many(dc, keys, q->n_keys, q->code_m, q->code_n, q->lease_until,
		                             on_bits, k);
		break;
	case CFS_MSG_CTL_HAVE:
		r = dhash_have_many(dc, keys, q->n_keys, on_bits, k);
		break;
	default:
		r = -EOPNOTSUPP;
		break;
	}
	q->sent = true;
	if (r < 0) {
		free(k);
		client__release(c); /* not closing: c stays */
		client__fail_soon(c, q, r);
	}
}

static void plain_request(void *arg, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	client_t *c = arg;

	if (!chord_handle_request(c->plain->chord, req, from))
		(void)cfs_transport_reply_error(c->plain->tr, from, -EOPNOTSUPP);
}

/*
 * A plain client keeps the ring members it met for its next run, so that
 * its first lookups start near their keys instead of at a bootstrap
 * server: $XDG_CACHE_HOME/cfs/contacts-H (as root without that variable,
 * /var/cache/cfs), H a hash of the bootstrap addresses, so that two rings
 * never share a file. CFS_CONTACTS=off keeps nothing.
 */
static void load_contacts(client_t *c, const struct cfs_addr *boot, size_t n)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *env = getenv("CFS_CONTACTS");
	char dir[PATH_MAX - 32], a[CFS_ADDR_STRLEN];
	struct cfs_hasher h;
	struct cfs_id id;
	struct client__plain *p = c->plain;
	int r;

	if (env && !strcmp(env, "off"))
		return;
	if (cfs_user_dir(dir, sizeof(dir), xdg && *xdg ? NULL : "/var/cache/cfs", "XDG_CACHE_HOME",
	                 ".cache") < 0)
		return;
	cfs_hasher_init(&h);
	for (size_t i = 0; i < n; i++) {
		cfs_addr_str(&boot[i], a);
		cfs_hasher_update(&h, a, strlen(a) + 1);
	}
	cfs_hasher_final(&h, &id);
	struct cfs_sbuf s = { 0 };
	cfs_sb_printf(&s, "%s/contacts-%02x%02x%02x%02x", dir, id.b[0], id.b[1], id.b[2], id.b[3]);
	p->contacts_path = s.p;
	if ((r = chord_client_load(p->chord, p->contacts_path)) >= 0)
		log_debug("client: %d ring contacts from %s", r, p->contacts_path);
	if (r > 0)
		contact_wait_start(c);
	else if (r != -ENOENT)
		log_debug("client: cannot read %s: %s", p->contacts_path, strerror(-r));
}

void client_keep_contacts(client_t *c)
{
	struct client__plain *p = c->plain;
	char dir[PATH_MAX];
	int r;

	if (!p || !p->contacts_path || !p->chord || !chord_is_client(p->chord))
		return;
	snprintf(dir, sizeof(dir), "%s", p->contacts_path);
	*strrchr(dir, '/') = 0;
	if ((r = cfs_mkdir_p(dir, 0755)) < 0 || (r = chord_client_save(p->chord, p->contacts_path)) < 0)
		log_debug("client: cannot keep the ring contacts in %s: %s", p->contacts_path,
		          strerror(-r));
}

/* The DHash operations end with -ECANCELED as the transport closes; the
 * handle stays until the last of them is back. */
static void plain_close(client_t *c)
{
	struct client__plain *p = c->plain;

	if (!p)
		return;
	client_keep_contacts(c);
	if (p->wait_live) {
		p->waiting = p->wait_live = false;
		free(p->held);
		p->held = NULL;
		p->nheld = 0;
		client__hold(c);
		uv_close((uv_handle_t *)&p->wait, on_wait_closed);
	}
	free(p->contacts_path);
	p->contacts_path = NULL;
	dhash_client_free(p->dc);
	p->dc = NULL;
	chord_free(p->chord);
	p->chord = NULL;
	if (p->tr)
		cfs_transport_close(p->tr);
	p->tr = NULL;
}

static void plain_release(client_t *c)
{
	free(c->plain);
}

const struct client__backend client__plain_backend = {
	.start = plain_start,
	.close = plain_close,
	.release = plain_release,
	.raw_calls = false,
};

int client__plain_open(client_t *c, const struct cfs_addr *boot, size_t n,
                       uint64_t cache_push_bytes_per_s)
{
	struct client__plain *p = c->plain = xcalloc(1, sizeof(*c->plain));
	struct cfs_transport_config tc;
	struct dhash_config dc;
	int r;

	cfs_transport_config_default(&tc);
	dhash_config_default(&dc);
	dc.cache_push_bytes_per_s = cache_push_bytes_per_s;
	/* The daemons' default lookup mode; a plain client's lookups take its
	 * next-hop rule and ask three servers at once while it knows the round
	 * trips of at most half its contacts, one at a time after that
	 * (chord/client.c). Its
	 * first hop is one of its contacts, anywhere on the globe, and
	 * OpenDHT's delay-aware rule (progress over a latency penalty) asks a
	 * near one that covers the key rather than the far one that precedes
	 * it most closely. A plain client in eu read a file spread over four
	 * continents at 6.1 MB/s with it, 1.9 with greedy hops. */
	if ((r = cfs_transport_new(c->loop, &tc, plain_request, c, &p->tr)) < 0)
		return log_error_errno(r, "client: cannot open a UDP socket");
	if ((r = chord_client_new(c->loop, p->tr, boot, n, &p->chord)) < 0 ||
	    (r = dhash_client_new(p->chord, &dc, &p->dc)) < 0)
		return r;
	load_contacts(c, boot, n);
	return 0;
}

const struct dhash_client_stats *client_dhash_stats(const client_t *c)
{
	return c->plain && c->plain->dc ? dhash_client_stats(c->plain->dc) : NULL;
}

uint64_t client_lookups_remembered(const client_t *c)
{
	return c->plain && c->plain->chord ? chord_lookups_remembered(c->plain->chord) : 0;
}

int client_clock_skew(client_t *c, int64_t *ret_skew_ms, uint32_t *ret_servers)
{
	*ret_skew_ms = 0;
	*ret_servers = 0;
	if (!c->plain || !c->plain->tr)
		return -ENODATA;
	return cfs_transport_clock_skew(c->plain->tr, ret_skew_ms, ret_servers);
}
