#!/usr/bin/env python3
"""Forged and flooding LEAVEs against cfsd, for t_leave_spoof.sh.

  leave_flood.py spoof SRC_IP SRC_PORT SRC_ID_HEX SECONDS RATE DST_IP:PORT...
      Raw IPv4 (root): LEAVEs "from" the node at SRC_IP:SRC_PORT, with no
      cookie, a random one, or 64 random valid-looking nodes, to each DST, at
      RATE datagrams a second per target for SECONDS. The spoofer never sees
      an answer.
  leave_flood.py member OWN_IP VICTIM_IP:PORT VICTIM_ID_HEX PRED_ID_HEX SECONDS RATE
      From its own address, as a ring member whose ID falls between the
      victim's predecessor and the victim: answers the victim's AUTH nonces,
      NOTIFYs to become its predecessor, then LEAVEs (round trip for the
      cookie included) offering 64 random valid-looking nodes each, RATE a
      second. With LEAVE_OLD=1 in the environment, main's LEAVE (no nonce
      field, no cookie), as daemons without authenticated leaves sent it.

A LEAVE of 64 nodes is over one datagram: since protocol version 4 it
goes as pieces (spoof: each once, raw; member: acknowledged, send_msg).
Prints one JSON line of what it sent (bytes: every datagram, pieces
included). IDs follow the daemon's scheme: the
victim's ID tells whether the port is hashed (H(IP || port || index)) or not
(H(IP || index)).
"""
import hashlib
import json
import os
import random
import socket
import struct
import sys
import time

LEAVE, AUTH, NOTIFY = 6, 2, 5
SCHEME = "port"
OLD = os.environ.get("LEAVE_OLD") == "1"  # main's LEAVE: no nonce field


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from cfsmsg import COORD, NIL, VERSION, arr, binb, datagrams, is_message, recv, send_msg, u, unpack  # noqa: E402

# ---------------------------------------------------------------- encoding

def node_id(ip, port, vindex=0):
    raw = socket.inet_aton(ip)
    tail = struct.pack(">HI", port, vindex) if SCHEME == "port" else struct.pack(">I", vindex)
    return hashlib.blake2b(raw + tail, digest_size=32).digest()


def detect_scheme(ip, port, want):
    global SCHEME
    for s in ("port", "ip"):
        SCHEME = s
        for v in range(64):
            if node_id(ip, port, v) == want:
                return v
    raise SystemExit("cannot reproduce the victim's ID from its address")


def node(nid, ip, port, vindex=0):
    return arr([binb(nid), binb(socket.inet_aton(ip)), u(port), u(vindex), COORD])


def msg(mtype, body, sender, reqid=None, reply=False, to=None):
    reqid = reqid if reqid is not None else int.from_bytes(os.urandom(8), "big")
    frm = arr([u(sender[1]), binb(sender[0])])
    return arr([u(2 if OLD else VERSION), u(mtype), u(1 if reply else 0), u(reqid), u(0), frm,
                binb(to) if to else NIL, COORD, arr(body)])


def leave_body(nodes, cookie, old):
    body = [arr([]), arr(nodes)]
    return body if old else body + [binb(cookie)]


def random_nodes(n=64):
    out = []
    for _ in range(n):
        ip = "127.%d.%d.%d" % (random.randrange(200, 250), random.randrange(256), random.randrange(1, 255))
        port = random.randrange(20000, 60000)
        out.append(node(node_id(ip, port), ip, port))
    return out


# ---------------------------------------------------------------- spoofing

def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    return ~s & 0xffff


def raw_udp(src, dst, payload):
    udp_len = 8 + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, random.randrange(65536), 0, 64,
                     socket.IPPROTO_UDP, 0, socket.inet_aton(src[0]), socket.inet_aton(dst[0]))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return ip + struct.pack("!HHHH", src[1], dst[1], udp_len, 0) + payload


def spoof(args):
    src_ip, src_port, src_hex, secs, rate = args[0], int(args[1]), args[2], float(args[3]), float(args[4])
    dsts = [(d.rsplit(":", 1)[0], int(d.rsplit(":", 1)[1])) for d in args[5:]]
    src_id = bytes.fromhex(src_hex)
    vindex = detect_scheme(src_ip, src_port, src_id)
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    sent = {"no_cookie": 0, "bad_cookie": 0, "flood": 0, "bytes": 0}
    end = time.time() + secs
    k = 0
    while time.time() < end:
        for d in dsts:
            kind = ("no_cookie", "bad_cookie", "flood")[k % 3]
            nodes = random_nodes() if kind == "flood" else []
            cookie = os.urandom(16) if kind == "bad_cookie" else bytes(16)
            p = msg(LEAVE, leave_body(nodes, cookie, OLD), (src_id, vindex))
            for g in datagrams(p):
                s.sendto(raw_udp((src_ip, src_port), d, g), (d[0], 0))
                sent["bytes"] += len(g) + 28
            sent[kind] += 1
        k += 1
        time.sleep(1.0 / rate)
    print(json.dumps(sent))


