#!/usr/bin/env python3
"""Flip one byte of a stored block in a stopped cfsd's block store, as a
disk that rots would.

Usage: rot_store.py DATA-DIR FILE

FILE holds the block's bytes. Its middle 64 bytes are looked for in the
LevelDB tables (DATA-DIR/blocks/*.ldb) and one byte there is flipped.
LevelDB does not check its block checksums on reads (cfsd leaves
verify_checksums off), and a table stores random bytes uncompressed, so the
daemon reads the flipped byte back as the block's. A block still only in
the write-ahead log (*.log, checksummed record by record) is not touched:
start and stop the daemon once first, which moves the log into a table.
Exit 0 when a byte was flipped, 2 when the bytes were not found in a table.
"""
import glob
import os
import sys


def main():
    d, path = sys.argv[1], sys.argv[2]
    data = open(path, "rb").read()
    mid = len(data) // 2
    probe = data[mid - 32:mid + 32]
    for f in sorted(glob.glob(os.path.join(d, "blocks", "*.ldb"))):
        b = bytearray(open(f, "rb").read())
        at = b.find(probe)
        if at < 0:
            continue
        b[at + 32] ^= 0x01
        with open(f, "wb") as fh:
            fh.write(b)
        print("%s: byte %d flipped" % (os.path.basename(f), at + 32))
        return 0
    print("block bytes not found in any table of %s" % d)
    return 2


if __name__ == "__main__":
    sys.exit(main())
