"""Replicated shards under fire (docs/replication.md, section 7, run A): one run under the
launcher (SmallNet; RefNet with PSTRAIN_REPL_CONFIG=refnet.yaml), 3 ps and 2 workers, async, --replicas=1, restart: on_failure. Three times the test
SIGKILLs the current head of a random shard, each time once the previous victim has rejoined as a
member (the chief's map line says so). Afterwards:
  no acknowledged update lost  every worker's global step never went back (PsClient logs an error
                               if it ever does); each shard's final step equals the pushes its
                               workers had acknowledged to it; at shutdown every replica of a shard
                               logs the same step and crc32c of its values and optimizer slots;
  failover in seconds          from each kill to the new head's first update (the time this test
                               saw the line appear), printed, each under 10 s;
  the run's accuracy           the chief's test accuracy is at least the target.

  replication_test.py --pstrain BUILD/pstrain [--synth BUILD/pstrain-synth-ctr]

With --synth the model is configs/widedeep.yaml on a synthetic click log (PSTRAIN_REPL_EXAMPLES
training examples, default 60000): its embedding rows live on the servers, so each replica's
digest covers its rows too, and the target is the chief's test AUC (PSTRAIN_REPL_TARGET, default
0.7).

Environment: PSTRAIN_REPL_SEED (default 2026) picks the shards and moments; PSTRAIN_REPL_KILLS
(default 3); PSTRAIN_REPL_TARGET (default 0.85) the accuracy; PSTRAIN_REPL_EPOCHS (default 2);
PSTRAIN_REPL_CONFIG (default smallnet.yaml) the model's file in configs/; PSTRAIN_REPL_REPLICAS
(default 1; 2 makes chains of 3, whose middle replicas forward records); PSTRAIN_REPL_KEEP=1 keeps
the train_dir. CI runs the defaults; the measured run of docs/replication.md is
PSTRAIN_REPL_CONFIG=refnet.yaml PSTRAIN_REPL_KILLS=5 PSTRAIN_REPL_EPOCHS=3.
"""

import argparse
import os
import random
import re
import shutil
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from launched_run import LocalRun, check_chief_done, click_config, read  # noqa: E402

NUM_PS = 3
NUM_WORKERS = 2
MAX_FAILOVER_S = 10.0


class LogWatch:
    """When each line matching a pattern first appeared in the role logs, as this test saw it."""

    def __init__(self, log_dir, names):
        self.log_dir, self.names = log_dir, names
        self.seen = []  # (monotonic time, log name, line)
        self.offsets = {n: 0 for n in names}
        self.stop = False
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            for n in self.names:
                text = read(os.path.join(self.log_dir, n))
                new = text[self.offsets[n]:]
                cut = new.rfind("\n") + 1
                if cut == 0:
                    continue
                self.offsets[n] += cut
                now = time.monotonic()
                with self.lock:
                    self.seen.extend((now, n, line) for line in new[:cut].splitlines())
            time.sleep(0.05)

    def first_after(self, t0, pattern):
        rx = re.compile(pattern)
        with self.lock:
            for t, n, line in self.seen:
                if t >= t0 and rx.search(line):
                    return t, n, line
        return None

    def lines(self, pattern):
        rx = re.compile(pattern)
        with self.lock:
            return [(t, n, line) for t, n, line in self.seen if rx.search(line)]


