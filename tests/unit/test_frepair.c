/* cfsd/frepair_sm.c: one key's background repair of coded fragments,
 * driven by scripted answers (no network). */
#include <criterion/criterion.h>
#include <string.h>

#include "cfsd/frepair.h"
#include "tests/unit/dhash_sm_fixtures.h"

TestSuite(frepair);

static struct dhash_frag_ref ref(uint8_t m, uint8_t n)
{
	struct dhash_frag_ref r = { .m = m, .n = n, .index = 0, .lease_until = 1234 };
	r.key.b[0] = 0x42;
	return r;
}

/* A locate of an m-of-8 key: holder i (node i + 1) in state st[i]; 10
 * holders (8 and the spares). */
static struct dhash_locate_result located(const int8_t *st)
{
	struct dhash_locate_result r = { .n = 10 };
	for (uint32_t i = 0; i < 10; i++) {
		r.nodes[i] = node((uint8_t)(i + 1));
		r.state[i] = st[i];
	}
	r.good = dhash_locate_coded_good(&r);
	return r;
}

#define G DHASH_COPY_GOOD
#define M DHASH_COPY_MISSING
#define S DHASH_COPY_SILENT

Test(frepair, the_threshold_is_a_coded_puts_quorum)
{
	cr_assert_eq(cfsd_frepair_threshold(4, 8), 6);
	cr_assert_eq(cfsd_frepair_threshold(4, 12), 8);
	cr_assert_eq(cfsd_frepair_threshold(8, 24), 16);
}

/* Keys in (second predecessor, us] are ours: the successor's and the next
 * server's; further back, another's. */
Test(frepair, responsible_for_the_keys_of_the_two_last_arcs)
{
	struct cfs_node preds[2] = { node(0x40), node(0x20) };
	struct cfs_id self = { { 0x60 } }, k = { { 0 } };

	k.b[0] = 0x50;
	cr_assert(cfsd_frepair_mine(&k, &self, preds, 2));
	k.b[0] = 0x30;
	cr_assert(cfsd_frepair_mine(&k, &self, preds, 2));
	k.b[0] = 0x10;
	cr_assert_not(cfsd_frepair_mine(&k, &self, preds, 2));
	cr_assert_not(cfsd_frepair_mine(&k, &self, preds, 1)); /* only (0x40, 0x60] */
	cr_assert(cfsd_frepair_mine(&k, &self, preds, 0));     /* alone: all */
}

/* A job whose probe counted too few holders: it locates next. */
static void init_low(struct cfsd_frepair_job *j, const struct dhash_frag_ref *r, bool until_n)
{
	cfsd_frepair_job_init(j, r, until_n);
	cr_assert_eq(j->next, CFSD_FREPAIR_PROBE);
	cfsd_frepair_job_probed(j, &(struct dhash_locate_result){ .status = 0, .good = 0 });
	cr_assert_eq(j->next, CFSD_FREPAIR_LOCATE);
}

/* A key is first counted by a probe (HAVEs): at the threshold the job
 * ends there, nothing fetched; below it, or with the probe failed, the
 * fragments are located one by one; a followed key's probe must find n. */
Test(frepair, a_probe_counts_first)
{
	struct cfsd_frepair_job j;
	struct dhash_frag_ref r = ref(4, 8);
	int8_t st[10] = { G, G, G, G, G, G, G, G, M, M };
	struct dhash_locate_result l = located(st);

	cfsd_frepair_job_init(&j, &r, false);
	cr_assert_eq(j.next, CFSD_FREPAIR_PROBE);
	cfsd_frepair_job_located(&j, &l); /* not asked: ignored */
	cr_assert_eq(j.next, CFSD_FREPAIR_PROBE);
	cfsd_frepair_job_probed(&j, &(struct dhash_locate_result){ .status = 0, .good = 6 });
	cr_assert_eq(j.next, CFSD_FREPAIR_DONE);
	cr_assert_eq(j.outcome, CFSD_FREPAIR_ENOUGH);
	cr_assert_eq(j.good, 6);
	cr_assert_not(cfsd_frepair_job_follow(&j));
	cfsd_frepair_job_fini(&j);

	cfsd_frepair_job_init(&j, &r, false);
	cfsd_frepair_job_probed(&j, &(struct dhash_locate_result){ .status = 0, .good = 5 });
	cr_assert_eq(j.next, CFSD_FREPAIR_LOCATE, "5 below the threshold of 6");
	cfsd_frepair_job_probed(&j, &(struct dhash_locate_result){ .status = 0, .good = 8 }); /* ignored */
	cr_assert_eq(j.next, CFSD_FREPAIR_LOCATE);
	cfsd_frepair_job_located(&j, &l);
	cr_assert_eq(j.outcome, CFSD_FREPAIR_ENOUGH, "the locate's count decides");
	cfsd_frepair_job_fini(&j);

	cfsd_frepair_job_init(&j, &r, false);
	cfsd_frepair_job_probed(&j, &(struct dhash_locate_result){ .status = -ETIMEDOUT, .good = 8 });
	cr_assert_eq(j.next, CFSD_FREPAIR_LOCATE, "a failed probe proves nothing");
	cfsd_frepair_job_fini(&j);

	cfsd_frepair_job_init(&j, &r, true);
	cfsd_frepair_job_probed(&j, &(struct dhash_locate_result){ .status = 0, .good = 7 });
	cr_assert_eq(j.next, CFSD_FREPAIR_LOCATE, "followed: 7 of 8 is not enough");
	cfsd_frepair_job_fini(&j);
}

