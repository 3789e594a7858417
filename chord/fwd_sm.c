/*
 * A recursive lookup's forwarding hop as a state machine without I/O
 * (lookup_sm.h): DHash++ Figure 10 at a node a: answer the originator q
 * when our successor list covers the key (or we hold the block), else pass
 * the query on to our best next hop b. The hop we pass it to acknowledges;
 * if it does not, we drop it as a finger and try the next best, up to
 * CHORD__LK_FWD_TRIES; when none is left we send the originator what we
 * know of the key's successors (our partial answer), if anything, and the
 * originator's deadline covers the rest (DHash++ 4.2).
 *
 *   start ──covered / has the block──▶ ANSWER, END
 *     └──▶ FWD_NEXT ──ack──▶ END
 *            └──failed──▶ DROP, FWD_NEXT again … or the partial ANSWER, END
 */
#include <stdlib.h>
#include <string.h>

#include "chord/lookup_sm.h"

static struct chord__lk_act *fwd_emit(struct chord__fwdsm *f, enum chord__lk_act_type type)
{
	return chord__lk_emit(&f->q, type);
}

static void fwd_end(struct chord__fwdsm *f)
{
	if (f->ended)
		return;
	f->ended = true;
	fwd_emit(f, CHORD__LKA_END);
}

/* LOOKUP_DONE to the originator with hops as the query reached us. */
static void fwd_answer(struct chord__fwdsm *f, uint32_t flags, const struct cfs_node *nodes,
                       uint32_t n)
{
	struct chord__lk_act *a = fwd_emit(f, CHORD__LKA_ANSWER);

	f->nout = n < CFS_MSG_MAX_NODES ? n : CFS_MSG_MAX_NODES;
	memmove(f->out, nodes, f->nout * sizeof(nodes[0]));
	a->has_to = true;
	a->to = f->qry.origin;
	a->flags = flags;
	a->hops = f->qry.hops;
	a->nodes = f->out;
	a->n = f->nout;
}

/* Every candidate failed: give the originator what we know, if anything. */
static void fwd_give_up(struct chord__fwdsm *f)
{
	if (f->npart > 0)
		fwd_answer(f, CFS_LOOKUP_F_DONE, f->part, f->npart);
	fwd_end(f);
}

/* DHash++ Fig. 10: "return b.lookup(q, k, d)", b by the lookup's rule. */
static void fwd_send(struct chord__fwdsm *f)
{
	int i = chord__lk_select(&f->env, CFS_LOOKUP_F_SELECT(f->qry.flags), &f->self.id, &f->qry.key,
	                         f->cand, f->ncand, f->tried);
	if (i < 0) {
		fwd_give_up(f);
		return;
	}
	f->tried[i] = true;
	struct chord__lk_act *a = fwd_emit(f, CHORD__LKA_FWD_NEXT);
	a->ask = (uint32_t)i;
	a->has_to = true;
	a->to = f->cand[i];
	a->hops = f->qry.hops + 1;
	a->nsucc = f->qry.nsucc;
	a->flags = f->qry.flags;
}

bool chord__fwd_acceptable(const struct chord__lk_env *env, const struct chord__fwd_query *q)
{
	return q->hops <= CHORD__LK_MAX_FWD_HOPS && env->ops->node_id_ok(env->ctx, &q->origin);
}

void chord__fwdsm_start(struct chord__fwdsm *f, const struct chord__lk_env *env,
                        const struct cfs_node *self, const struct chord__fwd_query *q, bool done,
                        bool has, const struct cfs_node *out, uint32_t n, uint32_t ncand)
{
	memset(f, 0, sizeof(*f));
	f->env = *env;
	f->self = *self;
	f->qry = *q;
	/* DHash++ Fig. 10: "if |overlap| ≥ d then return overlap to q";
	 * CFS Fig. 5: a node holding the block answers with itself. */
	if (done || has) {
		uint32_t flags = (done ? CFS_LOOKUP_F_DONE : 0) | (has ? CFS_LOOKUP_F_HAS_BLOCK : 0);
		if (has)
			fwd_answer(f, flags, self, 1);
		else
			fwd_answer(f, flags, out, n);
		fwd_end(f);
		return;
	}
	f->ncand = ncand < CHORD__LK_NCAND ? ncand : CHORD__LK_NCAND;
	memcpy(f->cand, out, f->ncand * sizeof(out[0]));
	f->npart = n - ncand < CHORD__LK_NCAND ? n - ncand : CHORD__LK_NCAND;
	memcpy(f->part, out + ncand, f->npart * sizeof(out[0]));
	fwd_send(f);
}

void chord__fwdsm_ack(struct chord__fwdsm *f, uint32_t ask, int status)
{
	if (f->ended || ask >= f->ncand)
		return;
	if (status == 0 || status == -ECANCELED) {
		fwd_end(f);
		return;
	}
	/* The next hop is unreachable: so is every candidate at its address. */
	for (uint32_t i = 0; i < f->ncand; i++)
		if (f->tried[i] && cfs_addr_eq(&f->cand[i].addr, &f->cand[ask].addr))
			fwd_emit(f, CHORD__LKA_DROP)->id = f->cand[i].id;
	if (++f->tries < CHORD__LK_FWD_TRIES) {
		fwd_send(f);
		return;
	}
	fwd_give_up(f);
}

void chord__fwdsm_send_failed(struct chord__fwdsm *f, uint32_t ask, int r)
{
	fwd_end(f);
}

void chord__fwdsm_release(struct chord__fwdsm *f)
{
	cfs_actq_free(&f->q);
}
