"""A host's leader pushes its host's average as backward produces it, with real processes.

  host_overlap_test.py --pstrain BUILD/pstrain

Two servers and two RefNet CPU workers on one host (--intra_node_sync=cpu: they average through
the leader's hub and only worker 0 talks to the servers) train asynchronously twice: with the
overlapped push (1 MiB parts; the host's average runs in buckets of that size while backward goes
on, and the leader pushes each as it is done) and without (one push per server after the whole
backward). Proved for both: every role exits cleanly, the loss falls to under half its start,
the losses and final test accuracy are the same (one pusher: nothing interleaves, so the
overlap changes when bytes leave, not a value), and each server counts one update per host step
(the leader's local steps, which are the other rank's too). With overlap the servers receive
several pushes per update, and the leader's step timelines (--vmodule=step_timeline=1) show
parts leaving before its backward ended; without, one push each. The other rank pushes nothing
(it logs no timeline). Half a minute on 2 cores.
"""

import argparse
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import overlap_push_test as cluster  # noqa: E402  (its two-server, two-worker cluster)

STEPS = 60  # host steps: each rank takes every one
EVENT = re.compile(r"(push|backward) (\S+) ([\d.]+)")


def timelines(worker_log):
    """Per step, (first push's ms, backward's end ms, pushes) from the leader's timelines."""
    steps = []
    for line in re.findall(r"timeline \(ms from the step's start\):(.*)", worker_log):
        events = EVENT.findall(line)
        pushes = [float(ms) for kind, _, ms in events if kind == "push"]
        ends = [float(ms) for kind, _, ms in events if kind == "backward"]
        if pushes and ends:
            steps.append((min(pushes), ends[0], len(pushes)))
    return steps


