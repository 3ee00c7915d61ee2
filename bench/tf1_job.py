#!/usr/bin/env python3
"""The README's whole job, pstrain against TensorFlow's own parameter-server runtime, back to back.

RefNet on Fashion-MNIST (configs/refnet.yaml: Adam, its staircase decay, batch 128 per worker),
1 parameter server + 2 workers on this machine (--servers, --workers; TensorFlow's reference runs
one server whatever --servers says), 2,808 global steps (or --steps N for a quick check). pstrain runs through launcher/pstrain-launch in local mode without an evaluator (a cluster
file written here); TensorFlow runs ../shared/bench/tf1_ps_refnet.py (PSTRAIN_TF1_REFNET) with
the bench venv's Python. Neither evaluates while training: both test the final weights on the 10k
test set once, so "time to 92%" is the wall time when the final accuracy reaches 0.92 (TARGET_ACCURACY).

Measured per side: wall time, final test accuracy, examples/s per worker, CPU-seconds (user+sys)
of the whole process tree (wait4 of the launcher / the TF script: every role is reaped below
it). pstrain's roles also run under /usr/bin/time, giving CPU-seconds per role, and with
--sample_threads the CPU of every thread (from /proc/<pid>/task/*/stat, sampled each second).
--role_env 'OMP_WAIT_POLICY=ACTIVE GOMP_SPINCOUNT=0' sets variables in every pstrain role after
the launcher's own (so it overrides them); --perf records each role with `perf record`.
Flags after `--` go to every pstrain role.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_ACCURACY = 0.92


def sh_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def wait_rusage(proc):
    """Waits for proc; returns its CPU-seconds and those of every descendant it reaped."""
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime


class ThreadSampler:
    """CPU-seconds of every thread of the processes whose /proc/<pid>/exe is `binary`, by role
    (PSTRAIN_ROLE in their environment) and thread name. The last sample before a thread ends is
    kept, so up to a second of each thread's time may be missed."""

    def __init__(self, binary, interval=1.0):
        self.binary = os.path.realpath(binary)
        self.interval = interval
        self.last = {}  # (role, pid, tid) -> (comm, utime_ticks, stime_ticks)
        self.roles = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.tick = os.sysconf("SC_CLK_TCK")

    def role_of(self, pid):
        if pid not in self.roles:
            try:
                if os.path.realpath(f"/proc/{pid}/exe") != self.binary:
                    return None
                env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
                role = next((e[13:].decode() for e in env if e.startswith(b"PSTRAIN_ROLE=")), "?")
            except OSError:
                return None
            self.roles[pid] = role
        return self.roles[pid]

    def sample(self):
        for pid in filter(str.isdigit, os.listdir("/proc")):
            role = self.role_of(int(pid))
            if role is None:
                continue
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                try:
                    stat = open(f"/proc/{pid}/task/{tid}/stat").read()
                except OSError:
                    continue
                comm = stat[stat.index("(") + 1:stat.rindex(")")]
                fields = stat[stat.rindex(")") + 2:].split()
                self.last[(role, pid, tid)] = (comm, int(fields[11]), int(fields[12]))

    def run(self):
        while not self.stop.wait(self.interval):
            self.sample()

    def report(self):
        by = {}
        for (role, _, _), (comm, ut, st) in self.last.items():
            name = re.sub(r"[0-9]+$", "N", comm)  # omp worker 3, zmq io 1: one line per kind
            u, s, n = by.get((role, name), (0, 0, 0))
            by[(role, name)] = (u + ut, s + st, n + 1)
        lines = ["per-thread CPU-seconds (sampled each second; role, thread name, threads, user, sys):"]
        for (role, name), (u, s, n) in sorted(by.items(), key=lambda kv: (kv[0][0], -sum(kv[1][:2]))):
            lines.append(f"  {role:10s} {name:18s} x{n:<3d} user {u / self.tick:7.1f}  sys {s / self.tick:6.1f}")
        return "\n".join(lines)


