/*
 * The end of a publish: the root. Its sequence number is above the last
 * one this machine signed for the volume (kept on disk, never reused) and
 * above every replica's; its valid-until is no later than the least lease
 * the servers granted the blocks it references (CFS 5.3); it is signed
 * and stored, with its version.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "publisher/publish_int.h"

/* Where the last sequence signed for pk's volume is kept. */
static int seq_path(const struct pub_options *opt, const struct cfs_pubkey *pk, char *buf, size_t n)
{
	char dir[4096], name[CFS_NAME_LEN + 1];
	int r;

	if (opt->state_dir)
		snprintf(dir, sizeof(dir), "%s", opt->state_dir);
	else if ((r = cfs_user_dir(dir, sizeof(dir) - 16, "/var/lib/cfs", "XDG_STATE_HOME",
	                           ".local/state")) < 0 ||
	         strlen(dir) + sizeof("/published") > sizeof(dir))
		return log_error_errno(r < 0 ? r : -ENAMETOOLONG,
		                       "no directory for the published sequences: give --state-dir");
	else
		strcat(dir, "/published");
	if ((r = cfs_mkdir_p(dir, 0700)) < 0)
		return log_error_errno(r, "cannot create %s for the published sequences", dir);
	cfs_name_encode(name, pk->b);
	if (snprintf(buf, n, "%s/%s.seq", dir, name) >= (int)n)
		return log_error_errno(-ENAMETOOLONG, "the state directory %s is too long", dir);
	return 0;
}

/* The sequence to sign: above the one the store holds (a root get asks
 * every replica it reaches and returns the highest) and above the last
 * one this publisher signed (kept on disk), so no sequence is used twice
 * even when the replicas holding the newest root are away. It is
 * recorded before the root is signed: a crash after that wastes a number,
 * never reuses one. */
int pub__next_seq(struct pub *p, const struct cfs_pubkey *pk, uint64_t current, uint64_t *ret)
{
	char path[4200];
	uint64_t mine;
	int r;

	if ((r = seq_path(p->opt, pk, path, sizeof(path))) < 0)
		return r;
	mine = cfs_num_load(path);
	if (mine > current)
		log_info("this publisher signed sequence %lu before; the store's newest is %lu",
		         (unsigned long)mine, (unsigned long)current);
	*ret = (mine > current ? mine : current) + 1;
	if (!p->opt->dry_run && (r = cfs_num_store(path, *ret)) < 0)
		return log_error_errno(r, "cannot record the sequence in %s", path);
	return 0;
}

/* The sequence of the volume's current root in the store (0: none). */
int pub__store_seq(struct pub *p, const struct cfs_pubkey *pk, uint64_t *ret)
{
	struct sfsro_root old;
	int r = pub__read_root(p->loop, p->sink, pk, 0, &old);

	*ret = 0;
	if (r == -ENOENT)
		return 0;
	if (r == -ECONNREFUSED || r == -EHOSTUNREACH)
		return r; /* the sink said which store it could not reach */
	if (r < 0)
		return log_error_errno(r, "the store holds an unreadable root for this volume");
	*ret = old.seq;
	return 0;
}

/* After the put: the root the store now answers with must be ours. A
 * replica may hold another root under the same sequence, or a higher one
 * (the key used elsewhere): the publish did not take, and is not said to.
 * An older one, or none, may be a replica still taking ours: asked again
 * a few times, then only warned about (the put was acknowledged). */
static int check_stored_root(struct pub *p, const struct sfsro_root *mine)
{
	struct sfsro_root got;
	int r = 0;

	for (int attempt = 0; attempt < 5; attempt++) {
		if (attempt)
			usleep(200000u * attempt);
		if ((r = pub__read_root(p->loop, p->sink, &mine->pk, 0, &got)) < 0)
			continue;
		if (got.seq == mine->seq && cfs_id_eq(&got.root_dir, &mine->root_dir) &&
		    got.issued == mine->issued && got.valid_until == mine->valid_until)
			return 0;
		if (got.seq >= mine->seq)
			return log_error_errno(-ESTALE, "another root of this volume is stored (sequence %lu, "
			                       "this publish signed %lu): the key is used by another "
			                       "publisher, or its sequence record was lost; this version "
			                       "did not take", (unsigned long)got.seq, (unsigned long)mine->seq);
	}
	if (r < 0)
		log_warn_errno(r, "the root just stored (sequence %lu) cannot be read back yet",
		               (unsigned long)mine->seq);
	else
		log_warn("the store still answers with sequence %lu, not the %lu just stored; its "
		         "replicas may be catching up", (unsigned long)got.seq, (unsigned long)mine->seq);
	return 0;
}

/* The root is valid until the leases its blocks got: what was asked, or
 * less when a server grants less (its --max-lease-days). */
static uint64_t bounded_valid_until(struct pub *p, uint64_t asked)
{
	uint64_t granted = p->sink->ops->lease_granted(p->sink->impl);

	if (granted >= asked)
		return asked;
	if (asked - granted > 60) {
		char when[64];
		time_t t = (time_t)granted;
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
		log_warn("the servers granted leases only until %s: the root is valid until then, "
		         "%.1f days less than asked (keep the volume alive with --refresh or "
		         "cfsctl pin)", when, (double)(asked - granted) / 86400);
	}
	return granted;
}

/* The root under its version key too. A store that cannot keep it (a
 * server older than version roots) leaves the publish whole: only reading
 * this version by number after a newer one is lost. */
static void put_version(struct pub *p, const uint8_t *buf, size_t len, uint64_t seq)
{
	int r;

	p->sink->ops->put_version(p->sink->impl, buf, len, p->lease_until, pub__on_done, p);
	if ((r = pub__wait_sink(p)) < 0)
		log_warn_errno(r, "version %lu could not be kept under its own key (it stays readable "
		               "while it is the newest)", (unsigned long)seq);
}

int pub__sign_and_store(struct pub *p, struct sfsro_root *root, const struct cfs_seckey *sk)
{
	uint8_t *buf = xmalloc(1024);
	struct cfs_id key;
	size_t len;
	int r;

	root->issued = cfs_wall_s();
	root->valid_until = bounded_valid_until(p, p->lease_until);
	p->root_phase = true;
	if (root->valid_until <= root->issued) {
		free(buf);
		return log_error_errno(-ETIME, "the servers granted leases that have already ended");
	}
	if ((r = sfsro_root_encode(root, sk, buf, 1024, &len)) == 0 && !p->opt->dry_run) {
		sfsro_root_key(&root->pk, &key);
		p->sink->ops->put_root(p->sink->impl, &key, buf, len, p->lease_until, pub__on_done, p);
		if ((r = pub__wait_sink(p)) < 0)
			log_error_errno(r, r == -ESTALE ? "storing the signed root failed: the store holds "
			                "a newer root, or another one with this sequence"
			                : "storing the signed root failed");
		else
			r = check_stored_root(p, root);
		if (r == 0)
			put_version(p, buf, len, root->seq);
	}
	free(buf);
	p->st->seq = root->seq;
	p->st->valid_until = root->valid_until;
	return r;
}
