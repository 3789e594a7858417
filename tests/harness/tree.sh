# A generated tree with every kind of entry a volume keeps, for the tests
# that publish one and compare it with what comes back (t_publish, t_mount).
#
#   make_tree DIR WIDE DEPTH
#
# DIR gets: an empty file, a file under the inline limit, one of exactly one
# block and one of a block plus one byte, 3 MB, an executable script, a
# 0600 file, names with a space, a newline, UTF-8 and Latin-1 bytes, a
# relative and a dangling symlink, an empty directory, a directory of WIDE
# empty files, a path DEPTH directories deep, and set mtimes (one with
# nanoseconds, one on a symlink).
make_tree() {
	local d=$1 wide=$2 depth=$3 deep i
	mkdir -p "$d"
	: >"$d/empty"
	head -c 8192 /dev/urandom >"$d/one-block"
	head -c 8193 /dev/urandom >"$d/one-block-plus-one"
	head -c 700 /dev/urandom >"$d/inline-small"
	head -c 3000000 /dev/urandom >"$d/three-mb"
	printf '#!/bin/sh\necho hi\n' >"$d/script.sh"; chmod 755 "$d/script.sh"
	chmod 600 "$d/one-block"
	printf 'spaces' >"$d/name with spaces"
	printf 'newline' >"$d/new
line"
	printf 'utf8' >"$d/naïve-日本"
	printf 'latin1' >"$d/$(printf 'caf\xe9')"
	ln -s one-block "$d/link-rel"
	ln -s /nonexistent/target "$d/link-dangling"
	mkdir "$d/empty-dir"
	mkdir "$d/wide"
	(cd "$d/wide" && seq -f 'entry-%05g' 1 "$wide" | xargs touch)
	deep=$d/deep
	for i in $(seq 1 "$depth"); do deep=$deep/level$i; done
	mkdir -p "$deep"
	echo bottom >"$deep/file"
	touch -d '2001-02-03 04:05:06.123456789' "$d/one-block"
	touch -h -d '1999-12-31 23:59:59' "$d/link-rel"
}
