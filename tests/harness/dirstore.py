#!/usr/bin/env python3
"""Look inside a cfs-publish directory store (dir:PATH), for tests.

  dirstore.py keys STORE          one line per block: key len lease, by key
  dirstore.py flip STORE [KEY]    flip one bit in the middle of a block's bytes
                                  (KEY, or the first block over 8 KiB); prints the key
  dirstore.py drop STORE KEY      spoil every index record of KEY: the store
                                  no longer has it (a lost block)

The layout is in publisher/dirstore.c and docs/PUBLISHING.md: packs/NNNNNN.pack
hold the bytes, index holds 64-byte records (key, pack, len, offset, lease,
check); the last valid record of a key wins.
"""
import hashlib
import os
import struct
import sys

REC = 64


def check(rec):
    return hashlib.blake2b(rec[:56], digest_size=32).digest()[:8]


def records(store):
    with open(os.path.join(store, "index"), "rb") as f:
        data = f.read()
    for off in range(0, len(data) - len(data) % REC, REC):
        rec = data[off:off + REC]
        if rec[56:] != check(rec):
            continue
        pack, length, where, lease = struct.unpack("<IIQQ", rec[32:56])
        yield off, rec[:32].hex(), pack, length, where, lease


def live(store):
    blocks = {}
    for _, key, pack, length, where, lease in records(store):
        blocks[key] = (pack, length, where, lease)
    return blocks


def main():
    cmd, store = sys.argv[1], sys.argv[2]
    blocks = live(store)
    if cmd == "keys":
        for key in sorted(blocks):
            print(key, blocks[key][1], blocks[key][3])
    elif cmd == "flip":
        key = sys.argv[3] if len(sys.argv) > 3 else next(k for k in sorted(blocks) if blocks[k][1] > 8192)
        pack, length, where, _ = blocks[key]
        with open(os.path.join(store, "packs", "%06d.pack" % pack), "r+b") as f:
            f.seek(where + length // 2)
            b = f.read(1)
            f.seek(where + length // 2)
            f.write(bytes([b[0] ^ 0x04]))
        print(key)
    elif cmd == "drop":
        key = sys.argv[3]
        with open(os.path.join(store, "index"), "r+b") as f:
            for off, k, *_ in list(records(store)):
                if k == key:
                    f.seek(off + 56)
                    f.write(bytes(8))
    else:
        sys.exit("usage: dirstore.py keys|flip|drop STORE [KEY]")


if __name__ == "__main__":
    main()
