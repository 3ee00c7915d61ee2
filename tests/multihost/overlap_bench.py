"""The overlapped push (--overlap_push) over a shaped link: step time with and without it,
against max(compute, transfer) (a measurement, not a test: the numbers are printed, not checked).

  python3 tests/multihost/overlap_bench.py --pstrain build/pstrain \
      [--config configs/resnet50.yaml] [--rate 1gbit] [--step_ms 800] [--steps 12] \
      [--baseline OTHER/pstrain] [--hosts 2 --ranks 2] [--variants off,on,bf16]

Two hosts of tests/multihost/netns_hosts.py, their links shaped with tc tbf to --rate in each
direction: ps0 on h1, one worker in synthetic compute on h2 (--synthetic_step_ms: forward a
third of the step, then a backward that hands out the layers, last first, each after its share
of the parameters; worker/distributed/training_step.h). The same cluster runs twice, back to
back, --overlap_push=false then true (parts of --push_part_mb). Step time is the mean gap
between the worker's progress lines after the first two steps. Transfer is the model's bytes
over the link rate, each way: without overlap a step is about compute + push + pull (the pull
waits for the push); with it, pushes leave during backward and pulls come back while later parts
still go up (the link is full duplex), so the bound is max(compute, transfer) plus the last
part's push and pull. Needs root, ip, tc, sshd (as the multi-host test).

With --hosts N --ranks R (R > 1) the workers are N hosts of R ranks each (h2 to hN+1), which
average within their host through the leader's hub (--intra_node_sync=cpu) before the leader
pushes: with overlap, each part as the host's average of it is done. The server's link then
carries N pushes and N pulls a host step, so the bound is max(compute, N x transfer). With
--servers S the variables are sharded over S servers, each on a host of its own (h1, then the
hosts after the workers'), and each server's link carries 1/S of that.
--variants picks the runs: off (whole pushes), on (overlapped), bf16 (overlapped, 16-bit
pushes and pulls, --push_dtype=bf16).
"""

