"""The cluster file's restart policy, with the fake role binary: a killed or failed role is started
again (its log goes on), a usage error is not, and the restarts are bounded."""

import os
import signal
import subprocess
import tempfile
import unittest

from launcher_testlib import (FAST, alive, cluster_yaml, kill_leftovers, launcher_argv, records,
                              recorded_pids, run_launcher, wait_for, write)


class RestartTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name
        self.train_dir = os.path.join(self.tmp, "run")
        self.seen_pids = []

    def tearDown(self):
        kill_leftovers(self.seen_pids + recorded_pids(self.train_dir))
        self._tmp.cleanup()

    def cluster(self, restart):
        text = cluster_yaml(ps=(2222, 2223), evaluator=False) + restart + "\n"
        return write(os.path.join(self.tmp, "cluster.yaml"), text)

    def log(self, name):
        with open(os.path.join(self.train_dir, "launcher", name)) as f:
            return f.read()

    def test_a_server_killed_by_sigkill_is_started_again_and_the_run_finishes(self):
        cluster = self.cluster("restart: {policy: on_failure, max_restarts: 2, backoff_secs: 0.2}")
        proc = subprocess.Popen(launcher_argv(cluster, self.train_dir, *FAST, "--",
                                              "--fake_steps=150", "--fake_step_s=0.02"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: len(records(self.train_dir)) == 4, what="every role to start")
            first = records(self.train_dir)["ps1"]["pid"]
            self.seen_pids.append(first)
            os.kill(first, signal.SIGKILL)
            wait_for(lambda: records(self.train_dir)["ps1"]["pid"] != first,
                     what="ps1 to be started again")
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
        self.assertEqual(proc.returncode, 0, out + err)
        self.assertIn("ps1 failed (killed by SIGKILL); restarting it in 0.2 s "
                      "(restart 1 of at most 2)", err)
        self.assertRegex(out, r"restarted ps1 \(pid \d+\)")
        log = self.log("ps-1.log")
        self.assertIn("==== [launcher] restart 1 of ps1 ====", log)
        self.assertEqual(log.count("started, pid"), 2, log)  # both lives in one log
        self.assertFalse(alive(first))

    def test_restarts_stop_at_max_restarts_and_the_run_fails_with_the_roles_code(self):
        cluster = self.cluster("restart: {policy: on_failure, max_restarts: 2, backoff_secs: 0}")
        result = run_launcher(cluster, self.train_dir, *FAST, "--", "--fake_steps=2000",
                              "--fake_step_s=0.01", "--fake_fail=worker:1:3")
        self.assertEqual(result.returncode, 3, result.stdout + result.stderr)
        self.assertIn("worker1 failed (exit 3); restarting it in 0 s (restart 1 of at most 2)",
                      result.stderr)
        self.assertIn("(restart 2 of at most 2)", result.stderr)
        self.assertIn("worker1 failed (exit 3) after 2 restart(s), the most "
                      "restart.max_restarts allows", result.stderr)
        self.assertEqual(self.log("worker-1.log").count("injected failure"), 3)

    def test_a_usage_error_is_not_restarted(self):
        cluster = self.cluster("restart: {policy: on_failure, max_restarts: 5}")
        result = run_launcher(cluster, self.train_dir, *FAST, "--", "--fake_steps=2000",
                              "--fake_step_s=0.01", "--fake_fail=worker:1:2")
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assertIn("worker1 failed (exit 2: a bad flag or config); not restarting it",
                      result.stderr)
        self.assertNotIn("restarting it in", result.stderr)

    def test_without_a_policy_a_killed_role_fails_the_run(self):
        cluster = self.cluster("")
        proc = subprocess.Popen(launcher_argv(cluster, self.train_dir, *FAST, "--",
                                              "--fake_hang=worker:0"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: len(records(self.train_dir)) == 4, what="every role to start")
            os.kill(records(self.train_dir)["worker1"]["pid"], signal.SIGKILL)
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
        self.assertEqual(proc.returncode, 128 + signal.SIGKILL, out + err)
        self.assertNotIn("restarting", err)

    def test_a_bad_policy_is_refused_at_start_naming_the_field(self):
        cluster = self.cluster("restart: {policy: always, max_restarts: -1}")
        result = run_launcher(cluster, self.train_dir, *FAST)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("restart.policy: expected one of never, on_failure, got \"always\"",
                      result.stderr)
        self.assertIn("restart.max_restarts: expected a whole number >= 0, got -1", result.stderr)


if __name__ == "__main__":
    unittest.main()
