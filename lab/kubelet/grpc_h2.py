"""A unary gRPC server over HTTP/2 on a unix socket, in the standard library only, for the lab
kubelet's PodResources API (pod_resources.py): the node's system Python runs the kubelet and has
no grpcio (package docstring), while kubelet's own clients (grpc-go, grpcio) must read it as they
read kubelet's grpc-go server. So this is the part of the gRPC protocol (PROTOCOL-HTTP2.md) and of
HTTP/2 (RFC 9113) such a client uses, as grpc-go's server answers it:

- the connection: the client preface, SETTINGS (``INITIAL_WINDOW_SIZE``, ``MAX_FRAME_SIZE``) and
  their ACK, PING, WINDOW_UPDATE, RST_STREAM, GOAWAY; HEADERS with CONTINUATION, padding and
  priority; DATA, whose bytes are handed back to the peer's windows as they arrive;
- HPACK (RFC 7541) for the request headers: the static and dynamic tables, size updates, and
  Huffman-coded strings (the canonical code, rebuilt from its lengths); the response headers are
  literals never added to the peer's table, which every decoder takes;
- a unary call: ``POST /<service>/<method>``, ``content-type: application/grpc``, one
  length-prefixed message in, the response message and the ``grpc-status``/``grpc-message``
  trailers out (an error as trailers only), within the peer's flow-control windows;
- grpc-go's own errors for what it refuses: an unknown service or method (UNIMPLEMENTED), a
  compressed message (no compressor is registered), a message over 4 MiB (RESOURCE_EXHAUSTED).

Streaming calls, TLS and compression are not served: kubelet's pod-resources server has none.
One thread per connection reads its frames and writes its answers, so nothing is shared between
connections but the handlers.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import socket
import struct
import tempfile
import threading
from collections import deque
from typing import Callable

from .common import log

# gRPC status codes (google.golang.org/grpc/codes)
OK, UNKNOWN, RESOURCE_EXHAUSTED, UNIMPLEMENTED, INTERNAL = 0, 2, 8, 12, 13
MAX_RECEIVE_MESSAGE = 4 * 1024 * 1024  # grpc-go's defaultServerMaxReceiveMessageSize

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
DEFAULT_WINDOW = 65535
DEFAULT_MAX_FRAME = 16384
PROTOCOL_ERROR, FRAME_SIZE_ERROR, COMPRESSION_ERROR = 0x1, 0x6, 0x9


class GrpcError(Exception):
    """A call's error status: what the handler (or the server) answers instead of a message."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class ProtocolError(Exception):
    """The peer broke HTTP/2 or HPACK: the connection ends with GOAWAY and this code."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


class _Closed(Exception):
    """The peer closed the connection."""


# --- HPACK (RFC 7541) ------------------------------------------------------------------------------
STATIC_TABLE = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
]

# Appendix B's code lengths for the symbols 0-255 (golang.org/x/net/http2/hpack huffmanCodeLen);
# EOS (256) is 30 bits. The code is canonical: ordered by length, then by symbol, each code is the
# previous one plus one, shifted left by the growth in length; so the lengths give every code.
_HUFFMAN_LENGTHS = bytes(
    [
        13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
        28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
        6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
        5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
        13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
        7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
        15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
        6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
        20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
        24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
        22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
        21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
        26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
        19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
        20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
        26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
        30,
    ]
)  # fmt: skip
EOS = 256


def _canonical_codes(lengths: bytes) -> dict[int, tuple[int, int]]:
    """symbol -> (code, length) of the canonical code with these lengths."""
    codes = {}
    code, previous = 0, 0
    for symbol in sorted(range(len(lengths)), key=lambda s: (lengths[s], s)):
        code <<= lengths[symbol] - previous
        codes[symbol] = (code, lengths[symbol])
        previous = lengths[symbol]
        code += 1
    return codes


HUFFMAN_CODES = _canonical_codes(_HUFFMAN_LENGTHS)
_HUFFMAN_DECODE = {(length, code): symbol for symbol, (code, length) in HUFFMAN_CODES.items()}


def huffman_decode(data: bytes) -> bytes:
    """A Huffman-coded string (5.2): its padding is fewer than 8 bits, all ones, and EOS never appears."""
    out = bytearray()
    code = length = 0
    for byte in data:
        for shift in range(7, -1, -1):
            code = (code << 1) | ((byte >> shift) & 1)
            length += 1
            symbol = _HUFFMAN_DECODE.get((length, code))
            if symbol is not None:
                if symbol == EOS:
                    raise ProtocolError(COMPRESSION_ERROR, "hpack: EOS in a Huffman-coded string")
                out.append(symbol)
                code = length = 0
            elif length > 30:
                raise ProtocolError(COMPRESSION_ERROR, "hpack: invalid Huffman code")
    if length > 7 or code != (1 << length) - 1:
        raise ProtocolError(COMPRESSION_ERROR, "hpack: invalid Huffman padding")
    return bytes(out)


def huffman_encode(data: bytes) -> bytes:
    """The string's Huffman code padded with ones (the tests' client side)."""
    value = bits = 0
    for byte in data:
        code, length = HUFFMAN_CODES[byte]
        value, bits = (value << length) | code, bits + length
    pad = -bits % 8
    value, bits = (value << pad) | ((1 << pad) - 1), bits + pad
    return value.to_bytes(bits // 8, "big") if bits else b""


def _read_int(block: bytes, at: int, prefix: int) -> tuple[int, int]:
    """An integer with an N-bit prefix (5.1), and where the next field starts."""
    if at >= len(block):
        raise ProtocolError(COMPRESSION_ERROR, "hpack: truncated integer")
    mask = (1 << prefix) - 1
    value = block[at] & mask
    at += 1
    if value < mask:
        return value, at
    shift = 0
    while True:
        if at >= len(block) or shift > 28:
            raise ProtocolError(COMPRESSION_ERROR, "hpack: truncated or oversized integer")
        byte = block[at]
        at += 1
        value += (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def encode_int(value: int, prefix: int, first: int = 0) -> bytes:
    """An integer with an N-bit prefix, ``first`` holding the bits above it."""
    mask = (1 << prefix) - 1
    if value < mask:
        return bytes([first | value])
    out = bytearray([first | mask])
    value -= mask
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_headers(headers: list[tuple[str, str]]) -> bytes:
    """Literal header fields without indexing, new names, raw strings (6.2.2): a block any decoder
    reads whatever its table holds, and which leaves that table as it was."""
    out = bytearray()
    for name, value in headers:
        raw_name, raw_value = name.encode("latin-1"), value.encode("latin-1")
        out += b"\x00" + encode_int(len(raw_name), 7) + raw_name + encode_int(len(raw_value), 7) + raw_value
    return bytes(out)


class HpackDecoder:
    """One connection's decoding context: its dynamic table (newest first) and size limit."""

    def __init__(self, limit: int = 4096):
        self.limit = limit  # SETTINGS_HEADER_TABLE_SIZE this end advertises (the default)
        self.max_size = limit
        self.table: deque[tuple[str, str]] = deque()
        self.size = 0

    def _entry(self, index: int) -> tuple[str, str]:
        if 1 <= index <= len(STATIC_TABLE):
            return STATIC_TABLE[index - 1]
        if 0 <= index - len(STATIC_TABLE) - 1 < len(self.table):
            return self.table[index - len(STATIC_TABLE) - 1]
        raise ProtocolError(COMPRESSION_ERROR, f"hpack: invalid index {index}")

    def _evict(self) -> None:
        while self.size > self.max_size:
            name, value = self.table.pop()
            self.size -= len(name) + len(value) + 32

    def _add(self, name: str, value: str) -> None:
        self.table.appendleft((name, value))
        self.size += len(name) + len(value) + 32  # 4.1: octets plus 32
        self._evict()

    def _string(self, block: bytes, at: int) -> tuple[str, int]:
        if at >= len(block):
            raise ProtocolError(COMPRESSION_ERROR, "hpack: truncated string")
        huffman = block[at] & 0x80
        length, at = _read_int(block, at, 7)
        if at + length > len(block):
            raise ProtocolError(COMPRESSION_ERROR, "hpack: truncated string")
        raw = block[at : at + length]
        return (huffman_decode(raw) if huffman else raw).decode("latin-1"), at + length

    def decode(self, block: bytes) -> list[tuple[str, str]]:
        headers = []
        at = 0
        while at < len(block):
            first = block[at]
            if first & 0x80:  # 6.1 indexed
                index, at = _read_int(block, at, 7)
                headers.append(self._entry(index))
                continue
            if first & 0xE0 == 0x20:  # 6.3 dynamic table size update
                size, at = _read_int(block, at, 5)
                if size > self.limit:
                    raise ProtocolError(COMPRESSION_ERROR, f"hpack: table size {size} over {self.limit}")
                self.max_size = size
                self._evict()
                continue
            indexing = bool(first & 0x40)  # 6.2.1, else 6.2.2 without / 6.2.3 never indexed
            index, at = _read_int(block, at, 6 if indexing else 4)
            if index:
                name = self._entry(index)[0]
            else:
                name, at = self._string(block, at)
            value, at = self._string(block, at)
            if indexing:
                self._add(name, value)
            headers.append((name, value))
        return headers


