/*
 * The operator's denylist (cfsctl deny): content this daemon refuses to
 * store or serve, kept across restarts in DATA/denylist.
 *
 * An entry is a block key, alone (denied by itself) or with the volume
 * whose walk reached it: denying a volume denies its root key and every
 * block its newest root reaches, and lifting the volume lifts exactly
 * those entries. A key may be named by several entries (a block two
 * denied volumes share); it stays denied while any names it. The list is
 * bounded (max entries); an addition that does not fit changes nothing.
 *
 * The list (denylist.c) does no network I/O: it parses and writes its
 * file and says which keys became denied or free. The daemon hands those
 * to its DHash server (dhash_server_deny / _allow), which does the
 * refusing. The walk (deny_walk.c) finds a volume's keys through the
 * daemon's DHash client with sfsro-format's verifying walker.
 */
#ifndef CFS_CFSD_DENY_H
#define CFS_CFSD_DENY_H

#include "dhash/dhash.h"
#include "sfsro-format/sfsro.h"

#define CFSD_DENY_FILE "denylist"
#define CFSD_DENY_MAX 262144u   /* entries: a volume of 16 GiB in 64 KiB blocks */
#define CFSD_DENY_LINE_MAX 160  /* "HEX64 VOLUME52\n" and room */

typedef struct cfsd_denylist cfsd_denylist_t;

/* One line of the file. */
struct cfsd_deny_entry {
	struct cfs_id key;
	bool has_volume;
	struct cfs_pubkey volume;
};

/* Parse one line ("KEY" or "KEY VOLUME", 64 hex digits and a volume name;
 * blanks around them and a newline ignored): 0 with *ret set, 1 for a blank
 * line or a comment (#), -EINVAL with *ret_why for anything else. */
int cfsd_deny_parse_line(const char *line, struct cfsd_deny_entry *ret, const char **ret_why) CFS_WUR;

/* An empty list of at most max entries, kept in path (NULL: in memory
 * only, for tests). */
cfsd_denylist_t *cfsd_denylist_new(const char *path, uint32_t max);
void cfsd_denylist_free(cfsd_denylist_t *l);
/* Read the list's file (absent: empty). Lines that do not parse are
 * logged and skipped; entries beyond max are logged and dropped. 0, or a
 * negative errno when the file cannot be read. */
int cfsd_denylist_load(cfsd_denylist_t *l) CFS_WUR;
/* The same from text in memory (the fuzz target's way in); *ret_bad gets
 * the lines skipped. */
void cfsd_denylist_load_text(cfsd_denylist_t *l, const char *text, size_t len, uint32_t *ret_bad);

/* Add an entry for each of keys (of volume, or alone: NULL) and write the
 * file. All or nothing: -ENOSPC when they do not fit in max, -EIO when the
 * file cannot be written (logged). *ret_new (may be NULL) gets the keys no
 * entry denied before. */
int cfsd_denylist_add(cfsd_denylist_t *l, const struct cfs_id *keys, uint32_t n,
                      const struct cfs_pubkey *volume, uint32_t *ret_new) CFS_WUR;
/* Remove every entry of volume, or (volume NULL) every entry of key, and
 * write the file: 0 with the keys now denied by no entry in *ret_freed
 * (malloc'd, the caller frees; *ret_n of them), -ENOENT when nothing
 * matched, -EIO when the file cannot be written (nothing changed). */
int cfsd_denylist_remove(cfsd_denylist_t *l, const struct cfs_id *key,
                         const struct cfs_pubkey *volume, struct cfs_id **ret_freed,
                         uint32_t *ret_n) CFS_WUR;
bool cfsd_denylist_has(const cfsd_denylist_t *l, const struct cfs_id *key);
/* Entries, and distinct keys denied. */
uint32_t cfsd_denylist_entries(const cfsd_denylist_t *l);
uint32_t cfsd_denylist_keys(const cfsd_denylist_t *l);
uint32_t cfsd_denylist_max(const cfsd_denylist_t *l);
/* Every distinct key (malloc'd; *ret_n of them), to hand to the server. */
struct cfs_id *cfsd_denylist_all_keys(const cfsd_denylist_t *l, uint32_t *ret_n);
/* The entries as cfsctl deny --list prints them: a heading line, then
 * "volume NAME N keys" per volume and "key HEX" per key denied alone. */
void cfsd_denylist_report(const cfsd_denylist_t *l, struct cfs_sbuf *b);

/* ---- a volume's keys (deny_walk.c) */

/* The walk's end: status 0 when every block was reached, else why it
 * stopped (-ECANCELED: the client is closing); keys are those reached,
 * the root key first whenever the root was read (borrowed for the call). */
typedef void (*cfsd_deny_walk_cb)(void *arg, int status, const struct sfsro_root *root,
                                  const struct cfs_id *keys, uint32_t n);
/* Read pk's newest root through client (any sequence, expired or not) and
 * visit every block under it, verifying each; data blocks are named by
 * their parents and never fetched. cb runs once, never inside this call;
 * a negative return (the first get could not start) means it never runs. */
int cfsd_deny_walk(dhash_client_t *client, const struct cfs_pubkey *pk, cfsd_deny_walk_cb cb,
                   void *arg) CFS_WUR;

#endif
