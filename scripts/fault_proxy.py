#!/usr/bin/env python3
"""A fault-injecting TCP proxy for the remote-store tests and benchmarks.

    fault_proxy.py UPSTREAM_PORT [--latency-ms N]

Listens on a free port of 127.0.0.1 and forwards every connection to
127.0.0.1:UPSTREAM_PORT. Prints one line, "PORT CONTROL_PORT", once both listen.
Every HTTP request (a client chunk starting with a method) is counted by method (and
GETs of anything but a metadata document also as DATA, those of an Icechunk chunk object
(a path with a `chunks/` folder) also as CHUNKS, listings, S3 or WebDAV, as LIST) and held for the added latency
before it goes upstream. The control port takes one
command per line and answers "ok ..." :

    latency MS      add MS milliseconds to every request from now on
    stall on|off    hold new requests for ever (on) / forward them again (off);
                    "off" also closes the connections that were held
    drop N          close the next N connections as soon as their request arrives
    stats           "ok GET=n HEAD=n ..." requests seen so far
    reset           zero the counts
"""
import asyncio
import sys

METHODS = (b"GET ", b"HEAD ", b"PUT ", b"POST ", b"PROPFIND ", b"DELETE ", b"OPTIONS ")
METADATA = ("zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata")


class Proxy:
    def __init__(self, upstream, latency_ms):
        self.upstream = upstream
        self.latency = latency_ms / 1000.0
        self.stalled = False
        self.drops = 0
        self.counts = {}
        self.held = set()

    def count(self, chunk):
        for m in METHODS:
            if chunk.startswith(m):
                name = m.decode().strip()
                self.counts[name] = self.counts.get(name, 0) + 1
                target = chunk.split(b" ", 2)[1].decode(errors="replace") if b" " in chunk else ""
                last = target.split("?")[0].rstrip("/").rsplit("/", 1)[-1]
                query = target.split("?", 1)[1] if "?" in target else ""
                if name == "PROPFIND" or "list-type=" in query or "delimiter=" in query:
                    self.counts["LIST"] = self.counts.get("LIST", 0) + 1
                elif name == "GET" and last not in METADATA:
                    self.counts["DATA"] = self.counts.get("DATA", 0) + 1
                    if "/chunks/" in target.split("?")[0]:
                        self.counts["CHUNKS"] = self.counts.get("CHUNKS", 0) + 1
                return True
        return False

    async def pipe_up(self, reader, writer, client_writer):
        while True:
            chunk = await reader.read(1 << 16)
            if not chunk:
                break
            if self.count(chunk):
                if self.drops > 0:
                    self.drops -= 1
                    client_writer.transport.abort()
                    writer.transport.abort()
                    return
                if self.stalled:
                    self.held.add(client_writer)
                    while self.stalled:
                        await asyncio.sleep(0.05)
                    self.held.discard(client_writer)
                    client_writer.transport.abort()
                    writer.transport.abort()
                    return
                if self.latency:
                    await asyncio.sleep(self.latency)
            writer.write(chunk)
            await writer.drain()
        writer.close()

    async def pipe_down(self, reader, writer):
        while True:
            chunk = await reader.read(1 << 16)
            if not chunk:
                break
            writer.write(chunk)
            await writer.drain()
        writer.close()

    async def handle(self, client_reader, client_writer):
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            client_writer.transport.abort()
            return
        try:
            await asyncio.gather(
                self.pipe_up(client_reader, up_writer, client_writer),
                self.pipe_down(up_reader, client_writer),
            )
        except (ConnectionError, OSError):
            pass
        finally:
            for w in (client_writer, up_writer):
                w.transport.abort()

    async def control(self, reader, writer):
        while True:
            line = await reader.readline()
            if not line:
                break
            words = line.decode().split()
            reply = "ok"
            if words[:1] == ["latency"] and len(words) == 2:
                self.latency = float(words[1]) / 1000.0
            elif words[:1] == ["stall"] and len(words) == 2:
                self.stalled = words[1] == "on"
            elif words[:1] == ["drop"] and len(words) == 2:
                self.drops = int(words[1])
            elif words == ["stats"]:
                reply = "ok " + " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
            elif words == ["reset"]:
                self.counts = {}
            else:
                reply = "error: unknown command"
            writer.write((reply + "\n").encode())
            await writer.drain()
        writer.close()


async def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    latency = 0.0
    if "--latency-ms" in args:
        i = args.index("--latency-ms")
        latency = float(args[i + 1])
        del args[i : i + 2]
    proxy = Proxy(int(args[0]), latency)
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", 0)
    control = await asyncio.start_server(proxy.control, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    cport = control.sockets[0].getsockname()[1]
    print(f"{port} {cport}", flush=True)
    async with server, control:
        await asyncio.gather(server.serve_forever(), control.serve_forever())


if __name__ == "__main__":
    asyncio.run(main())
