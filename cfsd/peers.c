/*
 * The peers a daemon remembers across restarts: DATA/peers, one address
 * a line, most recently seen first. Loaded before the ring starts (join
 * targets after the bootstrap addresses, and contacts of the ring check).
 * A missing file is a first start;
 * a line that is not an address is skipped, with one warning for the file.
 * Written when it changed, checked every few seconds and at shutdown.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfsd/cfsd.h"
#include "chord/chord.h"

#define PEERS_FILE "peers"

static void peers_path(const char *data_dir, char *buf, size_t n)
{
	snprintf(buf, n, "%s/%s", data_dir, PEERS_FILE);
}

int cfsd_peers_load(chord_t *c, const char *data_dir)
{
	char path[4096], line[128];
	struct cfs_addr a;
	int n = 0, bad = 0;
	FILE *f;

	peers_path(data_dir, path, sizeof(path));
	if (!(f = fopen(path, "re")))
		return errno == ENOENT ? 0 : log_warn_errno(-errno, "cannot read %s", path);
	while (n < CHORD_PEERS_MAX && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = 0;
		if (!line[0] || line[0] == '#')
			continue;
		char *colon = strrchr(line, ':');
		uint16_t port = 0;
		if (colon) {
			unsigned long p = strtoul(colon + 1, NULL, 10);
			port = p > 0 && p < 65536 ? (uint16_t)p : 0;
			*colon = 0;
		}
		char *host = line;
		if (host[0] == '[' && colon && colon > host && colon[-1] == ']') {
			colon[-1] = 0;
			host++;
		}
		if (!port || cfs_addr_from_ip(&a, host, port) < 0) {
			bad++;
			continue;
		}
		chord_remember(c, &a);
		n++;
	}
	fclose(f);
	if (bad)
		log_warn("%s: %d line%s that are not addresses skipped", path, bad, bad == 1 ? "" : "s");
	if (n)
		log_info("remembered %d peer%s from the last run", n, n == 1 ? "" : "s");
	return n;
}

int cfsd_peers_save(chord_t *c, const char *data_dir)
{
	struct cfs_addr peers[CHORD_PEERS_MAX];
	char path[4096], buf[CHORD_PEERS_MAX * (CFS_ADDR_STRLEN + 1)], a[CFS_ADDR_STRLEN];
	uint32_t n = chord_peers(c, peers, CHORD_PEERS_MAX);
	size_t len = 0;

	for (uint32_t i = 0; i < n; i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s\n", cfs_addr_str(&peers[i], a));
	/* Checked often, written only when the list changed: what a kill -9
	 * leaves behind is at most a few seconds old. */
	static char last[sizeof(buf)];
	static size_t last_len = SIZE_MAX;
	if (len == last_len && !memcmp(buf, last, len))
		return (int)n;
	peers_path(data_dir, path, sizeof(path));
	int r = cfs_write_file_atomic(path, buf, len, 0600);
	if (r < 0)
		return log_warn_errno(r, "cannot write %s", path);
	memcpy(last, buf, len);
	last_len = len;
	return (int)n;
}
