/*
 * The denylist's entries and its file (see cfsd/deny.h).
 *
 * Two tables: every entry (key, volume index) once, and per key the number
 * of entries naming it, so that "is this key denied" is one lookup and
 * lifting a volume frees only the keys no other entry names. Volumes are a
 * short array (index 0: no volume), each with its count of entries.
 *
 * The file is DATA/denylist, one entry a line, sorted (by volume, then
 * key) so that the same list is always the same file; it is replaced
 * atomically (cfs_write_file_atomic), so a crash leaves the old list or
 * the new one. A change is written before it takes effect: when the write
 * fails, the list in memory is put back as it was.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfsd/deny.h"

struct pair {
	struct cfs_id key;
	uint32_t vol;             /* 0: the key alone, else 1 + index in vols */
};

struct vol {
	struct cfs_pubkey pk;
	uint32_t entries;
};

struct cfsd_denylist {
	char *path;
	uint32_t max;
	struct cfs_htab pairs;    /* struct pair -> (unused byte) */
	struct cfs_htab keys;     /* key -> uint32_t entries naming it */
	struct vol *vols;
	uint32_t nvols;
};

int cfsd_deny_parse_line(const char *line, struct cfsd_deny_entry *ret, const char **ret_why)
{
	char a[CFSD_DENY_LINE_MAX], b[CFSD_DENY_LINE_MAX], c[2];
	const char *p = line;

	*ret_why = NULL;
	memset(ret, 0, sizeof(*ret));
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '#' || *p == '\n' || *p == '\r' || *p == 0)
		return 1;
	if (strlen(p) >= CFSD_DENY_LINE_MAX) {
		*ret_why = "line too long";
		return -EINVAL;
	}
	int n = sscanf(p, "%159s %159s %1s", a, b, c);
	if (n == 3) {
		*ret_why = "more than KEY and VOLUME";
		return -EINVAL;
	}
	if (strlen(a) != 64 || cfs_id_from_hex(&ret->key, a) < 0) {
		*ret_why = "the key is not 64 hex digits";
		return -EINVAL;
	}
	if (n == 2) {
		if (cfs_name_decode(ret->volume.b, b, ret_why) < 0)
			return -EINVAL;
		ret->has_volume = true;
	}
	return 0;
}

cfsd_denylist_t *cfsd_denylist_new(const char *path, uint32_t max)
{
	cfsd_denylist_t *l = xcalloc(1, sizeof(*l));

	l->path = path ? xstrdup(path) : NULL;
	l->max = max;
	cfs_htab_init(&l->pairs, sizeof(struct pair), 1);
	cfs_htab_init(&l->keys, sizeof(struct cfs_id), sizeof(uint32_t));
	return l;
}

void cfsd_denylist_free(cfsd_denylist_t *l)
{
	if (!l)
		return;
	cfs_htab_free(&l->pairs);
	cfs_htab_free(&l->keys);
	free(l->vols);
	free(l->path);
	free(l);
}

/* The volume's index + 1, adding it when add (else 0 when unknown). */
static uint32_t vol_index(cfsd_denylist_t *l, const struct cfs_pubkey *pk, bool add)
{
	if (!pk)
		return 0;
	for (uint32_t i = 0; i < l->nvols; i++)
		if (memcmp(l->vols[i].pk.b, pk->b, sizeof(pk->b)) == 0)
			return i + 1;
	if (!add)
		return 0;
	/* a slot of a volume with no entries left is reused */
	for (uint32_t i = 0; i < l->nvols; i++)
		if (l->vols[i].entries == 0) {
			l->vols[i].pk = *pk;
			return i + 1;
		}
	l->vols = xrealloc(l->vols, (l->nvols + 1) * sizeof(*l->vols));
	l->vols[l->nvols] = (struct vol){ .pk = *pk };
	return ++l->nvols;
}

static struct pair pair_of(const struct cfs_id *key, uint32_t vol)
{
	struct pair p;

	memset(&p, 0, sizeof(p)); /* the table compares every byte */
	p.key = *key;
	p.vol = vol;
	return p;
}

/* Insert an entry: true when it was not there; *ret_new when its key was
 * denied by no entry before. */
static bool pair_insert(cfsd_denylist_t *l, const struct cfs_id *key, uint32_t vol, bool *ret_new)
{
	struct pair p = pair_of(key, vol);
	bool added, kadded;

	*ret_new = false;
	(void)cfs_htab_put(&l->pairs, &p, &added);
	if (!added)
		return false;
	uint32_t *cnt = cfs_htab_put(&l->keys, key, &kadded);
	(*cnt)++;
	*ret_new = kadded;
	if (vol)
		l->vols[vol - 1].entries++;
	return true;
}

/* Remove an entry: true when it was there; *ret_freed when no entry names
 * its key any more. */
