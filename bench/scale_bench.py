"""Scaling of the parameter-server exchange over real hosts: network namespaces with shaped links
(tests/multihost/netns_hosts.py), ResNet-50's real variables (configs/resnet50.yaml, 25.6 M
parameters, 102 MB a push), workers in synthetic compute (--synthetic_step_ms: a GPU's time
for a batch of 64, no forward/backward), 1..8 worker hosts against 1..4 server hosts.

  bench/scale_bench.py --pstrain build/pstrain [--rates 10gbit,25gbit] [--workers 1,2,4,8]
                       [--servers 1,2,4] [--seconds 10] [--step_ms 35]

Per cell: images/s (local steps in the window x 64, from the workers' progress lines), scaling
efficiency (over N x the one-worker cell of the same row), each server's CPU (utime+stime from
/proc/<pid>/stat over the window) and link use (its bridge port's byte counters), the cores all
roles used together against the cores the whole machine was busy (/proc/stat: everyone's work,
other users' too; this machine's `nproc` cores serve every host), and the servers' CPU seconds
per GB they moved (in + out). Before the cells, what tbf lets through a link at each rate (one TCP stream between
two hosts) shows what the links can carry here. Needs root, ip, tc, sshd (as the multi-host test).
"""

import argparse
import datetime
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "multihost"))
import netns_hosts  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH = 64
MAX_SERVERS = 4
TICK = os.sysconf("SC_CLK_TCK")
ROLE_ENV = {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE",
            "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}  # as pstrain-launch runs roles


def rate_bits(rate):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", rate)
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


def shape(hosts, rate):
    """tbf at `rate` on both ends of every host's link; the bucket holds 1 ms of traffic (at
    least 1 MB, as netns_hosts.py), so that the timer's granularity does not cap the rate."""
    burst = max(1 << 20, int(rate_bits(rate) / 8 / 1000))
    for host in range(1, hosts.count + 1):
        for where, dev in ((hosts.ns(host), "eth0"), (hosts.net, f"h{host}")):
            netns_hosts.run("tc", "-n", where, "qdisc", "replace", "dev", dev, "root", "tbf",
                            "rate", rate, "burst", str(burst), "latency", "100ms")


def port_bytes(hosts):
    """{host: (bytes from the host, bytes to the host)} from its bridge port's counters."""
    out = netns_hosts.run("ip", "-n", hosts.net, "-s", "-j", "link", "show").stdout
    counters = {}
    for link in json.loads(out):
        m = re.fullmatch(r"h(\d+)", link.get("ifname", ""))
        if m:
            s = link["stats64"]
            counters[int(m.group(1))] = (s["rx"]["bytes"], s["tx"]["bytes"])
    return counters


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15)


