"""Measure a link between two network namespaces: TCP throughput and round-trip time.

    python measure.py serve HOST PORT            # in one namespace
    python measure.py probe HOST PORT [--mb 20]  # in the other; prints JSON

Used by netns.sh to compare what the kernel shaping delivers with what was configured.
"""

from __future__ import annotations

import argparse
import json
import socket
import time

CHUNK = 1 << 16


def serve(host: str, port: int) -> None:
    with socket.create_server((host, port)) as srv:
        while True:
            conn, _ = srv.accept()
            with conn:
                mode = conn.recv(1)
                if mode == b"p":  # ping-pong: echo one byte at a time
                    while b := conn.recv(1):
                        conn.sendall(b)
                elif mode == b"b":  # bulk: read until EOF, then acknowledge
                    while conn.recv(CHUNK):
                        pass
                elif mode == b"q":
                    return


def probe(host: str, port: int, megabytes: int) -> dict:
    with socket.create_connection((host, port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(b"p")
        rtts = []
        for _ in range(20):
            t = time.perf_counter()
            s.sendall(b"x")
            s.recv(1)
            rtts.append(time.perf_counter() - t)
    payload = b"\0" * CHUNK
    total = megabytes << 20
    with socket.create_connection((host, port)) as s:
        s.sendall(b"b")
        t = time.perf_counter()
        sent = 0
        while sent < total:
            s.sendall(payload)
            sent += len(payload)
        s.shutdown(socket.SHUT_WR)
        s.recv(1)
        seconds = time.perf_counter() - t
    return {
        "rtt_ms": round(sorted(rtts)[len(rtts) // 2] * 1000, 2),
        "mbit_per_s": round(total * 8 / seconds / 1e6, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["serve", "probe", "quit"])
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--mb", type=int, default=20)
    a = ap.parse_args()
    if a.mode == "serve":
        serve(a.host, a.port)
    elif a.mode == "quit":
        with socket.create_connection((a.host, a.port)) as s:
            s.sendall(b"q")
    else:
        print(json.dumps(probe(a.host, a.port, a.mb)))


if __name__ == "__main__":
    main()
