#!/usr/bin/env python3
"""tests/apps/pyapps.py: the Python servers and client of test_python.sh, plain standard library
(no smcr import: they are run under smcr-run like any program).

  pyapps.py http-server PORT DIR     `python3 -m http.server PORT --bind 127.0.0.1 --directory
                                     DIR` itself (runpy), with SIGTERM and SIGINT ending it
                                     normally (a background job starts with SIGINT ignored)
  pyapps.py asyncio-server PORT      asyncio streams echo server
  pyapps.py forking-server PORT      socketserver.ForkingMixIn echo server
  pyapps.py threading-server PORT    socketserver.ThreadingMixIn echo server
  pyapps.py client PORT CONNS SIZE   CONNS connections at once (threads), each sends SIZE
                                     random bytes in random-sized writes, half-closes, reads the
                                     echo; exit 0 only if every echo has the sent bytes' sha256
  pyapps.py asyncio-client PORT CONNS SIZE   the same from one asyncio event loop

Servers run until SIGTERM or SIGINT and then exit normally (the SMCR_STATS line is written).
"""
import asyncio
import hashlib
import os
import random
import signal
import socket
import socketserver
import sys
import threading


def stop_on_term():
    def handler(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)


class Echo(socketserver.StreamRequestHandler):
    def handle(self):
        while True:
            b = self.connection.recv(65536)
            if not b:
                break
            self.connection.sendall(b)


class Forking(socketserver.ForkingMixIn, socketserver.TCPServer):
    allow_reuse_address = True


class Threading(socketserver.ThreadingMixIn, socketserver.TCPServer):
    allow_reuse_address = True
    daemon_threads = True


def serve(cls, port):
    stop_on_term()
    with cls(("127.0.0.1", port), Echo) as srv:
        try:
            srv.serve_forever()
        except KeyboardInterrupt:
            pass


async def asyncio_echo(reader, writer):
    while True:
        b = await reader.read(65536)
        if not b:
            break
        writer.write(b)
        await writer.drain()
    writer.close()
    await writer.wait_closed()


def asyncio_server(port):
    async def main():
        srv = await asyncio.start_server(asyncio_echo, "127.0.0.1", port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for s in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(s, stop.set)
        async with srv:
            await stop.wait()
    asyncio.run(main())


def payload(size, seed):
    return random.Random(seed).randbytes(size)


def one_client(port, size, seed, results):
    data = payload(size, seed)
    got = bytearray()
    with socket.create_connection(("127.0.0.1", port)) as s:
        rng = random.Random(seed + 1)

        def reader():
            while True:
                b = s.recv(65536)
                if not b:
                    break
                got.extend(b)
        t = threading.Thread(target=reader)
        t.start()
        off = 0
        while off < size:
            n = rng.randint(1, 65536)
            s.sendall(data[off:off + n])
            off += n
        s.shutdown(socket.SHUT_WR)
        t.join()
    results.append(hashlib.sha256(got).digest() == hashlib.sha256(data).digest() and len(got) == size)


def client(port, conns, size):
    results = []
    ts = [threading.Thread(target=one_client, args=(port, size, i, results)) for i in range(conns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    ok = sum(results)
    print("client: %d of %d connections echoed %d bytes with the same sha256" % (ok, conns, size))
    return 0 if ok == conns else 1


def asyncio_client(port, conns, size):
    async def one(i):
        data = payload(size, i)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)

        async def send():
            rng = random.Random(i + 1)
            off = 0
            while off < size:
                n = rng.randint(1, 65536)
                writer.write(data[off:off + n])
                await writer.drain()
                off += n
            writer.write_eof()
        sender = asyncio.ensure_future(send())
        got = await reader.read()  # to EOF
        await sender
        writer.close()
        await writer.wait_closed()
        return hashlib.sha256(got).digest() == hashlib.sha256(data).digest()

    async def main():
        return await asyncio.gather(*(one(i) for i in range(conns)))
    ok = sum(asyncio.run(main()))
    print("asyncio client: %d of %d connections echoed %d bytes with the same sha256" % (ok, conns, size))
    return 0 if ok == conns else 1


def main():
    cmd, port = sys.argv[1], int(sys.argv[2])
    if cmd == "http-server":
        import runpy
        stop_on_term()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.argv = ["http.server", str(port), "--bind", "127.0.0.1", "--directory", sys.argv[3]]
        try:
            runpy.run_module("http.server", run_name="__main__", alter_sys=True)
        except SystemExit:
            pass
        return 0
    if cmd == "asyncio-server":
        asyncio_server(port)
    elif cmd == "forking-server":
        serve(Forking, port)
    elif cmd == "threading-server":
        serve(Threading, port)
    elif cmd == "client":
        return client(port, int(sys.argv[3]), int(sys.argv[4]))
    elif cmd == "asyncio-client":
        return asyncio_client(port, int(sys.argv[3]), int(sys.argv[4]))
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
