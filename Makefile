# CFS — one non-recursive Makefile.  `make help` lists the targets.
#
# Every target that is about to need a Debian package installs it first
# (tools/ensure-deps.sh, by set: @build, @test, @fuzz, @eval), so a fresh
# Debian 12 machine needs nothing but this.

B           ?= build
SHELL       := /bin/bash
V           ?= 0
FUZZ_SECONDS ?= 60
Q           := $(if $(filter 1,$(V)),,@)
export CFS_APT_STAMP := $(CURDIR)/$(B)/.apt-updated
ENSURE      := tools/ensure-deps.sh
BIN         := $(CURDIR)/$(B)/bin

.DEFAULT_GOAL := all
.PHONY: all unit integration test asan coverage fuzz fuzz-build eval eval-quick demo install \
        lint clean help deps-test deps-eval

# Goals that need neither a compiler nor any package skip the configuration.
ifneq ($(MAKECMDGOALS),)
ifeq ($(filter-out clean help lint,$(MAKECMDGOALS)),)
SKIP_CONFIG := 1
endif
endif
ifndef SKIP_CONFIG
include $(B)/config.mk
endif

# pkg-config's flags, recorded once the packages are in place.
$(B)/config.mk: Makefile $(ENSURE) tools/configure.sh
	$(Q)$(ENSURE) @build
	$(Q)tools/configure.sh $(B)

CC      ?= gcc
OPT     ?= -O2
WARN    := -Wall -Wextra -Werror -Wshadow -Wmissing-prototypes \
           -Wstrict-prototypes -Wwrite-strings -Wno-unused-parameter
CFLAGS_ALL = -std=gnu11 $(OPT) -g $(WARN) $(SAN) -I. -MMD -MP \
           $(UV_CFLAGS) $(SODIUM_CFLAGS) $(MSGPACK_CFLAGS) $(FUSE_CFLAGS) $(MHD_CFLAGS) $(EXTRA_CFLAGS)
LDFLAGS_ALL = $(SAN) $(EXTRA_LDFLAGS)
CORE_LIBS = $(UV_LIBS) $(SODIUM_LIBS) $(MSGPACK_LIBS) -lisal -lm

# ---------------------------------------------------------------- modules
# One static archive per folder, without its programs' own files; the
# dependencies point down (docs/INTERNALS.md): cfsd, publisher, cfs-fuse →
# client → dhash → blockstore, chord, sfsro-format → common. The testbed's
# churn schedules and delay model are one so the unit tests and fuzzers reach them.
obj = $(patsubst %.c,$(B)/%.o,$(1))
CFSD_SRCS   := cfsd/cfsd.c cfsd/config.c cfsd/startup.c cfsd/serve.c cfsd/peers.c cfsd/portmap.c
CFSCTL_SRCS := cfsd/cfsctl.c cfsd/lookup_cmd.c cfsd/block_cmd.c cfsd/history_cmd.c cfsd/ping_cmd.c
TESTBED_SRCS := tests/testbed/cfs_testbed.c tests/testbed/nodes.c tests/testbed/workload.c

