"""The push overlapped with backward (--overlap_push), with real processes on loopback.

  overlap_push_test.py --pstrain BUILD/pstrain

Two servers and two RefNet workers train asynchronously twice, with the overlapped push (each
server's share cut into 1 MiB parts, pushed as backward finishes them and pulled back at once)
and without (one push per server a step). Proved for both: every role exits cleanly, the loss
falls to well under half its start, the final test accuracy is of the same kind, and each
server's global step counts the workers' steps exactly (the sum of their local steps: a step
pushed in parts counts once). With overlap the servers receive several pushes per update, without
exactly one. With --overlap_push=auto and --pull_schedule=step workers whose servers are all on
loopback push whole steps, and under --update_mode=accumulate every worker does; they say why.
A minute or two on 2 cores.
"""

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

PSTRAIN = None
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = 120  # global steps: about 60 a worker


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cluster(tmp, flags, max_steps=STEPS):
    """Two servers and two workers to `max_steps`; the logs by role and the exit codes."""
    ps_hosts = ",".join(f"127.0.0.1:{free_port()}" for _ in range(2))
    worker_hosts = ",".join(f"127.0.0.1:{free_port()}" for _ in range(2))
    common = [f"--ps_hosts={ps_hosts}", f"--worker_hosts={worker_hosts}",
              f"--config={SOURCE}/configs/refnet.yaml", f"--train_dir={tmp}/td",
              f"--max_steps={max_steps}", "--log_every_n_steps=10",
              "--histogram_every_n_steps=0", "--save_checkpoints_secs=0",
              "--ps_summary_secs=0", "--ps_unavailable_timeout_secs=60"] + flags
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
    roles = {"ps0": ["--job_name=ps", "--task_index=0"], "ps1": ["--job_name=ps", "--task_index=1"],
             "worker0": ["--job_name=worker", "--task_index=0", "--device=cpu"],
             "worker1": ["--job_name=worker", "--task_index=1", "--device=cpu"]}
    procs, files = {}, {}
    for role, args in roles.items():
        files[role] = open(f"{tmp}/{role}.log", "w")
        procs[role] = subprocess.Popen([PSTRAIN] + args + common, stdout=files[role],
                                       stderr=subprocess.STDOUT, env=env)
    codes = {}
    try:
        for role in ("worker0", "worker1", "ps0", "ps1"):
            codes[role] = procs[role].wait(timeout=600)
    finally:
        for role, p in procs.items():
            if p.poll() is None:
                p.kill()
                p.wait()
                codes.setdefault(role, -1)
            files[role].close()
    logs = {}
    for role in roles:
        with open(f"{tmp}/{role}.log") as f:
            logs[role] = f.read()
    return codes, logs


def counts(ps_log):
    """(global step, pushes, updates) a server logged as it stopped."""
    m = re.search(r"stopped at global step (\d+) \((\d+) pushes, \d+ pulls, (\d+) updates", ps_log)
    assert m, ps_log[-3000:]
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def local_steps(worker_log):
    m = re.search(r"reached step \d+ after (\d+) local steps", worker_log)
    assert m, worker_log[-3000:]
    return int(m.group(1))


def losses(worker_log):
    return [float(x) for x in re.findall(r": step \d+/\d+ \(epoch [\d.]+\) loss ([\d.]+)",
                                         worker_log)]


class ClusterTest(unittest.TestCase):
    """A test whose clusters write under a temporary directory of their own (`self.tmp`)."""
    prefix = "pstrain-overlap-"

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix=self.prefix)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