def run_pstrain(a, extra_flags):
    work = os.path.join(a.build_dir, "bench-tf1")
    shutil.rmtree(work, ignore_errors=True)  # a train_dir left over would resume its checkpoint
    os.makedirs(work)
    binary = os.path.join(REPO, a.build_dir, "pstrain")
    wrapper = os.path.join(work, "role.sh")
    perf = (f'perf record -q {a.perf_flags} -o {sh_quote(work)}/perf-"$PSTRAIN_ROLE".data -- '
            if a.perf else "")
    with open(wrapper, "w") as f:
        f.write("#!/bin/bash\n# One pstrain role, its CPU-seconds written by /usr/bin/time.\n"
                f"[[ -n ${{BENCH_ROLE_ENV:-}} ]] && export $BENCH_ROLE_ENV\n"
                f"exec /usr/bin/time -o {sh_quote(work)}/rusage-\"$PSTRAIN_ROLE\" "
                f"-f '%U %S %e' {perf}{sh_quote(binary)} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    cluster = os.path.join(work, "cluster.yaml")
    p = a.port
    # Servers on ports p, p+1, ...; workers after them.
    servers = "".join(f"  - {{host: 127.0.0.1, port: {p + i}}}\n" for i in range(a.servers))
    workers = "".join(f"  - {{host: 127.0.0.1, port: {p + a.servers + i}}}\n"
                      for i in range(a.workers))
    with open(cluster, "w") as f:
        f.write(f"mode: local\nbinary: {wrapper}\nps:\n{servers}worker:\n{workers}flags: {{}}\n")
    config = os.path.join(work, "refnet.yaml")  # the README's config with this run's seed
    with open(os.path.join(REPO, "configs/refnet.yaml")) as f:
        text = f.read()
    if "  seed: 1\n" not in text:
        sys.exit("tf1_job: configs/refnet.yaml has no 'seed: 1' line to set --seeds by")
    with open(config, "w") as f:
        f.write(text.replace("  seed: 1\n", f"  seed: {a.seed}\n"))
    cmd = [os.path.join(REPO, "launcher/pstrain-launch"), "--cluster", cluster,
           "--config", config,
           "--train_dir", os.path.join(work, "run"), "--progress_interval", "30",
           "--keygen", os.path.join(REPO, a.build_dir, "pstrain-keygen")]
    if a.no_curve:
        cmd.append("--no_curve")
    cmd += ["--", f"--max_steps={a.steps}"] + extra_flags
    env = dict(os.environ)
    if a.role_env:
        env["BENCH_ROLE_ENV"] = a.role_env
    print("== pstrain:", " ".join(cmd), f"(role env: {a.role_env})" if a.role_env else "",
          flush=True)
    sampler = ThreadSampler(binary) if a.sample_threads else None
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    if sampler:
        sampler.thread.start()
    out = proc.stdout.read()
    cpu = wait_rusage(proc)
    wall = time.time() - t0
    if sampler:
        sampler.stop.set()
        sampler.thread.join()
    sys.stdout.write(out)
    if proc.returncode != 0:
        sys.exit(f"tf1_job: pstrain-launch exited {proc.returncode}; logs in {work}/run/launcher")
    logs = os.path.join(work, "run", "launcher")
    chief = open(os.path.join(logs, "worker-0.log")).read()
    m = re.search(r"done: global step (\d+), test accuracy ([0-9.]+)", chief)
    acc = float(m.group(2)) if m else None
    img_s = [worker_examples_per_sec(open(os.path.join(logs, f"worker-{i}.log")).read())
             for i in range(a.workers)]
    roles = {}
    for name in sorted(os.listdir(work)):
        if name.startswith("rusage-"):
            fields = open(os.path.join(work, name)).read().split()
            try:
                roles[name[7:]] = float(fields[-3]) + float(fields[-2])
            except (IndexError, ValueError):
                pass
    r = {"wall": wall, "acc": acc, "img_s": img_s, "cpu": cpu, "roles": roles}
    if sampler:
        r["threads"] = sampler.report()
    return r


_GLOG_TIME = re.compile(r"^[IWE]\d{8} (\d\d):(\d\d):(\d\d\.\d+)", re.M)


def worker_examples_per_sec(log):
    """Local steps x 128 over the time from the worker's first progress line to its last step.
    pstrain's progress lines already give a windowed examples/s; the mean over the run is what
    compares with TF's (examples / training seconds)."""
    lines = log.splitlines()
    steps = [l for l in lines if re.search(r"\bstep \d+", l) and "examples/s" in l]
    reached = next((l for l in lines if "reached step" in l), None)
    if not steps or not reached:
        return None
    rates = [float(x) for l in steps for x in re.findall(r"([0-9.]+) examples/s", l)]
    return sum(rates) / len(rates) if rates else None


def reference_script(env_var, name):
    """A reference script: `env_var`'s path, else shared/bench/<name> beside the repository."""
    return os.environ.get(env_var, os.path.join(REPO, "..", "shared", "bench", name))


def run_reference(label, cmd, rank_key, timeout=None, failed_hint=""):
    """Runs a reference job and prints its output; returns its wall and CPU-seconds, rank 0's
    accuracy (its JSON object's `rank_key` is 0) and every rank's img_s. With `timeout`, the job
    runs in a session of its own, so that a hung run can be stopped whole after that many
    seconds. A job that fails ends this script, naming it (`failed_hint` after)."""
    print(f"== {label}:", " ".join(cmd), flush=True)
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True,
                            start_new_session=timeout is not None)
    timer = None
    if timeout is not None:
        timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        timer.start()
    out = proc.stdout.read()
    cpu = wait_rusage(proc)
    wall = time.time() - t0
    if timer is not None:
        timer.cancel()
    sys.stdout.write(out)
    if proc.returncode != 0:
        sys.exit(f"tf1_job: {cmd[1]} exited {proc.returncode}{failed_hint}")
    runs = json_objects(out)
    acc = next((r["acc"] for r in runs if r.get(rank_key) == 0), None)
    return out, {"wall": wall, "acc": acc, "img_s": [r["img_s"] for r in runs], "cpu": cpu}