def machine_busy():
    """(busy, total) jiffies of every CPU of this machine (/proc/stat), whoever's."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]  # idle, iowait
    return sum(v) - idle, sum(v)


def link_probe(hosts, rate, seconds=2.0):
    """Gbit/s of one TCP stream from host 2 to host 1 through their shaped links."""
    code = ("import socket,sys,time\n"
            "s=socket.create_connection(('%s',5001));b=bytes(4<<20);end=time.time()+%f\n"
            "while time.time()<end: s.sendall(b)\n" % (hosts.address(1), seconds))
    server = subprocess.Popen(["ip", "netns", "exec", hosts.ns(1), sys.executable, "-c",
                               "import socket,time\n"
                               "l=socket.socket();l.setsockopt(socket.SOL_SOCKET,"
                               "socket.SO_REUSEADDR,1);l.bind(('%s',5001));l.listen(1)\n"
                               "c,_=l.accept();n=0;t=time.time()\n"
                               "while True:\n d=c.recv(1<<22)\n if not d: break\n n+=len(d)\n"
                               "print(n*8/(time.time()-t)/1e9)\n" % hosts.address(1)],
                              stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    subprocess.run(["ip", "netns", "exec", hosts.ns(2), sys.executable, "-c", code], check=True)
    return float(server.communicate(timeout=30)[0])


def glog_seconds(line):
    m = re.match(r"[IWE](\d{4})(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+)", line)
    if not m:
        return None
    y, mo, d, h, mi, s, us = (int(g) for g in m.groups())
    return datetime.datetime(y, mo, d, h, mi, s, us).timestamp()  # glog writes local time


def progress_times(path):
    with open(path, errors="replace") as f:
        return [glog_seconds(l) for l in f if re.search(r": step \d+/\d+ ", l)]


class Cell:
    def __init__(self, args, hosts, tmp, servers, workers):
        self.args, self.hosts, self.servers, self.workers = args, hosts, servers, workers
        self.dir = tempfile.mkdtemp(prefix=f"s{servers}w{workers}-", dir=tmp)
        self.server_hosts = list(range(1, servers + 1))
        self.worker_hosts = list(range(MAX_SERVERS + 1, MAX_SERVERS + 1 + workers))
        self.procs = []

    def start(self):
        a, h = self.args, self.hosts
        cluster = ["--ps_hosts=" + ",".join(f"{h.address(k)}:2222" for k in self.server_hosts),
                   "--worker_hosts=" + ",".join(f"{h.address(k)}:2230" for k in self.worker_hosts),
                   f"--config={a.config}", f"--train_dir={self.dir}/td", "--insecure",
                   "--ps_unavailable_timeout_secs=60"]
        env = dict(os.environ, **ROLE_ENV)
        for i, k in enumerate(self.server_hosts):
            self._spawn(k, f"ps{i}", ["--job_name=ps", f"--task_index={i}",
                                      "--ps_summary_secs=0"] + cluster, env)
        self.worker_logs = []
        for i, k in enumerate(self.worker_hosts):
            self.worker_logs.append(self._spawn(
                k, f"worker{i}",
                ["--job_name=worker", f"--task_index={i}", "--device=cpu",
                 f"--synthetic_step_ms={a.step_ms}", "--max_steps=100000000",
                 "--log_every_n_steps=1", "--histogram_every_n_steps=0",
                 "--save_checkpoints_secs=1000000"] + cluster, env))

    def _spawn(self, host, name, flags, env):
        log = os.path.join(self.dir, name + ".log")
        with open(log, "w") as f:
            p = subprocess.Popen(["ip", "netns", "exec", self.hosts.ns(host), self.args.pstrain]
                                 + flags, stdout=f, stderr=subprocess.STDOUT, env=env,
                                 preexec_fn=netns_hosts.die_with_parent())
        self.procs.append((name, host, p))
        return log

    def wait_training(self, timeout=120):
        """Until every worker has made 2 steps; raises naming the logs if one does not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, _, p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited {p.returncode}: see {self.dir}/{name}.log")
            if all(len(progress_times(l)) >= 2 for l in self.worker_logs):
                return
            time.sleep(0.2)
        raise RuntimeError(f"workers not training after {timeout} s: see {self.dir}")

    def measure(self, seconds):
        pids = {name: p.pid for name, _, p in self.procs}
        cpu0 = {n: cpu_seconds(pid) for n, pid in pids.items()}
        bytes0, busy0, t0 = port_bytes(self.hosts), machine_busy(), time.time()
        time.sleep(seconds)
        cpu1 = {n: cpu_seconds(pid) for n, pid in pids.items()}
        bytes1, busy1, t1 = port_bytes(self.hosts), machine_busy(), time.time()
        wall = t1 - t0
        steps = sum(sum(1 for t in progress_times(l) if t0 <= t < t1) for l in self.worker_logs)
        r = {"servers": self.servers, "workers": self.workers, "seconds": wall,
             "steps": steps, "images_per_sec": steps * BATCH / wall,
             "all_cores": sum(cpu1[n] - cpu0[n] for n in pids) / wall,
             "machine_cores": (busy1[0] - busy0[0]) / (busy1[1] - busy0[1]) * os.cpu_count(),
             "ps": []}
        for i, k in enumerate(self.server_hosts):
            name = f"ps{i}"
            sent, received = (bytes1[k][j] - bytes0[k][j] for j in (0, 1))
            r["ps"].append({"cpu": (cpu1[name] - cpu0[name]) / wall,
                            "cpu_seconds": cpu1[name] - cpu0[name],
                            "gbit_in": received * 8 / wall / 1e9,
                            "gbit_out": sent * 8 / wall / 1e9,
                            "bytes": sent + received})
        return r

    def stop(self):
        for _, _, p in self.procs:
            if p.poll() is None:
                p.kill()
        for _, _, p in self.procs:
            p.wait()


