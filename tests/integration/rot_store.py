#!/usr/bin/env python3
"""Flip one byte of a stored block in a stopped cfsd's block store, as a
disk that rots would.

Usage: rot_store.py DATA-DIR FILE

FILE holds the block's bytes. Its middle 64 bytes are looked for in the
store's pack files (DATA-DIR/blocks/packs/*.pack, docs/STORAGE.md), where
each block's bytes lie as they are, and one byte there is flipped. The
engine checks each entry's header, not the block's bytes: the readers
verify them against the key. Exit 0 when a byte was flipped, 2 when the
bytes were not found in a pack.
"""
import glob
import os
import sys


def main():
    d, path = sys.argv[1], sys.argv[2]
    data = open(path, "rb").read()
    mid = len(data) // 2
    probe = data[mid - 32:mid + 32]
    for f in sorted(glob.glob(os.path.join(d, "blocks", "packs", "*.pack"))):
        b = bytearray(open(f, "rb").read())
        at = b.find(probe)
        if at < 0:
            continue
        b[at + 32] ^= 0x01
        with open(f, "r+b") as fh:
            fh.seek(at + 32)
            fh.write(b[at + 32:at + 33])
        print("%s: byte %d flipped" % (os.path.basename(f), at + 32))
        return 0
    print("block bytes not found in any pack of %s" % d)
    return 2


if __name__ == "__main__":
    sys.exit(main())