# ---------------------------------------------------------------- member flood

class Member:
    def __init__(self, own_ip, victim, victim_id, pred_id):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.s.bind((own_ip, 0))
        self.ip, self.port = self.s.getsockname()
        self.victim, self.victim_id = victim, victim_id
        # An index whose ID falls between the victim's predecessor and the
        # victim: a NOTIFY then makes us its predecessor.
        # A node that left is dead to the victim for a while: each round
        # uses the next such index.
        self.ids = [(v, node_id(self.ip, self.port, v)) for v in range(64)
                    if between(node_id(self.ip, self.port, v), pred_id, victim_id)]
        self.vindex, self.id = self.ids[0] if self.ids else (None, None)
        self.next = 0
        self.answered = 0
        self.cookies = 0

    def rotate(self):
        self.vindex, self.id = self.ids[self.next % len(self.ids)]
        self.next += 1

    def send(self, mtype, body, reqid=None):
        p = msg(mtype, body, (self.id, self.vindex), reqid=reqid, to=self.victim_id)
        try:
            return send_msg(self.s, self.victim, p, give_up=2.0)
        except socket.timeout:  # the victim stopped acking our pieces: flood on
            return len(p)

    def pump(self, wait, want_reqid=None):
        """Answer AUTH requests until wait seconds pass or the reply to
        want_reqid arrives (returned, decoded)."""
        end = time.time() + wait
        while True:
            left = end - time.time()
            if left <= 0:
                return None
            got = recv(self.s, time.monotonic() + left)
            if got is None:
                return None
            data, frm = got
            if not is_message(data):  # an ack of our pieces
                continue
            try:
                m, _ = unpack(data)
            except Exception:
                continue
            mtype, flags, reqid, body = m[1], m[2], m[3], m[8]
            if not flags & 1 and mtype == AUTH:
                self.s.sendto(msg(AUTH, [binb(body[0])], (self.id, self.vindex), reqid=reqid, reply=True), frm)
                self.answered += 1
            elif flags & 1 and reqid == want_reqid:
                return m


def between(x, a, b):
    x, a, b = (int.from_bytes(v, "big") for v in (x, a, b))
    return (a < x < b) if a < b else (x > a or x < b)


def member(args):
    own_ip = args[0]
    vip, vport = args[1].rsplit(":", 1)
    victim = (vip, int(vport))
    victim_id, pred_id = bytes.fromhex(args[2]), bytes.fromhex(args[3])
    secs, rate = float(args[4]), float(args[5])
    old = OLD
    detect_scheme(victim[0], victim[1], victim_id)
    me = Member(own_ip, victim, victim_id, pred_id)
    if me.vindex is None:
        raise SystemExit("no index of ours falls before the victim")
    sent = {"leaves": 0, "notifies": 0, "offered": 0, "bytes": 0, "cookies": 0}
    end = time.time() + secs
    while time.time() < end:
        t0 = time.time()
        me.rotate()
        sent["bytes"] += me.send(NOTIFY, [node(me.id, me.ip, me.port, me.vindex)])
        sent["notifies"] += 1
        me.pump(0.02)
        nodes = random_nodes()
        rid = int.from_bytes(os.urandom(8), "big")
        sent["bytes"] += me.send(LEAVE, leave_body(nodes, bytes(16), old), reqid=rid)
        sent["leaves"] += 1
        rep = me.pump(0.5, rid)
        if not old and rep and rep[4] == 0 and rep[8][0] & 1:
            sent["cookies"] += 1
            rid = int.from_bytes(os.urandom(8), "big")
            sent["bytes"] += me.send(LEAVE, leave_body(nodes, rep[8][1], old), reqid=rid)
            sent["leaves"] += 1
            me.pump(0.5, rid)
        sent["offered"] += len(nodes)
        me.pump(max(0.0, 1.0 / rate - (time.time() - t0)))
    sent["auth_answered"] = me.answered
    sent["ids"] = len(me.ids)
    print(json.dumps(sent))


if __name__ == "__main__":
    {"spoof": spoof, "member": member}[sys.argv[1]](sys.argv[2:])
