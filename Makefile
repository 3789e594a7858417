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

ifeq ($(V),1)
Q :=
else
Q := @
endif

# Debian packages, by the targets that need them.
BUILD_PKGS := gcc make pkg-config libuv1-dev libsodium-dev libmsgpack-dev \
              libfuse3-dev fuse3 libleveldb-dev libminiupnpc-dev libnatpmp-dev \
              libnetfilter-queue-dev
TEST_PKGS  := libcriterion-dev iproute2 procps python3 bc systemd man-db iptables ethtool
TEST_PKGS  += miniupnpd nftables
TEST_PKGS  += python3-prometheus-client curl
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
	$(Q){ \
	  echo "UV_CFLAGS := $$(pkg-config --cflags libuv)"; \
	  echo "UV_LIBS := $$(pkg-config --libs libuv)"; \
	  echo "SODIUM_CFLAGS := $$(pkg-config --cflags libsodium)"; \
	  echo "SODIUM_LIBS := $$(pkg-config --libs libsodium)"; \
	  echo "MSGPACK_CFLAGS := $$(pkg-config --cflags msgpack)"; \
	  echo "MSGPACK_LIBS := $$(pkg-config --libs msgpack)"; \
	  echo "FUSE_CFLAGS := $$(pkg-config --cflags fuse3)"; \
	  echo "FUSE_LIBS := $$(pkg-config --libs fuse3)"; \
	  echo "LEVELDB_LIBS := $$(pkg-config --libs leveldb 2>/dev/null || echo -lleveldb)"; \
	} > $@.tmp && mv $@.tmp $@

CC      ?= gcc
OPT     ?= -O2
SAN     ?=
WARN    := -Wall -Wextra -Werror -Wshadow -Wmissing-prototypes \
           -Wstrict-prototypes -Wwrite-strings -Wno-unused-parameter
CFLAGS_ALL = -std=gnu11 $(OPT) -g $(WARN) $(SAN) -I. -MMD -MP \
           $(UV_CFLAGS) $(SODIUM_CFLAGS) $(MSGPACK_CFLAGS) $(FUSE_CFLAGS) $(EXTRA_CFLAGS)
LDFLAGS_ALL = $(SAN) $(EXTRA_LDFLAGS)
CORE_LIBS = $(UV_LIBS) $(SODIUM_LIBS) $(MSGPACK_LIBS) -lm