def chains_of(map_line):
    """{shard: ([members], [joining])} from the chief's 'map epoch E: shard 0 [ps0 ps1], shard 1
    [ps1] joining [ps2], ...'."""
    chains = {}
    for m in re.finditer(r"shard (\d+) \[([ps\d ]*)\](?: joining \[([ps\d ]*)\])?", map_line):
        chains[int(m.group(1))] = ([int(x) for x in re.findall(r"\d+", m.group(2))],
                                   [int(x) for x in re.findall(r"\d+", m.group(3) or "")])
    return chains


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pstrain", required=True)
    parser.add_argument("--synth", help="pstrain-synth-ctr: train the click model instead")
    args = parser.parse_args()
    seed = int(os.environ.get("PSTRAIN_REPL_SEED", "2026"))
    kills_wanted = int(os.environ.get("PSTRAIN_REPL_KILLS", "3"))
    target = float(os.environ.get("PSTRAIN_REPL_TARGET", "0.7" if args.synth else "0.85"))
    epochs = int(os.environ.get("PSTRAIN_REPL_EPOCHS", "2"))
    replicas = int(os.environ.get("PSTRAIN_REPL_REPLICAS", "1"))
    config = os.environ.get("PSTRAIN_REPL_CONFIG", "smallnet.yaml")
    steps = epochs * (60000 // 128)
    if args.synth:
        examples = int(os.environ.get("PSTRAIN_REPL_EXAMPLES", "60000"))
        config, _ = click_config(args.synth, examples, 4000, 5, "pstrain-repl-click-")
        steps = epochs * examples // 256
    rng = random.Random(seed)
    kill_steps = sorted(rng.randrange(steps // 10, steps * 7 // 10) for _ in range(kills_wanted))
    print(f"seed {seed}: {kills_wanted} head kills at global steps ~{kill_steps}", flush=True)

    run = LocalRun("pstrain-repl-", args.pstrain, NUM_PS, NUM_WORKERS,
                   flags=f"epochs: {epochs}, save_checkpoints_secs: 0, log_every_n_steps: 25, "
                   "ps_unavailable_timeout_secs: 120",
                   restart="policy: on_failure, max_restarts: 10, backoff_secs: 1",
                   extra=f"replicas: {replicas}\n", config=config)
    train_dir, log_dir = run.train_dir, run.log_dir
    launcher = run.start()
    names = [f"ps-{k}.log" for k in range(NUM_PS)] + [f"worker-{k}.log" for k in range(NUM_WORKERS)]
    watch = LogWatch(log_dir, names)
    started = time.monotonic()
    kills = []  # (shard, task, kill time, step)

    def latest_step():
        step = 0
        for _, _, line in watch.lines(r": step (\d+)/\d+ \(epoch"):
            step = max(step, int(re.search(r": step (\d+)/", line).group(1)))
        return step

    def current_map():
        lines = watch.lines(r"chief 0: map epoch \d+: shard")
        if not lines:
            return None, {}
        line = lines[-1][2]
        return int(re.search(r"map epoch (\d+)", line).group(1)), chains_of(line)

    def fully_replicated():
        _, chains = current_map()
        return len(chains) == NUM_PS and all(len(m) == 1 + replicas and not j
                                             for m, j in chains.values())

    problems = []
    try:
        for at_step in kill_steps:
            while launcher.proc.poll() is None:
                if latest_step() >= at_step and fully_replicated():
                    break
                if time.monotonic() - started > 1500:
                    raise SystemExit("FAIL: training made no progress to the next kill")
                time.sleep(0.2)
            if launcher.proc.poll() is not None:
                break
            epoch, chains = current_map()
            shard = rng.randrange(NUM_PS)
            head = chains[shard][0][0]
            pid = launcher.pid(f"ps{head}")[0]
            step = latest_step()
            t0 = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            print(f"==== kill {len(kills) + 1}: ps{head} (pid {pid}), head of shard {shard} at map "
                  f"epoch {epoch}, global step ~{step}", flush=True)
            kills.append((shard, head, t0, step))
            # The next kill waits until the new head has applied an update and the victim is back.
            deadline = time.monotonic() + 120
            while launcher.proc.poll() is None and time.monotonic() < deadline:
                if watch.first_after(t0, rf"as head of shard {shard} \("):
                    break
                time.sleep(0.2)
        code = launcher.proc.wait(timeout=1500)
    finally:
        if launcher.proc.poll() is None:
            os.killpg(launcher.proc.pid, signal.SIGKILL)
        time.sleep(0.5)
        watch.stop = True
    launcher.output()
    if code != 0:
        problems.append(f"the launcher exited {code}, expected 0")
    if len(kills) != kills_wanted:
        problems.append(f"only {len(kills)} of {kills_wanted} kills were made")

    # Failover: from each kill to the new head's first update.
    times = []
    for shard, head, t0, step in kills:
        hit = watch.first_after(t0, rf"as head of shard {shard} \(")
        if not hit:
            problems.append(f"no new head of shard {shard} applied an update after ps{head}'s kill")
            continue
        took = hit[0] - t0
        times.append(took)
        print(f"failover: shard {shard}, ps{head} killed at step ~{step}: {hit[1]} applied its "
              f"first update as head {took:.2f} s later", flush=True)
        if took > MAX_FAILOVER_S:
            problems.append(f"shard {shard}'s failover took {took:.1f} s (> {MAX_FAILOVER_S} s)")

    logs = {n: read(os.path.join(log_dir, n)) for n in names}
    workers_log = "".join(logs[f"worker-{k}.log"] for k in range(NUM_WORKERS))
    for m in re.finditer(r"global step went back[^\n]*", workers_log):
        problems.append(m.group(0))

    # Every replica of a shard ends at the same step with the same bytes (its rows included).
    final = {}  # shard -> {(step, crc)}
    rows = {}  # shard -> {rows held}
    for k in range(NUM_PS):
        for m in re.finditer(r"shard (\d+) \((?:head|backup)\) at step (\d+): crc32c (\w+)"
                             r"(?:, (\d+) rows)?", logs[f"ps-{k}.log"]):
            final.setdefault(int(m.group(1)), set()).add((int(m.group(2)), m.group(3)))
            rows.setdefault(int(m.group(1)), set()).add(int(m.group(4) or 0))
    for shard in range(NUM_PS):
        states = final.get(shard, set())
        if len(states) != 1:
            problems.append(f"shard {shard}'s replicas ended in {len(states)} states: {sorted(states)}"
                            " (expected one step and crc32c on every replica)")
        else:
            print(f"shard {shard}: every replica at step {next(iter(states))[0]}, crc32c "
                  f"{next(iter(states))[1]}, rows {sorted(rows[shard])}", flush=True)
        if args.synth and not all(n > 0 for n in rows.get(shard, {0})):
            problems.append(f"a replica of shard {shard} holds no table rows: {rows.get(shard)}")
    replicas_seen = sum(len(re.findall(r"shard \d+ \((?:head|backup)\) at step", logs[f"ps-{k}.log"]))
                        for k in range(NUM_PS))
    if replicas_seen < (1 + replicas) * NUM_PS:
        problems.append(f"only {replicas_seen} replica lines at shutdown, expected "
                        f"{(1 + replicas) * NUM_PS}")

    # No acknowledged update lost: each shard applied exactly the pushes its workers saw answered.
    acked = {}
    for k in range(NUM_WORKERS):
        for m in re.finditer(r"shard (\d+): (\d+) pushes acknowledged", logs[f"worker-{k}.log"]):
            acked[int(m.group(1))] = acked.get(int(m.group(1)), 0) + int(m.group(2))
    for shard in range(NUM_PS):
        states = final.get(shard, set())
        if shard not in acked:
            problems.append(f"no worker reported its acknowledged pushes to shard {shard}")
        elif len(states) == 1 and next(iter(states))[0] != acked[shard]:
            problems.append(f"shard {shard} ended at step {next(iter(states))[0]} but its workers had "
                            f"{acked[shard]} pushes acknowledged")
        elif len(states) == 1:
            print(f"shard {shard}: {acked[shard]} acknowledged pushes, all applied, none lost or "
                  "applied twice", flush=True)

    check_chief_done(logs["worker-0.log"], target, problems,
                     metric="test AUC" if args.synth else "test accuracy")

    if problems:
        print(f"FAIL (seed {seed}; logs kept in {train_dir}):\n  " + "\n  ".join(problems),
              flush=True)
        return 1
    print(f"PASS: {len(kills)} head kills, failover "
          f"{', '.join(f'{t:.2f}' for t in times)} s, in {time.monotonic() - started:.0f} s "
          f"(seed {seed})", flush=True)
    run.remove(keep_env="PSTRAIN_REPL_KEEP")
    if args.synth and os.environ.get("PSTRAIN_REPL_KEEP") != "1":
        shutil.rmtree(os.path.dirname(config), ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
