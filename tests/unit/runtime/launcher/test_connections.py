"""TensorFlow's traffic as the launcher counts it: sock_diag's answers parsed, real loopback
connections read, the poller's totals, and the record in a worker's log."""

import errno
import json
import socket
import struct
import sys
import threading
import time

import pytest

from tests.conftest import free_port, one_worker_env, run_python
from trainer.contract.cluster import from_template
from trainer.contract.exitcodes import ExitCode
from trainer.launcher import connections
from trainer.launcher.connections import Connection, dump_request, parse
from trainer.launcher.traffic import Traffic, TrafficPoller, tensorflow_ports
from trainer.verifier.events import events

SEQUENCE = 7
MEMINFO = 1  # INET_DIAG_MEMINFO: an attribute the parser must step over.


def attribute(kind: int, payload: bytes) -> bytes:
    """A struct rtattr with its payload, padded to 4 bytes."""
    data = struct.pack("=HH", 4 + len(payload), kind) + payload
    return data + b"\0" * (-len(data) % 4)


def tcp_info(sent: int, received: int, length: int = 232) -> bytes:
    """A struct tcp_info of `length` bytes whose byte counters (if it is long enough) are these."""
    info = bytearray(length)
    if length >= 136:
        struct.pack_into("=QQ", info, 120, sent, received)
    return bytes(info)


def message(kind: int, body: bytes, sequence: int = SEQUENCE) -> bytes:
    """A netlink message: struct nlmsghdr and its body, padded to 4 bytes."""
    data = struct.pack("=IHHII", 16 + len(body), kind, 0x2, sequence, 0) + body
    return data + b"\0" * (-len(data) % 4)


def socket_message(cookie: int, local_port: int, remote_port: int, *attributes: bytes, sequence=SEQUENCE) -> bytes:
    """The kernel's answer for one socket: struct inet_diag_msg (an ESTABLISHED IPv6 one) and its attributes."""
    identity = (
        struct.pack(">HH", local_port, remote_port)
        + bytes(32)
        + struct.pack("=III", 0, cookie & 0xFFFFFFFF, cookie >> 32)
    )
    body = struct.pack("=BBBB", socket.AF_INET6, 1, 0, 0) + identity + struct.pack("=IIIII", 0, 0, 0, 1000, 4242)
    assert len(body) == 72
    return message(connections.SOCK_DIAG_BY_FAMILY, body + b"".join(attributes), sequence)


def done(sequence: int = SEQUENCE) -> bytes:
    return message(connections.NLMSG_DONE, struct.pack("=i", 0), sequence)


# -- the parser, on hand-built answers ------------------------------------------------------------


def test_the_request_asks_for_every_tcp_socket_of_a_family_with_its_tcp_info():
    request = dump_request(socket.AF_INET6, SEQUENCE)
    assert len(request) == 16 + 56
    assert struct.unpack_from("=IHHII", request) == (72, 20, 0x301, SEQUENCE, 0)
    family, protocol, extensions, states = struct.unpack_from("=BBBxI", request, 16)
    assert (family, protocol, extensions) == (socket.AF_INET6, socket.IPPROTO_TCP, 1 << (2 - 1))
    assert states & (1 << 1)  # ESTABLISHED.
    assert not states & (1 << 10)  # Not LISTEN: a listener moves no bytes.
    assert request[24:] == bytes(48)  # Every socket: no address, port or cookie given.


