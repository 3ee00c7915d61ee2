"""What the process tests that run a cluster under pstrain-launch share (fault_test.py,
replication_test.py, elastic_test.py): a local cluster file on free loopback ports, the launcher
with its output and the pid of every role, and reading the roles' logs.

    run = LocalRun("pstrain-fault-", pstrain, num_ps=2, num_workers=2,
                   flags="epochs: 5, log_every_n_steps: 25",
                   restart="policy: on_failure, max_restarts: 5, backoff_secs: 1")
    run.start()            # run.launcher, run.train_dir, run.log_dir
    ...
    run.remove(keep_env="PSTRAIN_FAULT_KEEP")
"""

import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def free_ports(n, rng):
    """Ports below the ephemeral range (as tests/distributed/ports.h picks them)."""
    ports = []
    while len(ports) < n:
        port = rng.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        if port not in ports:
            ports.append(port)
    return ports


class Launcher:
    """The launcher process, its output collected, and the current pid of every role."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self.lines, self.pids, self.lock = [], {}, threading.Lock()
        self.readers = [threading.Thread(target=self._read, args=(s,), daemon=True)
                        for s in (self.proc.stdout, self.proc.stderr)]
        for r in self.readers:
            r.start()

    def _read(self, stream):
        for line in stream:
            sys.stdout.write("  launcher| " + line)
            sys.stdout.flush()
            m = re.search(r"\b(?:re)?started (\w+) \(pid (\d+)\)", line)
            with self.lock:
                self.lines.append(line)
                if m:
                    self.pids[m.group(1)] = (int(m.group(2)), time.monotonic())

    def pid(self, role):
        with self.lock:
            return self.pids.get(role)

    def output(self):
        for r in self.readers:
            r.join(timeout=5)
        with self.lock:
            return "".join(self.lines)


class LocalRun:
    """A `mode: local` cluster of `num_ps` servers and `num_workers` CPU workers on 127.0.0.1 in
    a fresh temporary directory; `flags` and `restart` are the bodies of the cluster file's
    inline maps, `extra` more top-level lines (replicas, min_workers); `config` the model's file
    in configs/."""

    def __init__(self, prefix, pstrain, num_ps, num_workers, flags, restart, extra="",
                 config="refnet.yaml"):
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        self.train_dir = os.path.join(self.tmp, "run")
        self.log_dir = os.path.join(self.train_dir, "launcher")
        self.cluster = os.path.join(self.tmp, "cluster.yaml")
        # The servers' ports, then the workers'.
        self.ports = free_ports(num_ps + num_workers, random.Random())
        ps = "".join(f"  - {{host: 127.0.0.1, port: {p}}}\n" for p in self.ports[:num_ps])
        workers = "".join(f"  - {{host: 127.0.0.1, port: {p}, gpus: \"\"}}\n"
                          for p in self.ports[num_ps:])
        with open(self.cluster, "w") as f:
            f.write(f"mode: local\nbinary: {pstrain}\nps:\n{ps}worker:\n{workers}{extra}"
                    f"flags: {{{flags}}}\nrestart: {{{restart}}}\n")
        self.config = os.path.join(REPO, "configs", config)
        self.launcher = None

    def start(self):
        self.launcher = Launcher([sys.executable, os.path.join(REPO, "launcher", "pstrain-launch"),
                                  "--cluster", self.cluster, "--config", self.config,
                                  "--train_dir",
                                  self.train_dir, "--progress_interval", "30"])
        return self.launcher

    def remove(self, keep_env):
        """Deletes the directory unless the environment variable `keep_env` is 1."""
        if os.environ.get(keep_env) != "1":
            shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            print(f"kept {self.tmp}", flush=True)


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def latest_step(log_dir):
    step = 0
    for name in ("worker-0.log", "worker-1.log"):
        for m in re.finditer(r": step (\d+)/\d+ \(epoch", read(os.path.join(log_dir, name))):
            step = max(step, int(m.group(1)))
    return step


def check_chief_done(chief_log, target, problems, metric="test accuracy"):
    """The chief's 'done:' line, with its `metric` ("test accuracy", or a click model's "test
    AUC") at least `target` (else a problem)."""
    done = re.search(r"done: global step (\d+), .*?" + metric + r" ([0-9.]+)", chief_log)
    if not done:
        problems.append(f"the chief printed no 'done:' line with its {metric}")
    elif float(done.group(2)) < target:
        problems.append(f"{metric} {done.group(2)} < target {target}")
    else:
        print(f"chief: {done.group(0)}", flush=True)


def click_config(synth, train_examples, test_examples, seed, prefix):
    """configs/widedeep.yaml reading a fresh synthetic click log (pstrain-synth-ctr `synth`) in a
    new temporary directory named with `prefix`: (the config's path, the directory)."""
    data = tempfile.mkdtemp(prefix=prefix)
    subprocess.run([synth, f"--out_dir={data}", f"--train_examples={train_examples}",
                    f"--test_examples={test_examples}", f"--seed={seed}"], check=True,
                   stdout=subprocess.DEVNULL)
    config = os.path.join(data, "widedeep.yaml")
    with open(os.path.join(REPO, "configs", "widedeep.yaml")) as f:
        text = f.read().replace("data/ctr/", data + "/")
    with open(config, "w") as f:
        f.write(text)
    return config, data
