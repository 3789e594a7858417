#!/usr/bin/env python3
"""STOREs of one content-hash block, sent as a client's put (flag PRIMARY).

Usage: forge_store.py forged SRC-IP DST-IP PORT FILE
       forge_store.py honest SRC-IP DST-IP PORT FILE

forged: three raw IPv4/UDP STOREs whose source address is SRC-IP (not
ours), with a zero nonce and with random ones; any answer goes to SRC-IP,
never here. A STORE over one datagram goes as its pieces, each once (the
acks go to SRC-IP too). honest: from our own address SRC-IP, send the STORE, take the
challenge's nonce from the reply and send it again; prints "challenged,
then STATUS" (or the first reply's status when there was no challenge).
Needs root (raw socket) for forged; run it inside a network namespace.
"""
import hashlib
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from cfsmsg import binb, datagrams, msg, reply_status, rpc, u  # noqa: E402

STORE = 11
PRIMARY = 1
CHASH = 1
CHALLENGE = 1


def store(key, data, nonce):
    return msg(STORE, [u(CHASH), binb(key), u(0), u(PRIMARY), binb(nonce), binb(data)])


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def raw_udp(src, dst, sport, dport, payload):
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0x1234, 0, 64, socket.IPPROTO_UDP, 0,
                      socket.inet_aton(src), socket.inet_aton(dst))
    hdr = hdr[:10] + struct.pack("!H", checksum(hdr)) + hdr[12:]
    return hdr + udp


def main():
    mode, src, dst, port, path = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    data = open(path, "rb").read()
    key = hashlib.blake2b(data, digest_size=32).digest()
    if mode == "forged":
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        for nonce in (bytes(16), os.urandom(16), os.urandom(16)):
            for d in datagrams(store(key, data, nonce)):
                s.sendto(raw_udp(src, dst, 4460, port, d), (dst, 0))
        return
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, 0))
    s.settimeout(5)
    r = rpc(s, (dst, port), store(key, data, bytes(16)), timeout=5)
    st = reply_status(r)
    # A challenge: status 0, body [flags, nonce, lease]: the lease granted
    # (0: nothing stored, one byte) ends the datagram, the nonce before it.
    if st != 0 or r[-19:-17] != b"\xc4\x10" or r[-20] != CHALLENGE or r[-1] != 0:
        print(st)
        return
    print("challenged, then %d" % reply_status(rpc(s, (dst, port), store(key, data, r[-17:-1]), timeout=5)))


if __name__ == "__main__":
    main()
