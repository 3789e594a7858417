# CFS — one non-recursive Makefile.  `make help` lists the targets.
#
# Every target that is about to need a Debian package installs it first
# (tools/ensure-deps.sh): a fresh Debian 12 machine needs nothing but this.

PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
MANDIR      ?= $(PREFIX)/share/man
DESTDIR     ?=
B           ?= build
SHELL       := /bin/bash
V           ?= 0
FUZZ_SECONDS ?= 60

Q           := $(if $(filter 1,$(V)),,@)

# Debian packages, by the targets that need them.
BUILD_PKGS := gcc make pkg-config libuv1-dev libsodium-dev libmsgpack-dev \
              libfuse3-dev fuse3 libleveldb-dev libminiupnpc-dev libnatpmp-dev \
              libnetfilter-queue-dev libisal-dev libmicrohttpd-dev
TEST_PKGS  := libcriterion-dev iproute2 procps python3 bc systemd man-db iptables ethtool \
              miniupnpd nftables python3-prometheus-client curl chromium
FUZZ_PKGS  := clang libclang-rt-14-dev
EVAL_PKGS  := gnuplot-nox python3
export CFS_APT_STAMP := $(CURDIR)/$(B)/.apt-updated
ENSURE := tools/ensure-deps.sh

# Goals that need neither a compiler nor any package.
NOCONFIG_GOALS := clean help lint
ifneq ($(MAKECMDGOALS),)
ifeq ($(filter-out $(NOCONFIG_GOALS),$(MAKECMDGOALS)),)
SKIP_CONFIG := 1
endif
endif

ifndef SKIP_CONFIG
include $(B)/config.mk
endif

# pkg-config output, recorded once after the packages are in place.  LevelDB
# ships no .pc file on Debian 12, hence the fallback.
$(B)/config.mk: Makefile $(ENSURE)
	$(Q)$(ENSURE) $(BUILD_PKGS)
	$(Q)mkdir -p $(B)
	$(Q){ for m in UV:libuv SODIUM:libsodium MSGPACK:msgpack FUSE:fuse3 MHD:libmicrohttpd; do \
	    echo "$${m%%:*}_CFLAGS := $$(pkg-config --cflags $${m#*:})"; \
	    echo "$${m%%:*}_LIBS := $$(pkg-config --libs $${m#*:})"; \
	  done; echo "LEVELDB_LIBS := $$(pkg-config --libs leveldb 2>/dev/null || echo -lleveldb)"; \
	} > $@.tmp && mv $@.tmp $@

CC      ?= gcc
OPT     ?= -O2
SAN     ?=
WARN    := -Wall -Wextra -Werror -Wshadow -Wmissing-prototypes \
           -Wstrict-prototypes -Wwrite-strings -Wno-unused-parameter
CFLAGS_ALL = -std=gnu11 $(OPT) -g $(WARN) $(SAN) -I. -MMD -MP \
           $(UV_CFLAGS) $(SODIUM_CFLAGS) $(MSGPACK_CFLAGS) $(FUSE_CFLAGS) $(MHD_CFLAGS) $(EXTRA_CFLAGS)
LDFLAGS_ALL = $(SAN) $(EXTRA_LDFLAGS)
CORE_LIBS = $(UV_LIBS) $(SODIUM_LIBS) $(MSGPACK_LIBS) -lisal -lm