def test_a_datagram_gives_each_socket_its_cookie_ports_and_counters_and_says_when_the_dump_is_done():
    cookie = (5 << 32) | 9  # Both halves of idiag_cookie matter.
    data = (
        socket_message(cookie, 12345, 40001, attribute(MEMINFO, bytes(16)), attribute(2, tcp_info(61234, 60871)))
        + socket_message(10, 40002, 12345, attribute(2, tcp_info(7, 8)))
        + done()
    )
    reply = parse(data, SEQUENCE)
    assert reply.done
    unspecified = bytes(16)  # The addresses socket_message gives: IPv6's `::`.
    assert reply.connections == [
        Connection(
            cookie=cookie, state=1, local_port=12345, remote_port=40001, sent=61234, received=60871,
            local_address=unspecified, remote_address=unspecified,
        ),
        Connection(
            cookie=10, state=1, local_port=40002, remote_port=12345, sent=7, received=8,
            local_address=unspecified, remote_address=unspecified,
        ),
    ]  # fmt: skip


def test_a_datagram_without_the_end_of_the_dump_is_not_done():
    reply = parse(socket_message(1, 12345, 40001, attribute(2, tcp_info(1, 2))), SEQUENCE)
    assert not reply.done
    assert len(reply.connections) == 1


def test_another_requests_messages_and_sockets_without_tcp_info_are_skipped():
    data = (
        socket_message(1, 12345, 40001, attribute(2, tcp_info(1, 2)), sequence=SEQUENCE + 1)
        + socket_message(2, 12345, 40002, attribute(MEMINFO, bytes(16)))
        + done(SEQUENCE + 1)
        + socket_message(3, 12345, 40003, attribute(2, tcp_info(3, 4)))
    )
    reply = parse(data, SEQUENCE)
    assert [connection.cookie for connection in reply.connections] == [3]
    assert not reply.done


def test_a_tcp_info_without_the_byte_counters_is_refused_naming_the_kernel_it_needs():
    data = socket_message(1, 12345, 40001, attribute(2, tcp_info(0, 0, length=104))) + done()
    with pytest.raises(ValueError, match=r"tcp_info has 104 bytes; its byte counters need 136 \(Linux 4.2"):
        parse(data, SEQUENCE)


def test_the_kernels_error_is_raised_with_its_errno():
    data = message(connections.NLMSG_ERROR, struct.pack("=i", -errno.EPERM) + bytes(16))
    with pytest.raises(OSError, match="sock_diag answered: Operation not permitted") as raised:
        parse(data, SEQUENCE)
    assert raised.value.errno == errno.EPERM


@pytest.mark.parametrize("cut", [20, 60])
def test_a_cut_answer_is_refused(cut):
    data = socket_message(1, 12345, 40001, attribute(2, tcp_info(1, 2)))
    with pytest.raises(ValueError, match="netlink message of"):
        parse(data[:cut], SEQUENCE)


# -- the reader, on this namespace's own loopback connections -------------------------------------

AMOUNT = 300_000


def exchange(port: int, family: socket.AddressFamily = socket.AF_INET) -> tuple[socket.socket, socket.socket]:
    """A connection to `port` on loopback that has carried AMOUNT bytes each way; (client, server) ends.

    An IPv6 one is as gRPC's often are: IPv6 sockets at both ends, with IPv4-mapped addresses.
    """
    host = "::ffff:127.0.0.1" if family == socket.AF_INET6 else "127.0.0.1"
    with socket.create_server((host, port), family=family, dualstack_ipv6=family == socket.AF_INET6) as listener:
        client = socket.create_connection((host, port))
        server, _ = listener.accept()
    for sender, receiver in ((client, server), (server, client)):
        sending = threading.Thread(target=sender.sendall, args=(b"x" * AMOUNT,))
        sending.start()
        received = 0
        while received < AMOUNT:
            received += len(receiver.recv(65536))
        sending.join()
    return client, server


@pytest.mark.parametrize("family", [socket.AF_INET, socket.AF_INET6])
def test_the_reader_counts_the_bytes_of_connections_on_the_given_port_only(family):
    port, other = free_port(), free_port()
    counted = exchange(port, family)
    ignored = exchange(other)
    try:
        found = connections.read({port})
        # Both ends are in this namespace: the connection is counted once, at its end on the port.
        [server] = found
        assert (server.local_port, server.remote_port) == (port, counted[0].getsockname()[1])
        assert server.sent >= AMOUNT and server.received >= AMOUNT
        assert all(other not in (connection.local_port, connection.remote_port) for connection in found)
    finally:
        for end in (*counted, *ignored):
            end.close()


