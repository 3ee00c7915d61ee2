#!/usr/bin/env python3
"""A stand-in for build/pstrain in the launcher's tests.

Takes the real binary's flags and records argv, environment, cwd and pid (and, with
--curve_keys, each file of its key directory with its mode) into
<train_dir>/fake/<job>-<index>.json. Workers print progress lines like the real trainer; the chief
(worker 0) prints the `done:` line and then creates <train_dir>/fake/chief-done, which is how the
fake servers and evaluators learn that training is over. On SIGTERM a role writes
<train_dir>/fake/<job>-<index>.term and exits 143.

Test-only flags, each a comma list of ROLE entries like worker:1 (passed to every role):
  --fake_fail=worker:1:3     that role fails with exit code 3 after 3 steps
  --fake_fail_wait=N         ... but first waits (up to 10 s) until N roles have recorded
  --fake_hang=worker:0       that role never finishes on its own
  --fake_ignore_term=ps:0    that role ignores SIGTERM
  --fake_grandchild=ps:0     that role starts a child process (same process group) and records it
  --fake_steps=N --fake_step_s=S   steps per worker and seconds per step
  --fake_final_accuracy=A    the chief's `done:` line reports test accuracy A (default 0.9102)
"""

import json
import os
import signal
import subprocess
import sys
import time


def parse_flags(argv):
    flags = {}
    for arg in argv:
        if arg.startswith("--") and "=" in arg:
            name, value = arg[2:].split("=", 1)
            flags[name] = value
    return flags


def selected(flags, name, role):
    """The entry of --name that names this role ("" if it has no suffix), or None."""
    for entry in filter(None, flags.get(name, "").split(",")):
        parts = entry.split(":")
        if ":".join(parts[:2]) == role:
            return ":".join(parts[2:])
    return None


def wait_for_roles(fake_dir, count):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if len([n for n in os.listdir(fake_dir) if n.endswith(".json")]) >= count:
            return
        time.sleep(0.02)


def main():
    flags = parse_flags(sys.argv[1:])
    job, index = flags["job_name"], int(flags["task_index"])
    role = f"{job}:{index}"
    fake_dir = os.path.join(flags["train_dir"], "fake")
    os.makedirs(fake_dir, exist_ok=True)
    stem = os.path.join(fake_dir, f"{job}-{index}")
    chief_done = os.path.join(fake_dir, "chief-done")

    def on_term(signum, frame):
        with open(stem + ".term", "w") as f:
            f.write("SIGTERM\n")
        sys.stdout.flush()
        os._exit(143)

    if selected(flags, "fake_ignore_term", role) is not None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, on_term)

    record = {"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd(),
              "pid": os.getpid(), "pgid": os.getpgid(0), "children": []}
    if "curve_keys" in flags:  # what this role sees of its keys (relative to its cwd)
        keys = flags["curve_keys"]
        record["curve_keys"] = {"mode": os.stat(keys).st_mode & 0o777, "files": {
            name: os.stat(os.path.join(keys, name)).st_mode & 0o777 for name in os.listdir(keys)}}
    if selected(flags, "fake_grandchild", role) is not None:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        record["children"].append(child.pid)
    with open(stem + ".json.tmp", "w") as f:
        json.dump(record, f)
    os.rename(stem + ".json.tmp", stem + ".json")
    print(f"fake {role}: started, pid {os.getpid()}", file=sys.stderr, flush=True)

    hang = selected(flags, "fake_hang", role) is not None
    fail = selected(flags, "fake_fail", role)
    steps = int(flags.get("fake_steps", "20"))
    step_s = float(flags.get("fake_step_s", "0.02"))

    if job == "worker":
        for step in range(1, steps + 1):
            time.sleep(step_s)
            loss = 2.0 / (step + 1)
            print(f"I0101 00:00:00.000000 {os.getpid()} trainer.cc:1] trainer: step {step}/{steps} "
                  f"(epoch {step / steps:.2f}) loss {loss:.4f} lr 0.0010 1649.3 examples/s",
                  flush=True)
            if fail is not None and step >= 3:
                wait_for_roles(fake_dir, int(flags.get("fake_fail_wait", "0")))
                print(f"E fake {role}: injected failure at step {step}", file=sys.stderr,
                      flush=True)
                sys.exit(int(fail))
        while hang:
            time.sleep(0.1)
        if index == 0:
            final = float(flags.get("fake_final_accuracy", "0.9102"))
            print(f"done: global step {steps}, test accuracy {final:.4f}, 12.3 s", flush=True)
            open(chief_done, "w").close()
        return 0

    deadline = time.monotonic() + 30
    accuracy = 0.8621
    while hang or not os.path.exists(chief_done):
        if fail is not None:
            wait_for_roles(fake_dir, int(flags.get("fake_fail_wait", "0")))
            print(f"E fake {role}: injected failure", file=sys.stderr, flush=True)
            return int(fail)
        if time.monotonic() > deadline:
            print(f"fake {role}: no shutdown from the chief after 30 s", flush=True)
            return 1
        if job == "evaluator":
            print(f"evaluator: test accuracy {accuracy:.4f}", flush=True)
        time.sleep(0.1)
    if job == "evaluator":
        print("evaluator: test accuracy 0.9012", flush=True)
    else:
        print("server: shutdown from the chief", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