def row(rate, r, one):
    n, ps = r["workers"], r["ps"]
    eff = r["images_per_sec"] / (n * one) if one else float("nan")
    ideal = r["images_per_sec"] / (n * BATCH * 1000 / ARGS.step_ms)
    moved = sum(p["bytes"] for p in ps)
    per_gb = sum(p["cpu_seconds"] for p in ps) / (moved / 1e9) if moved else float("nan")
    cpus = " ".join("%3.0f" % (p["cpu"] * 100) for p in ps)
    links = " ".join("%.2f/%.2f" % (p["gbit_in"], p["gbit_out"]) for p in ps)
    return (f"| {rate:>7} | {r['servers']:>2} | {n:>2} | {r['images_per_sec']:7.1f} | "
            f"{eff * 100:5.1f}% | {ideal * 100:5.1f}% | "
            f"{cpus:>15} | {links:>39} | "
            f"{r['all_cores']:4.2f} / {r['machine_cores']:4.2f} | {per_gb:5.2f} |")


HEADER = ("|    link | ps |  w |   img/s |   eff | ideal |   ps CPU % each | "
          "ps link in/out Gbit/s each             | cores ours / all | ps CPU s/GB |\n"
          "|---------|----|----|---------|-------|-------|-----------------|"
          "-----------------------------------------|------------------|-------------|")


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pstrain", default=os.path.join(ROOT, "build", "pstrain"))
    p.add_argument("--config", default=os.path.join(ROOT, "configs", "resnet50.yaml"))
    p.add_argument("--rates", default="10gbit,25gbit")
    p.add_argument("--workers", default="1,2,4,8")
    p.add_argument("--servers", default="1,2,4")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--step_ms", type=int, default=35)
    p.add_argument("--json", help="also write every cell's numbers here")
    ARGS = a = p.parse_args()
    missing = netns_hosts.missing_tools()
    if missing:
        print("bench/scale_bench.py: missing: " + ", ".join(missing), file=sys.stderr)
        return 2
    workers = [int(w) for w in a.workers.split(",")]
    servers = [int(s) for s in a.servers.split(",")]
    assert max(servers) <= MAX_SERVERS
    tmp = tempfile.mkdtemp(prefix="pstrain-scale-")
    cells = []
    print(f"== {os.cpu_count()} cores for every host; {a.config}, batch {BATCH}, "
          f"--synthetic_step_ms={a.step_ms} (ideal {BATCH * 1000 / a.step_ms:.0f} img/s a "
          f"worker); {a.seconds:.0f} s a cell; logs in {tmp}", flush=True)
    with netns_hosts.NetnsHosts(MAX_SERVERS + max(workers), tmp) as hosts:
        for rate in a.rates.split(","):
            shape(hosts, rate)
            print(f"== tbf {rate}: one TCP stream h2 -> h1 carries "
                  f"{link_probe(hosts, rate):.2f} Gbit/s", flush=True)
        netns_hosts.run("tc", "-n", hosts.ns(2), "qdisc", "del", "dev", "eth0", "root")
        netns_hosts.run("tc", "-n", hosts.net, "qdisc", "del", "dev", "h1", "root")
        print(f"== no tbf: one TCP stream h2 -> h1 carries {link_probe(hosts, 'none'):.2f} "
              f"Gbit/s (what this machine's CPUs move through veth and the bridge)", flush=True)
        for rate in a.rates.split(","):
            shape(hosts, rate)
            print(f"\n== links shaped to {rate} (tbf, each direction)\n{HEADER}", flush=True)
            for s in servers:
                one = None
                for n in workers:
                    cell = Cell(a, hosts, tmp, s, n)
                    try:
                        cell.start()
                        cell.wait_training()
                        time.sleep(1)  # past the first pulls
                        r = cell.measure(a.seconds)
                    finally:
                        cell.stop()
                    if n == 1:
                        one = r["images_per_sec"]
                    r["rate"] = rate
                    cells.append(r)
                    print(row(rate, r, one), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(cells, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