def test_a_connection_closed_before_the_last_poll_still_counts():
    port = free_port()
    poller = TrafficPoller([port], interval=0.05)
    poller.start()
    client, server = exchange(port)
    time.sleep(0.3)  # Polls see the counters...
    client.close()
    server.close()
    deadline = time.monotonic() + 5
    while connections.read({port}) and time.monotonic() < deadline:
        time.sleep(0.05)  # ...and the kernel forgets the connection.
    assert connections.read({port}) == []
    traffic = poller.stop()
    # One connection, both of whose ends are here: counted once, at its end on the port.
    assert traffic.sent >= AMOUNT and traffic.received >= AMOUNT
    assert traffic.connections == 1
    assert traffic.polls >= 3


# -- the poller's totals, with a stand-in reader --------------------------------------------------


class Readings:
    """A stand-in for connections.read: each call gives the next of the readings, then the last again."""

    def __init__(self, *readings):
        self._readings = list(readings)
        self.ports = None

    def __call__(self, ports):
        self.ports = ports
        reading = self._readings.pop(0) if len(self._readings) > 1 else self._readings[0]
        if isinstance(reading, Exception):
            raise reading
        return reading


ESTABLISHED, FIN_WAIT2 = 1, 5


def one(cookie, sent, received, state=ESTABLISHED):
    return Connection(
        cookie=cookie, state=state, local_port=40000 + cookie, remote_port=12345, sent=sent, received=received
    )


def test_the_totals_keep_each_sockets_largest_counters_and_leave_out_what_came_before_the_start():
    readings = Readings(
        [one(1, 500, 400, FIN_WAIT2)],  # At the start: an earlier run's connection, closing.
        [one(1, 500, 400, FIN_WAIT2), one(2, 1000, 900)],
        [one(2, 3000, 2900), one(3, 10, 20)],
        [],  # Both have gone by the last poll.
    )
    poller = TrafficPoller([12345], interval=3600, read=readings)
    poller.start()
    poller._poll()
    poller._poll()
    traffic = poller.stop()
    assert traffic == Traffic((12345,), sent=3010, received=2920, connections=2, polls=4)
    assert readings.ports == (12345,)


def test_a_closing_connection_there_at_the_start_counts_only_what_it_moved_since():
    readings = Readings([one(1, 500, 400, FIN_WAIT2)], [one(1, 800, 450, FIN_WAIT2)])
    poller = TrafficPoller([12345], interval=3600, read=readings)
    poller.start()
    assert poller.stop() == Traffic((12345,), sent=300, received=50, connections=1, polls=2)


def test_a_connection_established_at_the_start_is_this_runs_and_counts_in_full():
    readings = Readings([one(1, 500, 400)], [one(1, 800, 450)])
    poller = TrafficPoller([12345], interval=3600, read=readings)
    poller.start()
    assert poller.stop() == Traffic((12345,), sent=800, received=450, connections=1, polls=2)


@pytest.mark.parametrize(
    "error",
    [PermissionError(errno.EPERM, "Operation not permitted"), ValueError("a cut answer"), struct.error("short")],
)
def test_a_reader_that_always_fails_gives_why_and_never_raises(error):
    poller = TrafficPoller([12345], interval=0.01, read=Readings(error))
    poller.start()
    time.sleep(0.05)
    traffic = poller.stop()
    assert traffic.unavailable.startswith(f"cannot read the sockets' counters from sock_diag: {type(error).__name__}")
    assert json.loads(traffic.event()) == {
        "event": "connections",
        "ports": [12345],
        "unavailable": traffic.unavailable,
    }


