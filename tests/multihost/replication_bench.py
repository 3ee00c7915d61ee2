"""What replication costs: training throughput with --replicas=1 over --replicas=0 on
real links, and the bytes a server sends its backups per step (a measurement, not a test: the
numbers are printed, not checked).

  python3 tests/multihost/replication_bench.py --pstrain build/pstrain \
      [--config configs/refnet.yaml] [--rate 1gbit] [--steps 300] [--step_ms 0] [--workers 2] \
      [--role_flags="--partition_bytes=1048576 --push_part_mb=1"]

Three hosts of tests/multihost/netns_hosts.py, links shaped with tc tbf to --rate each way:
ps0 on h1, ps1 on h2 (with --replicas=1 each holds its own shard and backs up the other's, on
the other host, as PlaceReplicas places them), and the workers on h3. The same cluster runs
twice, back to back, --replicas=0 then 1, plaintext (--insecure) as both runs are. Throughput is
examples per second between the chief's progress lines after the first two; every worker trains
(real compute, one OpenMP thread each, unless --step_ms gives synthetic compute). Needs root,
ip, tc (as the multi-host test).
"""

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns_hosts  # noqa: E402
from overlap_bench import ROLE_ENV, glog_seconds  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_once(a, hosts, tmp, replicas):
    """Examples/s of the whole cluster, CPU-seconds per step of every role, and the servers' logs."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    d = tempfile.mkdtemp(prefix=f"replicas-{replicas}-", dir=tmp)
    cluster = [f"--ps_hosts={hosts.address(1)}:2222,{hosts.address(2)}:2222",
               "--worker_hosts=" + ",".join(f"{hosts.address(3)}:{2230 + k}"
                                            for k in range(a.workers)),
               f"--config={a.config}", f"--train_dir={d}/td", "--insecure",
               "--ps_unavailable_timeout_secs=60", f"--replicas={replicas}"] + a.role_flags.split()
    env = dict(os.environ, **ROLE_ENV)
    roles = [(1, "ps0", ["--job_name=ps", "--task_index=0", "--ps_summary_secs=0"]),
             (2, "ps1", ["--job_name=ps", "--task_index=1", "--ps_summary_secs=0"])]
    for k in range(a.workers):
        roles.append((3, f"worker{k}", [
            "--job_name=worker", f"--task_index={k}", "--device=cpu",
            f"--synthetic_step_ms={a.step_ms}", f"--max_steps={a.steps}",
            "--eval_interval_secs=1000000", "--log_every_n_steps=10",
            "--histogram_every_n_steps=0", "--save_checkpoints_secs=1000000"]))
    procs, logs = {}, {}
    for host, name, flags in roles:
        logs[name] = os.path.join(d, name + ".log")
        with open(logs[name], "w") as f:
            procs[name] = subprocess.Popen(["ip", "netns", "exec", hosts.ns(host), a.pstrain]
                                           + flags + cluster, stdout=f, stderr=subprocess.STDOUT,
                                           env=env, preexec_fn=netns_hosts.die_with_parent())
    try:
        code = procs["worker0"].wait(timeout=900)
        for name, p in procs.items():
            p.wait(timeout=120)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    text = {}
    for name, path in logs.items():
        with open(path, errors="replace") as f:
            text[name] = f.read()
    if code != 0:
        raise RuntimeError(f"the chief exited {code}: {logs['worker0']}\n{text['worker0'][-3000:]}")
    lines = [l for l in text["worker0"].splitlines() if re.search(r": step \d+/\d+ ", l)]
    steps = [int(re.search(r": step (\d+)/", l).group(1)) for l in lines]
    times = [glog_seconds(l) for l in lines]
    batch = 128
    rate = (steps[-1] - steps[2]) * batch / (times[-1] - times[2])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / steps[-1]
    return rate, cpu, text


def replicated_bytes(text):
    """(bytes, records) the servers sent their backups, from their 'stopped' lines."""
    total = records = 0
    for name, t in text.items():
        if not name.startswith("ps"):
            continue
        for m in re.finditer(r"(\d+) records and \d+ copies replicated \((\d+) tensor bytes\)",
                             t):
            records += int(m.group(1))
            total += int(m.group(2))
    return total, records


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pstrain", default=os.path.join(ROOT, "build", "pstrain"))
    p.add_argument("--config", default=os.path.join(ROOT, "configs", "refnet.yaml"))
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--step_ms", type=int, default=0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--role_flags", default="", help="more flags for every role, in both runs")
    a = p.parse_args()
    missing = netns_hosts.missing_tools()
    if missing:
        print("replication_bench.py: missing: " + ", ".join(missing), file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="pstrain-replication-bench-")
    with open("/proc/loadavg") as f:
        print(f"== load before: {' '.join(f.read().split()[:3])}; logs in {tmp}", flush=True)
    results = {}
    with netns_hosts.NetnsHosts(3, tmp, rate=a.rate) as hosts:
        for replicas in (0, 1):
            rate, cpu, text = run_once(a, hosts, tmp, replicas)
            sent, records = replicated_bytes(text)
            steps = a.steps
            results[replicas] = rate
            print(f"--replicas={replicas}: {rate:.0f} examples/s, {cpu:.3f} CPU-s a step (every "
                  f"role), {records} records, {sent / max(1, steps) / 1e6:.2f} MB replicated per "
                  f"global step", flush=True)
    with open("/proc/loadavg") as f:
        print(f"== load after: {' '.join(f.read().split()[:3])}")
    print(f"ratio: {results[1] / results[0]:.2f} (throughput --replicas=1 over --replicas=0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