import argparse
import datetime
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns_hosts  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE_ENV = {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE",
            "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}  # as pstrain-launch runs roles


def rate_bits(rate):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", rate)
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


def glog_seconds(line):
    m = re.match(r"[IWE](\d{4})(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+)", line)
    y, mo, d, h, mi, s, us = (int(g) for g in m.groups())
    return datetime.datetime(y, mo, d, h, mi, s, us).timestamp()


VARIANTS = {"off": ["--overlap_push=false"], "on": ["--overlap_push=true"],
            "bf16": ["--overlap_push=true", "--push_dtype=bf16"]}


def wait_cpu(proc, timeout):
    """The exit code and CPU-seconds (user + system) of `proc`, reaped here; -1 after `timeout`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_utime + usage.ru_stime
        time.sleep(0.05)
    return -1, 0.0


def run_once(a, hosts, tmp, variant, binary=None, ps_host=1):
    """Mean step time (s) of worker 0 in `variant` (VARIANTS; None: the --baseline binary), its
    log, and the CPU-seconds per host step of every role together, of the leader (worker 0) and
    of the servers (whole run, start included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    d = tempfile.mkdtemp(prefix=f"overlap-{variant}-", dir=tmp)
    worker_hosts = [(2 + h, f"{hosts.address(2 + h)}:{2230 + r}")
                    for h in range(a.hosts) for r in range(a.ranks)]
    # ps 0 on h1 (or ps_host), the others on hosts after the workers'.
    ps_hosts = [ps_host] + [2 + a.hosts + i for i in range(a.servers - 1)]
    cluster = [f"--ps_hosts={','.join(f'{hosts.address(h)}:2222' for h in ps_hosts)}",
               f"--worker_hosts={','.join(w for _, w in worker_hosts)}",
               f"--config={a.config}", f"--train_dir={d}/td", "--insecure",
               "--ps_unavailable_timeout_secs=60", f"--partition_bytes={a.partition_bytes}"]
    if a.ranks > 1:
        cluster.append("--intra_node_sync=cpu")
    if binary is None:
        binary = a.pstrain
        cluster += VARIANTS[variant] + [f"--push_part_mb={a.part_mb}"]
    env = dict(os.environ, **ROLE_ENV)
    procs = []
    logs = {}
    roles = [(h, f"ps{i}", ["--job_name=ps", f"--task_index={i}", "--ps_summary_secs=0"])
             for i, h in enumerate(ps_hosts)]
    for task, (host, _) in enumerate(worker_hosts):
        roles.append((host, f"worker{task}", [
            "--job_name=worker", f"--task_index={task}", "--device=cpu",
            f"--synthetic_step_ms={a.step_ms}", f"--max_steps={a.steps * a.hosts}",
            "--eval_interval_secs=1000000", "--log_every_n_steps=1",
            "--histogram_every_n_steps=0", "--save_checkpoints_secs=1000000"]))
    for host, name, flags in roles:
        logs[name] = os.path.join(d, name + ".log")
        with open(logs[name], "w") as f:
            procs.append(subprocess.Popen(["ip", "netns", "exec", hosts.ns(host), binary]
                                          + flags + cluster, stdout=f, stderr=subprocess.STDOUT,
                                          env=env, preexec_fn=netns_hosts.die_with_parent()))
    try:
        waited = [wait_cpu(p, 900) for p in procs[a.servers:]]
        code = next((c for c, _ in waited if c != 0), 0)
        ps_cpu = sum(wait_cpu(p, 60)[1] for p in procs[:a.servers])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    with open(logs["worker0"], errors="replace") as f:
        log = f.read()
    if code != 0:
        raise RuntimeError(f"worker exited {code}: {logs['worker0']}\n{log[-3000:]}")
    times = [glog_seconds(l) for l in log.splitlines() if re.search(r": step \d+/\d+ ", l)]
    gaps = [b - t for t, b in zip(times[2:], times[3:])]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = {"all": (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / a.steps,
           "leader": waited[0][1] / a.steps, "ps": ps_cpu / a.steps}
    return sum(gaps) / len(gaps), log, cpu


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pstrain", default=os.path.join(ROOT, "build", "pstrain"))
    p.add_argument("--config", default=os.path.join(ROOT, "configs", "resnet50.yaml"))
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--step_ms", type=int, default=800,
                   help="synthetic compute a step; 0: the model's real forward and backward "
                   "(one OpenMP thread), whose time is measured first with the server on the "
                   "worker's own host (no link between them)")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--part_mb", type=int, default=4)
    p.add_argument("--partition_bytes", type=int, default=8 << 20,
                   help="--partition_bytes of every role: a part never splits a partition")
    p.add_argument("--baseline", help="also run this pstrain binary (one without --overlap_push: "
                   "what one push a step cost before), first")
    p.add_argument("--hosts", type=int, default=1, help="worker hosts")
    p.add_argument("--servers", type=int, default=1,
                   help="server hosts, one ps each: h1, then hosts after the workers'")
    p.add_argument("--ranks", type=int, default=1,
                   help="workers on each worker host; above 1 they average behind a leader")
    p.add_argument("--variants", default="off,on",
                   help="comma-separated runs, in order: " + ", ".join(VARIANTS))
    a = p.parse_args()
    variants = a.variants.split(",")
    if any(v not in VARIANTS for v in variants) or min(a.hosts, a.ranks, a.servers) < 1:
        p.error(f"--variants takes {', '.join(VARIANTS)}; --hosts, --ranks, --servers at least 1")
    missing = netns_hosts.missing_tools()
    if missing:
        print("overlap_bench.py: missing: " + ", ".join(missing), file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="pstrain-overlap-bench-")
    with open("/proc/loadavg") as f:
        print(f"== load before: {' '.join(f.read().split()[:3])}; logs in {tmp}", flush=True)
    with netns_hosts.NetnsHosts(a.servers + a.hosts, tmp, rate=a.rate) as hosts:
        results = {}
        if not a.step_ms:  # real compute: a step with no link to cross
            compute, _, _ = run_once(a, hosts, tmp, "off", ps_host=2)
            print(f"real compute: {compute * 1000:.0f} ms a step with the server on the "
                  f"worker's host", flush=True)
        if a.baseline:
            base, _, cpu = run_once(a, hosts, tmp, None, binary=a.baseline)
            print(f"baseline {a.baseline}: {base * 1000:.0f} ms a step, {cpu['all']:.3f} CPU-s a "
                  f"step (every role)", flush=True)
        for variant in variants:
            results[variant], log, cpu = run_once(a, hosts, tmp, variant)
            params = int(re.search(r"(\d+) parameters", log).group(1))
            said = [l.split("] ", 1)[-1] for l in log.splitlines()
                    if "the push overlaps" in l or "one push per server" in l]
            print(f"{variant} ({' '.join(VARIANTS[variant])}): {results[variant] * 1000:.0f} ms a "
                  f"step, CPU-s a step: {cpu['all']:.3f} every role, {cpu['leader']:.3f} the leader"
                  f" (worker 0), {cpu['ps']:.3f} the servers ({said[0] if said else '?'})",
                  flush=True)
    with open("/proc/loadavg") as f:
        print(f"== load after: {' '.join(f.read().split()[:3])}")
    model_bytes = 4 * params
    # Each server's link carries its share of every host's push (and pull) a host step.
    transfer = a.hosts * model_bytes * 8 / rate_bits(a.rate) / a.servers
    if a.step_ms:
        compute = a.step_ms / 1000
    print(f"model {model_bytes / 1e6:.1f} MB; {a.hosts} worker host(s) x {a.ranks} rank(s), "
          f"{a.servers} server host(s); "
          f"link {a.rate} each way: each server's transfer {transfer * 1000:.0f} ms each way a "
          f"host step (fp32); compute {compute * 1000:.0f} ms"
          f"{'' if a.step_ms else ' (real, measured: includes the exchange on one host)'}")
    print("| variant | step ms | examples/s | compute + 2 x transfer | max(compute, transfer) "
          "| step / max |")
    with open(a.config) as f:
        batch = int(re.search(r"^\s*batch_size:\s*(\d+)", f.read(), re.M).group(1))
    for variant in variants:
        step = results[variant]
        moved = transfer / 2 if variant == "bf16" else transfer  # 2 bytes a parameter each way
        print(f"| {variant:>7} | {step * 1000:7.0f} | "
              f"{a.hosts * a.ranks * batch / step:10.0f} | "
              f"{(compute + 2 * moved) * 1000:22.0f} | {max(compute, moved) * 1000:22.0f} | "
              f"{step / max(compute, moved):10.2f} |")
    if "off" in results:
        for variant in variants:
            if variant != "off":
                print(f"speed-up of {variant} over off: {results['off'] / results[variant]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