/* At the threshold or above nothing is sent (Carbonite): a lost holder
 * that the spares absorb costs one locate. */
Test(frepair, at_the_threshold_nothing_is_sent)
{
	struct cfsd_frepair_job j;
	struct dhash_frag_ref r = ref(4, 8);
	int8_t st[10] = { G, G, G, G, G, G, S, S, M, M };
	struct dhash_locate_result l = located(st);

	init_low(&j, &r, false);
	cfsd_frepair_job_located(&j, &l);
	cr_assert_eq(j.next, CFSD_FREPAIR_DONE);
	cr_assert_eq(j.outcome, CFSD_FREPAIR_ENOUGH);
	cr_assert_not(cfsd_frepair_job_follow(&j));
	cfsd_frepair_job_fini(&j);
}

/* Below it: the block is read and each missing index goes to a holder
 * without a fragment, in ring order; fragments that moved count by their
 * index. Silent holders get nothing, so the key is followed next round. */
Test(frepair, below_the_threshold_the_missing_indices_are_stored)
{
	struct cfsd_frepair_job j;
	struct dhash_frag_ref r = ref(4, 8);
	/* indices 0, 1 in place; 5 and 6 moved to holders 2 and 3 (two died
	 * before them); holder 4 silent; holders 5..7 have nothing */
	int8_t st[10] = { G, G, DHASH_COPY_OTHER(5), DHASH_COPY_OTHER(6), S, M, M, M, M, M };
	struct dhash_locate_result l = located(st);
	uint8_t block[100] = { 7 };

	cr_assert_eq(l.good, 4);
	init_low(&j, &r, false);
	cfsd_frepair_job_located(&j, &l);
	cr_assert_eq(j.next, CFSD_FREPAIR_GET);
	cfsd_frepair_job_got(&j, 0, block, sizeof(block));
	cr_assert_eq(j.next, CFSD_FREPAIR_REPAIR);
	/* missing 2, 3, 4, 7 to holders 5, 6, 7 (node 6, 7, 8): 7 finds nobody */
	cr_assert_eq(j.mask, 1u << 2 | 1u << 3 | 1u << 4);
	cr_assert_eq(j.to[2].id.b[0], 6);
	cr_assert_eq(j.to[3].id.b[0], 7);
	cr_assert_eq(j.to[4].id.b[0], 8);
	cr_assert_eq(j.len, sizeof(block));
	cfsd_frepair_job_repaired(&j, 0);
	cr_assert_eq(j.outcome, CFSD_FREPAIR_REPAIRED);
	cr_assert(cfsd_frepair_job_follow(&j), "7 of 8: followed until at 8");
	cfsd_frepair_job_fini(&j);

	/* followed: repaired while below n, not only below the threshold */
	int8_t st2[10] = { G, G, DHASH_COPY_OTHER(5), DHASH_COPY_OTHER(6), M, DHASH_COPY_OTHER(2),
	                   DHASH_COPY_OTHER(3), DHASH_COPY_OTHER(4), M, M };
	l = located(st2);
	init_low(&j, &r, true);
	cfsd_frepair_job_located(&j, &l);
	cr_assert_eq(j.next, CFSD_FREPAIR_GET);
	cr_assert_eq(j.mask, 1u << 7);
	cr_assert_eq(j.to[7].id.b[0], 5);
	cfsd_frepair_job_got(&j, 0, block, sizeof(block));
	cfsd_frepair_job_repaired(&j, 0);
	cr_assert_not(cfsd_frepair_job_follow(&j), "at 8: done");
	cfsd_frepair_job_fini(&j);
}

/* Below m: nothing can be rebuilt; a failed locate, get or store ends the
 * job; answers to another step than the one asked are ignored. */
Test(frepair, below_m_lost_and_failures)
{
	struct cfsd_frepair_job j;
	struct dhash_frag_ref r = ref(4, 8);
	int8_t st[10] = { G, G, G, M, M, M, M, M, M, M };
	struct dhash_locate_result l = located(st);

	init_low(&j, &r, false);
	cfsd_frepair_job_got(&j, 0, (const uint8_t *)"x", 1); /* not asked: ignored */
	cr_assert_eq(j.next, CFSD_FREPAIR_LOCATE);
	cfsd_frepair_job_located(&j, &l);
	cr_assert_eq(j.outcome, CFSD_FREPAIR_LOST);
	cfsd_frepair_job_fini(&j);

	init_low(&j, &r, false);
	cfsd_frepair_job_located(&j, &(struct dhash_locate_result){ .status = -ETIMEDOUT });
	cr_assert_eq(j.outcome, CFSD_FREPAIR_FAILED);
	cfsd_frepair_job_fini(&j);

	int8_t st2[10] = { G, G, G, G, G, S, S, S, M, M };
	l = located(st2);
	init_low(&j, &r, false);
	cfsd_frepair_job_located(&j, &l);
	cr_assert_eq(j.outcome, CFSD_FREPAIR_NOWHERE, "no holder among the first 8 without one");
	cr_assert(cfsd_frepair_job_follow(&j));
	cfsd_frepair_job_fini(&j);

	int8_t st3[10] = { G, G, G, G, G, M, M, M, M, M };
	l = located(st3);
	init_low(&j, &r, false);
	cfsd_frepair_job_located(&j, &l);
	cfsd_frepair_job_got(&j, -EBADMSG, NULL, 0);
	cr_assert_eq(j.outcome, CFSD_FREPAIR_FAILED);
	cfsd_frepair_job_fini(&j);
}
