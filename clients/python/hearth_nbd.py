"""A small NBD client for Hearth's cache-hint extension (docs/nbd-extension.md).

Standard library only. It speaks fixed-newstyle NBD, negotiates
NBD_OPT_HEARTH_HINTS when the server offers it, and sends one request at a
time. Unmodified NBD servers work too: hints are then simply not sent.

    with HearthClient.connect_tcp("127.0.0.1", 10809, export="") as c:
        c.write(0, b"x" * 4096, buffer=0x1000)
        data = c.read(0, 4096, buffer=0x1000)
"""
import socket
import struct

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REPLY_MAGIC = 0x0003E889045565A9
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698

FLAG_FIXED_NEWSTYLE = 1
FLAG_NO_ZEROES = 2

OPT_GO = 7
OPT_HEARTH_HINTS = 0x48450001
REP_ACK = 1
REP_INFO = 3
REP_ERR_UNSUP = (1 << 31) + 1
INFO_EXPORT = 0

CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH = 0, 1, 2, 3
CMD_HEARTH_HINT = 0x4845
CMD_FLAG_FUA = 1

HINT_BUFFER, HINT_EVICTED, HINT_CONTEXT, HINT_CONTEXT_BEGIN, HINT_CONTEXT_END = 1, 2, 3, 4, 5


class NbdError(Exception):
    """The server answered a request with an NBD error (an errno value)."""

    def __init__(self, what, errno):
        super().__init__(f"{what}: NBD error {errno}")
        self.errno = errno


class HearthClient:
    def __init__(self, sock, export=""):
        self.sock = sock
        self.cookie = 0
        self.hints = False
        self._handshake(export)

    @classmethod
    def connect_tcp(cls, host, port, export=""):
        return cls(socket.create_connection((host, port)), export)

    @classmethod
    def connect_unix(cls, path, export=""):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        return cls(s, export)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- plumbing --------------------------------------------------------
    def _recv(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"server closed the connection ({len(buf)} of {n} bytes read)")
            buf += chunk
        return bytes(buf)

    def _option(self, opt, data=b""):
        self.sock.sendall(struct.pack(">QII", IHAVEOPT, opt, len(data)) + data)

    def _option_reply(self, opt):
        magic, ropt, rtype, length = struct.unpack(">QIII", self._recv(20))
        if magic != REPLY_MAGIC or ropt != opt:
            raise ConnectionError(f"bad option reply (magic {magic:#x}, option {ropt})")
        return rtype, self._recv(length)

    def _handshake(self, export):
        magic, opts, hflags = struct.unpack(">QQH", self._recv(18))
        if magic != NBDMAGIC or opts != IHAVEOPT or not hflags & FLAG_FIXED_NEWSTYLE:
            raise ConnectionError("not a fixed-newstyle NBD server")
        self.sock.sendall(struct.pack(">I", FLAG_FIXED_NEWSTYLE | (hflags & FLAG_NO_ZEROES)))
        self._option(OPT_HEARTH_HINTS)
        rtype, _ = self._option_reply(OPT_HEARTH_HINTS)
        self.hints = rtype == REP_ACK
        name = export.encode()
        self._option(OPT_GO, struct.pack(">I", len(name)) + name + struct.pack(">H", 0))
        while True:
            rtype, data = self._option_reply(OPT_GO)
            if rtype == REP_INFO and len(data) >= 12 and struct.unpack(">H", data[:2])[0] == INFO_EXPORT:
                self.size, self.flags = struct.unpack(">QH", data[2:12])
            elif rtype == REP_ACK:
                return
            elif rtype & (1 << 31):
                raise ConnectionError(f"server refused export {export!r}: {data.decode(errors='replace')}")

    def _request(self, cmd, offset=0, length=0, payload=b"", flags=0, reply_len=0):
        self.cookie += 1
        header = struct.pack(">IHHQQI", REQUEST_MAGIC, flags, cmd, self.cookie, offset, length)
        self.sock.sendall(header + payload)
        magic, error, cookie = struct.unpack(">IIQ", self._recv(16))
        if magic != SIMPLE_REPLY_MAGIC or cookie != self.cookie:
            raise ConnectionError(f"bad reply (magic {magic:#x}, cookie {cookie})")
        if error:
            raise NbdError(f"command {cmd} at {offset}+{length}", error)
        return self._recv(reply_len) if reply_len else b""

    def _hint(self, *records):
        if not self.hints:
            return False
        payload = b"".join(struct.pack(">H6xQQ", kind, a, b) for kind, a, b in records)
        self._request(CMD_HEARTH_HINT, length=len(payload), payload=payload)
        return True

    # -- the API ---------------------------------------------------------
    def read(self, offset, length, buffer=None):
        if buffer is not None:
            self._hint((HINT_BUFFER, buffer, 0))
        return self._request(CMD_READ, offset, length, reply_len=length)

    def write(self, offset, data, buffer=None, fua=False):
        if buffer is not None:
            self._hint((HINT_BUFFER, buffer, 0))
        self._request(CMD_WRITE, offset, len(data), payload=data, flags=CMD_FLAG_FUA if fua else 0)

    def evicted(self, offset, length):
        """Tell the server the client dropped bytes offset..offset+length from its cache."""
        return self._hint((HINT_EVICTED, offset, length))

    def context(self, ctx):
        """Tag the following requests with application context ctx."""
        return self._hint((HINT_CONTEXT, ctx, 0))

    def begin(self, ctx, template=0):
        """Context ctx starts a unit of work (of a numbered template) and tags what follows."""
        return self._hint((HINT_CONTEXT_BEGIN, ctx, template), (HINT_CONTEXT, ctx, 0))

    def end(self, ctx):
        return self._hint((HINT_CONTEXT_END, ctx, 0), (HINT_CONTEXT, 0, 0))

    def flush(self):
        self._request(CMD_FLUSH)

    def close(self):
        try:
            self.sock.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_DISC, 0, 0, 0))
        except OSError:
            pass
        self.sock.close()
