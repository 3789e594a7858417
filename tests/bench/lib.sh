# Helpers shared by the benchmark scripts; source it after
# tests/integration/lib.sh.
#   now                 the wall clock, seconds with nanoseconds
#   since T0            seconds from T0 (a `now`) until now, 3 decimals
#   mbs BYTES SECONDS   MB/s, 1 decimal
#   in_reader CMD...    CMD in the reader's namespace (cluster.sh's CL_READER_NS)
now() { date +%s.%N; }
since() { python3 -c "import sys; print('%.3f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$(now)"; }
mbs() { python3 -c "import sys; print('%.1f' % (float(sys.argv[1]) / 1e6 / float(sys.argv[2])))" "$@"; }
in_reader() { cluster_in "$CL_READER_NS" "$@"; }
