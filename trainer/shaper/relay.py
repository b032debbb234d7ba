"""A delaying TCP relay: how latency is added where the kernel has no netem.

It listens on a port of the worker's own network namespace (where the shaper redirects the
worker's incoming connections) and forwards each connection to the real server on 127.0.0.1,
holding every chunk, in each direction, for half the round trip time, plus or minus the jitter.
Chunks keep their order (TCP's), so jitter never reorders a stream: a chunk leaves no earlier
than the one before it. This is how Toxiproxy adds latency; netem does it per packet instead.
"""

import asyncio
import random
import time
from collections.abc import Callable

CHUNK = 65536
# Chunks in flight per direction before the relay stops reading: TCP's backpressure reaches the
# sender instead of this process's memory.
IN_FLIGHT = 256


class Delay:
    def __init__(self, one_way_ms: float, jitter_ms: float, rng: random.Random | None = None):
        self.set(one_way_ms, jitter_ms)
        self._rng = rng or random.Random()

    def set(self, one_way_ms: float, jitter_ms: float) -> None:
        """From the next chunk on (a link's fault changes its profile mid-run); none overtakes an earlier one."""
        # One pair, replaced whole: the shaper's fault thread sets it while the relay's loop reads it.
        self._seconds = (one_way_ms / 1000, jitter_ms / 1000)

    @property
    def one_way_ms(self) -> float:
        return self._seconds[0] * 1000

    def __call__(self) -> float:
        base, jitter = self._seconds
        return max(0.0, base + self._rng.uniform(-jitter, jitter))


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: Delay) -> None:
    queue: asyncio.Queue = asyncio.Queue(IN_FLIGHT)

    async def receive():
        due = 0.0
        while True:
            try:
                data = await reader.read(CHUNK)
            except (ConnectionError, OSError):
                data = b""  # A reset ends this direction like an end of stream.
            due = max(due, time.monotonic() + delay())
            await queue.put((due, data))
            if not data:
                return

    async def send():
        try:
            while True:
                due, data = await queue.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            return

    receiving = asyncio.ensure_future(receive())
    try:
        await send()
    finally:
        receiving.cancel()


# The delays of one connection, by its client's address: (what the client sends, what it is sent).
Route = Callable[[str], tuple[Delay, Delay]]


async def _relay(client_reader, client_writer, target_port: int, route: Route) -> None:
    try:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target_port)
    except OSError:
        client_writer.close()  # Nothing listens yet: the client sees its connection closed, and retries.
        return
    peer = client_writer.get_extra_info("peername")
    inbound, outbound = route(peer[0] if peer else "")
    try:
        await asyncio.gather(
            _pump(client_reader, server_writer, inbound), _pump(server_reader, client_writer, outbound)
        )
    except (ConnectionError, OSError):
        pass
    finally:
        for writer in (client_writer, server_writer):
            writer.close()


async def serve(listen_port: int, target_port: int, delay: Delay | Route) -> asyncio.Server:
    """Relays connections to `listen_port` (all addresses) to 127.0.0.1:`target_port`, each
    direction held by `delay`, or by the delays `delay` gives for the connection's client (links
    that differ: trainer/contract/links.py)."""
    route = delay if not isinstance(delay, Delay) else (lambda address: (delay, delay))
    return await asyncio.start_server(
        lambda reader, writer: _relay(reader, writer, target_port, route), host="0.0.0.0", port=listen_port
    )
