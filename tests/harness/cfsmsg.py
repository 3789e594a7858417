"""Hand-built CFS wire messages for tests that play a peer (msgpack by hand,
so the tests need no Python packages): the header of docs/PROTOCOL.md, the
body as a list of encoded fields, the status of a reply, and a small
decoder (unpack) for tests that read whole replies.

Since protocol version 4 a message longer than one safe datagram
(1,200 bytes) travels as 'P' pieces that the receiver acknowledges with 'A'
frames, and a server answers an address it has not validated with a 'Y'
token instead of a reply more than 3x what it received; the client proves
its address with 'V' and asks again. send_msg() and rpc() below speak that;
datagrams() gives the frames of a message for tests that send raw packets.
Messages of an older version always go whole, as those daemons expect."""
import hashlib
import ipaddress
import os
import re
import select
import socket
import struct
import time
import weakref


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
    (docs/PROTOCOL.md "Node IDs"). An int is taken as a port on 127.0.0.1, which does not
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


def _tree_version():
    """CFS_PROTO_VERSION_MIN of the source tree these tests ship with (the
    oldest version the daemons under test speak, whose header has no
    clock: these tests play a peer of that version); 4 if it cannot be
    read."""
    h = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common", "msg.h")
    try:
        m = re.search(r"#define\s+CFS_PROTO_VERSION_MIN\s+(\d+)", open(h).read())
        return int(m.group(1)) if m else 4
    except OSError:
        return 4


# The version messages carry: CFS_PROTO_VERSION in the environment, else the
# oldest the tree speaks.
VERSION = int(os.environ.get("CFS_PROTO_VERSION") or _tree_version())


def msg(mtype, body, sender=None, version=None, reqid=None):
    version = VERSION if version is None else version
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


# ------------------------------------------------------------ frames

PIECE, ACK, RETRY, VALIDATE = 0x50, 0x41, 0x59, 0x56
F_REPLY = 0x01       # piece, ack: of a reply (else of a request)
F_BACKGROUND = 0x02  # piece: background class
F_COMPLETE = 0x02    # ack: every piece held
DGRAM_SAFE = 1200
PIECE_HDR = 20
PIECE_DATA = DGRAM_SAFE - PIECE_HDR
MSG_MAX = 320 * 1024
ACK_HDR = 19
ACK_BITMAP_MAX = 64
TOKEN_BYTES = 16


def is_message(d):
    """A whole message (a msgpack fixarray), not a frame."""
    return len(d) > 0 and 0x90 <= d[0] <= 0x9f


def header(m):
    """(version, type, flags, reqid) of an encoded message."""
    i = 1 if is_message(m) else 3
    out = []
    for _ in range(4):
        v, i = _int(m, i)
        out.append(v)
    return tuple(out)


def npieces(length):
    return (length + PIECE_DATA - 1) // PIECE_DATA


def piece(m, index, reqid, pn, flags=0):
    """Piece index of message m, packet number pn."""
    return (struct.pack(">BBQIIH", PIECE, flags, reqid, len(m), pn, index)
            + m[index * PIECE_DATA:(index + 1) * PIECE_DATA])


def parse_piece(d):
    """(flags, reqid, msg_len, pn, index, payload) of a well-formed piece,
    else None (the checks common/xfer.c makes)."""
    if len(d) <= PIECE_HDR or len(d) > DGRAM_SAFE or d[0] != PIECE:
        return None
    _, flags, reqid, msg_len, pn, index = struct.unpack(">BBQIIH", d[:PIECE_HDR])
    if flags & ~(F_REPLY | F_BACKGROUND) or not DGRAM_SAFE < msg_len <= MSG_MAX:
        return None
    if index >= npieces(msg_len) or len(d) - PIECE_HDR != min(PIECE_DATA, msg_len - index * PIECE_DATA):
        return None
    return flags, reqid, msg_len, pn, index, d[PIECE_HDR:]


