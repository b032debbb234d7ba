"""Measuring a link between two workers' shapers: round trip time, throughput and packet loss.

Each shaper serves, on PROBE_PORT of its worker's network namespace (the same path, relay and
rules as TensorFlow's traffic), a line protocol over TCP and a counter over UDP:

  PING          -> PONG                        (round trip time)
  SINK <bytes>  then that many bytes -> GOT    (throughput)
  COUNT <token> -> how many UDP datagrams carrying <token> arrived (loss)
"""

import dataclasses
import socket
import socketserver
import statistics
import threading
import time
import uuid

PROBE_PORT = 12398
PINGS = 21
DATAGRAMS = 5000


class _Counts:
    def __init__(self):
        self._lock = threading.Lock()
        self._seen: dict[str, set[int]] = {}

    def add(self, token: str, sequence: int) -> None:
        with self._lock:
            self._seen.setdefault(token, set()).add(sequence)

    def count(self, token: str) -> int:
        with self._lock:
            return len(self._seen.get(token, ()))


class _TCPHandler(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            command, _, argument = line.decode().strip().partition(" ")
            if command == "PING":
                self.wfile.write(b"PONG\n")
            elif command == "SINK":
                remaining = int(argument)
                while remaining > 0:
                    chunk = self.rfile.read(min(remaining, 1 << 16))
                    if not chunk:
                        return
                    remaining -= len(chunk)
                self.wfile.write(b"GOT\n")
            elif command == "COUNT":
                # Datagrams the kernel dropped for want of buffer passed the loss rule: they count
                # as arrived (the probe's own overflow is no loss of the link).
                overflowed = receive_buffer_errors() - self.server.buffer_errors_at_start
                self.wfile.write(f"{self.server.counts.count(argument) + overflowed}\n".encode())
            else:
                return
            self.wfile.flush()


class _UDPHandler(socketserver.BaseRequestHandler):
    def handle(self):
        token, _, sequence = self.request[0].decode(errors="replace").partition(" ")
        if sequence.isdigit():
            self.server.counts.add(token, int(sequence))


def receive_buffer_errors() -> int:
    """This network namespace's count of UDP datagrams dropped because a receive buffer was full."""
    with open("/proc/net/snmp") as snmp:
        header, values = [line.split() for line in snmp if line.startswith("Udp:")][:2]
    return int(values[header.index("RcvbufErrors")])


class Server:
    """The probe endpoints, TCP and UDP, on `port` of every address; in threads of their own."""

    def __init__(self, port: int):
        counts = _Counts()
        buffer_errors = receive_buffer_errors()
        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self._tcp = socketserver.ThreadingTCPServer(("0.0.0.0", port), _TCPHandler)
        self._udp = socketserver.UDPServer(("0.0.0.0", port), _UDPHandler)
        for server in (self._tcp, self._udp):
            server.daemon_threads = True
            server.counts = counts
            server.buffer_errors_at_start = buffer_errors
            threading.Thread(target=server.serve_forever, daemon=True).start()

    def close(self) -> None:
        for server in (self._tcp, self._udp):
            server.shutdown()
            server.server_close()


@dataclasses.dataclass(frozen=True)
class Link:
    """What was measured towards one peer; None where it was not measured."""

    peer: str
    rtt_ms: float
    throughput_mbit: float | None = None
    loss: float | None = None


def connect(host: str, port: int, deadline: float) -> socket.socket:
    """Connects once the peer's shaper is up (it may start after this one), or raises at the deadline."""
    while True:
        try:
            connection = socket.create_connection((host, port), timeout=5)
            connection.settimeout(30)
            return connection
        except OSError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)  # The peer's probe is not up yet: nothing to wait on but time.


def _ask(connection: socket.socket, reader, line: str) -> str:
    connection.sendall(line.encode() + b"\n")
    answer = reader.readline().decode().strip()
    if not answer:
        raise ConnectionError(f"the peer's probe closed the connection after {line.split()[0]}")
    return answer


def round_trip_ms(connection, reader) -> float:
    _ask(connection, reader, "PING")  # The first may still set up the relay's path.
    times = []
    for _ in range(PINGS):
        started = time.perf_counter()
        _ask(connection, reader, "PING")
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def throughput_mbit(connection, reader, size: int) -> float:
    payload = b"\0" * (1 << 16)
    started = time.perf_counter()
    connection.sendall(f"SINK {size}\n".encode())
    remaining = size
    while remaining > 0:
        sent = connection.send(payload[: min(remaining, len(payload))])
        remaining -= sent
    if reader.readline().strip() != b"GOT":
        raise ConnectionError("the peer's probe did not confirm the bytes sent")
    return size * 8 / (time.perf_counter() - started) / 1e6


def loss_rate(host: str, port: int, connection, reader, datagrams: int = DATAGRAMS) -> float:
    """Datagrams sent at a steady pace (so no buffer overflows), then the peer says how many came."""
    token = uuid.uuid4().hex
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        sender.connect((host, port))
        for sequence in range(datagrams):
            sender.send(f"{token} {sequence}".encode())
            if sequence % 20 == 19:
                time.sleep(0.005)  # About 4,000 a second: a pace the peer's probe keeps up with.
    time.sleep(0.5)  # The last datagrams are in flight; UDP says nothing when they land.
    received = int(_ask(connection, reader, f"COUNT {token}"))
    return 1 - received / datagrams


def measure(host: str, *, port: int = PROBE_PORT, deadline: float, sink_bytes: int = 0, loss: bool = False) -> Link:
    """Measures the link, again from the start if the peer's end closed on it before the deadline."""
    while True:
        try:
            with connect(host, port, deadline) as connection, connection.makefile("rb") as reader:
                rtt = round_trip_ms(connection, reader)
                throughput = throughput_mbit(connection, reader, sink_bytes) if sink_bytes else None
                lost = loss_rate(host, port, connection, reader) if loss else None
            return Link(peer=host, rtt_ms=rtt, throughput_mbit=throughput, loss=lost)
        except ConnectionError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)  # The peer's shaper is still setting up behind its relay.
