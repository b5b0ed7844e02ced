#!/usr/bin/env python3
"""Shoal beside Mosquitto, measured with Mosquitto's own clients.

bench-compare.sh measures with Shoal's generator (bench/cmd/shoal-bench).
This script checks its headline figures with a generator that owes nothing
to Shoal: mosquitto_pub and mosquitto_sub (Debian's mosquitto-clients), one
pair of processes per topic, and a small pacer. Each publisher is
`mosquitto_pub -l`, which publishes every line it reads on its standard
input; the pacer writes it lines holding the wall-clock time in
nanoseconds. Each subscriber is `mosquitto_sub -F '%U %p'`, which prints the
time it received a message before the payload, so a line gives a latency.
The brokers run as bench-compare.sh runs them (Mosquitto with persistence
off, Shoal as `shoal all` on a new data directory), one after the other in
every round, swapping who goes first.

Scenarios:
  steady     PAIRS pairs at a fixed RATE messages/s in all: latency p50,
             p90, p99 and the broker's CPU (what bench-compare.sh calls
             latency-qos0 with the defaults)
  cycle      CLIENTS connections made by hand, CONCURRENCY at a time,
             each CONNECT, CONNACK, DISCONNECT, close: the broker's CPU per
             client over the run and SETTLE seconds after it (a
             connection's whole life; scripts/connect-cycle.sh with
             Shoal's generator)
  saturate   PAIRS pairs of connections this script makes by hand (MQTT
             3.1.1, QoS 0, 64-byte payloads): publishers write
             pre-encoded PUBLISHes as fast as their sockets take them,
             subscribers count what arrives: deliveries/s and deliveries
             per broker CPU-second. mosquitto_pub cannot saturate a
             broker: fed from a pipe, its own queue is the bottleneck

Usage (from the repository's root; needs mosquitto and mosquitto-clients):
  scripts/independent-compare.py                       # steady, 2 rounds
  SCENARIOS=steady,saturate ROUNDS=3 scripts/independent-compare.py

Environment: SCENARIOS, ROUNDS (2), PAIRS (50), RATE (10000), QOS (0),
MQTT_VERSION (mqttv311, the clients' default; or mqttv5), PIN (1: the
broker on CPU 0, the clients and the pacer on CPU 1, with taskset),
WARMUP (3 s), DURATION (10 s), CLIENTS (10000), CONCURRENCY (64),
SETTLE (6 s), SHOAL_BIN (bin/shoal), SHOAL_FLAGS,
OUT (a directory for the JSON results and the brokers' logs; default:
none).

The generator's own cost (the pacer and 100 client processes in steady,
this process in saturate) is on the same cores as the broker, as it is for
bench-compare.sh, and is reported. It is the same for both brokers, but on
2 cores it competes with them: a broker that needs more CPU also waits more
for a core, so steady's latency includes what its CPU costs the machine
(bench/README.md, "Checked with an independent generator").
"""

import json
import os
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def env_int(name, default):
    v = os.environ.get(name, "")
    return int(v) if v else default


def env_float(name, default):
    v = os.environ.get(name, "")
    return float(v) if v else default


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """User and system CPU of process pid (every thread), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_bytes(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


def wait_port(port, proc, secs=30):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"port {port} not open after {secs}s")


def pinned(args, cpu):
    """args run on CPU cpu when PIN=1 (taskset), as bench-compare.sh's PIN."""
    if os.environ.get("PIN") == "1":
        return ["taskset", "-c", str(cpu), *args]
    return args