class OverlapPushTest(ClusterTest):

    def train(self, name, flags):
        os.makedirs(f"{self.tmp}/{name}")
        codes, logs = run_cluster(f"{self.tmp}/{name}", flags)
        for role, code in codes.items():
            self.assertEqual(code, 0, f"{name}: {role} failed:\n{logs[role][-5000:]}")
        steps = local_steps(logs["worker0"]) + local_steps(logs["worker1"])
        result = {"steps": steps}
        for ps in ("ps0", "ps1"):
            global_step, pushes, updates = counts(logs[ps])
            # Every worker step counted once on every server, whatever it was pushed in.
            self.assertEqual(global_step, steps, f"{name}: {ps}:\n{logs[ps][-3000:]}")
            self.assertEqual(updates, steps, f"{name}: {ps}")
            result[ps] = (global_step, pushes, updates)
        for w in ("worker0", "worker1"):
            seen = losses(logs[w])
            self.assertGreaterEqual(len(seen), 4, logs[w][-3000:])
            # RefNet starts at ln(10) = 2.30; 60 Adam steps take it well under half of that.
            self.assertLess(seen[-1], 0.5 * seen[0], f"{name}: {w}: losses {seen}")
            result[w] = seen
        accuracy = re.search(r"test accuracy ([\d.]+)", logs["worker0"])
        self.assertIsNotNone(accuracy, logs["worker0"][-3000:])
        result["accuracy"] = float(accuracy.group(1))
        result["logs"] = logs
        return result

    def test_async_training_with_and_without_overlap_counts_every_step_once(self):
        on = self.train("on", ["--overlap_push=true", "--push_part_mb=1", "--pull_schedule=step"])
        off = self.train("off", ["--overlap_push=false"])
        for w in ("worker0", "worker1"):
            self.assertIn("the push overlaps backward, in parts of 1 MiB", on["logs"][w])
            self.assertIn("one push per server a step, after backward (--overlap_push=false)",
                          off["logs"][w])
        for ps in ("ps0", "ps1"):
            print(f"{ps}: overlap on: global step {on[ps][0]}, {on[ps][1]} pushes, {on[ps][2]} "
                  f"updates; off: global step {off[ps][0]}, {off[ps][1]} pushes, "
                  f"{off[ps][2]} updates")
            self.assertEqual(off[ps][1], off[ps][2])  # one push a step
        # RefNet is 13 MB over two servers, nearly all fc1 (two 6.4 MB partitions, one each):
        # on each, fc2 with fc1's partition closes a first part, the conv layers a second.
        for ps in ("ps0", "ps1"):
            self.assertGreaterEqual(on[ps][1], 2 * on[ps][2], ps)
        for w in ("worker0", "worker1"):
            print(f"{w} losses: overlap on {on[w]}, off {off[w]}")
        print(f"test accuracy: overlap on {on['accuracy']:.4f}, off {off['accuracy']:.4f}")
        # The same kind of result: async runs differ by their interleaving, not by the overlap.
        self.assertGreater(on["accuracy"], 0.6)
        self.assertGreater(off["accuracy"], 0.6)
        self.assertLess(abs(on["accuracy"] - off["accuracy"]), 0.1)

    def test_with_whole_step_pulls_servers_on_loopback_get_whole_pushes_and_workers_say_why(self):
        codes, logs = run_cluster(self.tmp, ["--pull_schedule=step"], max_steps=10)
        for role, code in codes.items():
            self.assertEqual(code, 0, f"{role} failed:\n{logs[role][-5000:]}")
        for w in ("worker0", "worker1"):
            self.assertIn("one push per server a step, after backward (every server is on "
                          "loopback, where there is no link to overlap with", logs[w])
        steps = local_steps(logs["worker0"]) + local_steps(logs["worker1"])
        for ps in ("ps0", "ps1"):
            self.assertEqual(counts(logs[ps]), (steps, steps, steps), ps)

    def test_accumulating_servers_get_whole_pushes_and_workers_say_why(self):
        codes, logs = run_cluster(self.tmp, ["--update_mode=accumulate"], max_steps=10)
        for role, code in codes.items():
            self.assertEqual(code, 0, f"{role} failed:\n{logs[role][-5000:]}")
        for w in ("worker0", "worker1"):
            self.assertIn("one push per server a step, after backward (the servers accumulate "
                          "or sync, which count whole pushes)", logs[w])
        steps = local_steps(logs["worker0"]) + local_steps(logs["worker1"])
        for ps in ("ps0", "ps1"):
            _, pushes, _ = counts(logs[ps])
            self.assertEqual(pushes, steps, ps)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--pstrain", required=True)
    args, rest = parser.parse_known_args()
    PSTRAIN = args.pstrain
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