# --- gRPC ------------------------------------------------------------------------------------------
def percent_encode(message: str) -> str:
    """grpc-message's encoding: bytes outside printable ASCII, and '%', as %XX of their UTF-8."""
    return "".join(chr(b) if 0x20 <= b <= 0x7E and b != 0x25 else f"%{b:02X}" for b in message.encode())


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


Handler = Callable[[bytes], bytes]


class _Stream:
    def __init__(self, ident: int, headers: list[tuple[str, str]], window: int):
        self.ident = ident
        self.headers = headers
        self.body = bytearray()
        self.window = window  # what this end may still send on it
        self.out: deque[tuple[int, bytes, bool]] = deque()  # (HEADERS or DATA, payload, END_STREAM)
        self.answered = False


class _Connection:
    def __init__(self, sock: socket.socket, server: UnaryServer):
        self.sock = sock
        self.server = server
        self.decoder = HpackDecoder()
        self.streams: dict[int, _Stream] = {}
        self.window = DEFAULT_WINDOW  # the connection's send window
        self.initial_window = DEFAULT_WINDOW  # the peer's SETTINGS_INITIAL_WINDOW_SIZE
        self.max_frame = DEFAULT_MAX_FRAME  # the peer's SETTINGS_MAX_FRAME_SIZE
        self.buffer = bytearray()

    def _read(self, count: int) -> bytes:
        while len(self.buffer) < count:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise _Closed
            self.buffer += chunk
        data = bytes(self.buffer[:count])
        del self.buffer[:count]
        return data

    def _frame(self) -> tuple[int, int, int, bytes]:
        header = self._read(9)
        length = int.from_bytes(header[:3], "big")
        if length > DEFAULT_MAX_FRAME:  # this end advertises the default SETTINGS_MAX_FRAME_SIZE
            raise ProtocolError(FRAME_SIZE_ERROR, f"frame of {length} bytes over {DEFAULT_MAX_FRAME}")
        stream = int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
        return header[3], header[4], stream, self._read(length)

    def run(self) -> None:
        try:
            if self._read(len(PREFACE)) != PREFACE:
                return  # not HTTP/2 with prior knowledge: grpc-go closes such a connection too
            self.sock.sendall(frame(SETTINGS, 0, 0))
            while True:
                self._handle(*self._frame())
                self._flush()
        except ProtocolError as exc:
            last = max(self.streams, default=0)
            log(f"pod-resources: connection ended: {exc}")
            with contextlib.suppress(OSError):
                self.sock.sendall(frame(GOAWAY, 0, 0, struct.pack(">II", last, exc.code)))
        except (_Closed, OSError):
            pass
        finally:
            self.sock.close()

    @staticmethod
    def _unpad(flags: int, payload: bytes) -> bytes:
        if flags & PADDED:
            if not payload or payload[0] >= len(payload):
                raise ProtocolError(PROTOCOL_ERROR, "padding longer than the frame")
            payload = payload[1 : len(payload) - payload[0]]
        return payload

    def _handle(self, kind: int, flags: int, ident: int, payload: bytes) -> None:
        if kind == SETTINGS:
            if flags & ACK:
                return
            if ident or len(payload) % 6:
                raise ProtocolError(FRAME_SIZE_ERROR if len(payload) % 6 else PROTOCOL_ERROR, "bad SETTINGS frame")
            for at in range(0, len(payload), 6):
                key, value = struct.unpack(">HI", payload[at : at + 6])
                if key == 0x4:  # INITIAL_WINDOW_SIZE: every stream's window moves by the change (6.9.2)
                    for stream in self.streams.values():
                        stream.window += value - self.initial_window
                    self.initial_window = value
                elif key == 0x5:
                    self.max_frame = value
            self.sock.sendall(frame(SETTINGS, ACK, 0))
        elif kind == PING:
            if not flags & ACK:
                self.sock.sendall(frame(PING, ACK, 0, payload))
        elif kind == WINDOW_UPDATE:
            increment = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
            if ident == 0:
                self.window += increment
            elif ident in self.streams:
                self.streams[ident].window += increment
        elif kind == HEADERS:
            payload = self._unpad(flags, payload)
            if flags & PRIORITY_FLAG:
                payload = payload[5:]
            block = payload
            end_stream = bool(flags & END_STREAM)
            while not flags & END_HEADERS:
                kind, flags, more, payload = self._frame()
                if kind != CONTINUATION or more != ident:
                    raise ProtocolError(PROTOCOL_ERROR, "a header block continued by another frame")
                block += payload
            headers = self.decoder.decode(block)  # always: the table must stay in step with the peer's
            stream = self.streams.get(ident)
            if stream is None:
                if ident % 2 == 0:
                    raise ProtocolError(PROTOCOL_ERROR, f"client stream {ident} has an even id")
                stream = self.streams[ident] = _Stream(ident, headers, self.initial_window)
            if end_stream:
                self._call(stream)
        elif kind == DATA:
            consumed = len(payload)
            payload = self._unpad(flags, payload)
            stream = self.streams.get(ident)
            if stream is not None and not stream.answered:
                stream.body += payload
            if consumed:  # hand the bytes back at once: a unary call's message is read whole
                self.sock.sendall(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", consumed)))
                if stream is not None and not flags & END_STREAM:
                    self.sock.sendall(frame(WINDOW_UPDATE, 0, ident, struct.pack(">I", consumed)))
            if stream is not None and flags & END_STREAM:
                self._call(stream)
        elif kind == RST_STREAM:
            self.streams.pop(ident, None)
        elif kind == GOAWAY:
            raise _Closed
        elif kind == PUSH_PROMISE:
            raise ProtocolError(PROTOCOL_ERROR, "a client sent PUSH_PROMISE")
        # PRIORITY and unknown frame types are ignored (5.5)

    def _call(self, stream: _Stream) -> None:
        """Answer the stream's call: status 200 and the message, or the error as trailers only."""
        if stream.answered:
            return
        stream.answered = True
        headers = dict(stream.headers)
        content_type = headers.get("content-type", "")
        if content_type != "application/grpc" and not content_type.startswith(
            ("application/grpc+", "application/grpc;")
        ):
            # grpc-go's handler answers a request that is not gRPC with 415
            stream.out.append((HEADERS, encode_headers([(":status", "415")]), True))
            return
        try:
            response = self.server.call(headers.get(":path", ""), headers.get("grpc-encoding"), bytes(stream.body))
        except GrpcError as exc:
            trailers = [("grpc-status", str(exc.code)), ("grpc-message", percent_encode(exc.message))]
            stream.out.append(
                (HEADERS, encode_headers([(":status", "200"), ("content-type", "application/grpc"), *trailers]), True)
            )
            return
        stream.out.append((HEADERS, encode_headers([(":status", "200"), ("content-type", "application/grpc")]), False))
        stream.out.append((DATA, b"\x00" + struct.pack(">I", len(response)) + response, False))
        stream.out.append((HEADERS, encode_headers([("grpc-status", "0")]), True))

    def _send_headers(self, ident: int, block: bytes, end_stream: bool) -> None:
        first, rest = block[: self.max_frame], block[self.max_frame :]
        flags = (END_STREAM if end_stream else 0) | (0 if rest else END_HEADERS)
        out = frame(HEADERS, flags, ident, first)
        while rest:
            chunk, rest = rest[: self.max_frame], rest[self.max_frame :]
            out += frame(CONTINUATION, 0 if rest else END_HEADERS, ident, chunk)
        self.sock.sendall(out)

    def _flush(self) -> None:
        """Send what the answered streams have queued, DATA as far as both windows allow."""
        for stream in [s for s in self.streams.values() if s.out]:
            while stream.out:
                kind, payload, end_stream = stream.out[0]
                if kind == HEADERS:
                    self._send_headers(stream.ident, payload, end_stream)
                    stream.out.popleft()
                    continue
                size = min(len(payload), self.window, stream.window, self.max_frame)
                if size <= 0:
                    break  # blocked until the peer's WINDOW_UPDATE
                self.sock.sendall(frame(DATA, 0, stream.ident, payload[:size]))
                self.window -= size
                stream.window -= size
                if size == len(payload):
                    stream.out.popleft()
                else:
                    stream.out[0] = (kind, payload[size:], end_stream)
            if not stream.out and stream.answered:
                del self.streams[stream.ident]


class UnaryServer:
    """Unary gRPC services on a unix socket. ``services`` maps a service's full name to its
    methods, each taking the request message's bytes and returning the response's (or raising
    GrpcError); ``interceptor`` runs before every registered method, as a grpc-go unary
    interceptor does (not for an unknown method, which the server answers itself)."""

    def __init__(
        self,
        path: pathlib.Path,
        services: dict[str, dict[str, Handler]],
        interceptor: Callable[[], None] | None = None,
    ):
        self.path = pathlib.Path(path)
        self.services = services
        self.interceptor = interceptor
        self.listener: socket.socket | None = None
        self.thread: threading.Thread | None = None
        self.stopping = threading.Event()
        self.connections: set[socket.socket] = set()
        self.lock = threading.Lock()

    def call(self, path: str, encoding: str | None, body: bytes) -> bytes:
        """grpc-go's processUnaryRPC for one request: route, read the one message, intercept, handle."""
        service, slash, method = path[1:].rpartition("/")
        if not path.startswith("/") or not slash:
            raise GrpcError(UNIMPLEMENTED, f"malformed method name: {path!r}")
        if service not in self.services:
            raise GrpcError(UNIMPLEMENTED, f"unknown service {service}")
        handler = self.services[service].get(method)
        if handler is None:
            raise GrpcError(UNIMPLEMENTED, f"unknown method {method} for service {service}")
        if len(body) < 5:
            raise GrpcError(INTERNAL, "grpc: the request has no message")  # io.ErrUnexpectedEOF
        compressed, length = body[0], struct.unpack(">I", body[1:5])[0]
        if length > MAX_RECEIVE_MESSAGE:
            raise GrpcError(
                RESOURCE_EXHAUSTED, f"grpc: received message larger than max ({length} vs. {MAX_RECEIVE_MESSAGE})"
            )
        if compressed and encoding not in (None, "identity"):
            raise GrpcError(UNIMPLEMENTED, f'grpc: Decompressor is not installed for grpc-encoding "{encoding}"')
        if compressed:
            raise GrpcError(INTERNAL, "grpc: compressed flag set with identity or empty encoding")
        if len(body) != 5 + length:
            raise GrpcError(INTERNAL, "grpc: a unary request has exactly one message")
        if self.interceptor is not None:
            self.interceptor()
        try:
            return handler(body[5:])
        except GrpcError:
            raise
        except Exception as exc:  # noqa: BLE001 - the call fails, the server and the kubelet keep running
            log(f"pod-resources: {path} failed: {exc!r}")
            raise GrpcError(UNKNOWN, str(exc)) from None

    def start(self) -> None:
        """Listen as kubelet's util.CreateListener does: the socket's directory made with mode
        0750 when missing, an old socket file unlinked, the socket bound on a temporary name in
        that directory and renamed to its own (no client ever sees a half-made socket). The
        socket file's mode is what the process's umask leaves, as for kubelet. OSError when any
        step fails, with kubelet's words."""
        directory = self.path.parent
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise OSError(f'failed to unlink socket file "{self.path}": {exc}') from None
        try:
            directory.mkdir(mode=0o750, parents=True, exist_ok=True)
        except OSError as exc:
            raise OSError(f'error creating socket directory "{directory}": {exc}') from None
        handle, temporary = tempfile.mkstemp(prefix="", dir=directory)
        os.close(handle)
        os.unlink(temporary)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(temporary)
            listener.listen(128)
            os.rename(temporary, self.path)
        except OSError:
            listener.close()
            pathlib.Path(temporary).unlink(missing_ok=True)
            raise
        listener.settimeout(0.2)  # the accept loop looks at ``stopping`` this often
        self.listener = listener
        self.stopping.clear()
        self.thread = threading.Thread(target=self._accept, name="pod-resources", daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        assert self.listener is not None
        while not self.stopping.is_set():
            try:
                sock = self.listener.accept()[0]
            except TimeoutError:
                continue
            except OSError:
                if self.stopping.is_set():
                    return
                raise
            sock.settimeout(None)
            with self.lock:
                self.connections.add(sock)
            threading.Thread(target=self._serve, args=(sock,), name="pod-resources-conn", daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        try:
            _Connection(sock, self).run()
        finally:
            with self.lock:
                self.connections.discard(sock)

    def stop(self) -> None:
        """Stop accepting and end the open connections (their clients see the connection close, as
        when kubelet exits); the socket file stays, as kubelet leaves it."""
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(timeout=2)
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        with self.lock:
            for sock in self.connections:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