# ---------------------------------------------------------------- modules
# One static archive per folder; dependencies point down:
#   cfsd → dhash → chord → common;  dhash → sfsro-format → common
#   dhash → blockstore → common (the storage engine)
#   client → dhash, chord (how a program reaches the ring)
#   publisher → client, sfsro-format;  cfs-fuse → client, sfsro-format;
#   cfsd's control tools (cfsctl) → client
COMMON_SRCS := $(wildcard common/*.c)
SFSRO_SRCS  := $(wildcard sfsro-format/*.c)
CHORD_SRCS  := $(wildcard chord/*.c)
DHASH_SRCS  := $(wildcard dhash/*.c)
CLIENT_SRCS := $(wildcard client/*.c)
BSTORE_SRCS := $(wildcard blockstore/*.c)
# The programs' own files; the rest of their folder is its library.
CFSD_SRCS   := cfsd/cfsd.c cfsd/config.c cfsd/startup.c cfsd/serve.c cfsd/peers.c cfsd/portmap.c
CFSCTL_SRCS := cfsd/cfsctl.c cfsd/lookup_cmd.c cfsd/block_cmd.c cfsd/history_cmd.c
CFSD_LIB_SRCS := $(filter-out $(CFSD_SRCS) $(CFSCTL_SRCS),$(wildcard cfsd/*.c))
PUB_LIB_SRCS  := $(filter-out publisher/cfs_%.c,$(wildcard publisher/*.c))
FUSE_LIB_SRCS := $(filter-out cfs-fuse/cfs_%.c,$(wildcard cfs-fuse/*.c))
# The evaluation testbed (tests/testbed/): its churn schedules are a library
# so that the unit tests and the fuzzer reach them.
TESTBED_LIB_SRCS := tests/testbed/churn.c tests/testbed/delay.c
TESTBED_SRCS := tests/testbed/cfs_testbed.c tests/testbed/nodes.c tests/testbed/workload.c

obj = $(patsubst %.c,$(B)/%.o,$(1))

LIBCOMMON := $(B)/libcfs_common.a
LIBCFSD   := $(B)/libcfsd.a
LIBCHORD  := $(B)/libchord.a
LIBDHASH  := $(B)/libdhash.a
LIBCLIENT := $(B)/libclient.a
LIBBSTORE := $(B)/libblockstore.a
LIBSFSRO  := $(B)/libsfsro.a
LIBPUB    := $(B)/libpublisher.a
LIBFUSE   := $(B)/libcfsfuse.a
LIBTESTBED := $(B)/libtestbed.a
# The library chain under everything that talks to the ring, top first
# (a static archive must come before the ones it uses).
RING_LIBS := $(LIBCLIENT) $(LIBDHASH) $(LIBBSTORE) $(LIBCHORD) $(LIBSFSRO) $(LIBCOMMON)

$(LIBCOMMON): $(call obj,$(COMMON_SRCS))
$(LIBCFSD): $(call obj,$(CFSD_LIB_SRCS))
$(LIBCHORD): $(call obj,$(CHORD_SRCS))
$(LIBDHASH): $(call obj,$(DHASH_SRCS))
$(LIBCLIENT): $(call obj,$(CLIENT_SRCS))
$(LIBBSTORE): $(call obj,$(BSTORE_SRCS))
$(LIBSFSRO): $(call obj,$(SFSRO_SRCS))
$(LIBPUB): $(call obj,$(PUB_LIB_SRCS))
$(LIBFUSE): $(call obj,$(FUSE_LIB_SRCS))
$(LIBTESTBED): $(call obj,$(TESTBED_LIB_SRCS))

$(B)/%.a:
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(B)/%.o: %.c $(B)/config.mk
	@mkdir -p $(dir $@)
	@[ "$(V)" = 1 ] || echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS_ALL) -c $< -o $@

# ---------------------------------------------------------------- programs
# Each program: its objects, then its libraries; one link recipe for all.
PROGRAMS := $(B)/bin/cfsd $(B)/bin/cfsctl $(B)/bin/cfs-publish $(B)/bin/cfs-fsck $(B)/bin/cfs-mount \
            $(B)/bin/cfs-cat $(B)/bin/cfs-gateway $(B)/bin/cfs-get
# The test harness: a ring in one process, hostile volumes and members,
# a look inside the storage engine's stores, the wide-area delay line.
HARNESS  := $(addprefix $(B)/bin/,cfs-ring cfs-testbed cfs-hostile-vol cfs-hostile cfs-storetool \
              cfs-delayline)
BENCHES  := $(addprefix $(B)/bench/,rpc-bench hash-rate udp-bench code-bench)
UNIT_BIN := $(B)/tests/unit-tests

$(B)/bin/cfsd:            $(call obj,$(CFSD_SRCS)) $(LIBCFSD) $(RING_LIBS)
$(B)/bin/cfsctl:          $(call obj,$(CFSCTL_SRCS)) $(LIBCFSD) $(RING_LIBS)
$(B)/bin/cfs-publish:     $(call obj,publisher/cfs_publish.c) $(LIBPUB) $(RING_LIBS)
$(B)/bin/cfs-fsck:        $(call obj,publisher/cfs_fsck.c) $(LIBPUB) $(RING_LIBS)
$(B)/bin/cfs-mount:       $(call obj,cfs-fuse/cfs_mount.c) $(LIBFUSE) $(RING_LIBS)
$(B)/bin/cfs-cat:         $(call obj,cfs-fuse/cfs_cat.c) $(LIBFUSE) $(RING_LIBS)
$(B)/bin/cfs-gateway:     $(call obj,cfs-fuse/cfs_gateway.c) $(LIBFUSE) $(RING_LIBS)
$(B)/bin/cfs-get:         $(call obj,cfs-fuse/cfs_get.c) $(LIBFUSE) $(RING_LIBS)
$(B)/bin/cfs-testbed:     $(call obj,$(TESTBED_SRCS)) $(LIBTESTBED) $(RING_LIBS)
$(B)/bin/cfs-ring:        $(call obj,tests/harness/cfs_ring.c) $(LIBCHORD) $(LIBCOMMON)
$(B)/bin/cfs-hostile:     $(call obj,tests/harness/cfs_hostile.c) $(LIBCHORD) $(LIBCOMMON)
$(B)/bin/cfs-hostile-vol: $(call obj,tests/harness/hostile_vol.c) $(LIBSFSRO) $(LIBCOMMON)
$(B)/bin/cfs-storetool:   $(call obj,tests/harness/storetool.c) $(LIBBSTORE) $(LIBCOMMON)
$(B)/bin/cfs-delayline:   $(call obj,tests/harness/cfs_delayline.c) $(LIBTESTBED)
$(B)/bench/rpc-bench:     $(call obj,tests/bench/rpc_bench.c) $(LIBCOMMON)
$(B)/bench/hash-rate:     $(call obj,tests/bench/hash_rate.c) $(LIBCOMMON)
# The UDP socket layer alone (common/udp.c): GSO/GRO, sendmmsg, plain.
$(B)/bench/udp-bench:     $(call obj,tests/bench/udp_bench.c) $(LIBCOMMON)
$(B)/bench/code-bench:    $(call obj,tests/bench/code_bench.c) $(LIBSFSRO) $(LIBCOMMON)

# The storage engine needs LevelDB; cfsd maps its port; the mounts need FUSE.
$(PROGRAMS) $(B)/bin/cfs-testbed $(B)/bin/cfs-storetool: LINK_LIBS = $(LEVELDB_LIBS) -lpthread
$(B)/bin/cfsd: LINK_LIBS += -lminiupnpc -lnatpmp
$(B)/bin/cfs-mount $(B)/bin/cfs-cat $(B)/bin/cfs-gateway $(B)/bin/cfs-get: LINK_LIBS += $(FUSE_LIBS)
$(B)/bin/cfs-gateway: LINK_LIBS += $(MHD_LIBS)
$(B)/bin/cfs-delayline: LINK_LIBS = -lnetfilter_queue -lnfnetlink

$(PROGRAMS) $(HARNESS) $(BENCHES) $(UNIT_BIN):
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LINK_LIBS) $(CORE_LIBS)

.DEFAULT_GOAL := all
.PHONY: all
all: $(PROGRAMS) $(HARNESS)

# ---------------------------------------------------------------- tests
UNIT_OBJS := $(call obj,$(wildcard tests/unit/test_*.c))
CRITERION_CFLAGS = $(shell pkg-config --cflags criterion 2>/dev/null)
CRITERION_LIBS   = $(shell pkg-config --libs criterion 2>/dev/null || echo -lcriterion)

$(UNIT_OBJS): CFLAGS_ALL += $(CRITERION_CFLAGS)
$(UNIT_OBJS): | deps-test
$(UNIT_BIN): $(UNIT_OBJS) $(LIBTESTBED) $(LIBFUSE) $(LIBCFSD) $(RING_LIBS) | deps-test
$(UNIT_BIN): LINK_LIBS = $(LEVELDB_LIBS) $(CRITERION_LIBS)

.PHONY: deps-test unit integration test
deps-test: $(B)/config.mk
	$(Q)$(ENSURE) $(TEST_PKGS)

# Criterion runs each test in its own process; --jobs keeps the 2 cores busy.
unit: $(UNIT_BIN)
	$(Q)$(UNIT_BIN) --jobs 2 $(UNIT_ARGS)

integration: $(PROGRAMS) $(HARNESS) | deps-test
	$(Q)CFS_BIN=$(CURDIR)/$(B)/bin tests/integration/run.sh

# Layering lint, Criterion's unit tests (plain, under ASan + UBSan, and
# with line coverage), the shell-driven integration tests and the quick
# evaluation; the last lines name every stage that failed (and the
# integration tests that did), for a reader of only the tail of the output.
test: $(PROGRAMS) $(HARNESS) $(UNIT_BIN) | deps-eval
	$(Q)bad=; it=$(B)/integration.out; rm -f $$it.tails; \
	tools/lint.sh || bad="$$bad lint"; \
	$(UNIT_BIN) --jobs 2 $(UNIT_ARGS) || bad="$$bad unit"; \
	$(MAKE) --no-print-directory asan || bad="$$bad asan"; \
	$(MAKE) --no-print-directory coverage || bad="$$bad coverage"; \
	CFS_FAIL_TAILS=$$it.tails CFS_BIN=$(CURDIR)/$(B)/bin tests/integration/run.sh | tee $$it; \
	[ $${PIPESTATUS[0]} -eq 0 ] || bad="$$bad integration"; \
	tests/testbed/eval.sh $(CURDIR)/$(B)/bin quick $(CURDIR)/$(B)/eval-quick || bad="$$bad eval-quick"; \
	if [ -s $$it.tails ]; then sed "s/^/make test: /" $$it.tails; fi; \
	tail -n 2 $$it | sed 's/^/make test: /'; \
	if [ -n "$$bad" ]; then echo "make test: FAILED:$$bad"; exit 1; fi; \
	echo "make test: every stage passed"

# AddressSanitizer + UndefinedBehaviorSanitizer build of the unit tests.
# Criterion does not count a sanitizer report in a test's worker as a
# failure, so the log is checked too: any report fails the target.
# libcriterion's runner leaks one object of its own; tests/lsan.supp
# suppresses leaks whose allocating caller is in libcriterion, and
# malloc_context_size=2 keeps that to the direct caller (a test's own leak
# has the test, not libcriterion, there). For full stacks when debugging:
#   ASAN_OPTIONS=malloc_context_size=30 build-asan/tests/unit-tests
.PHONY: asan
asan:
	$(Q)$(MAKE) --no-print-directory B=build-asan OPT=-O1 \
	  SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  build-asan/tests/unit-tests
	$(Q)set -o pipefail; ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:malloc_context_size=2 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  build-asan/tests/unit-tests --jobs 2 $(UNIT_ARGS) 2>&1 | tee build-asan/unit.log
	$(Q)if grep -q -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' build-asan/unit.log; then \
	  echo "asan: sanitizer reports above (build-asan/unit.log)"; exit 1; fi; \
	  echo "asan: no sanitizer reports"

# Line coverage of chord/, dhash/, sfsro-format/ and cfs-fuse/ by the unit
# tests alone (gcov, an -O0 build in build-cov). COVER_FOCUS is the code that
# must be covered — the lookup, ring maintenance, get/put, sync and walk
# state machines — and the target fails if that set falls below COVER_MIN percent.
COVER_FOCUS ?= chord/lookup_sm.c chord/fwd_sm.c chord/maint_sm.c dhash/get_sm.c dhash/put_sm.c \
               dhash/refresh_sm.c dhash/locate_sm.c dhash/sync_sm.c sfsro-format/walker.c \
               sfsro-format/walker_read.c
COVER_MIN   ?= 85
.PHONY: coverage
coverage: | deps-test
	$(Q)$(MAKE) --no-print-directory B=build-cov OPT=-O0 EXTRA_CFLAGS=--coverage \
	  EXTRA_LDFLAGS=--coverage build-cov/tests/unit-tests
	$(Q)tools/coverage.sh build-cov build-cov/tests/unit-tests $(COVER_MIN) $(COVER_FOCUS) \
	  -- chord dhash sfsro-format cfs-fuse

# ---------------------------------------------------------------- fuzzing
# A target links the library that holds its decoder, then common; most
# decoders are in sfsro-format or common.
FB           := build-fuzz
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,$(FB)/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_OTHER   := $(addprefix $(FB)/fuzz/fuzz_,churn delay chord_mode contacts denylist bstore gwhttp)

.PHONY: fuzz fuzz-build
fuzz-build: $(B)/config.mk
	$(Q)$(ENSURE) $(FUZZ_PKGS)
	$(Q)$(MAKE) --no-print-directory B=$(FB) CC=clang OPT=-O1 \
	  SAN="-fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer" \
	  $(FUZZ_TARGETS) $(FB)/fuzz/gen-seeds

$(FB)/fuzz/fuzz_churn $(FB)/fuzz/fuzz_delay: $(FB)/libtestbed.a $(FB)/libcfs_common.a
$(FB)/fuzz/fuzz_chord_mode $(FB)/fuzz/fuzz_contacts: $(FB)/libchord.a $(FB)/libcfs_common.a
$(FB)/fuzz/fuzz_denylist: $(FB)/libcfsd.a $(FB)/libcfs_common.a
$(FB)/fuzz/fuzz_bstore: $(FB)/libblockstore.a $(FB)/libcfs_common.a
$(FB)/fuzz/fuzz_bstore: FUZZ_LINK = $(LEVELDB_LIBS) -lpthread
# cfs-gateway's decoders of URLs and headers: their one file, pure.
$(FB)/fuzz/fuzz_gwhttp: cfs-fuse/gwhttp.c $(FB)/libcfs_common.a
$(filter-out $(FUZZ_OTHER),$(FUZZ_TARGETS)): $(FB)/libsfsro.a $(FB)/libcfs_common.a

$(FB)/fuzz/%: tests/fuzz/%.c
	@mkdir -p $(dir $@)
	@echo "  FUZZ    $@"
	$(Q)$(CC) $(filter-out -MMD -MP,$(CFLAGS_ALL)) -fsanitize=fuzzer -o $@ $(filter %.c %.a,$^) \
	  $(FUZZ_LINK) $(CORE_LIBS)

# Writes the seeds from the current encoder: no fuzzer in it.
$(FB)/fuzz/gen-seeds: tests/fuzz/gen_seeds.c $(FB)/libsfsro.a $(FB)/libcfs_common.a
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(filter-out -MMD -MP,$(CFLAGS_ALL)) -o $@ $(filter %.c %.a,$^) $(CORE_LIBS)

# Each target runs FUZZ_SECONDS (default 60), starting from seeds the
# current encoder writes; any finding fails the target.
fuzz: fuzz-build
	$(Q)tests/fuzz/run.sh $(FB) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# ---------------------------------------------------------------- benchmarks
# The ring benchmarks: each a script that runs the programs in build/bin.
BENCH_RING := $(addprefix bench-,republish read dhash blocksize ring-publish field wan gateway \
                mount-start)
.PHONY: $(BENCH_RING) bench-udp bench-code bench-coded bench-publish bench-rpc bench-lookup
$(BENCH_RING): bench-%: $(PROGRAMS) | deps-test
	$(Q)tests/bench/bench-$*.sh $(CURDIR)/$(B)/bin
# A reader across continents (bench-wan) runs behind the harness's delay line.
bench-wan: $(HARNESS)

bench-udp: $(B)/bench/udp-bench
	$(Q)$<

bench-code: $(B)/bench/code-bench
	$(Q)$<

# Coded volumes beside replicated ones: storage, reads, the coding, and
# (root) gets across continents behind the harness's delay line.
bench-coded: $(PROGRAMS) $(HARNESS) $(B)/bench/code-bench | deps-test
	$(Q)tests/bench/bench-coded.sh $(CURDIR)/$(B)/bin $(CURDIR)/$(B)/bench/code-bench

bench-publish: $(PROGRAMS) $(B)/bench/hash-rate
	$(Q)tests/bench/bench-publish.sh $(CURDIR)/$(B)/bin $(B)/bench/hash-rate

bench-rpc: $(B)/bench/rpc-bench
	$(Q)tests/bench/bench-rpc.sh $<

bench-lookup: $(HARNESS)
	$(Q)tests/bench/bench-lookup.sh $(CURDIR)/$(B)/bin/cfs-ring

# ---------------------------------------------------------------- evaluation
# make eval regenerates docs/EVALUATION.md and its plots (docs/eval/*.png)
# from experiments run here (about an hour); make eval-quick runs every
# experiment small (under ten minutes, part of make test) and checks that
# each gives sane output. Raw output: build/eval/ and build/eval-quick/.
.PHONY: eval eval-quick deps-eval
deps-eval: $(B)/config.mk
	$(Q)$(ENSURE) $(EVAL_PKGS)

eval: $(HARNESS) | deps-eval
	$(Q)tests/testbed/eval.sh $(CURDIR)/$(B)/bin full $(CURDIR)/$(B)/eval docs/EVALUATION.md docs/eval

eval-quick: $(HARNESS) | deps-eval
	$(Q)tests/testbed/eval.sh $(CURDIR)/$(B)/bin quick $(CURDIR)/$(B)/eval-quick

# ---------------------------------------------------------------- demo
.PHONY: demo
demo: $(PROGRAMS)
	$(Q)CFS_BIN=$(CURDIR)/$(B)/bin tools/demo.sh

# ---------------------------------------------------------------- install
# tools/install.sh says what goes where; DESTDIR (a package or a test)
# keeps it from touching anything outside.
SYSCONFDIR  ?= /etc
UNITDIR     ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= /usr/lib/sysusers.d
.PHONY: install
install: $(PROGRAMS) $(HARNESS)
	$(Q)DESTDIR=$(DESTDIR) BINDIR=$(BINDIR) MANDIR=$(MANDIR) SYSCONFDIR=$(SYSCONFDIR) \
	  UNITDIR=$(UNITDIR) SYSUSERSDIR=$(SYSUSERSDIR) tools/install.sh $(PROGRAMS)

# mount(8)'s helper for "mount -t cfs" and fstab (cfs-fuse/mount.cfs.in):
# it runs cfs-mount from BINDIR, the build's copy the build's cfs-mount.
# mount(8) looks for helpers in /sbin only, whatever PREFIX is.
MOUNT_HELPER_DIR ?= /sbin
MOUNT_HELPER := $(B)/bin/mount.cfs
all integration test: $(MOUNT_HELPER)
$(MOUNT_HELPER): cfs-fuse/mount.cfs.in
	@mkdir -p $(dir $@)
	$(Q)sed 's|@BINDIR@|$(abspath $(B)/bin)|' $< >$@.tmp && chmod 0755 $@.tmp && mv $@.tmp $@
.PHONY: install-mount
install: install-mount
install-mount: $(MOUNT_HELPER)
	install -d $(DESTDIR)$(MOUNT_HELPER_DIR) $(DESTDIR)$(MANDIR)/man1
	sed 's|@BINDIR@|$(BINDIR)|' cfs-fuse/mount.cfs.in >$(DESTDIR)$(MOUNT_HELPER_DIR)/mount.cfs
	chmod 0755 $(DESTDIR)$(MOUNT_HELPER_DIR)/mount.cfs
	install -m 0644 docs/man/cfs-mount.1 docs/man/cfs-cat.1 docs/man/cfs-get.1 $(DESTDIR)$(MANDIR)/man1/

# ---------------------------------------------------------------- hygiene
# Layering in miniature: lower folders never include upper ones, and the
# libraries that belong to one module stay in it.
.PHONY: lint
lint:
	$(Q)tools/lint.sh

.PHONY: clean
clean:
	rm -rf build build-asan build-fuzz build-cov

# The targets as docs/DEVELOPING.md's table lists them: one list, one place.
.PHONY: help
help:
	@awk -F ' [|] ' '/^[|] `make/ { gsub(/`|^[|] | [|]$$/, ""); print $$1; n = split($$2, w, " "); \
	  l = "   "; for (i = 1; i <= n; i++) { if (length(l) + length(w[i]) > 78) { print l; l = "   " } \
	  l = l " " w[i] } print l }' docs/DEVELOPING.md

-include $(shell find $(B) -name '*.d' 2>/dev/null)