# ---------------------------------------------------------------- modules
# One static archive per folder; dependencies point down:
#   cfsd → dhash → chord → common;  dhash → sfsro-format → common
#   dhash → blockstore → common (the storage engine)
#   client → dhash, chord (how a program reaches the ring)
#   publisher → client, sfsro-format;  cfs-fuse → client, sfsro-format;
#   cfsd's control tools (cfsctl) → client
COMMON_SRCS := $(wildcard common/*.c)
SFSRO_SRCS  := $(wildcard sfsro-format/*.c)
PUB_LIB_SRCS := publisher/keys.c publisher/dirstore.c publisher/cfsdsink.c publisher/publish.c \
                publisher/blocks.c publisher/replicas.c \
                publisher/fsck.c
PUB_LIB_SRCS += publisher/push.c
CHORD_SRCS  := $(wildcard chord/*.c)
DHASH_SRCS  := $(wildcard dhash/*.c)
CLIENT_SRCS := $(wildcard client/*.c)
BSTORE_SRCS := $(wildcard blockstore/*.c)
CFSD_LIB_SRCS := cfsd/ctl.c cfsd/pin.c cfsd/pin_walk.c cfsd/denylist.c cfsd/deny_walk.c
CFSD_LIB_SRCS += cfsd/metrics.c
CFSD_SRCS   := cfsd/cfsd.c cfsd/serve.c cfsd/peers.c cfsd/portmap.c
CFSCTL_SRCS := cfsd/cfsctl.c cfsd/lookup_cmd.c cfsd/block_cmd.c
FUSE_LIB_SRCS := cfs-fuse/blocks.c cfs-fuse/nodes.c cfs-fuse/walk.c cfs-fuse/ops.c cfs-fuse/root.c
FUSE_LIB_SRCS += cfs-fuse/localsrc.c
FUSE_LIB_SRCS += cfs-fuse/census.c cfs-fuse/logsink.c cfs-fuse/dirpf.c cfs-fuse/pipe.c
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

PROGRAMS := $(B)/bin/cfsd $(B)/bin/cfsctl $(B)/bin/cfs-publish $(B)/bin/cfs-fsck $(B)/bin/cfs-mount \
            $(B)/bin/cfs-cat
HARNESS  := $(B)/bin/cfs-ring $(B)/bin/cfs-testbed $(B)/bin/cfs-hostile-vol
# A lying ring member for t_hostile_member, and a look inside the
# storage engine's stores: tests only.
HARNESS  += $(B)/bin/cfs-hostile $(B)/bin/cfs-storetool
# The wide-area delay line (a netfilter queue in a router namespace).
HARNESS  += $(B)/bin/cfs-delayline

$(B)/bin/cfsd: $(call obj,$(CFSD_SRCS)) $(LIBCFSD) $(LIBCLIENT) $(LIBDHASH) $(LIBBSTORE) $(LIBCHORD) $(LIBSFSRO) $(LIBCOMMON)
$(B)/bin/cfsctl: $(call obj,$(CFSCTL_SRCS)) $(LIBCFSD) $(LIBCLIENT) $(LIBDHASH) $(LIBBSTORE) $(LIBCHORD) $(LIBSFSRO) $(LIBCOMMON)
$(B)/bin/cfs-ring: $(call obj,tests/harness/cfs_ring.c) $(LIBCHORD) $(LIBCOMMON)
# A hand-made hostile volume for t_hostile_volume.
$(B)/bin/cfs-hostile-vol: $(call obj,tests/harness/hostile_vol.c) $(LIBSFSRO) $(LIBCOMMON)
$(B)/bin/cfs-storetool: $(call obj,tests/harness/storetool.c) $(LIBBSTORE) $(LIBCOMMON)
$(B)/bin/cfs-storetool: LINK_LIBS = $(LEVELDB_LIBS) -lpthread
$(B)/bin/cfs-hostile: $(call obj,tests/harness/cfs_hostile.c) $(LIBCHORD) $(LIBCOMMON)
$(B)/bin/cfs-delayline: $(call obj,tests/harness/cfs_delayline.c) $(LIBTESTBED)
$(B)/bin/cfs-delayline: LINK_LIBS = -lnetfilter_queue -lnfnetlink
$(B)/bin/cfs-testbed: $(call obj,$(TESTBED_SRCS)) $(LIBTESTBED) $(LIBDHASH) $(LIBBSTORE) $(LIBCHORD) $(LIBSFSRO) $(LIBCOMMON)
$(B)/bin/cfs-publish: $(call obj,publisher/cfs_publish.c) $(LIBPUB) $(LIBCLIENT) $(LIBDHASH) $(LIBBSTORE) $(LIBCHORD) $(LIBSFSRO) $(LIBCOMMON)
$(B)/bin/cfs-fsck: $(call obj,publisher/cfs_fsck.c) $(LIBPUB) $(LIBCLIENT) $(LIBDHASH) $(LIBBSTORE) $(LIBCHORD) $(LIBSFSRO) $(LIBCOMMON)
$(B)/bin/cfs-mount: $(call obj,cfs-fuse/cfs_mount.c) $(LIBFUSE) $(LIBCLIENT) $(LIBDHASH) $(LIBBSTORE) $(LIBCHORD) $(LIBSFSRO) $(LIBCOMMON)
$(B)/bin/cfsd $(B)/bin/cfsctl $(B)/bin/cfs-testbed: LINK_LIBS = $(LEVELDB_LIBS) -lpthread
$(B)/bin/cfsd: LINK_LIBS += -lminiupnpc -lnatpmp
$(B)/bin/cfs-publish $(B)/bin/cfs-fsck: LINK_LIBS = $(LEVELDB_LIBS) -lpthread
$(B)/bin/cfs-cat: $(call obj,cfs-fuse/cfs_cat.c) $(LIBFUSE) $(LIBCLIENT) $(LIBDHASH) $(LIBBSTORE) $(LIBCHORD) $(LIBSFSRO) $(LIBCOMMON)
$(B)/bin/cfs-mount $(B)/bin/cfs-cat: LINK_LIBS = $(FUSE_LIBS) $(LEVELDB_LIBS) -lpthread
$(PROGRAMS) $(HARNESS):
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LINK_LIBS) $(CORE_LIBS)

.DEFAULT_GOAL := all
.PHONY: all
all: $(PROGRAMS) $(HARNESS)

# ---------------------------------------------------------------- tests
UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BIN   := $(B)/tests/unit-tests
CRITERION_CFLAGS = $(shell pkg-config --cflags criterion 2>/dev/null)
CRITERION_LIBS   = $(shell pkg-config --libs criterion 2>/dev/null || echo -lcriterion)

$(B)/tests/unit/%.o: tests/unit/%.c $(B)/config.mk | deps-test
	@mkdir -p $(dir $@)
	@[ "$(V)" = 1 ] || echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS_ALL) $(CRITERION_CFLAGS) -c $< -o $@

$(UNIT_BIN): $(call obj,$(UNIT_SRCS)) $(LIBTESTBED) $(LIBFUSE) $(LIBCFSD) $(LIBCLIENT) $(LIBDHASH) $(LIBBSTORE) $(LIBCHORD) $(LIBSFSRO) $(LIBCOMMON) | deps-test
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $(filter %.o %.a,$^) $(LEVELDB_LIBS) $(CORE_LIBS) $(CRITERION_LIBS)

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
# must be covered — the lookup, get/put and walk state machines —
# and the target fails if that set falls below COVER_MIN percent.
COVER_FOCUS ?= chord/lookup_sm.c chord/fwd_sm.c dhash/get_sm.c dhash/put_sm.c dhash/refresh_sm.c \
               dhash/locate_sm.c sfsro-format/walker.c sfsro-format/walker_read.c
COVER_MIN   ?= 85
.PHONY: coverage
coverage: | deps-test
	$(Q)$(MAKE) --no-print-directory B=build-cov OPT=-O0 EXTRA_CFLAGS=--coverage \
	  EXTRA_LDFLAGS=--coverage build-cov/tests/unit-tests
	$(Q)tools/coverage.sh build-cov build-cov/tests/unit-tests $(COVER_MIN) $(COVER_FOCUS) \
	  -- chord dhash sfsro-format cfs-fuse

# ---------------------------------------------------------------- fuzzing
FUZZ_SRCS    := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,build-fuzz/fuzz/%,$(FUZZ_SRCS))

.PHONY: fuzz fuzz-build
fuzz-build: $(B)/config.mk
	$(Q)$(ENSURE) $(FUZZ_PKGS)
	$(Q)$(MAKE) --no-print-directory B=build-fuzz CC=clang OPT=-O1 \
	  SAN="-fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer" \
	  $(FUZZ_TARGETS) build-fuzz/fuzz/gen-seeds

# The churn schedule and delay-matrix parsers live in the testbed's library.
build-fuzz/fuzz/fuzz_churn build-fuzz/fuzz/fuzz_delay: build-fuzz/fuzz/fuzz_%: tests/fuzz/fuzz_%.c build-fuzz/libtestbed.a build-fuzz/libcfs_common.a
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(filter-out -MMD -MP,$(CFLAGS_ALL)) -fsanitize=fuzzer -o $@ $(filter %.c %.a,$^) $(CORE_LIBS)

# The lookup-mode and saved-contacts parsers live in the chord library.
build-fuzz/fuzz/fuzz_chord_mode build-fuzz/fuzz/fuzz_contacts: build-fuzz/fuzz/fuzz_%: tests/fuzz/fuzz_%.c build-fuzz/libchord.a build-fuzz/libcfs_common.a
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(filter-out -MMD -MP,$(CFLAGS_ALL)) -fsanitize=fuzzer -o $@ $(filter %.c %.a,$^) $(CORE_LIBS)

# The daemon's denylist file parser lives in its library.
build-fuzz/fuzz/fuzz_denylist: tests/fuzz/fuzz_denylist.c build-fuzz/libcfsd.a build-fuzz/libcfs_common.a
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(filter-out -MMD -MP,$(CFLAGS_ALL)) -fsanitize=fuzzer -o $@ $(filter %.c %.a,$^) $(CORE_LIBS)

# The storage engine's decoders and pack scanner need its library and LevelDB.
build-fuzz/fuzz/fuzz_bstore: tests/fuzz/fuzz_bstore.c build-fuzz/libblockstore.a build-fuzz/libcfs_common.a
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(filter-out -MMD -MP,$(CFLAGS_ALL)) -fsanitize=fuzzer -o $@ $(filter %.c %.a,$^) $(LEVELDB_LIBS) -lpthread $(CORE_LIBS)

build-fuzz/fuzz/fuzz_%: tests/fuzz/fuzz_%.c build-fuzz/libsfsro.a build-fuzz/libcfs_common.a
	@mkdir -p $(dir $@)
	@echo "  FUZZ    $@"
	$(Q)$(CC) $(filter-out -MMD -MP,$(CFLAGS_ALL)) -fsanitize=fuzzer -o $@ $(filter %.c %.a,$^) $(CORE_LIBS)

build-fuzz/fuzz/gen-seeds: tests/fuzz/gen_seeds.c build-fuzz/libsfsro.a build-fuzz/libcfs_common.a
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(filter-out -MMD -MP,$(CFLAGS_ALL)) -o $@ $(filter %.c %.a,$^) $(CORE_LIBS)

# Each target runs FUZZ_SECONDS (default 60), starting from seeds the
# current encoder writes; any finding fails the target.
fuzz: fuzz-build
	$(Q)mkdir -p build-fuzz/seeds && build-fuzz/fuzz/gen-seeds build-fuzz/seeds/fuzz_msg build-fuzz/seeds/fuzz_name build-fuzz/seeds/fuzz_block \
	  build-fuzz/seeds/fuzz_denylist
	$(Q)for f in $(FUZZ_TARGETS); do \
	  n=$$(basename $$f); mkdir -p build-fuzz/corpus/$$n build-fuzz/findings/$$n build-fuzz/seeds/$$n; \
	  echo "== $$n: $(FUZZ_SECONDS) s"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -max_len=70000 -print_final_stats=1 \
	      -artifact_prefix=build-fuzz/findings/$$n/ \
	      build-fuzz/corpus/$$n build-fuzz/seeds/$$n > build-fuzz/$$n.log 2>&1; \
	  st=$$?; grep -E '^#[0-9]+.*DONE|stat::number_of_executed_units|ERROR|SUMMARY' build-fuzz/$$n.log; \
	  if [ $$st -ne 0 ]; then echo "$$n: FINDING, see build-fuzz/$$n.log"; exit 1; fi; \
	  echo "$$n: no finding"; \
	done

# ---------------------------------------------------------------- benchmarks
BENCH_RPC := $(B)/bench/rpc-bench
$(BENCH_RPC): $(call obj,tests/bench/rpc_bench.c) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(CORE_LIBS)

HASH_RATE := $(B)/bench/hash-rate
$(HASH_RATE): $(call obj,tests/bench/hash_rate.c) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(CORE_LIBS)

# The UDP socket layer alone (common/udp.c): GSO/GRO, sendmmsg, plain.
UDP_BENCH := $(B)/bench/udp-bench
$(UDP_BENCH): $(call obj,tests/bench/udp_bench.c) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(CORE_LIBS)

.PHONY: bench-udp
bench-udp: $(UDP_BENCH)
	$(Q)$(UDP_BENCH)

.PHONY: bench-publish
bench-publish: $(PROGRAMS) $(HASH_RATE)
	$(Q)tests/bench/bench-publish.sh $(CURDIR)/$(B)/bin $(HASH_RATE)

.PHONY: bench-rpc
bench-rpc: $(BENCH_RPC)
	$(Q)tests/bench/bench-rpc.sh $(BENCH_RPC)

.PHONY: bench-republish
bench-republish: $(PROGRAMS) | deps-test
	$(Q)tests/bench/bench-republish.sh $(CURDIR)/$(B)/bin

.PHONY: bench-read
bench-read: $(PROGRAMS) | deps-test
	$(Q)tests/bench/bench-read.sh $(CURDIR)/$(B)/bin

.PHONY: bench-dhash
bench-dhash: $(PROGRAMS) | deps-test
	$(Q)tests/bench/bench-dhash.sh $(CURDIR)/$(B)/bin

.PHONY: bench-blocksize
bench-blocksize: $(PROGRAMS) | deps-test
	$(Q)tests/bench/bench-blocksize.sh $(CURDIR)/$(B)/bin

.PHONY: bench-ring-publish
bench-ring-publish: $(PROGRAMS) | deps-test
	$(Q)tests/bench/bench-ring-publish.sh $(CURDIR)/$(B)/bin

.PHONY: bench-field
bench-field: $(PROGRAMS) | deps-test
	$(Q)tests/bench/bench-field.sh $(CURDIR)/$(B)/bin

# A reader across continents: twelve daemons in four regions behind the
# delay line, beside a TCP download from the publisher's region.
.PHONY: bench-wan
bench-wan: $(PROGRAMS) $(HARNESS) | deps-test
	$(Q)tests/bench/bench-wan.sh $(CURDIR)/$(B)/bin

.PHONY: bench-lookup
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
# The programs, every page of docs/man (sections 1, 5, 8), the service
# (cfsd.service; the user cfs from cfs.sysusers.conf, read by
# systemd-sysusers only under /usr/lib or /etc) and the sample
# /etc/cfs/cfsd.conf, never over one already there. Without DESTDIR it also
# creates the user and group cfs (systemd-sysusers, else useradd) and tells
# a running systemd about the unit; with DESTDIR (a package or a test) it
# touches nothing outside DESTDIR.
SYSCONFDIR  ?= /etc
UNITDIR     ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= /usr/lib/sysusers.d
MANPAGES    := $(wildcard docs/man/*.1 docs/man/*.5 docs/man/*.8)
.PHONY: install
install: $(PROGRAMS) $(HARNESS)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) \
	  $(DESTDIR)$(SYSCONFDIR)/cfs $(addprefix $(DESTDIR)$(MANDIR)/man,1 5 8)
	install -m 0755 $(PROGRAMS) $(DESTDIR)$(BINDIR)/
	$(Q)for m in $(MANPAGES); do install -m 0644 $$m $(DESTDIR)$(MANDIR)/man$${m##*.}/ || exit 1; done
	sed 's|/usr/local/bin|$(BINDIR)|; s|/etc/cfs|$(SYSCONFDIR)/cfs|' tools/systemd/cfsd.service \
	  >$(DESTDIR)$(UNITDIR)/cfsd.service
	install -m 0644 tools/systemd/cfs.sysusers.conf $(DESTDIR)$(SYSUSERSDIR)/cfs.conf
	$(Q)[ -e $(DESTDIR)$(SYSCONFDIR)/cfs/cfsd.conf ] || \
	  install -m 0644 tools/cfsd.conf $(DESTDIR)$(SYSCONFDIR)/cfs/cfsd.conf
ifeq ($(DESTDIR),)
	$(Q)if command -v systemd-sysusers >/dev/null; then systemd-sysusers $(SYSUSERSDIR)/cfs.conf; \
	  else getent group cfs >/dev/null || groupadd --system cfs; \
	       getent passwd cfs >/dev/null || useradd --system --gid cfs --home-dir /var/lib/cfs \
	         --shell /usr/sbin/nologin --comment "CFS server daemon" cfs; fi
	$(Q)[ ! -d /run/systemd/system ] || systemctl daemon-reload
	@echo "installed; configure $(SYSCONFDIR)/cfs/cfsd.conf, then: systemctl enable --now cfsd"
	@echo "readers: adduser USER cfs (then log in again) to use the system daemon"
endif

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
	install -m 0644 docs/man/cfs-mount.1 docs/man/cfs-cat.1 $(DESTDIR)$(MANDIR)/man1/

# ---------------------------------------------------------------- hygiene
# Layering in miniature: lower folders never include upper ones, and the
# libraries that belong to one module stay in it.
.PHONY: lint
lint:
	$(Q)tools/lint.sh

.PHONY: clean
clean:
	rm -rf build build-asan build-fuzz build-cov

.PHONY: help
help:
	@echo "make            build the programs (installs missing Debian packages)"
	@echo "make demo       run the main job on a local default (see README)"
	@echo "make test       run every test: lint, unit tests (also under ASan and with coverage), integration"
	@echo "make integration [CFS_TESTS=\"t_ring t_publish\"]  the integration scripts (all, or those named)"
	@echo "make unit       Criterion unit tests only"
	@echo "make asan       unit tests under AddressSanitizer + UBSan"
	@echo "make coverage   line coverage of the libraries by the unit tests (gcov)"
	@echo "make fuzz       build libFuzzer targets, run each FUZZ_SECONDS (60)"
	@echo "make bench-rpc  RPC rate and round trips between two processes"
	@echo "make bench-udp  the UDP socket layer on loopback: GSO+GRO vs sendmmsg vs one call per datagram"
	@echo "make bench-publish  publish a 1 GiB tree; MB/s beside the BLAKE2b ceiling"
	@echo "make bench-lookup   RPCs per lookup and memory per node, 16 to 4096 nodes"
	@echo "make bench-dhash    puts/s, gets/s, get latency and RPCs per get, 16 daemons"
	@echo "make bench-blocksize  publish and read 64 MiB in 8-128 KiB blocks on 16 daemons"
	@echo "make bench-republish  publish an 81 MB tree into 16 daemons, then again unchanged"
	@echo "make bench-ring-publish  a 205 MB tree into 16 daemons (k = 6) and into dir:; MB/s,"
	@echo "                    write amplification, CPU per MB, RPC timeouts and late replies"
	@echo "                    (BENCH_SCALE=0.1: a tenth of the tree)"
	@echo "                    (every block renewed on its 6 replicas)"
	@echo "make eval           run the papers' experiments (about an hour), regenerate docs/EVALUATION.md"
	@echo "make eval-quick     every experiment small (< 10 min, part of make test), output checked"
	@echo "make bench-read     a 256 MiB file through cfs-mount vs the client library and nginx,"
	@echo "                    through cfsd and as a plain ring client (--bootstrap);"
	@echo "                    download speed vs prefetch window; find / ls -lR of 10,000 files"
	@echo "make bench-field    8 daemons + a reader in namespaces (MTU 1500): cold reads at 0-3 % loss"
	@echo "                    and behind a 50 Mbit/s shallow queue, per block size, TCP beside;"
	@echo "                    IP fragments; publish at 1 % loss (BENCH_MB, BENCH_BLOCKS, BENCH_LOSSES)"
	@echo "make bench-wan      12 daemons in 4 regions behind a delay line (RTTs 10-200 ms): a reader in eu vs TCP"
	@echo "                    (through its own cfsd and as a plain client); single-block gets vs their oracle"
	@echo "make lint       layering, exported-name prefixes (nm), uv_run only in common/loop.c, long functions,"
	@echo "                every option and setting in --help, the man pages and the sample config"
	@echo "make install    programs, man pages, cfsd.service, the user cfs, /etc/cfs/cfsd.conf"
	@echo "                (PREFIX=$(PREFIX); DESTDIR=DIR installs into DIR and creates no user)"
	@echo "make clean      remove build trees"

-include $(shell find $(B) -name '*.d' 2>/dev/null)
