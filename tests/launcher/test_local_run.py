"""Local mode end to end with the fake role binary: success, failure, signals, logs, progress."""

import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

from launcher_testlib import (FAST, REPO, alive, cluster_yaml, kill_leftovers, launcher_argv,
                              records, recorded_pids, run_launcher, wait_for, write)

CONFIG = os.path.join(REPO, "configs", "refnet.yaml")


class LocalRunTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name
        self.train_dir = os.path.join(self.tmp, "run")
        self.cluster = write(os.path.join(self.tmp, "cluster.yaml"), cluster_yaml(
            ps=(2222, 2223), flags={"update_mode": "async"}))

    def tearDown(self):
        kill_leftovers(recorded_pids(self.train_dir))
        self._tmp.cleanup()

    def log(self, name):
        with open(os.path.join(self.train_dir, "launcher", name)) as f:
            return f.read()

    def assert_all_gone(self):
        for pid in recorded_pids(self.train_dir):
            wait_for(lambda: not alive(pid), timeout=3, what=f"fake role pid {pid} to be gone")

    def test_successful_run_exits_0_with_each_roles_flags_env_and_log(self):
        result = run_launcher(self.cluster, self.train_dir, *FAST, "--", "--fake_steps=25",
                              "--fake_step_s=0.04", "--fake_grandchild=worker:1")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        got = records(self.train_dir)
        self.assertEqual(sorted(got), ["evaluator0", "ps0", "ps1", "worker0", "worker1"])
        gpus = {"ps0": "", "ps1": "", "worker0": "", "worker1": "0,1", "evaluator0": ""}
        for name, record in got.items():
            job, index = name.rstrip("0123456789"), name[-1]
            self.assertEqual(record["argv"], [
                f"--job_name={job}", f"--task_index={index}",
                "--ps_hosts=127.0.0.1:2222,127.0.0.1:2223",
                "--worker_hosts=127.0.0.1:2232,127.0.0.1:2233", "--evaluators=1",
                f"--config={CONFIG}",
                f"--train_dir={self.train_dir}", f"--logdir={self.train_dir}/logs",
                f"--curve_keys={self.train_dir}/keys/{job}-{index}",  # CURVE by default
                "--update_mode=async", "--fake_steps=25", "--fake_step_s=0.04",
                "--fake_grandchild=worker:1"])
            self.assertEqual(record["env"]["CUDA_VISIBLE_DEVICES"], gpus[name])
            self.assertEqual(record["env"]["PSTRAIN_ROLE"], f"{job}:{index}")
            self.assertEqual(record["pgid"], record["pid"], "each role leads its own group")
            # Each log holds that role's stdout and stderr.
            log = self.log(f"{job}-{index}.log")
            self.assertIn(f"fake {job}:{index}: started", log)
        self.assertIn("trainer: step 25/25", self.log("worker-1.log"))
        self.assertIn("done: global step 25, test accuracy 0.9102", self.log("worker-0.log"))
        self.assertIn("test accuracy 0.9012", self.log("evaluator-0.log"))
        self.assertIn(f"logs: {self.train_dir}/launcher/ (ps-0.log, ps-1.log, worker-0.log, "
                      "worker-1.log, evaluator-0.log)", result.stdout)
        # The cluster first (the chief's step, all workers' examples/s, the evaluator's accuracy,
        # an ETA once the step has moved), then each role.
        self.assertRegex(result.stdout, r"\[launcher\] \d+s  step \d+/25, 3299 examples/s, "
                         r"accuracy 0\.8621(, ETA \d+s)? \| ps0 up  ps1 up  worker0 step \d+/25 "
                         r"loss \d\.\d{3}  worker1 step \d+/25 loss \d\.\d{3}  evaluator0 acc "
                         r"0\.8621")
        self.assertRegex(result.stdout, r", ETA \d+s \|")
        # One table at the end: the chief's result, and where everything is.
        table = result.stdout[result.stdout.index("[launcher] summary:"):]
        for row in ("result         done", "global step    25/25", "test accuracy  0.9102",
                    "throughput     3299 examples/s", "restarts       none",
                    f"role logs      {self.train_dir}/launcher",
                    f"TensorBoard    tensorboard --logdir {self.train_dir}/logs",
                    f"model          {self.train_dir}/model.safetensors"):
            self.assertIn(row, table)
        self.assertRegex(result.stdout, r"worker0 step 25/25 loss 0\.077 acc 0\.9102 exit 0")
        self.assertIn("exit codes: ps0 0, ps1 0, worker0 0, worker1 0, evaluator0 0",
                      result.stdout)
        self.assert_all_gone()  # worker1's child, left behind after it exited 0, included

    def test_a_run_whose_final_accuracy_collapsed_below_the_evaluators_best_fails(self):
        # The evaluator measured 0.8621 during the run and 0.9012 at its end; a chief that
        # ends at 0.1000 (a model that broke late) says "done", but the run does not.
        result = run_launcher(self.cluster, self.train_dir, *FAST, "--", "--fake_steps=10",
                              "--fake_final_accuracy=0.1000")
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertRegex(result.stdout, r"result\s+failed \(exit 1\): the chief's final test "
                         r"accuracy 0\.1000 is 0\.\d+ below the best an evaluator measured")
        self.assertIn("exit 1: the chief's final test accuracy 0.1000", result.stderr)
        # Within --max_accuracy_drop (0.1 by default) it is done, and 1 turns the check off.
        for final, extra in (("0.8500", ()), ("0.1000", ("--max_accuracy_drop", "1"))):
            again = run_launcher(self.cluster, self.train_dir + final + "".join(extra), *FAST,
                                 *extra, "--", "--fake_steps=10", f"--fake_final_accuracy={final}")
            self.assertEqual(again.returncode, 0, again.stdout + again.stderr)
            self.assertRegex(again.stdout, r"result\s+done")
        bad = run_launcher(self.cluster, self.train_dir + "-bad", "--max_accuracy_drop", "2")
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--max_accuracy_drop must be from 0 to 1", bad.stderr)

    def test_failing_worker_stops_the_rest_and_its_exit_code_and_log_tail_are_reported(self):
        result = run_launcher(self.cluster, self.train_dir, *FAST, "--", "--fake_steps=2000",
                              "--fake_step_s=0.01", "--fake_fail=worker:1:3",
                              "--fake_fail_wait=5", "--fake_grandchild=ps:0")
        self.assertEqual(result.returncode, 3, result.stdout + result.stderr)
        self.assertIn("[launcher] worker1 failed (exit 3); stopping the other roles",
                      result.stderr)
        self.assertIn(f"last lines of {self.train_dir}/launcher/worker-1.log (worker1):",
                      result.stderr)
        self.assertIn("  | E fake worker:1: injected failure at step 3", result.stderr)
        self.assertIn("  | I0101", result.stderr)
        self.assertIn("exit 3: worker1 failed", result.stderr)
        for name in ("ps-0", "ps-1", "worker-0", "evaluator-0"):
            self.assertTrue(os.path.exists(os.path.join(self.train_dir, "fake", name + ".term")),
                            f"{name} got no SIGTERM")
        self.assertIn("exit codes: ps0 143 (stopped), ps1 143 (stopped), worker0 143 (stopped), "
                      "worker1 3, evaluator0 143 (stopped)", result.stdout)
        self.assert_all_gone()

    def test_a_role_killed_by_a_signal_counts_as_a_failure(self):
        proc = subprocess.Popen(launcher_argv(self.cluster, self.train_dir, *FAST, "--",
                                              "--fake_hang=worker:0"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: len(records(self.train_dir)) == 5, what="every role to start")
            os.kill(records(self.train_dir)["ps1"]["pid"], signal.SIGKILL)
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
        self.assertEqual(proc.returncode, 128 + signal.SIGKILL, out + err)
        self.assertIn("ps1 failed (killed by SIGKILL)", err)
        self.assert_all_gone()

    def interrupt(self, sig, *flags):
        proc = subprocess.Popen(launcher_argv(self.cluster, self.train_dir, *FAST, "--",
                                              "--fake_hang=worker:0,worker:1", *flags),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: len(records(self.train_dir)) == 5, what="every role to start")
            time.sleep(0.3)
            os.kill(proc.pid, sig)
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
        return proc.returncode, out, err

    def test_sigint_stops_every_role_and_leaves_no_process_behind(self):
        code, out, err = self.interrupt(signal.SIGINT, "--fake_grandchild=ps:1,worker:0")
        self.assertEqual(code, 130, out + err)
        self.assertIn("got SIGINT; stopping every role", err)
        for name in ("ps-0", "ps-1", "worker-0", "worker-1", "evaluator-0"):
            self.assertTrue(os.path.exists(os.path.join(self.train_dir, "fake", name + ".term")))
        self.assertEqual(len(recorded_pids(self.train_dir)), 7)
        self.assert_all_gone()

    def test_sigterm_kills_a_role_that_ignores_sigterm_after_the_grace_period(self):
        started = time.monotonic()
        code, out, err = self.interrupt(signal.SIGTERM, "--fake_ignore_term=worker:1")
        self.assertEqual(code, 143, out + err)
        self.assertIn("worker1 still running; sending SIGKILL", out)
        self.assertIn("worker1 SIGKILL (stopped)", out)
        self.assertGreaterEqual(time.monotonic() - started, 2.0)  # FAST's --grace_period 2
        self.assert_all_gone()

    def test_a_launcher_killed_outright_still_takes_its_roles_down(self):
        # No chance to clean up: the parent-death signal (prctl) sends each role SIGTERM.
        proc = subprocess.Popen(launcher_argv(self.cluster, self.train_dir, *FAST, "--",
                                              "--fake_hang=worker:0,worker:1"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: len(records(self.train_dir)) == 5, what="every role to start")
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        self.assert_all_gone()

    def test_servers_that_do_not_exit_after_the_workers_fail_the_run(self):
        result = run_launcher(self.cluster, self.train_dir, "--progress_interval", "0",
                              "--grace_period", "1", "--shutdown_timeout", "0.5", "--",
                              "--fake_hang=ps:1")
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("ps1 still running 0.5 s after the workers finished; expected the servers "
                      "to exit after the chief's shutdown", result.stderr)
        # --progress_interval 0: one summary line, at the end.
        self.assertEqual(len(re.findall(r"\[launcher\] \d+s  (?:[^|\n]*\| )?ps0", result.stdout)), 1)
        self.assert_all_gone()


if __name__ == "__main__":
    unittest.main()