LIBCOMMON  := $(B)/libcfs_common.a
LIBCHORD   := $(B)/libchord.a
LIBDHASH   := $(B)/libdhash.a
LIBCLIENT  := $(B)/libclient.a
LIBBSTORE  := $(B)/libblockstore.a
LIBSFSRO   := $(B)/libsfsro.a
LIBCFSD    := $(B)/libcfsd.a
LIBPUB     := $(B)/libpublisher.a
LIBFUSE    := $(B)/libcfsfuse.a
LIBTESTBED := $(B)/libtestbed.a
$(LIBCOMMON):  $(call obj,$(wildcard common/*.c))
$(LIBCHORD):   $(call obj,$(wildcard chord/*.c))
$(LIBDHASH):   $(call obj,$(wildcard dhash/*.c))
$(LIBCLIENT):  $(call obj,$(wildcard client/*.c))
$(LIBBSTORE):  $(call obj,$(wildcard blockstore/*.c)) $(B)/blockstore/memenv.o
$(LIBSFSRO):   $(call obj,$(wildcard sfsro-format/*.c))
$(LIBCFSD):    $(call obj,$(filter-out $(CFSD_SRCS) $(CFSCTL_SRCS),$(wildcard cfsd/*.c)))
$(LIBPUB):     $(call obj,$(filter-out publisher/cfs_%.c,$(wildcard publisher/*.c)))
$(LIBFUSE):    $(call obj,$(filter-out cfs-fuse/cfs_%.c,$(wildcard cfs-fuse/*.c)))
$(LIBTESTBED): $(call obj,tests/testbed/churn.c tests/testbed/delay.c)
# The library chain under everything that talks to the ring, top first
# (a static archive must come before the ones it uses).
RING_LIBS := $(LIBCLIENT) $(LIBDHASH) $(LIBBSTORE) $(LIBCHORD) $(LIBSFSRO) $(LIBCOMMON)

$(B)/%.a:
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(B)/%.o: %.c $(B)/config.mk
	@mkdir -p $(dir $@)
	@[ "$(V)" = 1 ] || echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS_ALL) -c $< -o $@

# The one C++ file, LevelDB's in-memory environment for its C API: no
# exceptions or run-time types, so that it needs nothing from the C++
# library that LevelDB does not bring.
CXXFLAGS_ALL = -std=c++17 $(OPT) -g -Wall -Wextra -Werror $(SAN) -fno-exceptions -fno-rtti -MMD -MP \
               $(EXTRA_CFLAGS)
$(B)/%.o: %.cc $(B)/config.mk
	@mkdir -p $(dir $@)
	@[ "$(V)" = 1 ] || echo "  CXX     $<"
	$(Q)$(CXX) $(CXXFLAGS_ALL) -c $< -o $@

# ---------------------------------------------------------------- programs
# Each program: its objects, then its libraries; one link recipe for all.
# The harness: a ring in one process, the testbed, hostile volumes and
# members, a look into the stores, the wide-area delay line.
PROGRAMS := $(addprefix $(B)/bin/,cfsd cfsctl cfs-publish cfs-fsck cfs-mount cfs-cat cfs-gateway cfs-get)
HARNESS  := $(addprefix $(B)/bin/,cfs-ring cfs-testbed cfs-hostile-vol cfs-hostile cfs-storetool \
              cfs-delayline)
BENCHES  := $(addprefix $(B)/bench/,rpc-bench hash-rate udp-bench code-bench)
UNIT_BIN := $(B)/tests/unit-tests

$(B)/bin/cfsd:            $(call obj,$(CFSD_SRCS)) $(LIBCFSD) $(RING_LIBS)
$(B)/bin/cfsctl:          $(call obj,$(CFSCTL_SRCS)) $(LIBCFSD) $(RING_LIBS)
$(B)/bin/cfs-publish $(B)/bin/cfs-fsck: $(B)/bin/cfs-%: $(B)/publisher/cfs_%.o $(LIBPUB) $(RING_LIBS)
$(addprefix $(B)/bin/cfs-,mount cat gateway get): $(B)/bin/cfs-%: $(B)/cfs-fuse/cfs_%.o $(LIBFUSE) $(RING_LIBS)
$(B)/bin/cfs-testbed:     $(call obj,$(TESTBED_SRCS)) $(LIBTESTBED) $(LIBCFSD) $(RING_LIBS)
$(B)/bin/cfs-ring:        $(call obj,tests/harness/cfs_ring.c) $(LIBCHORD) $(LIBCOMMON)
$(B)/bin/cfs-hostile:     $(call obj,tests/harness/cfs_hostile.c) $(LIBCHORD) $(LIBCOMMON)
$(B)/bin/cfs-hostile-vol: $(call obj,tests/harness/hostile_vol.c) $(LIBSFSRO) $(LIBCOMMON)
$(B)/bin/cfs-storetool:   $(call obj,tests/harness/storetool.c) $(LIBBSTORE) $(LIBCOMMON)
$(B)/bin/cfs-delayline:   $(call obj,tests/harness/cfs_delayline.c) $(LIBTESTBED)
$(B)/bench/rpc-bench:     $(call obj,tests/bench/rpc_bench.c) $(LIBCOMMON)
$(B)/bench/hash-rate:     $(call obj,tests/bench/hash_rate.c) $(LIBCOMMON)
$(B)/bench/udp-bench:     $(call obj,tests/bench/udp_bench.c) $(LIBCOMMON)
$(B)/bench/code-bench:    $(call obj,tests/bench/code_bench.c) $(LIBSFSRO) $(LIBCOMMON)

# The storage engine needs LevelDB; cfsd maps its port; the mounts need FUSE.
$(PROGRAMS) $(B)/bin/cfs-testbed $(B)/bin/cfs-storetool: LINK_LIBS = $(LEVELDB_LIBS) -lpthread
$(B)/bin/cfsd: LINK_LIBS += -lminiupnpc -lnatpmp
$(addprefix $(B)/bin/cfs-,mount cat gateway get): LINK_LIBS += $(FUSE_LIBS)
$(B)/bin/cfs-gateway: LINK_LIBS += $(MHD_LIBS)
$(B)/bin/cfs-delayline: LINK_LIBS = -lnetfilter_queue -lnfnetlink

$(PROGRAMS) $(HARNESS) $(BENCHES) $(UNIT_BIN):
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LINK_LIBS) $(CORE_LIBS)

# mount(8)'s helper for "mount -t cfs" and fstab: the build's runs the
# build's cfs-mount (tools/install.sh installs one for BINDIR's).
MOUNT_HELPER := $(B)/bin/mount.cfs
$(MOUNT_HELPER): cfs-fuse/mount.cfs.in
	@mkdir -p $(dir $@)
	$(Q)sed 's|@BINDIR@|$(abspath $(B)/bin)|' $< >$@.tmp && chmod 0755 $@.tmp && mv $@.tmp $@

all: $(PROGRAMS) $(HARNESS) $(MOUNT_HELPER)

# ---------------------------------------------------------------- tests
# make test runs every check, stage by stage (tools/test.sh), its last lines
# naming what failed; make asan the unit tests under ASan + UBSan (tools/asan.sh).
UNIT_OBJS := $(call obj,$(wildcard tests/unit/test_*.c))
CRITERION_CFLAGS = $(shell pkg-config --cflags criterion 2>/dev/null)
CRITERION_LIBS   = $(shell pkg-config --libs criterion 2>/dev/null || echo -lcriterion)
$(UNIT_OBJS): CFLAGS_ALL += $(CRITERION_CFLAGS)
$(UNIT_OBJS): | deps-test
$(UNIT_BIN): $(UNIT_OBJS) $(LIBTESTBED) $(LIBFUSE) $(LIBCFSD) $(RING_LIBS) | deps-test
$(UNIT_BIN): LINK_LIBS = $(LEVELDB_LIBS) $(CRITERION_LIBS)

deps-test: $(B)/config.mk
	$(Q)$(ENSURE) @test
deps-eval: $(B)/config.mk
	$(Q)$(ENSURE) @eval
unit: $(UNIT_BIN)
	$(Q)$(UNIT_BIN) --jobs 2 $(UNIT_ARGS)
integration: all | deps-test
	$(Q)CFS_BIN=$(BIN) tests/integration/run.sh
test: all $(UNIT_BIN) | deps-eval
	$(Q)MAKE="$(MAKE)" UNIT_ARGS="$(UNIT_ARGS)" tools/test.sh $(B)
asan:
	$(Q)MAKE="$(MAKE)" UNIT_ARGS="$(UNIT_ARGS)" tools/asan.sh

# Line coverage of common/, chord/, dhash/, sfsro-format/ and cfs-fuse/ by
# the unit tests alone (gcov, an -O0 build in build-cov). COVER_FOCUS is the
# code that must be covered — the state machines of the transport, lookups,
# ring maintenance, gets and puts, sync and the walk — failing below COVER_MIN %.
COVER_FOCUS ?= chord/lookup_sm.c chord/fwd_sm.c chord/maint_sm.c dhash/get_sm.c dhash/put_sm.c \
               dhash/refresh_sm.c dhash/locate_sm.c dhash/sync_sm.c sfsro-format/walker.c \
               sfsro-format/walker_read.c common/link.c common/link_reasm.c common/link_valid.c \
               common/rpc.c common/xfer.c common/dgramq.c common/heap.c
COVER_MIN   ?= 85
coverage: | deps-test
	$(Q)$(MAKE) --no-print-directory B=build-cov OPT=-O0 EXTRA_CFLAGS=--coverage \
	  EXTRA_LDFLAGS=--coverage build-cov/tests/unit-tests
	$(Q)tools/coverage.sh build-cov build-cov/tests/unit-tests $(COVER_MIN) $(COVER_FOCUS) \
	  -- common chord dhash sfsro-format cfs-fuse

# ---------------------------------------------------------------- fuzzing
# Each target links what its decoder needs from the archives below (one
# group: their order does not matter) and runs FUZZ_SECONDS from seeds the
# current encoder writes (gen_seeds); any finding fails the target.
FB           := build-fuzz
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,$(FB)/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_LIBS    := $(addprefix $(FB)/lib,testbed.a cfsfuse.a cfsd.a blockstore.a chord.a sfsro.a cfs_common.a)
FUZZER       ?= -fsanitize=fuzzer
fuzz-build: $(B)/config.mk
	$(Q)$(ENSURE) @fuzz
	$(Q)$(MAKE) --no-print-directory B=$(FB) CC=clang CXX=clang++ OPT=-O1 \
	  SAN="-fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer" \
	  $(FUZZ_TARGETS) $(FB)/fuzz/gen_seeds
$(FB)/fuzz/gen_seeds: FUZZER :=
$(FB)/fuzz/%: tests/fuzz/%.c $(FUZZ_LIBS)
	@mkdir -p $(dir $@)
	@echo "  FUZZ    $@"
	$(Q)$(CC) $(filter-out -MMD -MP,$(CFLAGS_ALL)) $(FUZZER) -o $@ $< -Wl,--start-group \
	  $(filter %.a,$^) -Wl,--end-group $(LEVELDB_LIBS) -lpthread $(CORE_LIBS)
fuzz: fuzz-build
	$(Q)tests/fuzz/run.sh $(FB) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# ---------------------------------------------------------------- benchmarks
# Each a script that runs the programs in build/bin (the wide-area ones
# behind the harness's delay line); two run one benchmark program alone.
BENCH_SH := $(addprefix bench-,republish read dhash blocksize ring-publish field wan gateway \
              mount-start coded publish rpc lookup)
.PHONY: $(BENCH_SH) bench-udp bench-code
$(BENCH_SH): bench-%: all $(BENCHES) | deps-test
	$(Q)tests/bench/bench-$*.sh $(BIN)
bench-udp bench-code: bench-%: $(B)/bench/%-bench
	$(Q)$<

# ---------------------------------------------------------------- the rest
# make eval regenerates docs/EVALUATION.md and its plots (docs/eval/*.png)
# from experiments run here (about an hour); make eval-quick runs every
# experiment small (part of make test) and checks that each gives sane
# output. Raw output: build/eval/ and build/eval-quick/.
eval: $(HARNESS) | deps-eval
	$(Q)tests/testbed/eval.sh $(BIN) full $(CURDIR)/$(B)/eval docs/EVALUATION.md docs/eval
eval-quick: $(HARNESS) | deps-eval
	$(Q)tests/testbed/eval.sh $(BIN) quick $(CURDIR)/$(B)/eval-quick
demo: $(PROGRAMS)
	$(Q)CFS_BIN=$(BIN) tools/demo.sh
# tools/install.sh says what goes where (PREFIX, DESTDIR and the other
# directories given to make reach it in its environment).
install: all
	$(Q)tools/install.sh $(PROGRAMS)
# The layering, module prefixes, the machines' includes and the docs.
lint:
	$(Q)tools/lint.sh
clean:
	rm -rf build build-asan build-fuzz build-cov
# The targets as docs/DEVELOPING.md's table lists them: one list, one place.
help:
	@tools/help.sh docs/DEVELOPING.md

-include $(shell find $(B) -name '*.d' 2>/dev/null)
