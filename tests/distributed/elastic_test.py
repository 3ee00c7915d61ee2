"""Workers that join and leave a running job (docs/replication.md section 7, run B): one run under
the launcher (SmallNet; RefNet with PSTRAIN_ELASTIC_CONFIG=refnet.yaml), 1 ps, 2 workers, async, min_workers 1, max_workers 3, --elastic_data
(examples leased in chunks from server 0's data ledger), restart: on_failure. During the run:
  join     `pstrain-launch add-worker` starts worker 2;
  leave    `pstrain-launch remove-worker --task 1` (SIGTERM: it finishes its step, says goodbye);
  death    worker 2 is SIGKILLed (the launcher restarts it: a new process, the old one's leases
           freed by its silence or its restart).
Afterwards: the run ended on its own (no hang, launcher exit 0), the ledger logged every epoch as
60000 examples each used once, and the chief's test accuracy reached the target.

  elastic_test.py --pstrain BUILD/pstrain
Environment: PSTRAIN_ELASTIC_TARGET (default 0.85), PSTRAIN_ELASTIC_EPOCHS (default 2),
PSTRAIN_ELASTIC_CONFIG (default smallnet.yaml) the model's file in configs/,
PSTRAIN_ELASTIC_KEEP=1 keeps the train_dir.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from launched_run import REPO, LocalRun, check_chief_done, latest_step, read  # noqa: E402

EXAMPLES = 60000


def control(*args):
    """`python -m pstrain_launch ARGS` as a user runs it."""
    r = subprocess.run([sys.executable, "-m", "pstrain_launch", *args],
                       cwd=os.path.join(REPO, "launcher"), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=30)
    print(f"==== pstrain-launch {' '.join(args)}: exit {r.returncode}: {r.stdout.strip()}",
          flush=True)
    return r


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pstrain", required=True)
    args = parser.parse_args()
    target = float(os.environ.get("PSTRAIN_ELASTIC_TARGET", "0.85"))
    epochs = int(os.environ.get("PSTRAIN_ELASTIC_EPOCHS", "2"))
    steps = epochs * EXAMPLES // 128  # about: the ledger ends the run, not a step count

    run = LocalRun("pstrain-elastic-", args.pstrain, num_ps=1, num_workers=2,
                   flags=f"epochs: {epochs}, elastic_data: true, save_checkpoints_secs: 0, "
                   "log_every_n_steps: 25, ps_unavailable_timeout_secs: 120",
                   restart="policy: on_failure, max_restarts: 3, backoff_secs: 1",
                   extra="min_workers: 1\nmax_workers: 3\n",
                   config=os.environ.get("PSTRAIN_ELASTIC_CONFIG", "smallnet.yaml"))
    train_dir, log_dir = run.train_dir, run.log_dir
    launcher = run.start()
    started = time.monotonic()
    problems = []
    events = [(0.2, "join"), (0.4, "leave"), (0.6, "death")]
    try:
        for fraction, event in events:
            while launcher.proc.poll() is None and latest_step(log_dir) < fraction * steps:
                if time.monotonic() - started > 1200:
                    raise SystemExit("FAIL: training made no progress to the next event")
                time.sleep(0.5)
            if launcher.proc.poll() is not None:
                problems.append(f"the run ended before the {event}")
                break
            print(f"==== {event} at global step ~{latest_step(log_dir)}", flush=True)
            if event == "join":
                r = control("add-worker", "--train_dir", train_dir)
                if r.returncode != 0 or not re.search(r"started worker ?2", r.stdout):
                    problems.append(f"add-worker did not start worker 2: {r.stdout.strip()}")
            elif event == "leave":
                r = control("remove-worker", "--train_dir", train_dir, "--task", "1")
                if r.returncode != 0:
                    problems.append(f"remove-worker failed: {r.stdout.strip()}")
            else:
                entry = launcher.pid("worker2")
                if not entry:
                    problems.append("worker 2 was never started")
                    continue
                # Killed only once it trains: a fast run (SmallNet at ~300 steps a second) can
                # reach this step before the joined process has sent the server anything, and a
                # process the server never heard of dies unnoticed there.
                w2_log, deadline = os.path.join(log_dir, "worker-2.log"), time.monotonic() + 120
                while (launcher.proc.poll() is None and time.monotonic() < deadline and
                       not re.search(r"worker 2: step \d+/", read(w2_log))):
                    time.sleep(0.05)
                if launcher.proc.poll() is not None:
                    problems.append("the run ended before worker 2 trained a step")
                    break
                print(f"==== death: SIGKILL worker2 (pid {entry[0]}) at global step "
                      f"~{latest_step(log_dir)}, once it trains", flush=True)
                os.kill(entry[0], signal.SIGKILL)
        code = launcher.proc.wait(timeout=1200)
    finally:
        if launcher.proc.poll() is None:
            os.killpg(launcher.proc.pid, signal.SIGKILL)
    out = launcher.output()
    if code != 0:
        problems.append(f"the launcher exited {code}, expected 0 (no hang, no failure)")

    ps = read(os.path.join(log_dir, "ps-0.log"))
    used = {int(m.group(1)): int(m.group(2)) for m in
            re.finditer(r"epoch (\d+): (\d+) examples in \d+ chunks, every one used once", ps)}
    for e in range(epochs):
        if used.get(e) != EXAMPLES:
            problems.append(f"epoch {e}: the ledger says {used.get(e)} examples used once, expected "
                            f"{EXAMPLES}")
        else:
            print(f"epoch {e}: {EXAMPLES} examples, every one used once", flush=True)
    w1 = read(os.path.join(log_dir, "worker-1.log"))
    if "SIGTERM" not in w1:
        problems.append("worker 1's log does not say it left on SIGTERM")
    if "worker2 failed (killed by SIGKILL); restarting it" not in out:
        problems.append("the launcher did not restart the killed worker 2")
    if not re.search(r"worker 2 (restarted|has sent nothing)", ps):
        problems.append("the server's log does not name worker 2's death or restart")

    check_chief_done(read(os.path.join(log_dir, "worker-0.log")), target, problems)

    if problems:
        print(f"FAIL (logs kept in {train_dir}):\n  " + "\n  ".join(problems), flush=True)
        return 1
    print(f"PASS: a worker joined, one left, one died and came back, in "
          f"{time.monotonic() - started:.0f} s; every epoch's examples used once", flush=True)
    run.remove(keep_env="PSTRAIN_ELASTIC_KEEP")
    return 0


if __name__ == "__main__":
    sys.exit(main())
