"""Per-layer pulls (--pull_schedule), with real processes on loopback.

  pull_schedule_process_test.py --pstrain BUILD/pstrain

Two servers and two RefNet workers train asynchronously with the step's pulls by layer, fc1 cut
into 1 MiB partitions over both servers (--partition_bytes), each worker logging its steps'
timelines (--vmodule=step_timeline=1). Proved from the timelines: with per_layer every pull is
sent at the step's start and a layer's forward starts before the step's last pull has arrived
(the forward waits per layer, not for the whole model); with late each layer's pull is sent only
after the forward of the layer before it started, and the push goes in parts of one layer each,
each as backward finishes its layer. Both train (the loss falls to well under half
of ln 10), count every step exactly once on every server, and say what they do; a bad value
stops the worker naming the allowed ones. By default (late) workers on loopback push in parts.
A minute or two on 2 cores.
"""

import argparse
import math
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import overlap_push_test as cluster  # noqa: E402  (its two-server, two-worker cluster)

STEPS = 60
LAYERS = ["conv1", "conv2", "fc1", "fc2"]  # RefNet's layers with variables
EVENT = re.compile(r"(issue|arrive|forward|push) (\S+) ([\d.]+)")


def timelines(worker_log):
    """Per step, its events as (kind, what, ms) in the order noted."""
    steps = []
    for line in re.findall(r"timeline \(ms from the step's start\):(.*)", worker_log):
        steps.append([(k, w, float(ms)) for k, w, ms in EVENT.findall(line)])
    return steps


class PullScheduleProcessTest(cluster.ClusterTest):
    prefix = "pstrain-pulls-"

    def train(self, schedule, extra=()):
        tmp = f"{self.tmp}/{schedule}"
        os.makedirs(tmp)
        flags = [f"--pull_schedule={schedule}", "--partition_bytes=1048576", "--push_part_mb=1",
                 "--vmodule=step_timeline=1"] + list(extra)
        codes, logs = cluster.run_cluster(tmp, flags, max_steps=STEPS)
        for role, code in codes.items():
            self.assertEqual(code, 0, f"{schedule}: {role} failed:\n{logs[role][-5000:]}")
        steps = cluster.local_steps(logs["worker0"]) + cluster.local_steps(logs["worker1"])
        for ps in ("ps0", "ps1"):
            global_step, pushes, updates = cluster.counts(logs[ps])
            self.assertEqual(global_step, steps, f"{schedule}: {ps}:\n{logs[ps][-3000:]}")
            self.assertEqual(updates, steps, f"{schedule}: {ps}")
            self.assertGreater(pushes, updates, f"{schedule}: {ps}: the push went in parts")
            self.assertNotIn("one step per pull", logs[ps], f"{schedule}: {ps} refused a part")
        for w in ("worker0", "worker1"):
            seen = cluster.losses(logs[w])
            self.assertGreaterEqual(len(seen), 2, logs[w][-3000:])
            # RefNet starts at ln(10) = 2.30; 30 Adam steps a worker take it well under half.
            self.assertLess(seen[-1], 0.5 * math.log(10), f"{schedule}: {w}: losses {seen}")
            self.assertIn(f"the next step pulls by layer (--pull_schedule={schedule})", logs[w])
        return logs

    def test_per_layer_forward_starts_before_the_steps_last_pull_arrives(self):
        logs = self.train("per_layer")
        for w in ("worker0", "worker1"):
            steps = timelines(logs[w])
            self.assertGreaterEqual(len(steps), STEPS // 4, logs[w][-3000:])
            early = 0
            for events in steps:
                kinds = [k for k, _, _ in events]
                issues = [ms for k, _, ms in events if k == "issue"]
                arrivals = [ms for k, _, ms in events if k == "arrive"]
                forwards = [ms for k, _, ms in events if k == "forward"]
                # conv1, conv2, fc1 (on both servers), fc2: every pull sent before any forward.
                self.assertGreaterEqual(len(issues), 5, events)
                self.assertEqual(len(arrivals), len(issues), events)
                self.assertEqual(kinds[:len(issues)], ["issue"] * len(issues), events)
                early += min(forwards) < max(arrivals)
            print(f"{w}, a per_layer step: {steps[len(steps) // 2]}")
            # The first layer's forward runs while fc1's partitions are still on their way.
            self.assertEqual(early, len(steps), f"{w}: {early} of {len(steps)} steps")

    def test_late_sends_each_layers_pull_after_the_forward_before_it_started(self):
        logs = self.train("late")
        for w in ("worker0", "worker1"):
            steps = timelines(logs[w])
            self.assertGreaterEqual(len(steps), STEPS // 4, logs[w][-3000:])
            for events in steps:
                last_forward = None
                for kind, what, ms in events:
                    layer = what.split("@")[0]
                    if kind == "issue" and last_forward is not None:
                        self.assertNotEqual(layer, last_forward[0], events)
                        self.assertGreaterEqual(ms, last_forward[1], events)
                    if kind == "forward":
                        last_forward = (layer, ms)
                forwards = [what for k, what, _ in events if k == "forward"]
                self.assertEqual(forwards, LAYERS, events)
                # The push leaves in backward, after every forward, each part as its layer's
                # backward ends: one layer a part, the last layer first.
                pushes = [(what.split("@")[0], ms) for k, what, ms in events if k == "push"]
                self.assertGreaterEqual(pushes[0][1], last_forward[1], events)
                layers = [LAYERS.index(layer) for layer, _ in pushes]
                self.assertEqual(layers, sorted(layers, reverse=True), events)
                self.assertEqual(set(layers), set(range(len(LAYERS))), events)
            print(f"{w}, a late step: {steps[len(steps) // 2]}")

    def test_a_bad_schedule_stops_the_worker_naming_the_allowed_ones(self):
        out = subprocess.run([cluster.PSTRAIN, "--job_name=worker", "--task_index=0",
                              "--ps_hosts=127.0.0.1:1", "--worker_hosts=127.0.0.1:2",
                              f"--train_dir={self.tmp}/td",
                              f"--config={cluster.SOURCE}/configs/refnet.yaml",
                              "--pull_schedule=eager"], capture_output=True, text=True,
                             timeout=60)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("--pull_schedule must be step, per_layer or late, got 'eager'",
                      out.stdout + out.stderr)

    def test_by_default_workers_on_loopback_push_in_parts_and_pull_late(self):
        codes, logs = cluster.run_cluster(self.tmp, [], max_steps=10)
        for role, code in codes.items():
            self.assertEqual(code, 0, f"{role} failed:\n{logs[role][-5000:]}")
        for w in ("worker0", "worker1"):
            self.assertIn("the next step pulls by layer (--pull_schedule=late)", logs[w])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--pstrain", required=True)
    args, rest = parser.parse_known_args()
    cluster.PSTRAIN = args.pstrain
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