def test_a_reader_that_failed_once_still_counts_what_the_other_polls_saw():
    poller = TrafficPoller([12345], interval=3600, read=Readings(OSError("busy"), [one(1, 10, 20)]))
    poller.start()
    assert poller.stop() == Traffic((12345,), sent=10, received=20, connections=1, polls=1)


def test_the_record_is_one_json_line_of_the_agreed_shape():
    line = Traffic((12345,), sent=61234, received=60871, connections=2, polls=48).event()
    assert "\n" not in line
    assert line == (
        '{"event": "connections", "ports": [12345], "sent": 61234, "received": 60871, "connections": 2, "polls": 48}'
    )


def test_the_ports_are_the_workers_tensorflow_ports_not_the_launchers():
    assert tensorflow_ports(from_template("worker-0,worker-1", 0)) == (12345,)
    assert tensorflow_ports(from_template("a:2222,b:12345,c:2222", 1)) == (2222, 12345)


# -- the launcher, with a stand-in program that talks on its TensorFlow port ----------------------

# Talks on each port it is given, AMOUNT bytes each way, then closes before it ends.
PROGRAM = f"""
import socket, sys, threading, time
def drain(end):
    received = 0
    while received < {AMOUNT}:
        received += len(end.recv(65536))
for port in map(int, sys.argv[1:]):
    with socket.create_server(("127.0.0.1", port)) as listener:
        client = socket.create_connection(("127.0.0.1", port))
        server, _ = listener.accept()
    readers = [threading.Thread(target=drain, args=(end,)) for end in (client, server)]
    for reader in readers:
        reader.start()
    client.sendall(bytes({AMOUNT}))
    server.sendall(bytes({AMOUNT}))
    for reader in readers:
        reader.join()
    time.sleep(1)  # Long enough for the launcher's polls to see it; TensorFlow's connections last the run.
    client.close()
    server.close()
print("trained", flush=True)
"""


def test_the_launcher_prints_the_record_into_the_workers_log_before_its_last_lines(tmp_path):
    port, other = free_port(), free_port()
    env = one_worker_env(tmp_path, f"127.0.0.1:{port}", PYTHONPATH=".")  # Run from the project's root.
    command = [sys.executable, "-c", PROGRAM, str(port), str(other)]
    result = run_python("-m", "trainer.launcher", "--", *command, env=env)
    assert result.returncode == ExitCode.OK, result.stdout + result.stderr
    log = (tmp_path / "127.0.0.1.log").read_text()
    [record] = events(log, "connections")
    assert record["ports"] == [port]
    # Its one connection, both ends here, counted once; the one on the other port is not TensorFlow's.
    assert record["sent"] >= AMOUNT and record["received"] >= AMOUNT
    assert record["connections"] == 1
    assert record["polls"] >= 2
    assert list(record) == ["event", "ports", "sent", "received", "connections", "polls"]
    lines = log.splitlines()
    assert lines.index(json.dumps(record)) > lines.index("trained")
    assert f"{json.dumps(record)}\n" in result.stdout


def test_a_connection_with_both_ends_here_is_counted_once_at_its_end_on_the_port():
    here, peer = b"\0" * 10 + b"\xff\xff" + bytes([172, 29, 0, 2]), b"\0" * 10 + b"\xff\xff" + bytes([172, 29, 0, 3])

    def connection(cookie, local, local_port, remote, remote_port):
        return connections.Connection(
            cookie=cookie, state=1, local_port=local_port, remote_port=remote_port, sent=10, received=10,
            local_address=local, remote_address=remote,
        )  # fmt: skip

    to_itself = [connection(1, here, 40000, here, 12345), connection(2, here, 12345, here, 40000)]
    to_peer = [connection(3, here, 40001, peer, 12345), connection(4, here, 12345, peer, 40002)]
    kept = connections.one_end_each([*to_itself, *to_peer], {12345})
    assert [each.cookie for each in kept] == [2, 3, 4]