static bool pair_erase(cfsd_denylist_t *l, const struct cfs_id *key, uint32_t vol, bool *ret_freed)
{
	struct pair p = pair_of(key, vol);

	*ret_freed = false;
	if (!cfs_htab_del(&l->pairs, &p, NULL))
		return false;
	uint32_t *cnt = cfs_htab_get(&l->keys, key);
	if (cnt && --*cnt == 0) {
		(void)cfs_htab_del(&l->keys, key, NULL);
		*ret_freed = true;
	}
	if (vol)
		l->vols[vol - 1].entries--;
	return true;
}

static int pair_cmp(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;

	if (x->vol != y->vol)
		return x->vol < y->vol ? -1 : 1;
	return cfs_id_cmp(&x->key, &y->key);
}

/* Every entry, sorted (malloc'd). */
static struct pair *sorted_pairs(const cfsd_denylist_t *l, size_t *ret_n)
{
	size_t n = cfs_htab_count(&l->pairs), i = 0, pos = 0;
	struct pair *v = xmalloc((n ? n : 1) * sizeof(*v));
	const void *k;
	void *val;

	while (cfs_htab_next(&l->pairs, &pos, &k, &val))
		memcpy(&v[i++], k, sizeof(*v));
	qsort(v, n, sizeof(*v), pair_cmp);
	*ret_n = n;
	return v;
}

static int save(const cfsd_denylist_t *l)
{
	struct cfs_sbuf b = { 0 };
	size_t n;
	struct pair *v;
	char hex[65], name[CFS_NAME_LEN + 1];
	int r;

	if (!l->path)
		return 0;
	v = sorted_pairs(l, &n);
	cfs_sb_printf(&b, "# cfsd denylist (cfsctl deny): KEY, or KEY VOLUME for a block of a "
	                  "denied volume\n");
	for (size_t i = 0; i < n; i++) {
		cfs_id_hex(&v[i].key, hex);
		if (v[i].vol) {
			cfs_name_encode(name, l->vols[v[i].vol - 1].pk.b);
			cfs_sb_printf(&b, "%s %s\n", hex, name);
		} else {
			cfs_sb_printf(&b, "%s\n", hex);
		}
	}
	r = cfs_write_file_atomic(l->path, b.p ? b.p : "", b.len, 0600);
	free(b.p);
	free(v);
	return r < 0 ? log_error_errno(r, "cannot write the denylist %s", l->path) : 0;
}

void cfsd_denylist_load_text(cfsd_denylist_t *l, const char *text, size_t len, uint32_t *ret_bad)
{
	const char *p = text, *end = text + len;
	unsigned lineno = 0, bad = 0, over = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char line[CFSD_DENY_LINE_MAX + 1];
		struct cfsd_deny_entry e;
		const char *why;
		bool fresh;
		lineno++;
		if (n > CFSD_DENY_LINE_MAX)
			n = CFSD_DENY_LINE_MAX; /* then refused as too long */
		memcpy(line, p, n);
		line[n] = 0;
		if (memchr(line, 0, n)) {
			why = "a NUL byte";
			bad++;
			log_warn("%s:%u: not a denylist entry (%s), skipped", l->path ? l->path : "denylist",
			         lineno, why);
		} else {
			int r = cfsd_deny_parse_line(line, &e, &why);
			if (r < 0) {
				bad++;
				log_warn("%s:%u: not a denylist entry (%s), skipped",
				         l->path ? l->path : "denylist", lineno, why);
			} else if (r == 0 && cfs_htab_count(&l->pairs) >= l->max) {
				over++;
			} else if (r == 0) {
				uint32_t vol = e.has_volume ? vol_index(l, &e.volume, true) : 0;
				(void)pair_insert(l, &e.key, vol, &fresh);
			}
		}
		p += nl ? n + 1 : n;
		if (!nl)
			break;
	}
	if (over)
		log_warn("%s: %u entries beyond the limit of %u dropped", l->path ? l->path : "denylist",
		         over, l->max);
	if (ret_bad)
		*ret_bad = bad + over;
}

int cfsd_denylist_load(cfsd_denylist_t *l)
{
	FILE *f = fopen(l->path, "r");
	size_t len = 0, cap = 65536, n;
	char *buf;

	if (!f)
		return errno == ENOENT ? 0 : log_error_errno(-errno, "cannot read the denylist %s", l->path);
	buf = xmalloc(cap);
	while ((n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap)
			buf = xrealloc(buf, cap *= 2);
	}
	bool err = ferror(f);
	fclose(f);
	if (err) {
		free(buf);
		return log_error_errno(-EIO, "cannot read the denylist %s", l->path);
	}
	cfsd_denylist_load_text(l, buf, len, NULL);
	free(buf);
	return 0;
}

