"""Chaos: one RefNet training run under the launcher (2 ps, 2 workers, restart: on_failure) while
roles are killed with SIGKILL at random moments, each of ps0, ps1, the chief and worker1 at least
once, in a random order, with two checkpoint faults among them:
  damaged   bytes in the middle of a server's newest shard file are overwritten (a torn write, a
            bad disk), then that server is killed: it must not restart in a loop on the damage;
            it sets the file aside naming it and the chief gives it its values;
  between   ps1 cannot save (its shard directory is made a file), so the next checkpoint is
            written by ps0 only and never committed; then both servers and the chief are killed
            together: the new chief must restore the newest committed step on both shards, not
            ps0's newer file.
Afterwards: the run finished (launcher exit 0), the chief's test accuracy reached the target, every
checkpoint verifies (pstrain-checkpoint verify), and the logs name every fault (the launcher's
restart, the peers' detection, the server's restore or re-initialisation, the one step every
shard restored).

  fault_test.py --pstrain BUILD/pstrain --checkpoint_tool BUILD/pstrain-checkpoint
Environment: PSTRAIN_FAULT_SEED (default 2026) picks the order and moments; PSTRAIN_FAULT_TARGET
(default 0.90) the accuracy; PSTRAIN_FAULT_KEEP=1 keeps the train_dir for a look afterwards.
"""

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from launched_run import LocalRun, check_chief_done, latest_step, read  # noqa: E402

