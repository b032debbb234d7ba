"""This network namespace's TCP connections and their byte counters, read from the kernel's sock_diag.

The launcher counts TensorFlow's own traffic between the workers (trainer/launcher/traffic.py): the
bytes of the TCP connections one end of which is a worker's TensorFlow port. An interface's
counters cannot tell those bytes from the launchers' heartbeats, and the image has no `ss`; so the
launcher asks the kernel itself, over the netlink interface `ss` uses, with the standard library:

- an `AF_NETLINK` socket of protocol `NETLINK_SOCK_DIAG`, which needs no privilege for the sockets
  of its own network namespace (a container with every capability dropped may ask);
- one `SOCK_DIAG_BY_FAMILY` dump request per family, `struct inet_diag_req_v2` for TCP, `AF_INET`
  and `AF_INET6` (gRPC often listens and connects on IPv6 sockets, with IPv4-mapped addresses),
  which asks for `INET_DIAG_INFO`: each socket's `struct tcp_info`;
- each answer is a `struct inet_diag_msg` (its `inet_diag_sockid`: the ports and addresses, and the
  socket's cookie, which names it for the namespace's life) followed by attributes (`struct rtattr`).

A connection both of whose ends are in the namespace has two sockets here, and is counted once.

The counters are per connection, `tcpi_bytes_acked` (bytes sent that the peer acknowledged) and
`tcpi_bytes_received`, at offsets 120 and 128 of `struct tcp_info` since Linux 4.2. Structures:
include/uapi/linux/netlink.h, sock_diag.h, inet_diag.h and tcp.h in the Linux sources.
"""

import dataclasses
import os
import socket
import struct
from collections.abc import Collection

NETLINK_SOCK_DIAG = 4  # Python's socket module does not name it.
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300  # NLM_F_ROOT | NLM_F_MATCH.
NLMSG_ERROR = 2
NLMSG_DONE = 3
INET_DIAG_INFO = 2

# struct nlmsghdr: length, type, flags, sequence, port id.
HEADER = struct.Struct("=IHHII")
# struct inet_diag_req_v2: family, protocol, extensions, pad, states, then its inet_diag_sockid
# (ports and addresses big-endian, interface, cookie), all zero: every socket.
REQUEST = struct.Struct("=BBBxI48x")
# struct inet_diag_msg: family, state, timer, retransmits, then its inet_diag_sockid (source and
# destination ports, big-endian; the addresses, 2 x 16 bytes; the interface; the cookie, two
# halves), then expires, the read and write queues, uid and inode: 72 bytes.
MESSAGE_SIZE = 72
PORTS = struct.Struct(">HH")  # At offset 4.
COOKIE = struct.Struct("=II")  # At offset 44, low half first.
# struct rtattr: length (header included), type; attributes are aligned to 4 bytes.
ATTRIBUTE = struct.Struct("=HH")
# tcpi_bytes_acked and tcpi_bytes_received, adjacent __u64s of struct tcp_info since Linux 4.2.
COUNTERS = struct.Struct("=QQ")
COUNTERS_OFFSET = 120
TCP_INFO_NEEDED = COUNTERS_OFFSET + COUNTERS.size  # 136 bytes.

# The states of sockets with a connection's counters (include/net/tcp_states.h): not LISTEN (10),
# nor TIME_WAIT (6) and the SYN_RECV request sockets (3, 12), which are minisockets without tcp_info.
ESTABLISHED, SYN_SENT = 1, 2
STATES = sum(1 << state for state in (ESTABLISHED, SYN_SENT, 4, 5, 7, 8, 9, 11))
# One reply can be a few sockets or many; a netlink dump's datagram is at most 32 KiB.
RECEIVE_SIZE = 65536
# The kernel answers at once; a wait this long means something is wrong, never a busy namespace.
TIMEOUT = 2.0


@dataclasses.dataclass(frozen=True)
class Connection:
    """One TCP socket of the namespace: its cookie, its state, its ports, and its byte counters."""

    cookie: int
    state: int  # As include/net/tcp_states.h numbers them: ESTABLISHED is 1.
    local_port: int
    remote_port: int
    sent: int  # tcpi_bytes_acked: sent and acknowledged by the peer.
    received: int  # tcpi_bytes_received.
    # The addresses as IPv6 (an IPv4 one mapped, ::ffff:a.b.c.d), so that both families compare.
    local_address: bytes = b""
    remote_address: bytes = b""

    @property
    def ends(self) -> tuple:
        return self.local_address, self.local_port, self.remote_address, self.remote_port

    @property
    def mirrored(self) -> tuple:
        """The ends of this connection's other socket, were it in this namespace too."""
        return self.remote_address, self.remote_port, self.local_address, self.local_port


@dataclasses.dataclass(frozen=True)
class Reply:
    """What one datagram of a dump held: its sockets, and whether it was the dump's last."""

    connections: list[Connection]
    done: bool


