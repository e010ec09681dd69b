#!/usr/bin/env python3
"""Benchmarks soft-verbs with programs nobody here wrote.

perftest's RC programs (ib_write_bw, ib_read_bw, ib_send_bw, ib_write_lat,
ib_send_lat, ib_read_lat) run on soft-verbs, server and client as two
processes on this host, once over the soft provider's TCP stream path
(HIPOBJ_SOFT_CMA=0) and once over its same-host path (process_vm_writev,
HIPOBJ_SOFT_CMA=privileged, since CI runs as root); qperf's tcp_bw and
tcp_lat, in the same run, are the plain TCP loopback baseline. Each case
runs --repeat times and the median is kept; every process runs under
/usr/bin/time, which gives its CPU seconds.

    soft-verbs/link.sh release
    python3 scripts/bench-soft-verbs.py [--lib target/soft-verbs/release]

Prints a Markdown report (docs/benchmarks.md keeps one).
"""

import argparse
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

GIB = 1 << 30


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def timed(cmd, env, tmp, tag):
    """Starts cmd under /usr/bin/time; returns (Popen, path of its CPU file)."""
    out = os.path.join(tmp, f"{tag}.time")
    p = subprocess.Popen(
        ["/usr/bin/time", "-f", "%U %S", "-o", out] + cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return p, out


def cpu_of(path):
    with open(path) as f:
        u, s = f.read().split()[-2:]
    return float(u) + float(s)


def proc_cpu(pid):
    """CPU seconds a live process (and its reaped children) used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(int(x) for x in fields[11:15]) / ticks


def perftest(prog, size, iters, lib, cma, tmp, extra=()):
    """One server/client run; returns (client output, server CPU s, client CPU s)."""
    env = dict(os.environ, LD_LIBRARY_PATH=lib, HIPOBJ_SOFT_CMA=cma)
    env.pop("HIPOBJ_SOFT_ADDRS", None)
    port = str(free_port())
    args = [prog, "-d", "hipobj_soft0", "-x", "0", "-s", str(size), "-n", str(iters), "-p", port]
    args += list(extra)
    srv, srv_t = timed(args, env, tmp, "srv")
    deadline = time.time() + 20
    while True:
        cli, cli_t = timed(args + ["127.0.0.1"], env, tmp, "cli")
        out, _ = cli.communicate(timeout=300)
        if cli.returncode == 0 or "Couldn't connect" not in out or time.time() > deadline:
            break
        time.sleep(0.1)
    sout, _ = srv.communicate(timeout=300)
    if cli.returncode != 0 or srv.returncode != 0:
        sys.exit(f"{prog} failed:\n--- server\n{sout}\n--- client\n{out}")
    return out, cpu_of(srv_t), cpu_of(cli_t)


def row(out, size):
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == str(size):
            return f
    sys.exit(f"no result row for {size} in:\n{out}")


def qperf(test, size, seconds, tmp):
    """qperf's tcp_bw or tcp_lat against a qperf server on loopback, each
    under /usr/bin/time; returns (value, unit, client CPU s, server CPU s,
    bytes the client sent)."""
    port = str(free_port())
    srv = subprocess.Popen(["qperf", "-lp", port], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        cli, cli_t = timed(
            ["qperf", "127.0.0.1", "-lp", port, "-m", str(size), "-t", str(seconds), "-vvs", test],
            dict(os.environ), tmp, "qcli",
        )
        out, _ = cli.communicate(timeout=120)
        srv_cpu = proc_cpu(srv.pid)
    finally:
        srv.kill()
        srv.wait()
    val = re.search(r"(bw|latency)\s*=\s*([\d.]+)\s*(\S+)", out)
    byt = re.search(r"send_bytes\s*=\s*([\d.]+)\s*(\S+)", out)
    if cli.returncode != 0 or not val:
        sys.exit(f"qperf {test} failed:\n{out}")
    scale = {"bytes": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9}
    moved = float(byt.group(1)) * scale.get(byt.group(2), 1) if byt else None
    return float(val.group(2)), val.group(3), cpu_of(cli_t), srv_cpu, moved


def mb_s(value, unit):
    return value * {"GB/sec": 1000.0, "MB/sec": 1.0, "KB/sec": 0.001}[unit]


def us(value, unit):
    return value * {"us": 1.0, "ms": 1000.0, "ns": 0.001, "sec": 1e6}[unit]


def median_of(n, f):
    runs = [f() for _ in range(n)]
    keys = sorted(range(n), key=lambda i: runs[i][0])
    return runs[keys[n // 2]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=os.path.join(os.path.dirname(__file__), "..", "target", "soft-verbs", "release"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bw-iters", type=int, default=3000, help="1 MiB messages per bandwidth run")
    ap.add_argument("--lat-iters", type=int, default=20000)
    a = ap.parse_args()
    lib = os.path.abspath(a.lib)
    if not os.path.exists(os.path.join(lib, "libibverbs.so.1")):
        sys.exit(f"no libibverbs.so.1 in {lib}: run soft-verbs/link.sh release")
    tmp = tempfile.mkdtemp(prefix="bench-soft-verbs-")
    mib = 1 << 20

    print(f"Machine: {os.cpu_count()} CPUs, {platform.platform()}, load {os.getloadavg()}; "
          f"library {lib}; median of {a.repeat} runs.\n")

    # Bandwidth.
    tcp_bw = median_of(a.repeat, lambda: qperf("tcp_bw", mib, 3, tmp))
    tcp_mb = mb_s(tcp_bw[0], tcp_bw[1])
    tcp_gib = (tcp_bw[4] or tcp_mb * 1e6 * 3) / GIB
    print("| 1 MiB messages | MB/s | ratio to TCP | CPU s/GiB server | CPU s/GiB client |")
    print("|---|---|---|---|---|")
    print(f"| plain TCP loopback (qperf tcp_bw) | {tcp_mb:.0f} | 1.00 | "
          f"{tcp_bw[3] / tcp_gib:.2f} (receiver) | {tcp_bw[2] / tcp_gib:.2f} (sender) |")
    for prog in ["ib_write_bw", "ib_read_bw", "ib_send_bw"]:
        for path, cma in [("TCP stream", "0"), ("same-host", "privileged")]:
            def one():
                out, s_cpu, c_cpu = perftest(prog, mib, a.bw_iters, lib, cma, tmp)
                return float(row(out, mib)[3]), s_cpu, c_cpu
            bw, s_cpu, c_cpu = median_of(a.repeat, one)
            gib = a.bw_iters * mib / GIB
            print(f"| {prog} ({path}) | {bw * 1.048576:.0f} | {bw * 1.048576 / tcp_mb:.2f} | "
                  f"{s_cpu / gib:.2f} | {c_cpu / gib:.2f} |")
    # What bounds them on a small host: perftest spins on its CQ, one core
    # per process, while the soft provider's threads move the bytes. With
    # -e it sleeps on the completion channel instead (SEND only: perftest
    # has no event mode for WRITE and READ).
    def one_e():
        out, s_cpu, c_cpu = perftest("ib_send_bw", mib, a.bw_iters, lib, "0", tmp, ["-e"])
        return float(row(out, mib)[3]), s_cpu, c_cpu
    bw, s_cpu, c_cpu = median_of(a.repeat, one_e)
    gib = a.bw_iters * mib / GIB
    print(f"| ib_send_bw -e (TCP stream, waiting on the completion channel) | {bw * 1.048576:.0f} | "
          f"{bw * 1.048576 / tcp_mb:.2f} | {s_cpu / gib:.2f} | {c_cpu / gib:.2f} |")
    print("\n(perftest reports MiB/s as MB/sec; converted to MB/s here.)\n")

    # Latency.
    print("| one-way latency (round trip / 2) | p50 µs | mean µs | TCP mean µs | p50 / TCP |")
    print("|---|---|---|---|---|")
    for size in [8, 4096]:
        t = median_of(a.repeat, lambda: qperf("tcp_lat", size, 3, tmp))
        tcp_us = us(t[0], t[1])
        print(f"| plain TCP ping-pong (qperf tcp_lat), {size} B | | | {tcp_us:.2f} | 1.00 |")
        for prog in ["ib_write_lat", "ib_send_lat", "ib_read_lat"]:
            def one():
                out, _, _ = perftest(prog, size, a.lat_iters, lib, "0", tmp)
                f = row(out, size)
                return float(f[4]), float(f[5])
            p50, mean = median_of(a.repeat, one)
            note = " (full round trip: a READ is one)" if prog == "ib_read_lat" else ""
            ratio = p50 / tcp_us if prog != "ib_read_lat" else p50 / (2 * tcp_us)
            print(f"| {prog}, {size} B{note} | {p50:.2f} | {mean:.2f} | {tcp_us:.2f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
