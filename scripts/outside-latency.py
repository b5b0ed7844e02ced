#!/usr/bin/env python3
"""Latency of a running broker as an outside generator sees it.

Shoal's own generator (bench/load) measures the distributed roles'
latency; this script measures it again with nothing of Shoal's: its own
MQTT 3.1.1 codec over plain sockets, its own pacer, every sample kept
(exact percentiles). PAIRS publishers connect to PUB (host:port, or a
comma-separated list: pair i on entry i modulo its length) and PAIRS
subscribers to SUB; publisher i sends QoS 0 PUBLISHes of SIZE bytes to
topic out/<i> at RATE/PAIRS messages/s, each payload starting with the
wall-clock time in nanoseconds; subscriber i, subscribed to out/<i>,
takes the difference when it reads one.

First WARMUPS saturating warm-ups of WARMUP_S seconds each (the
publishers write as fast as their sockets take, as an outside tester's
warm-up does), then ROUNDS rounds back to back of SETTLE_S seconds
unmeasured and DURATION_S measured. Each round prints one line of JSON
(p50, p90, p99, p99.9, max in ms, sent, received in the window, this
process's CPU) to stdout; with OUT, all of them go to OUT as a JSON list.
Everything runs in this one process, on one core's worth of Python at
most: its own CPU is reported with each round.

Environment: PUB, SUB (required), PAIRS (50), RATE (10000), SIZE (64),
WARMUPS (2), WARMUP_S (10), ROUNDS (6), SETTLE_S (2), DURATION_S (10),
PREFIX (outside), CLEAN (1; 0 connects with persistent sessions), OUT.
"""

import json
import os
import selectors
import socket
import sys
import time


def env(name, default, cast=int):
    v = os.environ.get(name, "")
    return cast(v) if v else default


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def varint(n):
    out = b""
    while True:
        n, d = divmod(n, 128)
        out += bytes([d | (0x80 if n else 0)])
        if not n:
            return out


def packet(first, body):
    return bytes([first]) + varint(len(body)) + body


def string(b):
    return len(b).to_bytes(2, "big") + b


