/* Write a seed corpus for the fuzz targets from the current encoder:
 * one valid message per (type, direction), a few names and blocks, and
 * (with a fourth directory) a denylist file. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "sfsro-format/sfsro.h"

static void put(const char *dir, const char *name, const void *p, size_t n)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f) {
		perror(path);
		return;
	}
	fwrite(p, 1, n, f);
	fclose(f);
}

int main(int argc, char **argv)
{
	static uint8_t buf[CFS_FRAME_MAX], blob[300];
	static struct cfs_msg m;
	static struct cfs_id keys[3];
	char name[64];

	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: gen-seeds MSG_DIR NAME_DIR BLOCK_DIR [DENYLIST_DIR]\n");
		return 2;
	}
	mkdir(argv[1], 0755);
	mkdir(argv[2], 0755);
	mkdir(argv[3], 0755);
	for (unsigned t = 1; t < CFS_MSG_TYPE_END; t++) {
		if (strcmp(cfs_msg_type_name(t), "?") == 0)
			continue;
		for (int dir = 0; dir < 2; dir++) {
			size_t len;
			cfs_msg_init(&m, (enum cfs_msg_type)t);
			m.is_reply = dir;
			m.has_from = dir;
			m.n_nodes = 2;
			for (int i = 0; i < 2; i++) {
				(void)!cfs_addr_from_ip(&m.nodes[i].addr, i ? "::1" : "127.0.0.1", 4000);
				m.nodes[i].vindex = (uint32_t)i;
			}
			m.node = m.nodes[0];
			m.pred = m.nodes[1];
			m.has_pred = true;
			m.data = (struct cfs_bytes){ blob, sizeof(blob) };
			m.keys = keys;
			m.n_keys = 3;
			if (cfs_msg_encode(&m, buf, sizeof(buf), &len) == 0) {
				snprintf(name, sizeof(name), "%s-%d", cfs_msg_type_name(t), dir);
				put(argv[1], name, buf, len);
			}
		}
	}
	uint8_t key[32] = { 1, 2, 3 };
	char text[CFS_NAME_LEN + 1];
	cfs_name_encode(text, key);
	put(argv[2], "name", text, strlen(text));

	/* one block of every kind */
	uint8_t seed[32] = { 7 };
	struct cfs_pubkey pk;
	struct cfs_seckey sk;
	size_t len;
	cfs_sign_seed_keypair(seed, &pk, &sk);
	struct sfsro_root root = { .pk = pk, .seq = 3, .issued = 1, .valid_until = 2, .dir_mode = 0755 };
	if (sfsro_root_encode(&root, &sk, buf, sizeof(buf), &len) == 0)
		put(argv[3], "root", buf, len);
	root.code_m = 4; /* a coded volume's root: format 2, nine items */
	root.code_n = 12;
	if (sfsro_root_encode(&root, &sk, buf, sizeof(buf), &len) == 0)
		put(argv[3], "root-coded", buf, len);
	if (sfsro_data_encode(blob, 100, buf, sizeof(buf), &len) == 0)
		put(argv[3], "data", buf, len);
	if (sfsro_indirect_encode(1, keys, 3, buf, sizeof(buf), &len) == 0)
		put(argv[3], "indirect", buf, len);
	struct sfsro_inode ino = { .size = 3 * 8192, .mode = 0644, .bsize = 8192,
	                           .fanout = sfsro_fanout(8192), .keys = keys, .nkeys = 3 };
	if (sfsro_inode_encode(&ino, buf, sizeof(buf), &len) == 0)
		put(argv[3], "inode", buf, len);
	struct sfsro_entry e[2] = {
		{ .name = { (const uint8_t *)"a", 1 }, .type = SFSRO_T_FILE, .size = 5, .mode = 0644 },
		{ .name = { (const uint8_t *)"b", 1 }, .type = SFSRO_T_SYMLINK, .size = 1,
		  .target = { (const uint8_t *)"a", 1 } },
	};
	struct sfsro_dir d = { .n = 2, .entries = e };
	if (sfsro_dir_encode(&d, buf, sizeof(buf), &len) == 0)
		put(argv[3], "dir", buf, len);

	/* a denylist as cfsd writes it: a comment, a key alone, a volume's key */
	if (argc == 5) {
		char hex[65], list[512];
		struct cfs_id k1 = { { 1 } }, k2 = { { 2 } };
		mkdir(argv[4], 0755);
		cfs_name_encode(text, pk.b);
		int n = snprintf(list, sizeof(list), "# cfsd denylist\n%s\n", cfs_id_hex(&k1, hex));
		n += snprintf(list + n, sizeof(list) - (size_t)n, "%s %s\n", cfs_id_hex(&k2, hex), text);
		put(argv[4], "denylist", list, (size_t)n);
	}
	return 0;
}
