"""Hand-built CFS wire messages for tests that play a peer (msgpack by hand,
so the tests need no Python packages): the header of docs/PROTOCOL.md, the
body as a list of encoded fields, the status of a reply, and a small
decoder (unpack) for tests that read whole replies."""
import hashlib
import ipaddress
import os
import struct


def u(n):
    if n < 128:
        return bytes([n])
    if n < 256:
        return b"\xcc" + bytes([n])
    if n < 65536:
        return b"\xcd" + struct.pack(">H", n)
    if n < 2**32:
        return b"\xce" + struct.pack(">I", n)
    return b"\xcf" + struct.pack(">Q", n)


def arr(items):
    n = len(items)
    head = bytes([0x90 | n]) if n < 16 else b"\xdc" + struct.pack(">H", n)
    return head + b"".join(items)


def binb(b):
    if len(b) < 256:
        return b"\xc4" + bytes([len(b)]) + b
    if len(b) < 65536:
        return b"\xc5" + struct.pack(">H", len(b)) + b
    return b"\xc6" + struct.pack(">I", len(b)) + b


def f32(x):
    return b"\xca" + struct.pack(">f", x)


COORD = arr([f32(0.0), f32(0.0), f32(0.0), f32(0.1)])
NIL = b"\xc0"


def ip_bytes(ip):
    """The raw 4 or 16 bytes of an IP address (as cfs_addr_ip_bytes)."""
    return ipaddress.ip_address(ip).packed


def node_id(ip="127.0.0.1", vindex=0):
    """H(IP ‖ index), as common/id.c's cfs_node_id: the port is not hashed
    (DESIGN.md §3). An int is taken as a port on 127.0.0.1, which does not
    change the ID."""
    if isinstance(ip, int):
        ip = "127.0.0.1"
    return hashlib.blake2b(ip_bytes(ip) + struct.pack(">I", vindex), digest_size=32).digest()


def node(nid, port, vindex=0, ip="127.0.0.1"):
    return arr([binb(nid), binb(ip_bytes(ip)), u(port), u(vindex), COORD])


def parse_addr(s):
    """"HOST:PORT" or a bare PORT (on 127.0.0.1) as a (host, port) pair."""
    host, _, port = s.rpartition(":")
    return (host or "127.0.0.1", int(port))


def msg(mtype, body, sender=None, version=3, reqid=None):
    reqid = reqid if reqid is not None else int.from_bytes(os.urandom(4), "big")
    frm = arr([u(sender[1]), binb(sender[0])]) if sender else NIL
    return arr([u(version), u(mtype), u(0), u(reqid), u(0), frm, NIL, COORD, arr(body)])


def _int(b, i):
    """Decode the msgpack integer at b[i]: (value, next index)."""
    t = b[i]
    if t < 0x80:
        return t, i + 1
    if t >= 0xe0:
        return t - 256, i + 1
    sizes = {0xcc: (1, ">B"), 0xcd: (2, ">H"), 0xce: (4, ">I"), 0xcf: (8, ">Q"),
             0xd0: (1, ">b"), 0xd1: (2, ">h"), 0xd2: (4, ">i"), 0xd3: (8, ">q")}
    n, fmt = sizes[t]
    return struct.unpack(fmt, b[i + 1:i + 1 + n])[0], i + 1 + n


def reply_status(b):
    """The status of a reply datagram (0 or a negative errno)."""
    i = 1 if b[0] & 0xf0 == 0x90 else 3  # array header
    for _ in range(4):  # version, type, flags, reqid
        _, i = _int(b, i)
    status, _ = _int(b, i)
    return status


def unpack(b, i=0):
    """A minimal msgpack decoder (the types the CFS codec uses):
    (value, next index)."""
    t = b[i]
    if t <= 0x7f:
        return t, i + 1
    if t >= 0xe0:
        return t - 256, i + 1
    if 0x90 <= t <= 0x9f:
        return unpack_items(b, i + 1, t & 0x0f)
    if 0xa0 <= t <= 0xbf:
        n = t & 0x1f
        return b[i + 1:i + 1 + n], i + 1 + n
    if t == 0xc0:
        return None, i + 1
    if t in (0xc2, 0xc3):
        return t == 0xc3, i + 1
    fixed = {0xcc: ">B", 0xcd: ">H", 0xce: ">I", 0xcf: ">Q", 0xd0: ">b", 0xd1: ">h",
             0xd2: ">i", 0xd3: ">q", 0xca: ">f", 0xcb: ">d"}
    if t in fixed:
        n = struct.calcsize(fixed[t])
        return struct.unpack(fixed[t], b[i + 1:i + 1 + n])[0], i + 1 + n
    lens = {0xc4: ">B", 0xc5: ">H", 0xc6: ">I", 0xd9: ">B", 0xda: ">H", 0xdb: ">I"}
    if t in lens:
        w = struct.calcsize(lens[t])
        n = struct.unpack(lens[t], b[i + 1:i + 1 + w])[0]
        s = i + 1 + w
        return b[s:s + n], s + n
    if t in (0xdc, 0xdd):
        w = 2 if t == 0xdc else 4
        n = struct.unpack(">H" if w == 2 else ">I", b[i + 1:i + 1 + w])[0]
        return unpack_items(b, i + 1 + w, n)
    raise ValueError("msgpack type 0x%02x" % t)


def unpack_items(b, i, n):
    out = []
    for _ in range(n):
        v, i = unpack(b, i)
        out.append(v)
    return out, i