def connect(addr, client_id, subscribe=None):
    """A blocking MQTT 3.1.1 connection: CONNECT (clean session unless
    CLEAN=0, no keepalive), CONNACK, and a QoS 0 SUBSCRIBE and its SUBACK
    if asked."""
    host, _, port = addr.rpartition(":")
    s = socket.create_connection((host, int(port)), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    flags = 0x02 if os.environ.get("CLEAN", "1") != "0" else 0x00
    s.sendall(packet(0x10, string(b"MQTT") + bytes([4, flags, 0, 0]) + string(client_id)))
    ack = recv_exact(s, 4)
    if ack[:2] != b"\x20\x02" or ack[3] != 0:
        raise RuntimeError(f"{client_id!r}: CONNACK {ack.hex()}")
    if subscribe is not None:
        s.sendall(packet(0x82, (1).to_bytes(2, "big") + string(subscribe) + b"\x00"))
        ack = recv_exact(s, 5)
        if ack[0] != 0x90 or ack[4] > 2:
            raise RuntimeError(f"{client_id!r}: SUBACK {ack.hex()}")
    s.setblocking(False)
    return s


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        chunk = s.recv(n - len(b))
        if not chunk:
            raise RuntimeError("connection closed")
        b += chunk
    return b


class Subscriber:
    """Reads PUBLISH packets off a stream, keeping the latency of each
    whose stamp is in the measured window."""

    def __init__(self, sock):
        self.sock, self.buf = sock, bytearray()

    def read(self, now_ns, window, lat):
        try:
            chunk = self.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return 0
        if not chunk:
            raise RuntimeError("a subscriber's connection closed")
        self.buf += chunk
        got, b, i = 0, self.buf, 0
        while True:
            if len(b) - i < 2:
                break
            n, mul, j = 0, 1, i + 1  # the remaining length
            while j < len(b):
                n += (b[j] & 0x7F) * mul
                mul *= 128
                j += 1
                if b[j - 1] < 0x80:
                    break
            else:
                break
            if len(b) - j < n:
                break
            if b[i] >> 4 == 3:  # PUBLISH, QoS 0: topic, then the payload
                tl = int.from_bytes(b[j:j + 2], "big")
                p = j + 2 + tl
                stamp = int(b[p:p + 19])
                if window[0] <= stamp < window[1]:
                    lat.append(now_ns - stamp)
                got += 1
            i = j + n
        del b[:i]
        return got


def percentile(sorted_ns, q):
    if not sorted_ns:
        return float("nan")
    return sorted_ns[min(len(sorted_ns) - 1, int(q * len(sorted_ns)))] / 1e6


def main():
    pub_addrs = os.environ["PUB"].split(",")
    sub_addrs = os.environ["SUB"].split(",")
    pairs, rate, size = env("PAIRS", 50), env("RATE", 10000, float), env("SIZE", 64)
    warmups, warmup_s = env("WARMUPS", 2), env("WARMUP_S", 10.0, float)
    rounds, settle_s, duration_s = env("ROUNDS", 6), env("SETTLE_S", 2.0, float), env("DURATION_S", 10.0, float)
    prefix = os.environ.get("PREFIX", "outside").encode()
    if size < 19:
        sys.exit("SIZE: at least 19 bytes (the stamp)")
    sel = selectors.DefaultSelector()
    subs, pubs, topics = [], [], []
    for i in range(pairs):
        t = b"%s/out/%d" % (prefix, i)
        topics.append(t)
        s = Subscriber(connect(sub_addrs[i % len(sub_addrs)], b"%s-sub-%d" % (prefix, i), t))
        subs.append(s)
        sel.register(s.sock, selectors.EVENT_READ, s)
    time.sleep(1)  # the subscriptions reach every router before the first publish
    for i in range(pairs):
        pubs.append(connect(pub_addrs[i % len(pub_addrs)], b"%s-pub-%d" % (prefix, i)))
    log(f"{pairs} pairs connected: publishers on {','.join(pub_addrs)}, subscribers on {','.join(sub_addrs)}")
    heads = [bytes([0x30]) + varint(2 + len(t) + size) + string(t) for t in topics]
    pad = b"x" * (size - 19)
    lat, window = [], [0, 0]

    def drain(timeout):
        n = 0
        for key, _ in sel.select(timeout):
            n += key.data.read(time.time_ns(), window, lat)
        return n

    outbox = [bytearray() for _ in range(pairs)]

    def flush(i):
        """Writes what publisher i has pending, as much as its socket
        takes: a partial write keeps the rest, so packets stay whole."""
        if outbox[i]:
            try:
                n = pubs[i].send(outbox[i])
            except (BlockingIOError, InterruptedError):
                return
            del outbox[i][:n]

    for w in range(warmups):  # saturating: 64 KiB of PUBLISHes per write
        block = [(heads[i] + b"%019d" % time.time_ns() + pad) * 256 for i in range(pairs)]
        end = time.monotonic() + warmup_s
        sent = 0
        while time.monotonic() < end:
            for i in range(pairs):
                if len(outbox[i]) < len(block[i]):
                    outbox[i] += block[i]
                    sent += 256
                flush(i)
            drain(0)
        while any(outbox) and time.monotonic() < end + 10:
            for i in range(pairs):
                flush(i)
            drain(0)
        quiet = time.monotonic() + 30
        while time.monotonic() < quiet and drain(0.5) > 0:
            pass  # until the warm-up's backlog is delivered
        log(f"warm-up {w + 1}: {sent:,} messages written")

    results = []
    for r in range(1, rounds + 1):
        lat.clear()
        start = time.monotonic()
        wall = time.time_ns()
        window[0] = wall + int(settle_s * 1e9)
        window[1] = window[0] + int(duration_s * 1e9)
        total, sent, in_window, i = settle_s + duration_s, 0, 0, 0
        cpu0 = None
        while True:
            now = time.monotonic() - start
            if now >= total:
                break
            if cpu0 is None and now >= settle_s:
                t = os.times()
                cpu0 = (time.monotonic(), t.user + t.system)
            due = int(now * rate) - sent
            for _ in range(max(due, 0)):
                stamp = time.time_ns()
                k = i % pairs
                outbox[k] += heads[k] + b"%019d" % stamp + pad
                flush(k)
                if window[0] <= stamp < window[1]:
                    in_window += 1
                i += 1
            sent += max(due, 0)
            for k in range(pairs):
                flush(k)
            drain(0)
            time.sleep(0.0002)
        t = os.times()
        cpu1 = (time.monotonic(), t.user + t.system)
        end = time.monotonic() + 2  # the last messages
        while time.monotonic() < end:
            drain(0.05)
        lat.sort()
        res = {"round": r, "sent_in_window": in_window, "received_in_window": len(lat),
               "p50_ms": percentile(lat, 0.5), "p90_ms": percentile(lat, 0.9), "p99_ms": percentile(lat, 0.99),
               "p999_ms": percentile(lat, 0.999), "max_ms": lat[-1] / 1e6 if lat else float("nan"),
               "generator_cpu_pct": 100 * (cpu1[1] - cpu0[1]) / (cpu1[0] - cpu0[0]),
               "pairs": pairs, "rate": rate, "size": size}
        print(json.dumps(res), flush=True)
        results.append(res)
    for s in pubs + [x.sock for x in subs]:
        s.close()
    if os.environ.get("OUT"):
        with open(os.environ["OUT"], "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
