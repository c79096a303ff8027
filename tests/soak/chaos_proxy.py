#!/usr/bin/env python3
"""A TCP proxy for the soak (tests/soak/soak.sh) that makes the object store unreachable or slow
on demand. It sits between every S3 client (the lab's ClickHouse disks, the agents' uploader,
ferry's janitor) and the enforcing S3 proxy (tests/lib/s3_policy_proxy.py), forwarding bytes
unchanged, so signatures and the policy proxy's per-role counts are untouched.

    chaos_proxy.py --port P --upstream-port U --mode-file F

F holds one word, read for every new connection and every forwarded chunk:
    normal        forward
    down          new connections are closed at once and open ones are cut (the store is
                  unreachable: clients see a reset)
    slow MS       every chunk in either direction waits MS milliseconds first
A missing or unreadable file means normal. Prints "listening PORT" once ready.
"""
import argparse
import asyncio
import sys

args = None


def mode():
    try:
        with open(args.mode_file) as f:
            w = f.read().split()
    except OSError:
        return ("normal", 0)
    if not w:
        return ("normal", 0)
    if w[0] == "slow":
        return ("slow", int(w[1]) if len(w) > 1 else 500)
    return (w[0], 0)


async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            m, ms = mode()
            if m == "down":
                break
            if m == "slow":
                await asyncio.sleep(ms / 1000.0)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def handle(creader, cwriter):
    if mode()[0] == "down":
        cwriter.transport.abort()
        return
    try:
        ureader, uwriter = await asyncio.open_connection("127.0.0.1", args.upstream_port)
    except OSError:
        cwriter.transport.abort()
        return
    await asyncio.gather(pipe(creader, uwriter), pipe(ureader, cwriter))


async def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--upstream-port", type=int, required=True)
    p.add_argument("--mode-file", required=True)
    args = p.parse_args()
    server = await asyncio.start_server(handle, "127.0.0.1", args.port, reuse_address=True)
    print("listening %d" % args.port, flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
