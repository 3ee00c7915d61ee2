"""Each role's command line and environment, the ssh wrapping, the remote watcher and --dry_run."""

import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from launcher_testlib import (FAKE, REPO, alive, cluster_yaml, records, run_launcher, wait_for,
                              write)

from pstrain_launch.cluster import parse_cluster
from pstrain_launch.roles import (REMOTE_SUPERVISOR, LaunchOptions, build_roles, remote_command,
                                  ssh_argv)

TWO_PS = """\
ps:
  - {host: 10.0.0.1, port: 2222}
  - {host: 10.0.0.2, port: 2223}
worker:
  - {host: 10.0.0.3, port: 2232, gpus: "0,1"}
  - {host: 10.0.0.4, port: 2233}
evaluator:
  - {host: 10.0.0.5}
flags: {update_mode: async, log_device_placement: true}
"""
SSH = """\
mode: ssh
binary: pstrain
ssh: {user: alice, port: 2022, identity_file: /keys/id, remote_dir: /opt/my pstrain,
      options: [ConnectTimeout=5]}
"""
OPTS = LaunchOptions(config="configs/refnet.yaml", train_dir="runs/dist",
                     logdir="runs/dist/logs", extra_flags=["--max_to_keep=3"])


def common_flags(job, index):
    return [f"--job_name={job}", f"--task_index={index}",
            "--ps_hosts=10.0.0.1:2222,10.0.0.2:2223",
            "--worker_hosts=10.0.0.3:2232,10.0.0.4:2233", "--evaluators=1",
            "--config=configs/refnet.yaml",
            "--train_dir=runs/dist", "--logdir=runs/dist/logs", "--update_mode=async",
            "--log_device_placement=true", "--max_to_keep=3"]


