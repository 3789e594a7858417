/*
 * A root get with an interim answer through cfsd: the machine of
 * client/internal.h ("A root get with an interim answer"), driven by
 * daemon.c. The daemon runs dhash_get_root_early for it: its interim reply
 * is the first root that verifies under the key (one server's word, which
 * the mount accepts by its own rules: docs/MOUNTING.md, "The first root,
 * in two steps"), its final reply the read quorum's. An older daemon is
 * asked the plain ctl_get and answers once, as before.
 */
#include "client/internal.h"

enum client__speaks client__speaks_of(int ping_status)
{
	/* Only "I speak it" (0) counts: any error means an older daemon,
	 * which gets what it always understood. */
	return ping_status == 0 ? CLIENT_SPEAKS_YES : CLIENT_SPEAKS_NO;
}

enum client__rg_act client__rg_start(struct client__rg *g, enum client__speaks speaks)
{
	switch (speaks) {
	case CLIENT_SPEAKS_YES:
		g->state = CLIENT_RG_SENT_ROOT;
		return CLIENT_RG_SEND_ROOT;
	case CLIENT_SPEAKS_NO:
		g->state = CLIENT_RG_SENT_GET;
		return CLIENT_RG_SEND_GET;
	case CLIENT_SPEAKS_UNKNOWN:
		g->state = CLIENT_RG_WAIT;
		return CLIENT_RG_ASK;
	case CLIENT_SPEAKS_ASKING:
	default:
		g->state = CLIENT_RG_WAIT;
		return CLIENT_RG_NONE;
	}
}

uint8_t client__rg_wire(const struct client__rg *g)
{
	return g->state == CLIENT_RG_SENT_ROOT ? CFS_MSG_CTL_GET_ROOT : CFS_MSG_CTL_GET;
}

static enum client__rg_act fail(struct client__rg *g, int status)
{
	g->state = CLIENT_RG_DONE;
	g->status = status;
	return CLIENT_RG_FAIL;
}

enum client__rg_act client__rg_reply(struct client__rg *g, uint8_t type, int status,
                                     uint32_t flags, bool ok)
{
	if (g->state != CLIENT_RG_SENT_ROOT && g->state != CLIENT_RG_SENT_GET)
		return CLIENT_RG_NONE; /* nothing out: not ours */
	if (type != client__rg_wire(g))
		return fail(g, -EPROTO);
	/* An error reply has no body and so no flags: it is the final one,
	 * after an interim root or not. */
	if (status < 0)
		return fail(g, status);
	if (!ok)
		return fail(g, -EBADMSG);
	if (g->state == CLIENT_RG_SENT_ROOT && (flags & CFS_GET_ROOT_R_INTERIM)) {
		if (g->early_given) /* one interim reply per request */
			return fail(g, -EPROTO);
		g->early_given = true;
		return CLIENT_RG_EARLY;
	}
	g->state = CLIENT_RG_DONE;
	return CLIENT_RG_ANSWER;
}