int cfsd_denylist_add(cfsd_denylist_t *l, const struct cfs_id *keys, uint32_t n,
                      const struct cfs_pubkey *volume, uint32_t *ret_new)
{
	uint32_t vol = volume ? vol_index(l, volume, true) : 0, fresh = 0, more = 0;
	bool *added = xcalloc(n ? n : 1, sizeof(*added)), is_new;
	int r = 0;

	/* what is new first: all of it fits, or nothing changes */
	for (uint32_t i = 0; i < n; i++) {
		struct pair p = pair_of(&keys[i], vol);
		more += cfs_htab_get(&l->pairs, &p) == NULL;
	}
	if (cfs_htab_count(&l->pairs) + more > l->max) {
		free(added);
		return -ENOSPC;
	}
	for (uint32_t i = 0; i < n; i++) {
		added[i] = pair_insert(l, &keys[i], vol, &is_new);
		fresh += is_new;
	}
	if (more && save(l) < 0) {
		for (uint32_t i = 0; i < n; i++)
			if (added[i])
				(void)pair_erase(l, &keys[i], vol, &is_new);
		fresh = 0;
		r = -EIO;
	}
	free(added);
	if (ret_new)
		*ret_new = fresh;
	return r;
}

int cfsd_denylist_remove(cfsd_denylist_t *l, const struct cfs_id *key,
                         const struct cfs_pubkey *volume, struct cfs_id **ret_freed,
                         uint32_t *ret_n)
{
	size_t n, m = 0;
	struct pair *v = sorted_pairs(l, &n), *gone = xmalloc((n ? n : 1) * sizeof(*gone));
	uint32_t vol = volume ? vol_index(l, volume, false) : 0, nfreed = 0;
	struct cfs_id *freed = xmalloc((n ? n : 1) * sizeof(*freed));
	bool f;

	*ret_freed = NULL;
	*ret_n = 0;
	for (size_t i = 0; i < n && (!volume || vol); i++)
		if (volume ? v[i].vol == vol : cfs_id_eq(&v[i].key, key))
			gone[m++] = v[i];
	free(v);
	if (m == 0) {
		free(gone);
		free(freed);
		return -ENOENT;
	}
	for (size_t i = 0; i < m; i++) {
		(void)pair_erase(l, &gone[i].key, gone[i].vol, &f);
		if (f)
			freed[nfreed++] = gone[i].key;
	}
	if (save(l) < 0) {
		for (size_t i = 0; i < m; i++)
			(void)pair_insert(l, &gone[i].key, gone[i].vol, &f);
		free(gone);
		free(freed);
		return -EIO;
	}
	free(gone);
	*ret_freed = freed;
	*ret_n = nfreed;
	return 0;
}

bool cfsd_denylist_has(const cfsd_denylist_t *l, const struct cfs_id *key)
{
	return cfs_htab_get(&l->keys, key) != NULL;
}

uint32_t cfsd_denylist_entries(const cfsd_denylist_t *l)
{
	return (uint32_t)cfs_htab_count(&l->pairs);
}

uint32_t cfsd_denylist_keys(const cfsd_denylist_t *l)
{
	return (uint32_t)cfs_htab_count(&l->keys);
}

uint32_t cfsd_denylist_max(const cfsd_denylist_t *l)
{
	return l->max;
}

struct cfs_id *cfsd_denylist_all_keys(const cfsd_denylist_t *l, uint32_t *ret_n)
{
	size_t n = cfs_htab_count(&l->keys), i = 0, pos = 0;
	struct cfs_id *v = xmalloc((n ? n : 1) * sizeof(*v));
	const void *k;
	void *val;

	while (cfs_htab_next(&l->keys, &pos, &k, &val))
		memcpy(&v[i++], k, sizeof(*v));
	*ret_n = (uint32_t)n;
	return v;
}

void cfsd_denylist_report(const cfsd_denylist_t *l, struct cfs_sbuf *b)
{
	size_t n;
	struct pair *v = sorted_pairs(l, &n);
	char hex[65], name[CFS_NAME_LEN + 1];
	uint32_t nvol = 0;

	for (uint32_t i = 0; i < l->nvols; i++)
		nvol += l->vols[i].entries > 0;
	cfs_sb_printf(b, "%u key%s denied: %u volume%s, %u entr%s of at most %u\n",
	              cfsd_denylist_keys(l), cfsd_denylist_keys(l) == 1 ? "" : "s", nvol,
	              nvol == 1 ? "" : "s", (unsigned)n, n == 1 ? "y" : "ies", l->max);
	for (uint32_t i = 0; i < l->nvols; i++) {
		if (!l->vols[i].entries)
			continue;
		cfs_name_encode(name, l->vols[i].pk.b);
		cfs_sb_printf(b, "volume %s %u key%s\n", name, l->vols[i].entries,
		              l->vols[i].entries == 1 ? "" : "s");
	}
	for (size_t i = 0; i < n && v[i].vol == 0; i++)
		cfs_sb_printf(b, "key %s\n", cfs_id_hex(&v[i].key, hex));
	free(v);
}
