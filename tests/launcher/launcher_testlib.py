"""Shared pieces of the launcher tests: paths, cluster files, running the launcher, processes."""

import glob
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.realpath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
LAUNCHER = os.path.join(REPO, "launcher", "pstrain-launch")
FAKE = os.path.join(HERE, "fake_pstrain.py")
# The built pstrain-keygen and pstrain (CMake passes them); tests that need one skip without it.
KEYGEN = os.environ.get("PSTRAIN_KEYGEN", "")
PSTRAIN = os.environ.get("PSTRAIN_BINARY", "")

sys.path.insert(0, os.path.join(REPO, "launcher"))

# A fast, quiet launcher: progress lines every 0.2 s, a short grace period.
FAST = ["--progress_interval", "0.2", "--grace_period", "2", "--shutdown_timeout", "20"]


def cluster_yaml(binary=FAKE, ps=(2222,), workers=(("", 2232), ("0,1", 2233)), evaluator=True,
                 flags=None, mode="local", ssh=None):
    lines = [f"mode: {mode}", f"binary: {json.dumps(binary)}", "ps:"]
    lines += [f"  - {{host: 127.0.0.1, port: {p}}}" for p in ps]
    lines.append("worker:")
    lines += [f"  - {{host: 127.0.0.1, port: {p}, gpus: {json.dumps(g)}}}" for g, p in workers]
    if evaluator:
        lines += ["evaluator:", "  - {host: 127.0.0.1}"]
    if flags:
        lines.append(f"flags: {json.dumps(flags)}")
    if ssh:
        lines.append(f"ssh: {json.dumps(ssh)}")
    return "\n".join(lines) + "\n"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def launcher_argv(cluster, train_dir, *more, config=None):
    config = config or os.path.join(REPO, "configs", "refnet.yaml")
    keygen = ["--keygen", KEYGEN] if KEYGEN else []  # ssh mode makes CURVE keys by default
    return [sys.executable, LAUNCHER, "--cluster", cluster, "--config", config,
            "--train_dir", train_dir] + keygen + list(more)


def run_launcher(cluster, train_dir, *more, timeout=40, cwd=None):
    return subprocess.run(launcher_argv(cluster, train_dir, *more), cwd=cwd, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def records(train_dir):
    """The fake roles' records by role name (ps0, worker1, ...)."""
    out = {}
    for path in glob.glob(os.path.join(train_dir, "fake", "*.json")):
        job, index = os.path.basename(path)[:-len(".json")].split("-")
        with open(path) as f:
            out[f"{job}{index}"] = json.load(f)
    return out


def wait_for(predicate, timeout=15.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def alive(pid):
    """True if pid is a live process (zombies count as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def recorded_pids(train_dir):
    pids = []
    for record in records(train_dir).values():
        pids.append(record["pid"])
        pids.extend(record["children"])
    return pids


def kill_leftovers(pids):
    """Test cleanup: whatever a failing test left behind."""
    for pid in pids:
        if alive(pid):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