EPOCHS = 5
STEPS = EPOCHS * (60000 // 128)
SAVE_EVERY = 150  # steps between checkpoints


def listed_steps(index_path):
    """The steps a TF-style checkpoint state file lists (a shard's index, the commit record)."""
    return sorted(int(m) for m in re.findall(r'all_model_checkpoint_paths: "model\.ckpt-(\d+)"',
                                             read(index_path)))


def restored_steps(log_text):
    return [int(m) for m in re.findall(r"restored its shard of committed step (\d+)", log_text)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pstrain", required=True)
    parser.add_argument("--checkpoint_tool", required=True)
    args = parser.parse_args()
    seed = int(os.environ.get("PSTRAIN_FAULT_SEED", "2026"))
    target = float(os.environ.get("PSTRAIN_FAULT_TARGET", "0.90"))
    rng = random.Random(seed)
    victims = ["ps0", "ps1", "worker0", "worker1", "damaged", "between"]
    rng.shuffle(victims)
    kill_steps = sorted(rng.randrange(STEPS // 10, STEPS * 3 // 4) for _ in victims)
    damaged_ps = rng.randrange(2)
    print(f"seed {seed}: will kill {', '.join(f'{v} at step ~{s}' for v, s in zip(victims, kill_steps))}"
          f" (damaged: ps{damaged_ps})", flush=True)

    run = LocalRun("pstrain-fault-", args.pstrain, num_ps=2, num_workers=2,
                   flags=f"epochs: {EPOCHS}, save_checkpoints_steps: {SAVE_EVERY}, "
                   "save_checkpoints_secs: 0, log_every_n_steps: 25, "
                   "ps_unavailable_timeout_secs: 120",
                   restart="policy: on_failure, max_restarts: 5, backoff_secs: 1")
    train_dir, log_dir, ports = run.train_dir, run.log_dir, run.ports
    launcher = run.start()
    kills = []  # (fault, pids, step)
    checks = {}  # what each checkpoint fault must have left in the logs
    started = time.monotonic()
    roles_of = {"damaged": [f"ps{damaged_ps}"], "between": ["ps0", "ps1", "worker0"]}

    def wait_for(what, condition, timeout=300):
        deadline = time.monotonic() + timeout
        while not condition():
            if launcher.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"FAIL: {what} did not happen (seed {seed}; logs in {train_dir})")
            time.sleep(0.1)

    def kill(roles, fault, step):
        pids = [launcher.pid(r)[0] for r in roles]
        print(f"==== {fault}: killing {', '.join(f'{r} (pid {p})' for r, p in zip(roles, pids))} "
              f"with SIGKILL at step ~{step}", flush=True)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        kills.append((fault, roles, step))

    def damage_and_kill(step):
        shard = os.path.join(train_dir, f"ps-{damaged_ps}-of-2")
        wait_for(f"two checkpoints of ps{damaged_ps}",
                 lambda: len(listed_steps(os.path.join(shard, "checkpoint"))) >= 2)
        newest = os.path.join(shard, f"model.ckpt-{listed_steps(os.path.join(shard, 'checkpoint'))[-1]}")
        with open(newest, "r+b") as f:
            size = os.path.getsize(newest)
            f.seek(size // 2)
            old = f.read(64)
            f.seek(size // 2)
            f.write(bytes(b ^ 0xA5 for b in old))  # every byte changes
        print(f"==== damaged: overwrote 64 bytes in the middle of {newest}", flush=True)
        kill([f"ps{damaged_ps}"], "damaged", step)
        checks["damaged"] = newest

    def kill_between_saves(step):
        record = os.path.join(train_dir, "committed_checkpoints")
        shard0 = os.path.join(train_dir, "ps-0-of-2", "checkpoint")
        shard1 = os.path.join(train_dir, "ps-1-of-2")
        wait_for("a first commit", lambda: listed_steps(record))
        chief_pid = launcher.pid("worker0")[0]
        committed = listed_steps(record)[-1]
        os.rename(shard1, shard1 + ".aside")
        with open(shard1, "w") as f:
            f.write("in the way of ps1's next save\n")
        print(f"==== between: ps1 cannot save (newest committed step {committed})", flush=True)
        try:
            # ps0 writes the next step, ps1 fails, the chief commits nothing and exits on the error.
            wait_for("ps0's save of a step after the last commit",
                     lambda: listed_steps(shard0) and listed_steps(shard0)[-1] > committed)
            wait_for("the chief's restart after the failed checkpoint",
                     lambda: launcher.pid("worker0")[0] != chief_pid)
            time.sleep(2)  # the new chief finds the servers running and keeps their values
        finally:
            os.remove(shard1)
            os.rename(shard1 + ".aside", shard1)
        uncommitted = listed_steps(shard0)[-1]
        now = listed_steps(record)[-1]
        if now != committed:
            raise SystemExit(f"FAIL: step {now} was committed though ps1 could not save it")
        print(f"==== between: ps0 holds step {uncommitted}, ps1 does not, the commit record ends "
              f"at {committed}", flush=True)
        offsets = [len(read(os.path.join(log_dir, f"ps-{k}.log"))) for k in (0, 1)]
        kill(["ps0", "ps1", "worker0"], "between", step)
        checks["between"] = (committed, uncommitted, offsets)

    try:
        for victim, at_step in zip(victims, kill_steps):
            roles = roles_of.get(victim, [victim])
            while launcher.proc.poll() is None:
                entries = [launcher.pid(r) for r in roles]
                # A role just (re)started gets time to rejoin before it is killed again.
                if latest_step(log_dir) >= at_step and all(
                        e and time.monotonic() - e[1] > 8 for e in entries):
                    break
                if time.monotonic() - started > 1500:
                    raise SystemExit("FAIL: training made no progress to the next fault")
                time.sleep(0.5)
            if launcher.proc.poll() is not None:
                break
            step = latest_step(log_dir)
            if victim == "damaged":
                damage_and_kill(step)
            elif victim == "between":
                kill_between_saves(step)
            else:
                kill([victim], victim, step)
        code = launcher.proc.wait(timeout=1500)
    finally:
        if launcher.proc.poll() is None:
            os.killpg(launcher.proc.pid, signal.SIGKILL)
    out = launcher.output()
    problems = []
    if code != 0:
        problems.append(f"the launcher exited {code}, expected 0")
    if len(kills) != len(victims):
        problems.append(f"only {len(kills)} of {len(victims)} faults were injected")

    chief = read(os.path.join(log_dir, "worker-0.log"))
    check_chief_done(chief, target, problems)

    verify = subprocess.run([args.checkpoint_tool, "verify", train_dir], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    print(verify.stdout, flush=True)
    if verify.returncode != 0:
        problems.append("pstrain-checkpoint verify found problems")
    for shard in ("ps-0-of-2", "ps-1-of-2"):
        if f"/{shard}/" not in verify.stdout:
            problems.append(f"no checkpoint of shard {shard}")

    logs = {name: read(os.path.join(log_dir, name)) for name in
            ("ps-0.log", "ps-1.log", "worker-0.log", "worker-1.log")}
    workers_log = logs["worker-0.log"] + logs["worker-1.log"]
    for fault, roles, step in kills:
        for victim in roles:
            if f"{victim} failed (killed by SIGKILL); restarting it" not in out:
                problems.append(f"the launcher did not report restarting {victim}")
            if victim.startswith("ps"):
                k = victim[2:]
                addr = f"ps {k} (127.0.0.1:{ports[int(k)]})"
                detected = (f"{addr} has not answered heartbeats" in workers_log or
                            f"{addr} restarted" in workers_log)
                recovered = (f"ps {k}: restored" in logs[f"ps-{k}.log"] or
                             f"{addr} has lost its variables" in workers_log)
                if not detected:
                    problems.append(f"no worker log names {victim}'s death or restart")
                if not recovered:
                    problems.append(f"{victim} neither restored a checkpoint nor was re-initialised")
            else:
                k = victim[6:]
                who = "chief 0" if k == "0" else f"worker {k}"
                if not any(f"{who} restarted" in logs[p] or f"{who} has sent nothing" in logs[p]
                           for p in ("ps-0.log", "ps-1.log")):
                    problems.append(f"no server log names {victim}'s death or restart")
        print(f"fault: {fault} at step ~{step}: named by the launcher and the peers", flush=True)
    if "damaged" in checks:
        path = checks["damaged"]
        if f"skipping damaged checkpoint {path}" not in logs[f"ps-{damaged_ps}.log"]:
            problems.append(f"ps{damaged_ps}'s log does not name the damaged {path} it skipped")
        else:
            print(f"fault: damaged: ps{damaged_ps} skipped {path}, naming it", flush=True)
    if "between" in checks:
        committed, uncommitted, offsets = checks["between"]
        # Each server's first restore after the kill: both must be the committed step.
        last = [restored_steps(logs[f"ps-{k}.log"][offsets[k]:])[:1] for k in (0, 1)]
        if last != [[committed], [committed]]:
            problems.append(f"after the kill between saves the shards restored {last}, expected "
                            f"the committed step {committed} on both (ps0 also held {uncommitted})")
        elif f"every server restored its shard of committed step {committed}" not in chief:
            problems.append("the chief's log does not say which step every server restored")
        else:
            print(f"fault: between: both shards restored committed step {committed}, not ps0's "
                  f"{uncommitted}", flush=True)

    if problems:
        print(f"FAIL (seed {seed}; logs kept in {train_dir}):\n  " + "\n  ".join(problems),
              flush=True)
        return 1
    print(f"PASS: {len(kills)} faults injected and survived in "
          f"{time.monotonic() - started:.0f} s (seed {seed})", flush=True)
    run.remove(keep_env="PSTRAIN_FAULT_KEEP")
    return 0


if __name__ == "__main__":
    sys.exit(main())
