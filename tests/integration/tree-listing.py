#!/usr/bin/env python3
"""Print a directory tree the way `cfs-fsck --list` prints a volume:
TYPE MODE SIZE MTIME BLAKE2B PATH, one line per entry, so that a published
volume can be compared with its source. Sockets, devices and FIFOs are
left out, as cfs-publish leaves them out."""
import hashlib, os, stat, sys

def esc(b):
    return "".join(chr(c) if 0x20 <= c < 0x7f and c != 0x5c else "\\x%02x" % c for c in b)

def mtime(st):
    return "%d.%09d" % (st.st_mtime_ns // 10**9, st.st_mtime_ns % 10**9)

def published(st):
    return stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)

def walk(root, rel, out):
    path = os.path.join(root, rel) if rel else root
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        st = os.lstat(full)
        if not published(st):
            continue
        shown = b"/" + os.fsencode(os.path.join(rel, name) if rel else name)
        mode = "%04o" % (st.st_mode & 0o7777)
        if stat.S_ISDIR(st.st_mode):
            n = sum(1 for x in os.listdir(full) if published(os.lstat(os.path.join(full, x))))
            out.append("d %s %d %s - %s" % (mode, n, mtime(st), esc(shown)))
            walk(root, os.path.join(rel, name) if rel else name, out)
        elif stat.S_ISLNK(st.st_mode):
            t = os.fsencode(os.readlink(full))
            out.append("l %s %d %s %s %s" % (mode, len(t), mtime(st), hashlib.blake2b(t, digest_size=32).hexdigest(), esc(shown)))
        else:
            h = hashlib.blake2b(digest_size=32)
            with open(full, "rb") as f:
                while True:
                    chunk = f.read(1 << 20)
                    if not chunk:
                        break
                    h.update(chunk)
            out.append("f %s %d %s %s %s" % (mode, st.st_size, mtime(st), h.hexdigest(), esc(shown)))

root = sys.argv[1]
st = os.stat(root)
out = ["d %04o 0 %s - /" % (st.st_mode & 0o7777, mtime(st))]
walk(root, "", out)
print("\n".join(out))
