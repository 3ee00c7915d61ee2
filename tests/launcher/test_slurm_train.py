"""The shipped sbatch example (configs/slurm/refnet.sbatch) trains on a real Slurm (slurm_testlib:
three one-CPU nodes on this machine): 1 ps, 2 workers and an evaluator over two nodes, every role
an srun step started by `pstrain-launch --slurm`.

Kept short for CI: SmallNet (the example's CONFIG variable; PSTRAIN_SLURM_CONFIG=refnet.yaml for
its default, RefNet, ~3.5 minutes), 2 epochs to a test accuracy of at least 0.85 (SmallNet and
RefNet reach ~0.88 there; the accumulate cluster test and fault_test.py in tests/distributed
train RefNet to 0.90). The example's GPU, task and CPU counts are overridden on sbatch's command
line (one task and CPU per node, no GPU), its paths and extra options through the variables it
reads. Skipped without root, Slurm or Fashion-MNIST."""

import os
import re
import sys
import tempfile
import time
import unittest

from launcher_testlib import KEYGEN, PSTRAIN, REPO
from slurm_testlib import FASHION_MNIST, SlurmCluster, free_ports, read, skip_reason

SKIP_REASON = skip_reason()
SBATCH = os.path.join(REPO, "configs", "slurm", "refnet.sbatch")
TARGET = 0.85
EPOCHS = 2
CONFIG = os.environ.get("PSTRAIN_SLURM_CONFIG", "smallnet.yaml")


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
@unittest.skipIf(not PSTRAIN or not KEYGEN, "PSTRAIN_BINARY or PSTRAIN_KEYGEN is not set")
@unittest.skipIf(not os.path.exists(FASHION_MNIST), "Fashion-MNIST is not installed")
class SlurmTrainTest(unittest.TestCase):
    def test_the_sbatch_example_trains_across_slurm_nodes_to_the_target(self):
        slurm = SlurmCluster(nodes=3).start()
        self.addCleanup(slurm.stop)
        tmp = tempfile.TemporaryDirectory(prefix="pstrain-slurm-train-")
        self.addCleanup(tmp.cleanup)
        train_dir = os.path.join(tmp.name, "run")
        out = os.path.join(tmp.name, "refnet.out")
        options = ["--ps", "1", "--port", str(free_ports(3)), "--binary", PSTRAIN,
                   "--keygen", KEYGEN, "--progress_interval", "15"]
        started = time.monotonic()
        job = slurm.sbatch(
            "--nodes=2", "--ntasks-per-node=1", "--gpus-per-node=0", "--cpus-per-task=1",
            "--time=15", f"--output={out}", f"--chdir={tmp.name}", SBATCH,
            PSTRAIN_DIR=REPO, DATA_DIR=os.path.dirname(FASHION_MNIST), TRAIN_DIR=train_dir,
            CONFIG=os.path.join("configs", CONFIG),
            PSTRAIN_LAUNCH_OPTIONS=" ".join(options),
            PSTRAIN_FLAGS=f"--epochs={EPOCHS} --log_every_n_steps=100 --eval_interval_secs=30")
        state, code = slurm.wait_job(job, timeout=600)
        elapsed = time.monotonic() - started
        logs = {n: read(os.path.join(train_dir, "launcher", f"{n}.log"))
                for n in ("ps-0", "worker-0", "worker-1", "evaluator-0")}
        output = read(out)
        explain = (f"--- job output\n{output}\n" + "".join(
            f"--- {n}.log\n{text[-3000:]}" for n, text in logs.items()) + slurm.logs())
        self.assertEqual((state, code), ("COMPLETED", "0:0"), explain)
        placed = re.findall(r"\[launcher\] started (\w+) on (node\d)", output)
        self.assertEqual(placed, [("ps0", "node1"), ("worker0", "node1"), ("worker1", "node2"),
                                  ("evaluator0", "node2")], explain)
        self.assertIn("exit codes: ps0 0, worker0 0, worker1 0, evaluator0 0", output, explain)
        self.assertIn("CURVE authentication on", logs["ps-0"], explain)
        done = re.search(r"done: global step (\d+), test accuracy ([0-9.]+)", logs["worker-0"])
        self.assertIsNotNone(done, explain)
        accuracy = float(done.group(2))
        print(f"\n  {CONFIG} over Slurm: {EPOCHS} epochs, global step {done.group(1)}, test "
              f"accuracy {accuracy:.4f} (target {TARGET}), job took {elapsed:.0f} s",
              file=sys.stderr)
        self.assertGreaterEqual(accuracy, TARGET, explain)


if __name__ == "__main__":
    unittest.main()
