"""Workers joining and leaving a running launch (cluster keys min_workers and max_workers,
`pstrain-launch add-worker` and `remove-worker`), with the fake role binary: an added worker gets
the lowest free task index and the others' flags, a removed one gets SIGTERM, the run still ends
by itself, and the control socket is private to the user."""

import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unittest

from launcher_testlib import (FAST, KEYGEN, REPO, alive, cluster_yaml, kill_leftovers,
                              launcher_argv, records, recorded_pids, wait_for, write)

from pstrain_launch import control, keys  # noqa: E402  (launcher_testlib puts it on the path)
from pstrain_launch.cluster import ConfigError, parse_cluster  # noqa: E402
from pstrain_launch.roles import LaunchOptions, build_roles  # noqa: E402

ELASTIC = "min_workers: 1\nmax_workers: 4\nreplicas: 1\n"


def control_command(*args):
    """`python -m pstrain_launch ARGS` as a user runs it, from the launcher's directory."""
    return subprocess.run([sys.executable, "-m", "pstrain_launch", *args],
                          cwd=os.path.join(REPO, "launcher"), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=20)


class ElasticConfigTest(unittest.TestCase):
    def parse(self, extra, **kw):
        return parse_cluster(cluster_yaml(ps=(2222, 2223), **kw) + extra, "c.yaml")

    def test_the_keys_become_every_roles_flags(self):
        cluster = self.parse(ELASTIC, evaluator=True)
        roles = build_roles(cluster, LaunchOptions("cfg.yaml", "run", "run/logs", []))
        for r in roles:
            self.assertIn("--replicas=1", r.flags, r.name)
            self.assertIn("--min_workers=1", r.flags, r.name)
            self.assertIn("--max_workers=4", r.flags, r.name)
        self.assertEqual(keys.worker_keys(cluster), 4)

    def test_without_the_keys_no_flag_is_added(self):
        roles = build_roles(self.parse(""), LaunchOptions("cfg.yaml", "run", "run/logs", []))
        for r in roles:
            self.assertFalse([f for f in r.flags if "workers=" in f or "replicas" in f], r.flags)

    def test_bad_counts_are_refused_naming_the_key(self):
        with self.assertRaises(ConfigError) as e:
            self.parse("min_workers: 3\nmax_workers: 1\nreplicas: 2\n")
        text = str(e.exception)
        self.assertIn("max_workers: 1 is below the worker list's 2 workers", text)
        self.assertIn("replicas: 2 backups per shard need more than 2 ps", text)
        with self.assertRaises(ConfigError) as e:
            self.parse("min_workers: 3\nmax_workers: 2\n")
        self.assertIn("min_workers: 3 is above max_workers 2", str(e.exception))
        with self.assertRaises(ConfigError) as e:
            self.parse("max_workers: 3\n")
        self.assertIn("max_workers: needs min_workers >= 1", str(e.exception))

    def test_intra_node_sync_with_min_workers_is_refused_naming_both(self):
        with self.assertRaises(ConfigError) as e:
            self.parse(ELASTIC, flags={"intra_node_sync": "nccl"})
        self.assertIn("flags.intra_node_sync: nccl does not go with min_workers 1",
                      str(e.exception))

    def test_the_flags_may_not_be_set_elsewhere(self):
        with self.assertRaises(ConfigError) as e:
            self.parse("", flags={"min_workers": 2})
        self.assertIn("set the cluster file's top-level key min_workers instead", str(e.exception))

    @unittest.skipUnless(KEYGEN, "needs the built pstrain-keygen (PSTRAIN_KEYGEN)")
    def test_keys_are_made_for_max_workers(self):
        with tempfile.TemporaryDirectory() as tmp:
            keys.generate(KEYGEN, os.path.join(tmp, "keys"), self.parse(ELASTIC))
            self.assertTrue(os.path.isdir(os.path.join(tmp, "keys", "worker-3")))


class AddRemoveWorkerTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name
        self.train_dir = os.path.join(self.tmp, "run")
        self.proc = None

    def tearDown(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        kill_leftovers(recorded_pids(self.train_dir))
        self._tmp.cleanup()

    def launch(self, extra=ELASTIC, steps="120"):
        cluster = write(os.path.join(self.tmp, "cluster.yaml"),
                        cluster_yaml(ps=(2222, 2223), evaluator=False) + extra)
        self.proc = subprocess.Popen(
            launcher_argv(cluster, self.train_dir, *FAST, "--no_curve", "--",
                          f"--fake_steps={steps}", "--fake_step_s=0.05"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: len(records(self.train_dir)) == 4, what="two ps and two workers")

    def finish(self):
        out, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, out, err

    def test_add_worker_starts_the_lowest_free_task_with_the_others_flags(self):
        self.launch()
        result = control_command("add-worker", "--train_dir", self.train_dir)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("started worker 2", result.stdout)
        wait_for(lambda: "worker2" in records(self.train_dir), what="worker 2 to start")
        got = records(self.train_dir)
        added, model = got["worker2"]["argv"], got["worker1"]["argv"]
        self.assertIn("--task_index=2", added)
        self.assertIn("--worker_hosts=127.0.0.1:2232,127.0.0.1:2233,127.0.0.1:0", added)
        self.assertIn("--min_workers=1", added)
        self.assertIn("--max_workers=4", added)
        same = [f for f in model if not f.startswith(("--task_index=", "--worker_hosts="))]
        self.assertEqual([f for f in added if not f.startswith(("--task_index=",
                                                                 "--worker_hosts="))], same)
        self.assertEqual(got["worker2"]["env"]["PSTRAIN_ROLE"], "worker:2")
        code, out, err = self.finish()
        self.assertEqual(code, 0, out + err)
        self.assertRegex(out, r"add-worker: started worker2 \(pid \d+\)")

    def test_remove_worker_sends_sigterm_and_the_run_still_ends(self):
        self.launch()
        pid = records(self.train_dir)["worker1"]["pid"]
        result = control_command("remove-worker", "--train_dir", self.train_dir, "--task", "1")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("sent SIGTERM to worker 1", result.stdout)
        wait_for(lambda: os.path.exists(os.path.join(self.train_dir, "fake", "worker-1.term")),
                 what="worker 1 to get SIGTERM")
        wait_for(lambda: not alive(pid), what="worker 1 to exit")
        # The chief cannot leave; a task that does not run is named.
        result = control_command("remove-worker", "--train_dir", self.train_dir, "--task", "0")
        self.assertEqual(result.returncode, 1)
        self.assertIn("worker 0 is the chief and cannot leave", result.stderr)
        result = control_command("remove-worker", "--train_dir", self.train_dir, "--task", "1")
        self.assertIn("worker 1 is not running", result.stderr)
        # Task 1 is free again: add-worker takes it, its log going on after the first one's.
        result = control_command("add-worker", "--train_dir", self.train_dir)
        self.assertIn("started worker 1", result.stdout, result.stderr)
        code, out, err = self.finish()
        self.assertEqual(code, 0, out + err)
        self.assertIn("worker1 stopped", out)
        with open(os.path.join(self.train_dir, "launcher", "worker-1.log")) as f:
            log = f.read()
        self.assertEqual(log.count("started, pid"), 2, log)

    def test_add_worker_stops_at_max_workers(self):
        self.launch("min_workers: 1\nmax_workers: 3\n")
        self.assertEqual(control_command("add-worker", "--train_dir", self.train_dir).returncode,
                         0)
        result = control_command("add-worker", "--train_dir", self.train_dir)
        self.assertEqual(result.returncode, 1)
        self.assertIn("all 3 worker tasks run (max_workers: 3)", result.stderr)

    def test_the_control_socket_is_private_and_refuses_what_it_cannot_read(self):
        self.launch()
        path = control.socket_path(self.train_dir)
        self.assertTrue(stat.S_ISSOCK(os.stat(path).st_mode))
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        self.assertEqual(os.stat(os.path.dirname(path)).st_mode & 0o777, 0o700)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(path)
        s.sendall(b"not json\n")
        answer = s.recv(4096).decode()
        s.close()
        self.assertIn('"ok": false', answer)
        self.assertIn("expected one JSON line", answer)
        self.assertEqual(control.send(self.train_dir, {"op": "reboot"}),
                         (False, "unknown op 'reboot': expected add-worker or remove-worker"))
        code, out, err = self.finish()
        self.assertEqual(code, 0, out + err)
        self.assertFalse(os.path.exists(path), "the socket goes with the launcher")

    def test_a_client_dripping_its_request_is_cut_off_and_the_next_is_answered(self):
        self.launch()
        path = control.socket_path(self.train_dir)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(path)
        started = time.monotonic()
        answer = b""
        for byte in b'{"op": "add-worker"}':  # a byte every 0.4 s: each read is quick
            try:
                s.sendall(bytes([byte]))
            except OSError:
                pass  # cut off: the answer is waiting
            s.settimeout(0.4)
            try:
                answer = s.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                pass
            break
        s.close()
        self.assertIn(b"did not arrive within 2 s", answer)
        self.assertLess(time.monotonic() - started, 4.0)
        self.assertEqual(control.send(self.train_dir, {"op": "reboot"}),
                         (False, "unknown op 'reboot': expected add-worker or remove-worker"))
        code, out, err = self.finish()
        self.assertEqual(code, 0, out + err)

    def test_a_fixed_cluster_has_no_control_socket(self):
        self.launch(extra="", steps="20")
        result = control_command("add-worker", "--train_dir", self.train_dir)
        self.assertEqual(result.returncode, 1)
        self.assertIn("no launcher control socket", result.stderr)
        self.finish()


if __name__ == "__main__":
    unittest.main()
