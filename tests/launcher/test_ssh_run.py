"""Ssh mode against a real sshd on 127.0.0.1 (temporary host key, user key and config)."""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from launcher_testlib import (FAKE, FAST, alive, cluster_yaml, kill_leftovers, launcher_argv,
                              records, recorded_pids, run_launcher, wait_for, write)

SSHD = "/usr/sbin/sshd"
SKIP_REASON = None
if not os.path.exists(SSHD):
    SKIP_REASON = f"{SSHD} is missing (Debian: apt-get install openssh-server)"
elif os.geteuid() != 0:
    SKIP_REASON = "starting sshd for the test needs root"
elif not shutil.which("ssh") or not shutil.which("ssh-keygen"):
    SKIP_REASON = "ssh or ssh-keygen is missing (Debian: apt-get install openssh-client)"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class SshRunTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        cls.tmp = tmp = cls._tmp.name
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation dir
        for key in ("host_key", "user_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                            os.path.join(tmp, key)], check=True)
        shutil.copy(os.path.join(tmp, "user_key.pub"), os.path.join(tmp, "authorized_keys"))
        cls.port = free_port()
        config = write(os.path.join(tmp, "sshd_config"), "\n".join([
            f"Port {cls.port}", "ListenAddress 127.0.0.1", f"HostKey {tmp}/host_key",
            f"AuthorizedKeysFile {tmp}/authorized_keys", "StrictModes no",
            f"PidFile {tmp}/sshd.pid", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password",
            "UsePAM no", "MaxStartups 50", "MaxSessions 50", ""]))
        cls.sshd_log = open(os.path.join(tmp, "sshd.log"), "w")
        cls.sshd = subprocess.Popen([SSHD, "-D", "-e", "-f", config], stdout=cls.sshd_log,
                                    stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", cls.port), timeout=1).close()
                break
            except OSError:
                if cls.sshd.poll() is not None or time.monotonic() > deadline:
                    cls.tearDownClass()
                    raise RuntimeError(f"sshd did not start; see {tmp}/sshd.log")
                time.sleep(0.05)
        # The "remote" checkout: the fake binary under a relative name, as build/pstrain would be.
        cls.remote_dir = os.path.join(tmp, "remote")
        os.makedirs(cls.remote_dir)
        shutil.copy(FAKE, os.path.join(cls.remote_dir, "fake-pstrain"))

    @classmethod
    def tearDownClass(cls):
        cls.sshd.terminate()
        try:
            cls.sshd.wait(timeout=5)
        except subprocess.TimeoutExpired:
            cls.sshd.kill()
            cls.sshd.wait()
        cls.sshd_log.close()
        cls._tmp.cleanup()

    def setUp(self):
        self.run_dir = tempfile.mkdtemp(dir=self.tmp)
        self.train_dir = os.path.join(self.run_dir, "run")
        self.cluster = write(os.path.join(self.run_dir, "cluster.yaml"), cluster_yaml(
            binary="fake-pstrain", mode="ssh", flags={"update_mode": "async"},
            ssh={"user": "root", "port": self.port, "identity_file": f"{self.tmp}/user_key",
                 "remote_dir": self.remote_dir,
                 "options": [f"UserKnownHostsFile={self.tmp}/known_hosts",
                             "ConnectTimeout=10", "LogLevel=ERROR"]}))

    def tearDown(self):
        kill_leftovers(recorded_pids(self.train_dir))

    def assert_all_gone(self):
        for pid in recorded_pids(self.train_dir):
            wait_for(lambda: not alive(pid), timeout=5, what=f"remote fake pid {pid} to be gone")

    def test_roles_run_through_sshd_and_the_launcher_exits_0_with_local_logs(self):
        result = run_launcher(self.cluster, self.train_dir, *FAST, "--", "--fake_steps=20",
                              "--fake_step_s=0.05", "--fake_grandchild=ps:0")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        got = records(self.train_dir)
        self.assertEqual(sorted(got), ["evaluator0", "ps0", "worker0", "worker1"])
        gpus = {"ps0": "", "worker0": "", "worker1": "0,1", "evaluator0": ""}
        for name, record in got.items():
            job, index = name[:-1], name[-1]
            self.assertIn("SSH_CONNECTION", record["env"], f"{name} did not run through ssh")
            self.assertTrue(record["env"]["SSH_CONNECTION"].startswith("127.0.0.1 "))
            self.assertEqual(record["cwd"], os.path.realpath(self.remote_dir))
            self.assertEqual(record["env"]["CUDA_VISIBLE_DEVICES"], gpus[name])
            self.assertEqual(record["env"]["PSTRAIN_ROLE"], f"{job}:{index}")
            self.assertEqual(record["argv"][:2], [f"--job_name={job}", f"--task_index={index}"])
            self.assertIn("--worker_hosts=127.0.0.1:2232,127.0.0.1:2233", record["argv"])
            with open(os.path.join(self.train_dir, "launcher", f"{job}-{index}.log")) as f:
                self.assertIn(f"fake {job}:{index}: started", f.read())
        with open(os.path.join(self.train_dir, "launcher", "worker-0.log")) as f:
            self.assertIn("done: global step 20, test accuracy 0.9102", f.read())
        self.assertRegex(result.stdout, r"\d+s  (?:[^|\n]*\| )?ps0 up  worker0 step \d+/20 loss")
        self.assertIn("exit codes: ps0 0, worker0 0, worker1 0, evaluator0 0", result.stdout)
        self.assert_all_gone()  # ps0's child included

    def test_ssh_mode_copies_each_role_only_its_own_curve_keys(self):
        # CURVE is on by default across hosts: keys are made here, then each role's directory
        # goes to its host (here the same sshd) before the role starts.
        result = run_launcher(self.cluster, self.train_dir, *FAST, "--", "--fake_steps=3")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("on its host", result.stdout)
        roles = ["ps-0", "worker-0", "worker-1", "evaluator-0"]
        for name, record in records(self.train_dir).items():
            role = f"{name[:-1]}-{name[-1]}"
            self.assertIn(f"--curve_keys={self.train_dir}/keys/{role}", record["argv"])
            expected = {f"{r}.key": 0o644 for r in roles}
            expected[f"{role}.key_secret"] = 0o600
            self.assertEqual(record["curve_keys"], {"mode": 0o700, "files": expected}, name)

    def test_remote_failure_stops_the_remote_roles_and_its_exit_code_is_returned(self):
        result = run_launcher(self.cluster, self.train_dir, *FAST, "--", "--fake_steps=2000",
                              "--fake_step_s=0.01", "--fake_fail=worker:1:3",
                              "--fake_fail_wait=4", "--fake_grandchild=ps:0")
        self.assertEqual(result.returncode, 3, result.stdout + result.stderr)
        self.assertIn("worker1 failed (exit 3)", result.stderr)
        self.assertIn("  | E fake worker:1: injected failure at step 3", result.stderr)
        for name in ("ps-0", "worker-0", "evaluator-0"):
            self.assertTrue(os.path.exists(os.path.join(self.train_dir, "fake", name + ".term")),
                            f"remote {name} got no SIGTERM")
        # The failed role's own code, and every other role stopped by the launcher. Their codes
        # are not asserted: under load a role can exit on its own (worker0 with 1, having lost
        # its peer) between the failure and the launcher's SIGTERM.
        line = re.search(r"exit codes: (.*)", result.stdout)
        self.assertIsNotNone(line, result.stdout)
        codes = dict(re.findall(r"(\w+?\d+) (\d+(?: \(stopped\))?)", line.group(1)))
        self.assertEqual(sorted(codes), ["evaluator0", "ps0", "worker0", "worker1"], line.group(0))
        self.assertEqual(codes["worker1"], "3", line.group(0))
        for name in ("ps0", "worker0", "evaluator0"):
            self.assertTrue(codes[name].endswith("(stopped)"), f"{name}: {line.group(0)}")
        self.assert_all_gone()

    def test_sigint_stops_the_remote_roles(self):
        proc = subprocess.Popen(launcher_argv(self.cluster, self.train_dir, *FAST, "--",
                                              "--fake_hang=worker:0,worker:1",
                                              "--fake_grandchild=worker:1"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: len(records(self.train_dir)) == 4, what="every remote role")
            os.kill(proc.pid, signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
        self.assertEqual(proc.returncode, 130, out + err)
        self.assertEqual(len(recorded_pids(self.train_dir)), 5)
        self.assert_all_gone()

    def test_a_launcher_killed_outright_still_takes_its_remote_roles_down(self):
        # SIGKILL leaves the launcher no chance to clean up: ssh sees its stdin close (and gets
        # SIGTERM from the parent-death signal), and the remote watcher stops the role.
        proc = subprocess.Popen(launcher_argv(self.cluster, self.train_dir, *FAST, "--",
                                              "--fake_hang=worker:0,worker:1"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: len(records(self.train_dir)) == 4, what="every remote role")
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        self.assert_all_gone()


if __name__ == "__main__":
    unittest.main()