def run_tf(a):
    script = reference_script("PSTRAIN_TF1_REFNET", "tf1_ps_refnet.py")
    # The reference script runs one ps whatever --servers says (tf1_ps_refnet.py's layout).
    cmd = [a.python, script, "--workers", str(a.workers), "--steps", str(a.steps), "--port",
           str(a.port + 40)]
    # With few steps the chief may finish before worker 1 has joined, which then waits for the
    # chief forever: the run is stopped after --tf_timeout.
    out, result = run_reference(
        "TensorFlow", cmd, "task", timeout=a.tf_timeout,
        failed_hint=f" (killed after --tf_timeout {a.tf_timeout} s?); logs in /tmp/tf1_worker*.log")
    version = re.search(r"\(TensorFlow ([^)]*)\)", out)
    result["version"] = version.group(1) if version else "?"
    return result


def json_objects(out):
    """Every flat JSON object in a run's output. Ranks that print at once can land on one line
    (4 DDP ranks wrote '{...}{...}' in one run), so objects are found by their braces, not lines."""
    return [json.loads(m) for m in re.findall(r"\{[^{}]*\}", out)]


def run_ddp(a):
    """PyTorch DistributedDataParallel (gloo, --workers ranks, the same examples), as most users
    would run the job instead: its summary line's wall, CPU-seconds and accuracy."""
    script = reference_script("PSTRAIN_TORCH_DDP", "torch_ddp_refnet.py")
    cmd = [a.python, script, "--workers", str(a.workers), "--seed", str(a.seed), "--port",
           str(a.port + 80)]
    return run_reference("PyTorch DDP", cmd, "rank")[1]


def time_to_target(r):
    if r["acc"] is not None and r["acc"] >= TARGET_ACCURACY:
        return f"{r['wall']:.0f} s"
    return f"not reached (final {r['acc']})"


