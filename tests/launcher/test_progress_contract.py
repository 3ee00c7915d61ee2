"""The progress line is a contract between worker/training/progress_line.h (FormatProgressLine, which
every trainer logs) and the launcher's reader (launcher/pstrain_launch/progress.py). This feeds
the reader the real pstrain-train's output, not a hand-copied line: the step, total, loss and
examples/s it reads must be the ones the binary printed."""

import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.realpath(__file__)))), "launcher"))
from pstrain_launch.progress import RoleProgress  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
TRAIN = os.environ.get("PSTRAIN_TRAIN", "")
FASHION_MNIST = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"


@unittest.skipIf(not TRAIN, "PSTRAIN_TRAIN is not set")
@unittest.skipIf(not os.path.exists(FASHION_MNIST), "Fashion-MNIST is not installed")
class ProgressContractTest(unittest.TestCase):
    def test_the_launcher_reads_what_the_real_trainer_prints(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "train.log")
            with open(log, "w") as out:
                result = subprocess.run(
                    [TRAIN, f"--config={REPO}/tests/worker/testdata/tiny.yaml",
                     f"--train_dir={tmp}/run", "--max_steps=20", "--log_every_n_steps=10",
                     "--eval_every_n_steps=0"],
                    stdout=out, stderr=subprocess.STDOUT, timeout=300)
            with open(log) as f:
                text = f.read()
            self.assertEqual(result.returncode, 0, text)
            printed = re.findall(r"trainer: step (\d+)/(\d+) \(epoch [0-9.]+\) loss ([0-9.]+) lr "
                                 r"[0-9.]+ ([0-9.]+) examples/s", text)
            self.assertEqual([p[0] for p in printed], ["10", "20"], text)
            progress = RoleProgress(log)
            progress.update()
            self.assertEqual(progress.step, "20/20")
            self.assertEqual(progress.global_step(), 20)
            self.assertEqual(progress.total_steps(), 20)
            self.assertEqual(progress.loss, printed[-1][2])
            self.assertEqual(progress.examples_per_sec, float(printed[-1][3]))
            self.assertGreater(progress.examples_per_sec, 0)


if __name__ == "__main__":
    unittest.main()
