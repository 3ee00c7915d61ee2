"""The launcher's ETA (ClusterProgress in launcher/pstrain_launch/progress.py) on a steady run
whose chief writes a progress line every N local steps: with two workers the global step moves
in strides of 2N, a line every several seconds, and the launcher polls in between. The ETA must
hold to the true remaining time between lines and at each one, not sag and leap with the strides.
The real trainer's lines are fed to it in test_progress_contract.py."""

import os
import re
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.realpath(__file__)))), "launcher"))
from pstrain_launch.progress import ClusterProgress, RoleProgress  # noqa: E402

TOTAL = 6000
STEPS_PER_SEC = 20.0  # global steps, both workers together
STRIDE = 200          # 100 local steps x 2 workers between the chief's lines


def eta_of(line):
    """The seconds of the line's "ETA 4m05s" (or "ETA 42s"); None without one."""
    m = re.search(r"ETA (?:(\d+)m)?(\d+)s", line)
    return None if m is None else int(m.group(1) or 0) * 60 + int(m.group(2))


class ProgressEtaTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.log = os.path.join(self.tmp.name, "worker-0.log")
        open(self.log, "w").close()
        self.chief = RoleProgress(self.log)
        self.cluster = ClusterProgress()

    def tearDown(self):
        self.tmp.cleanup()

    def say(self, step):
        with open(self.log, "a") as f:
            f.write(f"worker 0: step {step}/{TOTAL} (epoch 0.10) loss 0.5 lr 0.0010 "
                    f"2560.0 examples/s staleness 1.00 dropped 0\n")

    def test_the_eta_holds_to_the_remaining_time_between_and_at_the_chiefs_lines(self):
        ratios = []
        next_line = STRIDE
        for tick in range(1, 240):  # a poll a second for four minutes
            now = float(tick)
            while next_line <= now * STEPS_PER_SEC:  # the line the chief wrote meanwhile
                self.say(next_line)
                next_line += STRIDE
            self.chief.update()
            eta = eta_of(self.cluster.line(now, self.chief, [self.chief], []))
            if eta is not None:
                ratios.append(eta / (TOTAL / STEPS_PER_SEC - now))
        self.assertGreater(len(ratios), 200)
        # Lines come every 10 s: a line is seen up to a poll (1 s) late, which the rate
        # over the last minute (6 strides) dilutes to within a few per cent.
        self.assertLess(max(ratios), 1.1, f"ETA / remaining time: max {max(ratios):.3f}")
        self.assertGreater(min(ratios), 0.9, f"ETA / remaining time: min {min(ratios):.3f}")

    def test_the_rate_comes_from_the_last_minute(self):
        # Two minutes at 20 steps/s, then the cluster halves its speed: a minute later the ETA
        # follows the new rate only.
        now, step = 0.0, 0
        while now < 240:
            now += 1
            rate = STEPS_PER_SEC if now <= 120 else STEPS_PER_SEC / 2
            step += int(rate)
            self.say(step)
            self.chief.update()
            line = self.cluster.line(now, self.chief, [self.chief], [])
        self.assertAlmostEqual(eta_of(line), (TOTAL - step) / (STEPS_PER_SEC / 2), delta=1.0)


if __name__ == "__main__":
    unittest.main()