def start_mosquitto(d, port):
    os.chmod(d, 0o777)  # started as root, mosquitto runs as user mosquitto
    conf = os.path.join(d, "mosquitto.conf")
    with open(conf, "w") as f:
        f.write(f"""listener {port} 127.0.0.1
allow_anonymous true
persistence false
max_queued_messages 1000000
max_queued_bytes 0
max_inflight_messages 0
set_tcp_nodelay true
log_dest file {d}/broker.log
log_type error
log_type warning
""")
    mosq = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    p = subprocess.Popen(pinned([mosq, "-c", conf], 0), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    wait_port(port, p)
    return p


def install_copy(src, dst):
    """Copies binary src to dst as an installation does; the runs measure
    the copy. A binary the Go linker has just written maps 9 MiB more of
    its file into a process than the same binary read from disk or copied
    (scripts/bench-lib.sh, install_copy)."""
    shutil.copyfile(src, dst + ".part")
    os.chmod(dst + ".part", 0o755)
    os.replace(dst + ".part", dst)


def start_shoal(d, port):
    http = free_port()
    shoal = os.environ.get("SHOAL_BIN") or "bin/shoal"  # main's installed copy
    args = [shoal, "all", "--data-dir", os.path.join(d, "data"), "--mqtt-listen", f"127.0.0.1:{port}",
            "--http-listen", f"127.0.0.1:{http}", "--ws-listen", ""] + os.environ.get("SHOAL_FLAGS", "").split()
    out = open(os.path.join(d, "broker.log"), "w")
    p = subprocess.Popen(pinned(args, 0), stdout=out, stderr=subprocess.STDOUT)
    wait_port(port, p)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/readyz", timeout=1) as r:
                if r.status == 200:
                    return p
        except OSError:
            pass
        if p.poll() is not None:
            raise RuntimeError(f"shoal exited with {p.returncode}")
        time.sleep(0.1)
    raise RuntimeError("shoal not ready after 30s")


def stop(p, secs=10):
    if p is None or p.poll() is not None:
        return
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(secs)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


class Clients:
    """PAIRS subscriber and publisher processes on topics lat/<i>."""

    def __init__(self, port, pairs, qos, tag, feed=None):
        self.subs, self.pubs, self.feeds = [], [], []
        common = ["-h", "127.0.0.1", "-p", str(port), "-q", str(qos), "--nodelay",
                  "-V", os.environ.get("MQTT_VERSION", "mqttv311")]
        for i in range(pairs):
            self.subs.append(subprocess.Popen(pinned(
                ["mosquitto_sub", *common, "-i", f"{tag}-sub-{i}", "-t", f"lat/{i}", "-F", "%U %p"], 1),
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
        time.sleep(1.5)  # the subscriptions are made before anything is published
        for i in range(pairs):
            stdin = subprocess.PIPE
            if feed is not None:  # a process writing lines as fast as the pipe takes them
                self.feeds.append(subprocess.Popen(pinned(feed, 1), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
                stdin = self.feeds[-1].stdout
            self.pubs.append(subprocess.Popen(pinned(
                ["mosquitto_pub", *common, "-i", f"{tag}-pub-{i}", "-t", f"lat/{i}", "-l"], 1),
                stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            if feed is not None:
                self.feeds[-1].stdout.close()  # the publisher's now
        for s in self.subs:
            os.set_blocking(s.stdout.fileno(), False)
        self.sel = selectors.DefaultSelector()
        for s in self.subs:
            self.sel.register(s.stdout, selectors.EVENT_READ)
        self.rest = {s.stdout.fileno(): b"" for s in self.subs}

    def count(self, timeout):
        """Counts the lines the subscribers printed within timeout."""
        n = 0
        for key, _ in self.sel.select(timeout):
            try:
                chunk = os.read(key.fileobj.fileno(), 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                self.sel.unregister(key.fileobj)
            n += chunk.count(b"\n")
        return n

    def read(self, timeout, on_line):
        """Reads what the subscribers printed within timeout, line by line."""
        for key, _ in self.sel.select(timeout):
            fd = key.fileobj.fileno()
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                self.sel.unregister(key.fileobj)
                continue
            data = self.rest[fd] + chunk
            lines = data.split(b"\n")
            self.rest[fd] = lines.pop()
            for line in lines:
                on_line(line)

    def cpu(self):
        """CPU seconds of the clients and of this process so far."""
        t = os.times()
        total = t.user + t.system
        for p in self.subs + self.pubs + self.feeds:
            try:
                total += cpu_seconds(p.pid)
            except OSError:
                pass
        return total

    def close(self):
        for p in self.feeds:
            stop(p, 3)
        for p in self.pubs:
            if p.stdin is not None:
                try:
                    p.stdin.close()
                except OSError:
                    pass
        for p in self.pubs + self.subs:
            stop(p, 3)


def steady(broker, port, cfg):
    pairs, rate, qos = cfg["pairs"], cfg["rate"], cfg["qos"]
    warmup, duration = cfg["warmup"], cfg["duration"]
    c = Clients(port, pairs, qos, "steady")
    lat = []
    win = [0, 0]  # the measured window, in wall-clock nanoseconds

    def on_line(line):
        recv, _, sent = line.partition(b" ")
        secs, _, nanos = recv.partition(b".")  # %U: seconds.nanoseconds
        try:
            r = int(secs) * 1_000_000_000 + int(nanos.ljust(9, b"0")[:9])
            s = int(sent)
        except ValueError:
            return
        if win[0] <= s < win[1]:
            lat.append(r - s)

    try:
        start = time.monotonic()
        wall0 = time.time_ns()
        win[0] = wall0 + int(warmup * 1e9)
        win[1] = win[0] + int(duration * 1e9)
        total = warmup + duration
        sent = 0
        cpu0 = cpu1 = None
        rss_max, next_rss = 0, 0.0
        i = 0
        while True:
            now = time.monotonic() - start
            if now >= total:
                break
            if cpu0 is None and now >= warmup:
                cpu0 = (time.monotonic(), cpu_seconds(broker.pid), c.cpu())
            due = int(now * rate) - sent
            for _ in range(due):
                p = c.pubs[i % pairs]
                i += 1
                p.stdin.write(b"%d\n" % time.time_ns())
                p.stdin.flush()
            sent += max(due, 0)
            c.read(0, on_line)
            if now >= next_rss:
                rss_max, next_rss = max(rss_max, rss_bytes(broker.pid)), now + 0.1
            time.sleep(0.0005)
        cpu1 = (time.monotonic(), cpu_seconds(broker.pid), c.cpu())
        end = time.monotonic() + 2  # the last messages
        while time.monotonic() < end:
            c.read(0.05, on_line)
    finally:
        c.close()
    lat.sort()
    n = len(lat)
    expected = int(rate * duration)

    def q(x):
        return lat[min(n - 1, int(x * n))] / 1e3 if n else float("nan")

    return {
        "sent_in_window": expected, "received_in_window": n,
        "p50_us": q(0.50), "p90_us": q(0.90), "p99_us": q(0.99),
        "cpu_pct": 100 * (cpu1[1] - cpu0[1]) / (cpu1[0] - cpu0[0]),
        "generator_cpu_pct": 100 * (cpu1[2] - cpu0[2]) / (cpu1[0] - cpu0[0]),
        "rss_max_mib": rss_max / (1 << 20),
    }


def mqtt_string(b):
    return len(b).to_bytes(2, "big") + b


def mqtt_packet(first, body):
    """An MQTT packet: its first byte, the remaining length, body."""
    n, rl = len(body), b""
    while True:
        n, d = divmod(n, 128)
        rl += bytes([d | (0x80 if n else 0)])
        if not n:
            return bytes([first]) + rl + body


def raw_client(port, client_id, subscribe=None):
    """A blocking MQTT 3.1.1 connection made by hand: CONNECT (clean
    session, keep alive 0), CONNACK, and a QoS 0 SUBSCRIBE when asked."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(mqtt_packet(0x10, mqtt_string(b"MQTT") + bytes([4, 0x02, 0, 0]) + mqtt_string(client_id)))
    if s.recv(4)[:2] != b"\x20\x02":
        raise RuntimeError("no CONNACK")
    if subscribe is not None:
        s.sendall(mqtt_packet(0x82, (1).to_bytes(2, "big") + mqtt_string(subscribe) + b"\x00"))
        if s.recv(5)[:1] != b"\x90":
            raise RuntimeError("no SUBACK")
    return s


def saturate(broker, port, cfg):
    """PAIRS publishers write pre-encoded 64-byte QoS 0 PUBLISHes as fast as
    their sockets take them (a 64 KiB write each time), PAIRS subscribers
    count what they receive (every packet the same size)."""
    pairs, warmup, duration = cfg["pairs"], cfg["warmup"], cfg["duration"]
    subs, pubs, size = [], [], {}
    sel = selectors.DefaultSelector()
    try:
        for i in range(pairs):
            s = raw_client(port, b"sat-sub-%d" % i, b"lat/%d" % i)
            s.setblocking(False)
            subs.append(s)
            sel.register(s, selectors.EVENT_READ, ("sub", i))
        time.sleep(0.5)
        for i in range(pairs):
            pkt = mqtt_packet(0x30, mqtt_string(b"lat/%d" % i) + b"x" * 64)
            size[i] = len(pkt)
            s = raw_client(port, b"sat-pub-%d" % i)
            s.setblocking(False)
            pubs.append(s)
            sel.register(s, selectors.EVENT_WRITE, ("pub", pkt * (65536 // len(pkt))))
        got, sent = [0] * pairs, [0]
        start = time.monotonic()
        marks = {}
        while True:
            now = time.monotonic() - start
            if now >= warmup + duration:
                break
            if "a" not in marks and now >= warmup:
                marks["a"] = (time.monotonic(), cpu_seconds(broker.pid), sum(got), os.times(), sent[0])
            for key, _ in sel.select(0.01):
                kind, data = key.data
                try:
                    if kind == "pub":
                        sent[0] += key.fileobj.send(data)
                    else:
                        got[data] += len(key.fileobj.recv(1 << 16))
                except (BlockingIOError, InterruptedError):
                    pass
        marks["b"] = (time.monotonic(), cpu_seconds(broker.pid), sum(got), os.times(), sent[0])
        rss = rss_bytes(broker.pid)
    finally:
        for s in subs + pubs:
            s.close()
    (t0, c0, b0, g0, s0), (t1, c1, b1, g1, s1) = marks["a"], marks["b"]
    n = (b1 - b0) / size[0]  # every pair's packets are the same size, to a byte (lat/0 to lat/9: one less)
    gen = (g1.user + g1.system) - (g0.user + g0.system)
    return {
        "deliveries_per_s": n / (t1 - t0),
        "published_per_s": (s1 - s0) / size[0] / (t1 - t0),
        "cpu_pct": 100 * (c1 - c0) / (t1 - t0),
        "deliveries_per_cpu_s": n / max(c1 - c0, 1e-9),
        "rss_end_mib": rss / (1 << 20),
        "generator_cpu_pct": 100 * gen / (t1 - t0),
    }


def cycle(broker, port, cfg):
    """CLIENTS connections this script makes by hand, CONCURRENCY at a
    time (MQTT 3.1.1, Clean Session, each its own client id): CONNECT, wait
    for the CONNACK, DISCONNECT and close, the next one as soon as one is
    done. The broker's CPU per client over the run, and over SETTLE
    seconds after it, while it still writes and applies the ends of those
    sessions (what scripts/connect-cycle.sh measures with Shoal's
    generator)."""
    n, conc, settle = cfg["clients"], cfg["concurrency"], cfg["settle"]
    disconnect = mqtt_packet(0xE0, b"")
    sel = selectors.DefaultSelector()
    started = done = 0
    tag = int(time.time() * 1000) % 1000000  # client ids unique to the run

    def start():
        nonlocal started
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        cid = b"cyc%d-%d" % (tag, started)
        started += 1
        pkt = mqtt_packet(0x10, mqtt_string(b"MQTT") + bytes([4, 0x02, 0, 0]) + mqtt_string(cid))
        sel.register(s, selectors.EVENT_WRITE, ["connect", pkt, b""])

    t0, c0 = time.monotonic(), cpu_seconds(broker.pid)
    g0 = os.times()
    for _ in range(min(conc, n)):
        start()
    while done < n:
        events = sel.select(10)
        if not events:
            raise RuntimeError(f"cycle: no progress with {started - done} connections open")
        for key, ev in events:
            s, st = key.fileobj, key.data
            if st[0] == "connect":
                s.sendall(st[1])
                st[0] = "connack"
                sel.modify(s, selectors.EVENT_READ, st)
                continue
            st[2] += s.recv(4 - len(st[2]))
            if len(st[2]) < 4:
                if not st[2]:
                    raise RuntimeError("cycle: connection closed before CONNACK")
                continue
            if st[2][:2] != b"\x20\x02" or st[2][3] != 0:
                raise RuntimeError(f"cycle: CONNACK {st[2]!r}")
            s.sendall(disconnect)
            sel.unregister(s)
            s.close()
            done += 1
            if started < n:
                start()
    t1, c1 = time.monotonic(), cpu_seconds(broker.pid)
    g1 = os.times()
    time.sleep(settle)
    c2 = cpu_seconds(broker.pid)
    us = lambda secs: secs * 1e6 / n
    return {
        "cycles_per_s": n / (t1 - t0),
        "cpu_us_per_client_run": us(c1 - c0),
        "cpu_us_per_client_after": us(c2 - c1),
        "cpu_us_per_client": us(c2 - c0),
        "generator_cpu_pct": 100 * ((g1.user + g1.system) - (g0.user + g0.system)) / (t1 - t0),
        "rss_end_mib": rss_bytes(broker.pid) / (1 << 20),
    }


SCENARIOS = {"steady": steady, "saturate": saturate, "cycle": cycle}
STARTERS = {"mosquitto": start_mosquitto, "shoal": start_shoal}


def main():
    names = [s for s in os.environ.get("SCENARIOS", "steady").replace(",", " ").split() if s]
    for n in names:
        if n not in SCENARIOS:
            sys.exit(f"unknown scenario {n!r} (known: {', '.join(SCENARIOS)})")
    for tool in ("mosquitto_pub", "mosquitto_sub"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found: apt-get install mosquitto-clients")
    cfg = {"pairs": env_int("PAIRS", 50), "rate": env_int("RATE", 10000), "qos": env_int("QOS", 0),
           "warmup": env_float("WARMUP", 3), "duration": env_float("DURATION", 10)}
    if "cycle" in names:
        cfg.update(clients=env_int("CLIENTS", 10000), concurrency=env_int("CONCURRENCY", 64),
                   settle=env_float("SETTLE", 6))
    rounds = env_int("ROUNDS", 2)
    if os.environ.get("PIN") == "1":
        os.sched_setaffinity(0, {1})  # the pacer with the clients, the broker alone on CPU 0
    out = os.environ.get("OUT", "")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o711)
        installed = os.path.join(tmp, "shoal")
        install_copy(os.environ.get("SHOAL_BIN") or "bin/shoal", installed)
        os.environ["SHOAL_BIN"] = installed
        for name in names:
            for r in range(1, rounds + 1):
                order = ["mosquitto", "shoal"] if r % 2 else ["shoal", "mosquitto"]
                for broker in order:
                    d = os.path.join(tmp, f"{name}-{broker}-r{r}")
                    os.makedirs(d)
                    port = free_port()
                    p = STARTERS[broker](d, port)
                    try:
                        res = SCENARIOS[name](p, port, cfg)
                    finally:
                        stop(p)
                        if out:  # the broker's log, for a look after the run
                            os.makedirs(out, exist_ok=True)
                            log_file = os.path.join(d, "broker.log")
                            if os.path.exists(log_file):
                                shutil.copy(log_file, os.path.join(out, f"{name}-{broker}-r{r}.log"))
                    res.update(scenario=name, broker=broker, round=r, **cfg)
                    log(json.dumps(res))
                    results.append(res)
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "independent.json"), "w") as f:
            json.dump(results, f, indent=1)
    report(results)


def report(results):
    metrics = {"steady": ["p50_us", "p90_us", "p99_us", "cpu_pct", "generator_cpu_pct", "rss_max_mib"],
               "saturate": ["deliveries_per_s", "published_per_s", "cpu_pct", "deliveries_per_cpu_s",
                            "generator_cpu_pct", "rss_end_mib"],
               "cycle": ["cycles_per_s", "cpu_us_per_client_run", "cpu_us_per_client_after", "cpu_us_per_client",
                         "generator_cpu_pct", "rss_end_mib"]}
    print("| scenario | metric | Shoal (median) | Mosquitto (median) | ratio |")
    print("|---|---|---:|---:|---:|")
    for name, ms in metrics.items():
        rs = [r for r in results if r["scenario"] == name]
        if not rs:
            continue
        for m in ms:
            s = statistics.median(r[m] for r in rs if r["broker"] == "shoal")
            q = statistics.median(r[m] for r in rs if r["broker"] == "mosquitto")
            ratio = f"{s / q:.2f}×" if q else "–"
            print(f"| {name} | {m} | {s:,.1f} | {q:,.1f} | {ratio} |")
        if name == "steady":
            for b in ("shoal", "mosquitto"):
                got = [r["received_in_window"] for r in rs if r["broker"] == b]
                print(f"| {name} | received of {rs[0]['sent_in_window']:,} ({b}) | {got} | | |")


if __name__ == "__main__":
    main()
