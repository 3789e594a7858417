/*
 * Vivaldi network coordinates (Dabek et al., used by DHash++ 2.3): three
 * Euclidean dimensions plus a height, in milliseconds. Every reply carries
 * the sender's coordinate; each RTT sample moves ours a step along the
 * spring between the two, weighted by how sure we are of our own position.
 */
#include <math.h>

#include "chord/internal.h"

#define CC 0.25         /* step size */
#define CE 0.25         /* error smoothing */
#define REMOTE_ERR 0.5  /* the wire carries no error estimate: assume a middling one */
#define HEIGHT_MIN 0.01

double chord__vivaldi_predict_ms(const struct cfs_coord *a, const struct cfs_coord *b)
{
	double d = 0;

	for (int i = 0; i < 3; i++) {
		double x = (double)a->v[i] - (double)b->v[i];
		d += x * x;
	}
	return sqrt(d) + (double)a->h + (double)b->h;
}

void chord__vivaldi_update(chord_t *c, const struct cfs_coord *remote, uint64_t rtt_us)
{
	struct cfs_coord *me = &c->coord;
	double rtt = (double)rtt_us / 1000.0, diff[3], norm = 0, dist, w, es, force;

	if (rtt < 0.01)
		rtt = 0.01;
	if (!isfinite(remote->v[0]) || !isfinite(remote->v[1]) || !isfinite(remote->v[2]) ||
	    !isfinite(remote->h) || remote->h < 0 || fabs(remote->v[0]) > 1e6 ||
	    fabs(remote->v[1]) > 1e6 || fabs(remote->v[2]) > 1e6 || remote->h > 1e6)
		return; /* a hostile or broken coordinate moves nothing */
	for (int i = 0; i < 3; i++) {
		diff[i] = (double)me->v[i] - (double)remote->v[i];
		norm += diff[i] * diff[i];
	}
	norm = sqrt(norm);
	dist = norm + (double)me->h + (double)remote->h;
	w = c->coord_err / (c->coord_err + REMOTE_ERR);
	es = fabs(dist - rtt) / rtt;
	c->coord_err = es * CE * w + c->coord_err * (1 - CE * w);
	if (c->coord_err > 1.5)
		c->coord_err = 1.5;
	force = CC * w * (rtt - dist);
	if (norm < 1e-9) {
		/* Same position: push apart in a random direction. */
		for (int i = 0; i < 3; i++)
			diff[i] = cfs_rng_double(&c->rng) - 0.5;
		norm = sqrt(diff[0] * diff[0] + diff[1] * diff[1] + diff[2] * diff[2]);
	}
	double total = norm + (double)me->h + (double)remote->h;
	for (int i = 0; i < 3; i++)
		me->v[i] = (float)((double)me->v[i] + force * diff[i] / total);
	double h = (double)me->h + force * ((double)me->h + (double)remote->h) / total;
	me->h = (float)(h < HEIGHT_MIN ? HEIGHT_MIN : h);
}