def ack(flags, reqid, largest_pn, delay_us, first_missing, bitmap=b""):
    return struct.pack(">BBQIHHB", ACK, flags, reqid, largest_pn, min(delay_us // 16, 0xffff),
                       first_missing, len(bitmap)) + bitmap


def parse_ack(d):
    """(flags, reqid, largest_pn, delay_us, first_missing, bitmap) or None."""
    if len(d) < ACK_HDR or d[0] != ACK or len(d) != ACK_HDR + d[18] or d[18] > ACK_BITMAP_MAX:
        return None
    _, flags, reqid, largest, delay, first, _ = struct.unpack(">BBQIHHB", d[:ACK_HDR])
    return flags, reqid, largest, delay * 16, first, d[ACK_HDR:]


def retry(reqid, token):
    return struct.pack(">BBQ", RETRY, 0, reqid) + token


def parse_retry(d):
    """(reqid, token) of a 'Y' frame, or None."""
    if len(d) != 10 + TOKEN_BYTES or d[0] != RETRY or d[1] != 0:
        return None
    return struct.unpack(">Q", d[2:10])[0], d[10:]


def validate(token):
    return bytes([VALIDATE]) + token


def parse_validate(d):
    return d[1:] if len(d) == 1 + TOKEN_BYTES and d[0] == VALIDATE else None


def whole_ok(m):
    """Does m travel as one datagram? (short, or of a version before pieces)"""
    try:
        old = header(m)[0] < 4
    except (IndexError, KeyError, struct.error):
        old = False  # not a message we can read: its length decides
    return len(m) <= DGRAM_SAFE or old


def datagrams(m, reqid=None, flags=0):
    """Every datagram of message m, once each (pieces numbered from 0), for
    tests that send raw packets and never hear an ack."""
    if whole_ok(m):
        return [m]
    reqid = header(m)[3] if reqid is None else reqid
    return [piece(m, i, reqid, i, flags) for i in range(npieces(len(m)))]


# ------------------------------------------------------------ reassembly

class Reassembly:
    """One message arriving as pieces; ack() is the 'A' frame to send."""

    def __init__(self, flags, reqid, msg_len):
        self.flags, self.reqid, self.len = flags & F_REPLY, reqid, msg_len
        self.n = npieces(msg_len)
        self.parts = {}
        self.largest_pn, self.largest_at = 0, time.monotonic()

    def add(self, p):
        """Take a parsed piece of this transfer; False if it contradicts it."""
        _, _, msg_len, pn, index, payload = p
        if msg_len != self.len:
            return False
        self.parts.setdefault(index, payload)
        if pn >= self.largest_pn:
            self.largest_pn, self.largest_at = pn, time.monotonic()
        return True

    def complete(self):
        return len(self.parts) == self.n

    def message(self):
        return b"".join(self.parts[i] for i in range(self.n))

    def ack(self):
        first = 0
        while first < self.n and first in self.parts:
            first += 1
        delay = int((time.monotonic() - self.largest_at) * 1e6)
        if first == self.n:
            return ack(self.flags | F_COMPLETE, self.reqid, self.largest_pn, delay, first)
        span = min((self.n - first + 7) // 8, ACK_BITMAP_MAX)
        bits = bytearray(span)
        for b in range(span * 8):
            if first + b in self.parts:
                bits[b // 8] |= 1 << (b % 8)
        return ack(self.flags, self.reqid, self.largest_pn, delay, first, bytes(bits))


def acked_pieces(a, n):
    """The piece indexes an ack says are held, of a message of n pieces."""
    flags, _, _, _, first, bitmap = a
    if flags & F_COMPLETE:
        return set(range(n))
    held = set(range(min(first, n)))
    for b in range(len(bitmap) * 8):
        if bitmap[b // 8] >> (b % 8) & 1 and first + b < n:
            held.add(first + b)
    return held


# ------------------------------------------------------------ a socket's state

class _Endpoint:
    """What one socket carries between calls: datagrams read while waiting
    for something else (the next receive gets them first), and the complete
    acks of transfers it finished, sent again if a piece of one comes back
    (the sender did not get the ack)."""

    def __init__(self):
        self.backlog = []
        self.done = {}  # (address, reqid, reply flag) -> complete ack


_endpoints = weakref.WeakKeyDictionary()


def _ep(sock):
    return _endpoints.setdefault(sock, _Endpoint())


def _remember(sock, transfer, complete_ack):
    """Keep the complete ack of a finished transfer (the last 64)."""
    done = _ep(sock).done
    done[transfer] = complete_ack
    while len(done) > 64:
        del done[next(iter(done))]


def _same(a, b):
    return a[0] == b[0] and a[1] == b[1]


def recv(sock, deadline, backlog=True):
    """The next datagram (data, address) that needs attention, the kept ones
    first (backlog=False: only new ones), or None at the deadline
    (time.monotonic()). Stray pieces of finished transfers are answered
    here with their complete ack and not returned."""
    ep = _ep(sock)
    while True:
        if backlog and ep.backlog:
            d, a = ep.backlog.pop(0)
        else:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([sock], [], [], left)[0]:
                return None
            d, a = sock.recvfrom(65536)
        p = parse_piece(d) if d[:1] == bytes([PIECE]) else None
        done = p and ep.done.get((a[:2], p[1], p[0] & F_REPLY))
        if done:
            sock.sendto(done, a)
            continue
        return d, a


def _readable(sock):
    return bool(_ep(sock).backlog) or bool(select.select([sock], [], [], 0)[0])


def _answers(d, reqid):
    """Is d something a server sends only once it holds our whole request
    reqid (its reply, a piece of it, or a 'Y')?"""
    if is_message(d):
        try:
            _, _, flags, r = header(d)
        except (IndexError, KeyError, struct.error):
            return False
        return r == reqid and flags & 1
    p = parse_piece(d) if d[:1] == bytes([PIECE]) else None
    if p:
        return p[1] == reqid and p[0] & F_REPLY
    y = parse_retry(d)
    return bool(y) and y[0] == reqid


# ------------------------------------------------------------ sending

WINDOW = 32         # pieces in flight at most
RESEND_S = 0.1      # a piece unacked this long is sent again
LOST_AFTER_PN = 3   # ... or when one sent this many numbers later is acked (RFC 9002 6.1.1)


def send_msg(sock, addr, m, reqid=None, is_reply=False, give_up=5.0):
    """Send message m to addr: whole when whole_ok(m), else as pieces,
    resending what the acks do not name (selective repeat) until every
    piece is acked. A request also counts as delivered when its answer
    arrives. Other datagrams that come meanwhile are kept for recv().
    Returns the bytes sent (retransmissions included); raises
    socket.timeout after give_up seconds without progress."""
    if whole_ok(m):
        sock.sendto(m, addr)
        return len(m)
    reqid = header(m)[3] if reqid is None else reqid
    flags = F_REPLY if is_reply else 0
    n = npieces(len(m))
    todo, inflight, held = list(range(n)), {}, set()  # inflight: index -> (pn, time sent)
    pn = sent = 0
    progress = time.monotonic()
    while len(held) < n:
        while todo and len(inflight) < WINDOW:
            i = todo.pop(0)
            if i in held:  # acked while it waited to be resent
                continue
            d = piece(m, i, reqid, pn, flags)
            sock.sendto(d, addr)
            inflight[i] = (pn, time.monotonic())
            pn, sent = pn + 1, sent + len(d)
        now = time.monotonic()
        if now - progress > give_up:
            raise socket.timeout("%d of %d pieces acked in %.1f s" % (len(held), n, give_up))
        oldest = min(t for _, t in inflight.values()) if inflight else now
        got = recv(sock, min(oldest + RESEND_S, progress + give_up), backlog=False)
        if got is None:  # a timeout: resend what has waited too long, first
            late = sorted(i for i, (_, t) in inflight.items() if time.monotonic() - t >= RESEND_S)
            todo = late + todo
            for i in late:
                del inflight[i]
            continue
        d, a = got
        k = parse_ack(d) if _same(a, addr) else None
        if not k or k[1] != reqid or k[0] & F_REPLY != flags:
            if d[:1] != bytes([ACK]):  # an ack of another transfer is stale
                _ep(sock).backlog.append(got)
            if not is_reply and _same(a, addr) and _answers(d, reqid):
                return sent
            continue
        new = acked_pieces(k, n) - held
        if new:
            held |= new
            progress = time.monotonic()
        for i in list(inflight):
            if i in held:
                del inflight[i]
            elif inflight[i][0] + LOST_AFTER_PN <= k[2]:  # later pieces came, not this one
                del inflight[i]
                todo.insert(0, i)
    return sent


# ------------------------------------------------------------ calls

class RetryAsked(Exception):
    """The server asked us to prove our address ('Y'), and we were told not to."""

    def __init__(self, token):
        super().__init__("server asked for address validation")
        self.token = token


def rpc(sock, addr, m, reqid=None, timeout=5.0, validate_address=True):
    """Send request m to addr and return its reply's bytes (a whole message,
    reassembled from pieces if it came so; their acks are sent, the last
    with the complete flag). A 'Y' is answered with 'V' and the request
    sent again (validate_address=False raises RetryAsked instead).
    Unrelated datagrams are ignored. Raises socket.timeout."""
    reqid = header(m)[3] if reqid is None else reqid
    deadline = time.monotonic() + timeout
    send_msg(sock, addr, m, reqid, give_up=timeout)
    asm, retries = None, 0
    while True:
        got = recv(sock, deadline)
        if got is None:
            raise socket.timeout("no reply to request %d" % reqid)
        d, a = got
        if not _same(a, addr) or not _answers(d, reqid):
            continue
        if is_message(d):
            return d
        y = parse_retry(d)
        if y:
            if not validate_address:
                raise RetryAsked(y[1])
            retries += 1
            if retries > 3:
                raise socket.timeout("request %d: asked to validate %d times" % (reqid, retries))
            sock.sendto(validate(y[1]), addr)
            send_msg(sock, addr, m, reqid, give_up=max(0.1, deadline - time.monotonic()))
            continue
        p = parse_piece(d)
        asm = asm or Reassembly(p[0], reqid, p[2])
        if not asm.add(p):
            continue
        if asm.complete():
            done = asm.ack()
            sock.sendto(done, addr)
            _remember(sock, (a[:2], reqid, F_REPLY), done)
            return asm.message()
        if not _readable(sock):  # the end of a read batch: say what we hold
            sock.sendto(asm.ack(), addr)