def fmt_rates(rates):
    return " / ".join("?" if x is None else f"{x:.0f}" for x in rates)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--steps", type=int, default=2808, help="global steps (the config's 6 epochs)")
    p.add_argument("--build_dir", default="build")
    p.add_argument("--python", default=sys.executable, help="a Python with tensorflow-cpu")
    p.add_argument("--port", type=int, default=24400)
    p.add_argument("--tf_timeout", type=float, default=1800,
                   help="seconds before the TF run is killed (below ~200 steps its worker 1 "
                   "may join after the chief has finished and wait forever)")
    p.add_argument("--only", choices=["pstrain", "tf"], help="run one side alone")
    p.add_argument("--workers", type=int, default=2,
                   help="workers on every side (the global steps stay --steps: each worker "
                   "takes a share of the same examples)")
    p.add_argument("--servers", type=int, default=1,
                   help="pstrain's parameter servers (TensorFlow's reference script runs one)")
    p.add_argument("--seeds", type=int, default=1,
                   help="runs per side (pstrain's train.seed 1..N; TensorFlow's runs differ by "
                   "their timing): mean and spread of each figure")
    p.add_argument("--ddp", action="store_true",
                   help="also PyTorch DDP (PSTRAIN_TORCH_DDP, default "
                   "../shared/bench/torch_ddp_refnet.py; --python needs torch)")
    p.add_argument("--no_curve", action="store_true", help="pstrain over plaintext, as TF's gRPC")
    p.add_argument("--role_env", default="", help="VAR=VALUE ... for every pstrain role")
    p.add_argument("--sample_threads", action="store_true")
    p.add_argument("--perf", action="store_true", help="perf record each role (build_dir/bench-tf1)")
    p.add_argument("--perf_flags", default="-F 199",
                   help="perf record's flags with --perf ('-F 999 -g': call graphs, e.g. who "
                   "faults pages in)")
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    a = p.parse_args(argv)
    if not 1 <= a.workers <= 16 or not 1 <= a.servers <= 8:
        p.error(f"--workers must be in [1, 16] and --servers in [1, 8], got {a.workers} and "
                f"{a.servers}")
    print(f"== load average before: {open('/proc/loadavg').read().split()[:3]}, "
          f"{os.cpu_count()} cores, {a.steps} global steps", flush=True)
    if a.seeds > 1 or a.ddp:
        return compare_seeds(a, extra)
    a.seed = 1
    ours = run_pstrain(a, extra) if a.only != "tf" else None
    if ours:
        print(f"== load average after pstrain: {open('/proc/loadavg').read().split()[:3]}")
    ref = run_tf(a) if a.only != "pstrain" else None
    if ref:
        print(f"== load average after TensorFlow: {open('/proc/loadavg').read().split()[:3]}")
    print(f"\n{'':22s}{'pstrain':>22s}{'TensorFlow ' + (ref or {}).get('version', ''):>24s}")
    rows = [("wall", lambda r: f"{r['wall']:.1f} s"),
            ("final test accuracy", lambda r: f"{r['acc']}"),
            ("time to 92%", time_to_target),
            ("examples/s per worker", lambda r: fmt_rates(r["img_s"])),
            ("CPU-seconds (all roles)", lambda r: f"{r['cpu']:.0f}")]
    for name, f in rows:
        print(f"{name:22s}{f(ours) if ours else '-':>22s}{f(ref) if ref else '-':>24s}")
    if ours:
        print("pstrain CPU-seconds per role: " +
              ", ".join(f"{k} {v:.1f}" for k, v in ours["roles"].items()) +
              f", launcher and wrappers {ours['cpu'] - sum(ours['roles'].values()):.1f}")
        if "threads" in ours:
            print(ours["threads"])
    if ours and ref:
        print(f"pstrain/TF: wall {ours['wall'] / ref['wall']:.2f}, "
              f"CPU-seconds {ours['cpu'] / ref['cpu']:.2f}")
        # Above 1 means pstrain is faster, as every bench/run.sh ratio.
        print(f"ratio: {ref['wall'] / ours['wall']:.2f}")


def compare_seeds(a, extra):
    """Each side --seeds times (interleaved, so that the machine's drift falls on all), then per
    side the mean and spread of final accuracy, wall time, CPU-seconds, and time to 92% (the
    wall time of a run whose final accuracy reached it; every side tests its final weights once,
    the same way). The ratio is TensorFlow's mean time to 92% over pstrain's (wall when a side
    never reached it, said as such)."""
    sides = {"pstrain": run_pstrain, "TensorFlow": run_tf}
    if a.ddp:
        sides["PyTorch DDP"] = run_ddp
    results = {name: [] for name in sides}
    for seed in range(1, a.seeds + 1):
        a.seed = seed
        for name, run in sides.items():
            r = run(a, extra) if name == "pstrain" else run(a)
            results[name].append(r)
            print(f"== seed {seed} {name}: accuracy {r['acc']}, wall {r['wall']:.0f} s, "
                  f"CPU {r['cpu']:.0f} s", flush=True)

    def spread(values):
        values = [v for v in values if v is not None]
        if not values:
            return "-"
        mean = sum(values) / len(values)
        return f"{mean:.4g} (min {min(values):.4g}, max {max(values):.4g})"

    def reached(rs):
        return [r["wall"] for r in rs if r["acc"] is not None and r["acc"] >= TARGET_ACCURACY]

    print(f"\n{a.seeds} run(s) a side, {a.steps} global steps ({a.workers} workers; pstrain "
          f"{a.servers} server(s), TensorFlow 1)")
    for name, rs in results.items():
        hit = reached(rs)
        print(f"{name:12s} accuracy {spread([r['acc'] for r in rs])}; "
              f"each {', '.join(str(r['acc']) for r in rs)}")
        print(f"{'':12s} wall s {spread([r['wall'] for r in rs])}; CPU-s "
              f"{spread([r['cpu'] for r in rs])}; time to {TARGET_ACCURACY:.0%}: "
              f"{spread(hit)} in {len(hit)} of {len(rs)} run(s)")
    ours, ref = reached(results["pstrain"]), reached(results["TensorFlow"])
    if ours and ref:
        print(f"ratio: {(sum(ref) / len(ref)) / (sum(ours) / len(ours)):.2f}")
    else:
        walls = {n: sum(r["wall"] for r in rs) / len(rs) for n, rs in results.items()}
        print(f"(a side never reached {TARGET_ACCURACY:.0%}: the ratio is of wall times)")
        print(f"ratio: {walls['TensorFlow'] / walls['pstrain']:.2f}")


if __name__ == "__main__":
    main()