class RoleCommandTest(unittest.TestCase):
    def test_roles_start_ps_then_workers_then_evaluator_with_tf_flags(self):
        roles = build_roles(parse_cluster(TWO_PS, "c.yaml"), OPTS)
        self.assertEqual([r.name for r in roles],
                         ["ps0", "ps1", "worker0", "worker1", "evaluator0"])
        for role in roles:
            self.assertEqual(role.flags, common_flags(role.job, role.index))
        self.assertEqual(roles[3].log_path, os.path.join("runs/dist/launcher", "worker-1.log"))

    def test_workers_sharing_a_host_with_a_gpu_each_sync_over_nccl_unless_flags_say(self):
        gpu_host = """\
ps:
  - {host: 10.0.0.1, port: 2222}
worker:
  - {host: 10.0.0.2, port: 2232, gpus: "0"}
  - {host: 10.0.0.2, port: 2233, gpus: "1"}
  - {host: 10.0.0.3, port: 2232, gpus: "0"}
"""
        roles = build_roles(parse_cluster(gpu_host, "c.yaml"), OPTS)
        for role in roles:  # servers too: they count one pusher per host
            self.assertIn("--intra_node_sync=nccl", role.flags, role.name)
        cpu_host = gpu_host.replace('gpus: "1"', 'gpus: ""')
        for role in build_roles(parse_cluster(cpu_host, "c.yaml"), OPTS):
            self.assertFalse(any("intra_node_sync" in f for f in role.flags), role.name)
        same_gpu = gpu_host.replace('gpus: "1"', 'gpus: "0"')
        for role in build_roles(parse_cluster(same_gpu, "c.yaml"), OPTS):
            self.assertFalse(any("intra_node_sync" in f for f in role.flags), role.name)
        chosen = gpu_host + "flags: {intra_node_sync: cpu}\n"
        for role in build_roles(parse_cluster(chosen, "c.yaml"), OPTS):
            self.assertEqual([f for f in role.flags if "intra_node_sync" in f],
                             ["--intra_node_sync=cpu"], role.name)
        # Workers alone on their hosts (TWO_PS) get nothing to sync.
        for role in build_roles(parse_cluster(TWO_PS, "c.yaml"), OPTS):
            self.assertFalse(any("intra_node_sync" in f for f in role.flags), role.name)

    def test_cuda_visible_devices_is_empty_for_ps_and_evaluator_and_the_gpus_for_workers(self):
        roles = build_roles(parse_cluster(TWO_PS, "c.yaml"), OPTS)
        self.assertEqual([{k: r.env[k] for k in ("CUDA_VISIBLE_DEVICES", "PSTRAIN_ROLE")}
                          for r in roles], [
            {"CUDA_VISIBLE_DEVICES": "", "PSTRAIN_ROLE": "ps:0"},
            {"CUDA_VISIBLE_DEVICES": "", "PSTRAIN_ROLE": "ps:1"},
            {"CUDA_VISIBLE_DEVICES": "0,1", "PSTRAIN_ROLE": "worker:0"},
            {"CUDA_VISIBLE_DEVICES": "", "PSTRAIN_ROLE": "worker:1"},
            {"CUDA_VISIBLE_DEVICES": "", "PSTRAIN_ROLE": "evaluator:0"}])

    def test_local_roles_split_the_cores_and_idle_openmp_threads_sleep(self):
        one_host = ("ps:\n  - {host: 127.0.0.1, port: 2222}\nworker:\n"
                    "  - {host: 127.0.0.1, port: 2232}\n  - {host: 127.0.0.1, port: 2233}\n"
                    "evaluator:\n  - {host: 127.0.0.1}\n")
        roles = build_roles(parse_cluster(one_host, "c.yaml"), OPTS)
        for r in roles:
            self.assertEqual(r.env["OMP_WAIT_POLICY"], "PASSIVE")
            self.assertIn("glibc.malloc.hugetlb=1", r.env["GLIBC_TUNABLES"])
        threads = {r.name: int(r.env["OMP_NUM_THREADS"]) for r in roles}
        cores = os.cpu_count() or 1
        self.assertEqual(threads, {"ps0": 1, "worker0": max(1, cores // 2),
                                   "worker1": max(1, cores // 2), "evaluator0": 1})

    def test_ssh_command_runs_the_role_in_remote_dir_without_a_tty(self):
        cluster = parse_cluster(TWO_PS + SSH, "c.yaml")
        role = build_roles(cluster, OPTS)[2]
        argv = ssh_argv(role, cluster, 10)
        self.assertEqual(argv[:-1], ["ssh", "-o", "ConnectTimeout=5", "-o", "BatchMode=yes",
                                     "-o", "StrictHostKeyChecking=accept-new", "-p", "2022",
                                     "-i", "/keys/id", "alice@10.0.0.3"])
        self.assertNotIn("-t", argv)
        self.assertNotIn("-tt", argv)
        self.assertEqual(shlex.split(argv[-1]), [
            "cd", "/opt/my pstrain", "&&", "exec", "sh", "-c", REMOTE_SUPERVISOR,
            "pstrain-launch", "10", "env", "CUDA_VISIBLE_DEVICES=0,1",
            "PSTRAIN_ROLE=worker:0", "OMP_WAIT_POLICY=PASSIVE",
            "GLIBC_TUNABLES=glibc.malloc.hugetlb=1", "./pstrain"] + common_flags("worker", 0))

    def test_dry_run_prints_every_role_with_env_and_starts_nothing(self):
        with tempfile.TemporaryDirectory() as tmp:
            cluster = write(os.path.join(tmp, "c.yaml"),
                            cluster_yaml(flags={"update_mode": "async"}))
            train_dir = os.path.join(tmp, "run")
            result = run_launcher(cluster, train_dir, "--dry_run", "--", "--extra=1")
            self.assertEqual(result.returncode, 0, result.stderr)
            commands = [shlex.split(line) for line in result.stdout.splitlines()
                        if not line.startswith("#")]
            self.assertEqual(len(commands), 4)
            self.assertEqual([c[1:3] for c in commands], [
                ["CUDA_VISIBLE_DEVICES=", "PSTRAIN_ROLE=ps:0"],
                ["CUDA_VISIBLE_DEVICES=", "PSTRAIN_ROLE=worker:0"],
                ["CUDA_VISIBLE_DEVICES=0,1", "PSTRAIN_ROLE=worker:1"],
                ["CUDA_VISIBLE_DEVICES=", "PSTRAIN_ROLE=evaluator:0"]])
            self.assertEqual(commands[2][0], "env")
            # env NAME=VALUE... BINARY FLAGS...
            binary_at = next(i for i, w in enumerate(commands[2]) if i > 0 and "=" not in w)
            self.assertIn("OMP_NUM_THREADS=" + str(max(1, (os.cpu_count() or 1) // 2)),
                          commands[2][:binary_at])
            self.assertEqual(os.path.realpath(commands[2][binary_at]), FAKE)
            self.assertEqual(commands[2][binary_at + 1:], [
                "--job_name=worker", "--task_index=1", "--ps_hosts=127.0.0.1:2222",
                "--worker_hosts=127.0.0.1:2232,127.0.0.1:2233", "--evaluators=1",
                f"--config={os.path.join(REPO, 'configs', 'refnet.yaml')}",
                f"--train_dir={train_dir}", f"--logdir={os.path.join(train_dir, 'logs')}",
                f"--curve_keys={os.path.join(train_dir, 'keys', 'worker-1')}",  # CURVE by default
                "--update_mode=async", "--extra=1"])
            self.assertIn(f"# worker1 > {train_dir}/launcher/worker-1.log", result.stdout)
            self.assertFalse(os.path.exists(train_dir))


class RemoteWatcherTest(unittest.TestCase):
    """The remote side of ssh mode, run through a local sh in its own session as sshd would."""

    def start(self, tmp, *extra):
        cluster = parse_cluster(cluster_yaml(binary=FAKE, mode="ssh", ssh={"remote_dir": tmp}),
                                "c.yaml")
        opts = LaunchOptions(config="c", train_dir=tmp, logdir=tmp, extra_flags=list(extra))
        role = build_roles(cluster, opts)[0]  # ps0: runs until the chief is done or stopped
        return subprocess.Popen(["sh", "-c", remote_command(role, cluster, 1)],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)

    def test_closing_stdin_stops_the_role_and_reports_its_exit_code(self):
        with tempfile.TemporaryDirectory() as tmp:
            shell = self.start(tmp, "--fake_grandchild=ps:0")
            wait_for(lambda: "ps0" in records(tmp), what="the fake ps to start")
            record = records(tmp)["ps0"]
            self.assertEqual(record["env"]["PSTRAIN_ROLE"], "ps:0")
            self.assertEqual(record["cwd"], os.path.realpath(tmp))
            shell.stdin.close()
            self.assertEqual(shell.wait(timeout=10), 143)
            self.assertTrue(os.path.exists(os.path.join(tmp, "fake", "ps-0.term")))
            for pid in [record["pid"]] + record["children"]:
                wait_for(lambda: not alive(pid), timeout=5, what=f"pid {pid} to go")

    def test_role_ignoring_sigterm_is_killed_after_the_grace_period(self):
        with tempfile.TemporaryDirectory() as tmp:
            shell = self.start(tmp, "--fake_ignore_term=ps:0")
            wait_for(lambda: "ps0" in records(tmp), what="the fake ps to start")
            started = time.monotonic()
            shell.stdin.close()
            code = shell.wait(timeout=10)
            self.assertIn(code, (-signal.SIGKILL, 128 + signal.SIGKILL))
            self.assertGreaterEqual(time.monotonic() - started, 0.9)

    def test_exit_code_of_a_finished_role_passes_through(self):
        with tempfile.TemporaryDirectory() as tmp:
            shell = self.start(tmp, "--fake_fail=ps:0:7")
            self.assertEqual(shell.wait(timeout=10), 7)
            shell.stdin.close()


if __name__ == "__main__":
    unittest.main()
