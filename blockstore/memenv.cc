/*
 * LevelDB's in-memory environment (helpers/memenv.h) for the C API, which
 * has no constructor for one. The testbed runs thousands of stores in one
 * process, and each index on disk holds four descriptors (LOCK, LOG,
 * MANIFEST, the write-ahead log); in memory it holds none.
 */
#include <leveldb/c.h>
#include <leveldb/env.h>
#include <leveldb/helpers/memenv.h>

extern "C" leveldb_env_t *bstore__mem_env(void); /* blockstore/internal.h */

/* The C API's handle on an Env, laid out as LevelDB's c.cc defines it.
 * The C API reads only rep (leveldb_options_set_env); this handle is never
 * given to leveldb_env_destroy. */
struct leveldb_env_t {
	leveldb::Env *rep;
	bool is_default;
};

static leveldb_env_t mem_env;

/* One environment for the process, so that a store closed and opened
 * again finds its index; NULL if this LevelDB's handle is not laid out as
 * above (its default handle must hold Env::Default()). Not thread-safe:
 * called while opening a store, which a process does from one thread. */
extern "C" leveldb_env_t *bstore__mem_env(void)
{
	if (!mem_env.rep) {
		leveldb_env_t *d = leveldb_create_default_env();
		bool same = d->rep == leveldb::Env::Default();
		leveldb_env_destroy(d);
		if (!same)
			return nullptr;
		mem_env.rep = leveldb::NewMemEnv(leveldb::Env::Default());
	}
	return &mem_env;
}
