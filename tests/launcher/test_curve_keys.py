"""CURVE keys from the launcher: fresh keys per launch, each role's directory holding its own
secret only, on by default in ssh mode and with --curve locally; and a tiny real cluster that
trains over CURVE."""

import os
import random
import socket
import subprocess
import tempfile
import unittest

from launcher_testlib import (FAST, KEYGEN, PSTRAIN, REPO, cluster_yaml, kill_leftovers,
                              launcher_argv, records, recorded_pids, run_launcher, write)

from pstrain_launch import keys
from pstrain_launch.cluster import parse_cluster
from pstrain_launch.roles import LaunchOptions, build_roles

ROLES = ["ps-0", "ps-1", "worker-0", "worker-1", "evaluator-0"]
FASHION_MNIST = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"


def read_public_key(path):
    with open(path) as f:
        for line in f:
            if line.strip().startswith("public-key"):
                return line.split('"')[1]
    return None


def free_port():
    """A port below the ephemeral range that nothing listens on (as tests/distributed does)."""
    while True:
        port = random.randint(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
                return port
            except OSError:
                pass


@unittest.skipIf(not KEYGEN, "PSTRAIN_KEYGEN is not set (ctest sets it to pstrain-keygen)")
class LauncherCurveTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name
        self.train_dir = os.path.join(self.tmp, "run")
        self.cluster = write(os.path.join(self.tmp, "cluster.yaml"), cluster_yaml(
            ps=(2222, 2223), flags={"update_mode": "async"}))

    def tearDown(self):
        kill_leftovers(recorded_pids(self.train_dir))
        self._tmp.cleanup()

    def test_curve_gives_each_local_role_its_own_secret_and_every_public_key(self):
        result = run_launcher(self.cluster, self.train_dir, *FAST, "--curve", "--",
                              "--fake_steps=5")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        keys_dir = os.path.join(self.train_dir, "keys")
        self.assertIn(f"[launcher] CURVE: fresh keys, each role's in {keys_dir}/<job>-<index>",
                      result.stdout)
        self.assertEqual(os.stat(keys_dir).st_mode & 0o777, 0o700)
        got = records(self.train_dir)
        self.assertEqual(sorted(got), ["evaluator0", "ps0", "ps1", "worker0", "worker1"])
        for name, record in got.items():
            role = f"{name[:-1]}-{name[-1]}"
            self.assertIn(f"--curve_keys={keys_dir}/{role}", record["argv"])
            seen = record["curve_keys"]
            self.assertEqual(seen["mode"], 0o700, name)
            expected = {f"{r}.key": 0o644 for r in ROLES}
            expected[f"{role}.key_secret"] = 0o600  # its own secret, and no other
            self.assertEqual(seen["files"], expected, name)

    def test_local_runs_use_curve_by_default_and_no_curve_is_loopback_plaintext(self):
        result = run_launcher(self.cluster, self.train_dir, *FAST, "--", "--fake_steps=2")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        for name, record in records(self.train_dir).items():
            self.assertIn(f"--curve_keys={self.train_dir}/keys/{name[:-1]}-{name[-1]}",
                          record["argv"])
        result = run_launcher(self.cluster, self.train_dir, *FAST, "--no_curve", "--",
                              "--fake_steps=2")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        for record in records(self.train_dir).values():
            self.assertFalse([a for a in record["argv"] if a.startswith("--curve_keys")])
            self.assertNotIn("--insecure", record["argv"])  # local: loopback plaintext

    def test_each_launch_makes_fresh_keys(self):
        secret = os.path.join(self.train_dir, "keys", "ps-0", "ps-0.key")
        run_launcher(self.cluster, self.train_dir, *FAST, "--curve", "--", "--fake_steps=1")
        first = read_public_key(secret)
        result = run_launcher(self.cluster, self.train_dir, *FAST, "--curve", "--",
                              "--fake_steps=1")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertNotEqual(read_public_key(secret), first)

    def test_curve_keys_cannot_be_set_by_hand(self):
        result = run_launcher(self.cluster, self.train_dir, "--", "--curve_keys=/tmp/mine")
        self.assertEqual(result.returncode, 2)
        self.assertIn("--curve_keys is set by the launcher (use pstrain-launch --curve or "
                      "--no_curve", result.stderr)

    def test_missing_keygen_stops_before_any_role_starts(self):
        result = run_launcher(self.cluster, self.train_dir, "--curve", "--keygen",
                              os.path.join(self.tmp, "no-keygen"))
        self.assertEqual(result.returncode, 2)
        self.assertIn(f"CURVE keys need {self.tmp}/no-keygen, which is not an executable file",
                      result.stderr)
        self.assertEqual(records(self.train_dir), {})

    def test_dry_run_shows_the_key_flags_in_ssh_mode_and_writes_nothing(self):
        cluster = write(os.path.join(self.tmp, "ssh.yaml"), cluster_yaml(
            mode="ssh", ssh={"remote_dir": "/opt/pstrain"}))
        result = run_launcher(cluster, "runs/x", "--dry_run")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("--curve_keys=runs/x/keys/worker-1", result.stdout)
        self.assertIn("would write fresh keys to runs/x/keys/<job>-<index>", result.stdout)
        result = run_launcher(cluster, "runs/x", "--dry_run", "--no_curve")
        self.assertNotIn("--curve_keys", result.stdout)
        self.assertIn("--insecure", result.stdout)  # plaintext across hosts, as asked
        self.assertIn("WARNING: --no_curve: traffic between the roles on 1 host(s) is neither "
                      "authenticated nor encrypted", result.stderr)


class CopyCommandTest(unittest.TestCase):
    """The remote side of handing a role its keys in ssh mode, run through a local sh."""

    @unittest.skipIf(not KEYGEN, "PSTRAIN_KEYGEN is not set")
    def test_copy_command_replaces_the_roles_directory_with_private_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            cluster = parse_cluster(cluster_yaml(mode="ssh", ssh={"remote_dir": tmp}), "c.yaml")
            generated = os.path.join(tmp, "generated")
            keys.generate(KEYGEN, generated, cluster)
            role = build_roles(cluster, LaunchOptions("c", "run", "run/logs", []))[1]
            stale = os.path.join(tmp, "run", "keys", "worker-0")
            os.makedirs(stale)
            write(os.path.join(stale, "ps-9.key_secret"), "left over\n")
            archive = keys._archive(os.path.join(generated, "worker-0"))
            subprocess.run(["sh", "-c", keys.copy_command("run", role, cluster)], input=archive,
                           check=True)
            self.assertEqual(os.stat(os.path.join(tmp, "run", "keys")).st_mode & 0o777, 0o700)
            self.assertEqual(os.stat(stale).st_mode & 0o777, 0o700)
            files = {n: os.stat(os.path.join(stale, n)).st_mode & 0o777 for n in os.listdir(stale)}
            self.assertEqual(files, {"ps-0.key": 0o644, "worker-0.key": 0o644,
                                     "worker-1.key": 0o644, "evaluator-0.key": 0o644,
                                     "worker-0.key_secret": 0o600})


@unittest.skipIf(not PSTRAIN or not KEYGEN, "PSTRAIN_BINARY or PSTRAIN_KEYGEN is not set")
@unittest.skipIf(not os.path.exists(FASHION_MNIST), "Fashion-MNIST is not installed")
class RealClusterCurveTest(unittest.TestCase):
    def test_tiny_cluster_trains_over_curve_and_its_servers_refuse_nobody(self):
        with tempfile.TemporaryDirectory() as tmp:
            train_dir = os.path.join(tmp, "run")
            cluster = write(os.path.join(tmp, "cluster.yaml"), cluster_yaml(
                binary=PSTRAIN, ps=(free_port(),), workers=(("", free_port()),)))
            config = os.path.join(REPO, "tests", "worker", "testdata", "tiny.yaml")
            result = subprocess.run(
                launcher_argv(cluster, train_dir, "--curve", "--progress_interval", "0",
                              "--shutdown_timeout", "30", "--", "--max_steps=20",
                              "--log_every_n_steps=10", "--eval_interval_secs=1", config=config),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=100)
            logs = {}
            for name in ("ps-0", "worker-0", "evaluator-0"):
                with open(os.path.join(train_dir, "launcher", f"{name}.log")) as f:
                    logs[name] = f.read()
            everything = result.stdout + result.stderr + "".join(logs.values())
            self.assertEqual(result.returncode, 0, everything)
            self.assertIn("CURVE authentication on", logs["ps-0"])
            # Every role is on this host: each reached the server over its same-host socket,
            # proving its key there (common/wire/same_host.h), never over CURVE.
            sock = os.path.join(train_dir, "keys", "ps-0", "ps.sock")
            self.assertIn(f"same-host roles on ipc://{sock}", logs["ps-0"])
            for role in ("worker-0", "evaluator-0"):
                self.assertRegex(logs["ps-0"], f"accepted {role} from .* on ipc://{sock} "
                                 r"\(key proved, same host\)")
            self.assertNotIn("(CURVE)", logs["ps-0"])
            self.assertNotIn("handshake failed", logs["ps-0"])
            self.assertNotIn("authentication refused", logs["ps-0"])
            self.assertIn("done: global step 20", logs["worker-0"])


if __name__ == "__main__":
    unittest.main()