def read(ports: Collection[int], *, timeout: float = TIMEOUT) -> list[Connection]:
    """Every TCP connection of this network namespace one end of which is on one of `ports`.

    Raises OSError when the kernel cannot be asked, ValueError when its answer cannot be read.
    """
    found = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as netlink:
        netlink.settimeout(timeout)
        for sequence, family in enumerate((socket.AF_INET, socket.AF_INET6), start=1):
            netlink.sendto(dump_request(family, sequence), (0, 0))
            found += _receive_dump(netlink, sequence)
    return one_end_each([each for each in found if each.local_port in ports or each.remote_port in ports], ports)


def one_end_each(found: list[Connection], ports: Collection[int]) -> list[Connection]:
    """Each connection once: one whose both ends are in this namespace (worker-0 reaching its own
    coordination service, a shaper's relay beside its worker) is counted at its end on `ports` alone."""
    here = {connection.ends for connection in found}
    return [each for each in found if each.local_port in ports or each.mirrored not in here]


def _receive_dump(netlink: socket.socket, sequence: int) -> list[Connection]:
    found = []
    while True:
        reply = parse(netlink.recv(RECEIVE_SIZE), sequence)
        found += reply.connections
        if reply.done:
            return found


def dump_request(family: int, sequence: int) -> bytes:
    """A SOCK_DIAG_BY_FAMILY request for every TCP socket of `family`, each with its tcp_info."""
    body = REQUEST.pack(family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), STATES)
    return HEADER.pack(HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, sequence, 0) + body


def parse(data: bytes, sequence: int) -> Reply:
    """The sockets in one datagram of the kernel's answer to request `sequence`.

    Messages of another sequence are skipped; an error message raises OSError with its errno.
    """
    connections, offset = [], 0
    while offset + HEADER.size <= len(data):
        length, kind, _flags, message_sequence, _port = HEADER.unpack_from(data, offset)
        if length < HEADER.size or offset + length > len(data):
            raise ValueError(f"a netlink message of {length} bytes at offset {offset} of {len(data)}")
        body = data[offset + HEADER.size : offset + length]
        offset += _aligned(length)
        if message_sequence != sequence:
            continue
        if kind == NLMSG_DONE:
            return Reply(connections, done=True)
        if kind == NLMSG_ERROR:
            error = -struct.unpack_from("=i", body)[0]
            raise OSError(error, f"sock_diag answered: {os.strerror(error)}")
        if kind == SOCK_DIAG_BY_FAMILY:
            connection = _connection(body)
            if connection is not None:
                connections.append(connection)
    return Reply(connections, done=False)


def _connection(body: bytes) -> Connection | None:
    """The socket an inet_diag_msg describes; None for one without a tcp_info (it has no counters)."""
    if len(body) < MESSAGE_SIZE:
        raise ValueError(f"an inet_diag_msg of {len(body)} bytes, shorter than its {MESSAGE_SIZE}")
    family, state = body[0], body[1]
    local_port, remote_port = PORTS.unpack_from(body, 4)
    local_address, remote_address = _address(family, body[8:24]), _address(family, body[24:40])
    low, high = COOKIE.unpack_from(body, 44)
    info = _attribute(body[MESSAGE_SIZE:], INET_DIAG_INFO)
    if info is None:
        return None
    if len(info) < TCP_INFO_NEEDED:
        raise ValueError(
            f"the kernel's tcp_info has {len(info)} bytes; its byte counters need {TCP_INFO_NEEDED} "
            "(Linux 4.2 or later)"
        )
    sent, received = COUNTERS.unpack_from(info, COUNTERS_OFFSET)
    cookie = low | high << 32
    return Connection(
        cookie=cookie,
        state=state,
        local_port=local_port,
        remote_port=remote_port,
        sent=sent,
        received=received,
        local_address=local_address,
        remote_address=remote_address,
    )


def _address(family: int, raw: bytes) -> bytes:
    """An inet_diag_sockid address (16 bytes; an IPv4 one in the first 4) as IPv6, IPv4 mapped into it."""
    return b"\0" * 10 + b"\xff\xff" + raw[:4] if family == socket.AF_INET else raw


def _attribute(data: bytes, wanted: int) -> bytes | None:
    """The payload of the first attribute of type `wanted` in a run of rtattrs, or None."""
    offset = 0
    while offset + ATTRIBUTE.size <= len(data):
        length, kind = ATTRIBUTE.unpack_from(data, offset)
        if length < ATTRIBUTE.size:
            raise ValueError(f"an attribute of {length} bytes at offset {offset}")
        if kind == wanted:
            return data[offset + ATTRIBUTE.size : offset + length]
        offset += _aligned(length)
    return None


def _aligned(length: int) -> int:
    """Netlink messages and attributes start on 4-byte boundaries (NLMSG_ALIGN, RTA_ALIGN)."""
    return (length + 3) & ~3