class HostOverlapTest(cluster.ClusterTest):
    prefix = "pstrain-host-overlap-"

    def train(self, name, flags):
        tmp = f"{self.tmp}/{name}"
        os.makedirs(tmp)
        codes, logs = cluster.run_cluster(
            tmp, ["--intra_node_sync=cpu", "--vmodule=step_timeline=1"] + flags, max_steps=STEPS)
        for role, code in codes.items():
            self.assertEqual(code, 0, f"{name}: {role} failed:\n{logs[role][-5000:]}")
        leader, other = cluster.local_steps(logs["worker0"]), cluster.local_steps(logs["worker1"])
        self.assertEqual(leader, other, f"{name}: the host's ranks take the same steps")
        result = {"logs": logs}
        for ps in ("ps0", "ps1"):
            global_step, pushes, updates = cluster.counts(logs[ps])
            # One pusher for the host: every host step counted once, whatever it came in.
            self.assertEqual(global_step, leader, f"{name}: {ps}:\n{logs[ps][-3000:]}")
            self.assertEqual(updates, leader, f"{name}: {ps}")
            result[ps] = (global_step, pushes, updates)
        for w in ("worker0", "worker1"):
            seen = cluster.losses(logs[w])
            self.assertGreaterEqual(len(seen), 3, logs[w][-3000:])
            self.assertLess(seen[-1], 0.5 * seen[0], f"{name}: {w}: losses {seen}")
        accuracy = re.search(r"test accuracy ([\d.]+)", logs["worker0"])
        self.assertIsNotNone(accuracy, logs["worker0"][-3000:])
        result["accuracy"] = float(accuracy.group(1))
        self.assertEqual(timelines(logs["worker1"]), [], f"{name}: only the leader pushes")
        return result

    def test_the_leader_pushes_each_part_as_the_hosts_average_of_it_is_done(self):
        on = self.train("on", ["--overlap_push=true", "--push_part_mb=1"])
        off = self.train("off", ["--overlap_push=false"])
        for w in ("worker0", "worker1"):
            self.assertIn("the push overlaps backward, in parts of 1 MiB a server, averaged within "
                          "the host in buckets of that size while backward goes on; the leader "
                          "(worker 0) pushes each as it is done", on["logs"][w])
            self.assertIn("one push per server a step, after backward (--overlap_push=false)",
                          off["logs"][w])
        for ps in ("ps0", "ps1"):
            print(f"{ps}: overlap on: global step {on[ps][0]}, {on[ps][1]} pushes; "
                  f"off: global step {off[ps][0]}, {off[ps][1]} pushes")
            self.assertEqual(off[ps][1], off[ps][2], f"{ps}: one push a step without overlap")
            # fc2 with fc1's partition, then the convolutions: two parts a step on each server.
            self.assertGreaterEqual(on[ps][1], 2 * on[ps][2], f"{ps}: the push went in parts")

        steps = timelines(on["logs"]["worker0"])
        self.assertGreaterEqual(len(steps), STEPS // 2, on["logs"]["worker0"][-3000:])
        early = [s for s in steps if s[0] < s[1]]
        print(f"leader: {len(early)} of {len(steps)} steps pushed a part before backward ended; "
              f"first push / backward end (ms), last step: {steps[-1][0]:.1f} / {steps[-1][1]:.1f}")
        # fc2 and fc1 are averaged and pushed while conv2 and conv1 still run backward. On a
        # busy machine the other rank may reach a bucket late, so not every step need show it.
        self.assertGreaterEqual(len(early), len(steps) // 4,
                                f"the leader's parts waited for backward: {steps[:10]}")
        self.assertTrue(all(n >= 4 for _, _, n in steps), "two parts a server every step")
        self.assertEqual(timelines(off["logs"]["worker0"]), [], "no parts without overlap")

        print(f"test accuracy: overlap on {on['accuracy']:.4f}, off {off['accuracy']:.4f}")
        self.assertGreater(on["accuracy"], 0.6)
        # With one pusher nothing interleaves: each part is applied as the whole push would be
        # (the same gradients, the same global step), so the overlap changes only when bytes
        # leave, not one value. Same losses, same accuracy.
        for w in ("worker0", "worker1"):
            self.assertEqual(cluster.losses(on["logs"][w]), cluster.losses(off["logs"][w]), w)
        self.assertEqual(on["accuracy"], off["accuracy"])

    def test_ranks_that_would_cut_buckets_differently_stop_at_start_naming_the_flags(self):
        # Before any server is reached: the ranks compare what they average at the hub's join.
        ps_hosts = f"127.0.0.1:{cluster.free_port()}"
        worker_hosts = ",".join(f"127.0.0.1:{cluster.free_port()}" for _ in range(2))
        procs = []
        for task, part_mb in ((0, 1), (1, 2)):
            log = open(f"{self.tmp}/disagree{task}.log", "w")
            procs.append((subprocess.Popen(
                [cluster.PSTRAIN, "--job_name=worker", f"--task_index={task}", "--device=cpu",
                 f"--ps_hosts={ps_hosts}", f"--worker_hosts={worker_hosts}",
                 f"--config={cluster.SOURCE}/configs/refnet.yaml",
                 f"--train_dir={self.tmp}/disagree", "--intra_node_sync=cpu",
                 "--overlap_push=true", f"--push_part_mb={part_mb}"],
                stdout=log, stderr=subprocess.STDOUT), log))
        for task, (p, log) in enumerate(procs):
            try:
                code = p.wait(timeout=120)
            finally:
                if p.poll() is None:
                    p.kill()
                log.close()
            with open(f"{self.tmp}/disagree{task}.log") as f:
                text = f.read()
            self.assertNotEqual(code, 0, text[-3000:])
            self.assertIn("disagree", text, text[-3000:])
            self.assertIn("averaged in buckets of 1048576 B while backward goes on "
                          "(--overlap_push, --push_part_mb)", text, text[-3000:])
            self.assertIn("averaged in buckets of 2097152 B", text, text[-3000:])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--pstrain", required=True)
    args, rest = parser.parse_known_args()
    cluster.PSTRAIN = args.pstrain
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
