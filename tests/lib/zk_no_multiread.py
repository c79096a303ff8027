#!/usr/bin/env python3
"""A TCP proxy in front of ZooKeeper that behaves like a server without multiRead (ZooKeeper
3.5): every frame is passed on both ways, except that a request of type 22 (multiRead) closes
the client's connection, as 3.5 does with an operation it does not know. Counts the multiReads
it refused in COUNT_FILE (rewritten at each). Prints the port it listens on to PORT_FILE.
  usage: zk_no_multiread.py ZK_PORT PORT_FILE COUNT_FILE"""
import socket
import struct
import sys
import threading

zk_port, port_file, count_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
refused = 0
lock = threading.Lock()


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b


def pump_back(up, down):
    try:
        while True:
            d = up.recv(65536)
            if not d:
                break
            down.sendall(d)
    except OSError:
        pass
    for s in (up, down):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(client):
    global refused
    up = socket.create_connection(("127.0.0.1", zk_port))
    threading.Thread(target=pump_back, args=(up, client), daemon=True).start()
    first = True
    try:
        while True:
            (n,) = struct.unpack(">i", recv_exact(client, 4))
            body = recv_exact(client, n)
            if not first and n >= 8 and struct.unpack(">i", body[4:8])[0] == 22:
                with lock:
                    refused += 1
                    with open(count_file, "w") as f:
                        f.write(f"{refused}\n")
                break
            first = False
            up.sendall(struct.pack(">i", n) + body)
    except (EOFError, OSError):
        pass
    for s in (client, up):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(64)
with open(port_file, "w") as f:
    f.write(f"{srv.getsockname()[1]}\n")
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
