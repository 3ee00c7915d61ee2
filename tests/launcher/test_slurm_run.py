"""pstrain-launch --slurm against a real Slurm (slurm_testlib: munged, slurmctld and three slurmd
on this machine, nodes node1..node3 with one CPU and two stand-in GPUs each): a worker per GPU
sees its own, a failing role is named with its node, and a cancelled job leaves no pstrain
process behind. Skipped without root or Slurm."""

import os
import re
import shlex
import sys
import tempfile
import time
import unittest

from launcher_testlib import FAKE, KEYGEN, LAUNCHER, PSTRAIN, REPO, records, wait_for
from slurm_testlib import (FASHION_MNIST, SlurmCluster, free_ports, processes_mentioning, read,
                           skip_reason)

SKIP_REASON = skip_reason()


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
@unittest.skipIf(not KEYGEN, "PSTRAIN_KEYGEN is not set (ctest sets it to pstrain-keygen)")
class SlurmRunTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.slurm = SlurmCluster(nodes=3, gpus_per_node=2).start()
        cls.addClassCleanup(cls.slurm.stop)

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="pstrain-slurm-run-")
        self.tmp = self._tmp.name
        self.train_dir = os.path.join(self.tmp, "run")
        self.addCleanup(self._tmp.cleanup)

    def submit(self, binary, *flags, sbatch=("--nodes=3",), launcher_options=("--ps", "1")):
        launcher = [sys.executable, LAUNCHER, "--slurm", "--config",
                    os.path.join(REPO, "configs", "refnet.yaml"),
                    "--train_dir", self.train_dir, "--binary", binary, "--keygen", KEYGEN,
                    "--port", str(free_ports(8)), "--progress_interval", "1",
                    "--grace_period", "3"] + list(launcher_options) + ["--"] + list(flags)
        self.out = os.path.join(self.tmp, "job.out")
        return self.slurm.sbatch(*sbatch, f"--output={self.out}", f"--chdir={self.tmp}",
                                 "--time=10",
                                 "--wrap", "exec " + " ".join(shlex.quote(a) for a in launcher))

    def role_log(self, name):
        return read(os.path.join(self.train_dir, "launcher", f"{name}.log"))

    def explain(self):
        logs = "".join(f"--- {n}.log\n{self.role_log(n)[-2000:]}" for n in
                       ("ps-0", "worker-0", "worker-1", "worker-2", "evaluator-0"))
        return f"--- job output\n{read(self.out)}\n{logs}\n{self.slurm.logs()}"

    def test_a_worker_per_gpu_each_sees_only_its_own_among_those_slurm_gave_the_job(self):
        job = self.submit(FAKE, "--fake_steps=3", sbatch=("--nodes=2", "--gpus-per-node=2"),
                          launcher_options=())
        state, code = self.slurm.wait_job(job, timeout=90)
        self.assertEqual((state, code), ("COMPLETED", "0:0"), self.explain())
        out = read(self.out)
        self.assertIn("2 node(s) node1, node2; 1 CPU(s) and 2 GPU(s) per node "
                      "(SLURM_GPUS_ON_NODE)", out)
        got = records(self.train_dir)
        seen = {name: (r["env"]["SLURMD_NODENAME"], r["env"]["CUDA_VISIBLE_DEVICES"])
                for name, r in got.items()}
        self.assertEqual(seen, {"ps0": ("node1", ""), "ps1": ("node2", ""),
                                "worker0": ("node1", "0"), "worker1": ("node1", "1"),
                                "worker2": ("node2", "0"), "worker3": ("node2", "1"),
                                "evaluator0": ("node2", "")}, self.explain())
        for name, record in got.items():  # a host's workers average over NCCL, as locally
            self.assertIn("--intra_node_sync=nccl", record["argv"], name)
            self.assertEqual(record["env"]["SLURM_JOB_ID"], job, name)

    def test_a_failing_role_is_named_with_its_node_and_the_job_fails_with_its_code(self):
        job = self.submit(FAKE, "--fake_fail=worker:1:3", "--fake_steps=50", "--fake_step_s=0.1")
        state, code = self.slurm.wait_job(job, timeout=90)
        out = read(self.out)
        self.assertEqual((state, code), ("FAILED", "3:0"), self.explain())
        self.assertIn("[launcher] started worker1 on node2", out)
        self.assertIn("[launcher] worker1 on node2 failed (exit 3); stopping the other roles", out)
        self.assertIn("[launcher] exit 3: worker1 on node2 failed", out)
        # srun names the node too, in the role's log that the launcher prints the end of.
        self.assertIn("srun: error: node2: task 0: Exited with exit code 3", out)
        self.assertRegex(out, r"exit codes: ps0 \S+ \(stopped\), worker0 \S+ \(stopped\), "
                              r"worker1 3, worker2 \S+ \(stopped\)")

    @unittest.skipIf(not PSTRAIN, "PSTRAIN_BINARY is not set (ctest sets it to pstrain)")
    @unittest.skipIf(not os.path.exists(FASHION_MNIST), "Fashion-MNIST is not installed")
    def test_scancel_stops_every_role_and_leaves_no_pstrain_process_behind(self):
        job = self.submit(PSTRAIN, "--log_every_n_steps=5")
        started = time.monotonic()
        step = re.compile(r"worker \d: step \d+/")
        try:
            wait_for(lambda: all(step.search(self.role_log(f"worker-{i}")) for i in range(3))
                     or self.slurm.job(job)[0] not in ("PENDING", "RUNNING"),
                     timeout=120, what="every worker training")
        except AssertionError as e:
            self.fail(f"{e}\n{self.explain()}")
        self.assertEqual(self.slurm.job(job)[0], "RUNNING", self.explain())
        print(f"\n  every worker trained after {time.monotonic() - started:.1f} s; scancel",
              file=sys.stderr)
        self.assertTrue(processes_mentioning(self.train_dir))  # what must go away
        cancelled = time.monotonic()
        self.slurm.run(["scancel", job])
        state, _ = self.slurm.wait_job(job, timeout=60)
        self.assertEqual(state, "CANCELLED", self.explain())
        # Slurm's KillWait is 5 s here; after it nothing of the job may run.
        wait_for(lambda: not processes_mentioning(self.train_dir), timeout=15,
                 what="every process of the job to exit")
        print(f"  no process left {time.monotonic() - cancelled:.1f} s after scancel",
              file=sys.stderr)
        out = read(self.out)
        # Slurm ends the steps and signals the launcher, in either order; either way the
        # launcher says why the roles ended, and no role is blamed for it.
        ending = rf"(Slurm is ending job {job} \(scancel, its time limit or a node failure\)|" \
                 rf"Slurm job {job} is CANCELLED)"
        self.assertRegex(out, rf"\[launcher\] (got SIGTERM|\w+ on node\d [^:\n]+): {ending}; "
                              "stopping every role", self.explain())
        self.assertRegex(out, rf"\[launcher\] exit 143: {ending}\n", self.explain())
        self.assertNotIn("failed", out, self.explain())
        # srun and slurmstepd report the cancelled steps in the roles' logs.
        for name in ("ps-0", "worker-0", "worker-1", "worker-2", "evaluator-0"):
            self.assertRegex(self.role_log(name), rf"STEP {job}\.\d+ ON node\d CANCELLED",
                             self.explain())


if __name__ == "__main__":
    unittest.main()
