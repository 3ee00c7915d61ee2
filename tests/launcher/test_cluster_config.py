"""Cluster config validation: each mistake names the file, the field and what was expected."""

import os
import tempfile
import textwrap
import unittest

from launcher_testlib import REPO, cluster_yaml, run_launcher, write

from pstrain_launch.cluster import ConfigError, load_cluster, parse_cluster

GOOD = """\
ps:
  - {host: 127.0.0.1, port: 2222}
worker:
  - {host: 127.0.0.1, port: 2232, gpus: ""}
"""


def problems(text):
    try:
        parse_cluster(textwrap.dedent(text), "bad.yaml")
    except ConfigError as e:
        return str(e)
    raise AssertionError("expected a ConfigError")


class ClusterConfigTest(unittest.TestCase):
    def test_shipped_cluster_configs_are_valid(self):
        local = load_cluster(os.path.join(REPO, "configs", "clusters", "local.yaml"))
        self.assertEqual(local.mode, "local")
        self.assertEqual(local.binary, "build/pstrain")
        self.assertEqual(len(local.ps), 1)
        self.assertEqual([w.port for w in local.worker], [2232, 2233])
        self.assertEqual(len(local.evaluator), 1)
        remote = load_cluster(os.path.join(REPO, "configs", "clusters", "ssh-example.yaml"))
        self.assertEqual(remote.mode, "ssh")
        self.assertEqual(remote.ssh.remote_dir, "/opt/pstrain")
        self.assertEqual(remote.worker[1].gpus, "1")

    def test_defaults_fill_mode_binary_and_empty_gpus(self):
        cluster = parse_cluster("ps: [{host: a, port: 1}]\nworker: [{host: b, port: 2}]\n", "x")
        self.assertEqual((cluster.mode, cluster.binary), ("local", "build/pstrain"))
        self.assertEqual(cluster.worker[0].gpus, "")
        self.assertEqual(cluster.evaluator, [])
        self.assertEqual(cluster.flags, {})

    def test_unknown_top_level_key_is_named_with_a_suggestion(self):
        message = problems(GOOD + "workers: []\n")
        self.assertIn("bad.yaml: workers: unknown key", message)
        self.assertIn('did you mean "worker"', message)

    def test_unknown_worker_key_is_named(self):
        message = problems(GOOD + "  - {host: 127.0.0.1, port: 2233, gpu: \"0\"}\n")
        self.assertIn("bad.yaml: worker[1].gpu: unknown key (expected one of: host, port, gpus)",
                      message)

    def test_unquoted_gpu_list_in_flow_mapping_gets_a_quoting_hint(self):
        message = problems(GOOD + "  - {host: 127.0.0.1, port: 2233, gpus: 0,1}\n")
        self.assertIn("worker[1].1: unknown key", message)
        self.assertIn('must be quoted: gpus: "0,1"', message)

    def test_missing_ps_and_worker_are_named(self):
        message = problems("mode: local\n")
        self.assertIn("bad.yaml: ps: expected a non-empty list", message)
        self.assertIn("bad.yaml: worker: expected a non-empty list", message)
        self.assertIn("bad.yaml: ps: expected a non-empty list",
                      problems("ps: []\nworker: [{host: h, port: 2}]\n"))

    def test_duplicate_host_port_is_named(self):
        message = problems(GOOD + "  - {host: 127.0.0.1, port: 2222}\n")
        self.assertIn("bad.yaml: worker[1]: 127.0.0.1:2222 is already used by ps[0]", message)

    def test_bad_ports_are_named(self):
        for port in ("0", "65536", '"2222"', "true", "-1"):
            with self.subTest(port=port):
                message = problems(f"ps: [{{host: h, port: {port}}}]\n"
                                   "worker: [{host: h, port: 2}]\n")
                self.assertIn("bad.yaml: ps[0].port: expected a port number from 1 to 65535",
                              message)
        self.assertIn("worker[0].port: expected a port number",
                      problems("ps: [{host: h, port: 1}]\nworker: [{host: h}]\n"))

    def test_bad_gpus_are_named(self):
        for gpus in ('"a,b"', '"0,"', '"0, 1"', '"-1"', "[0, 1]"):
            with self.subTest(gpus=gpus):
                message = problems(f"ps: [{{host: h, port: 1}}]\n"
                                   f"worker: [{{host: h, port: 2, gpus: {gpus}}}]\n")
                self.assertIn("bad.yaml: worker[0].gpus: expected a comma-separated list of GPU "
                              "indices", message)

    def test_gpus_as_a_plain_integer_is_accepted(self):
        cluster = parse_cluster("ps: [{host: h, port: 1}]\nworker: [{host: h, port: 2, gpus: 3}]\n",
                                "x")
        self.assertEqual(cluster.worker[0].gpus, "3")

    def test_bad_mode_host_and_ssh_fields_are_named(self):
        message = problems(GOOD + "mode: slurm\nevaluator: [{host: '-oProxyCommand=x'}]\n"
                           "ssh: {port: 0, options: ['-o Foo=1'], remote_dir: ''}\n")
        self.assertIn('bad.yaml: mode: expected "local" or "ssh", got "slurm"', message)
        self.assertIn("bad.yaml: evaluator[0].host: expected a host name", message)
        self.assertIn("bad.yaml: ssh.port: expected a port number", message)
        self.assertIn("bad.yaml: ssh.options[0]: expected an ssh -o option", message)
        self.assertIn("bad.yaml: ssh.remote_dir: expected a non-empty string", message)

    def test_ssh_mode_requires_remote_dir(self):
        message = problems(GOOD + "mode: ssh\nssh: {user: root}\n")
        self.assertIn("bad.yaml: ssh.remote_dir: expected a non-empty string, got nothing", message)

    def test_flags_the_launcher_sets_are_rejected(self):
        message = problems(GOOD + "flags: {train_dir: /x, update_mode: async, bad-name: 1, "
                           "list: [1]}\n")
        self.assertIn("bad.yaml: flags.train_dir: is set by the launcher for every role; expected "
                      "another flag (use pstrain-launch --train_dir)", message)
        self.assertIn("bad.yaml: flags.bad-name: expected a flag name", message)
        self.assertIn("bad.yaml: flags.list: expected a string, number or boolean", message)
        self.assertNotIn("flags.update_mode", message)

    def test_invalid_yaml_and_missing_file_are_named(self):
        self.assertIn("bad.yaml: not valid YAML", problems("ps: [\n"))
        with self.assertRaises(ConfigError) as e:
            load_cluster("/nonexistent/cluster.yaml")
        self.assertIn("/nonexistent/cluster.yaml: cannot read the cluster file", str(e.exception))

    def test_invalid_config_exits_2_before_starting_anything(self):
        with tempfile.TemporaryDirectory() as tmp:
            text = cluster_yaml(workers=(("x", 2232), ("", 2232)))
            cluster = write(os.path.join(tmp, "cluster.yaml"), text)
            train_dir = os.path.join(tmp, "run")
            result = run_launcher(cluster, train_dir)
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertIn(f"{cluster}: worker[0].gpus: expected a comma-separated list",
                          result.stderr)
            self.assertIn(f"{cluster}: worker[1]: 127.0.0.1:2232 is already used by worker[0]",
                          result.stderr)
            self.assertFalse(os.path.exists(train_dir), "nothing may start on a bad config")

    def test_missing_binary_and_bad_extra_flags_exit_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            cluster = write(os.path.join(tmp, "c.yaml"), cluster_yaml(binary="build/nonexistent"))
            result = run_launcher(cluster, os.path.join(tmp, "run"))
            self.assertEqual(result.returncode, 2)
            self.assertIn("binary: ", result.stderr)
            self.assertIn("is not an executable file", result.stderr)
            cluster = write(os.path.join(tmp, "c.yaml"), cluster_yaml())
            result = run_launcher(cluster, os.path.join(tmp, "run"), "--", "--task_index=3")
            self.assertEqual(result.returncode, 2)
            self.assertIn("--task_index is set by the launcher", result.stderr)
            self.assertFalse(os.path.exists(os.path.join(tmp, "run")))


if __name__ == "__main__":
    unittest.main()
