"""The example TFJob (configs/kubernetes/tfjob.yaml) as Kubeflow's training operator reads it:
every replica runs the pstrain binary in a container named "tensorflow" (the operator's rule),
servers see no GPU, the chief and workers ask for one each, every role mounts the CURVE key
Secret read-only and counts the same evaluators. No Kubernetes runs here; the roles' side of
TF_CONFIG is tested with real processes in tests/distributed/tf_config_process_test.cc."""

import os
import unittest

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
MANIFEST = os.path.join(REPO, "configs", "kubernetes", "tfjob.yaml")


class TfJobManifestTest(unittest.TestCase):
    def setUp(self):
        with open(MANIFEST) as f:
            self.job = yaml.safe_load(f)
        self.replicas = self.job["spec"]["tfReplicaSpecs"]

    def container(self, kind):
        return self.replicas[kind]["template"]["spec"]["containers"][0]

    def test_every_replica_runs_pstrain_as_the_operator_expects(self):
        self.assertEqual(self.job["kind"], "TFJob")
        self.assertEqual(sorted(self.replicas), ["Chief", "Evaluator", "PS", "Worker"])
        self.assertEqual(self.replicas["Chief"]["replicas"], 1)  # TF's chief is worker 0
        evaluators = self.replicas["Evaluator"]["replicas"]
        for kind in self.replicas:
            c = self.container(kind)
            self.assertEqual(c["name"], "tensorflow", kind)
            self.assertTrue(c["command"][0].endswith("/pstrain"), kind)
            args = c["args"]
            self.assertIn("--curve_keys=/keys", args, kind)
            self.assertIn(f"--evaluators={evaluators}", args, kind)
            # The role and cluster come from TF_CONFIG, never from flags that would win over it.
            for flag in ("--job_name", "--task_index", "--ps_hosts", "--worker_hosts"):
                self.assertFalse([a for a in args if a.startswith(flag)], (kind, flag))
            keys = [m for m in c["volumeMounts"] if m["mountPath"] == "/keys"]
            self.assertEqual(len(keys), 1, kind)
            self.assertTrue(keys[0]["readOnly"], kind)
            volumes = self.replicas[kind]["template"]["spec"]["volumes"]
            secret = [v for v in volumes if v["name"] == keys[0]["name"]][0]["secret"]
            self.assertEqual(secret["defaultMode"], 0o400, kind)  # pstrain refuses readable secrets

    def test_servers_and_the_evaluator_see_no_gpu_and_workers_one_each(self):
        for kind in ("PS", "Evaluator"):
            env = {e["name"]: e["value"] for e in self.container(kind).get("env", [])}
            self.assertEqual(env.get("CUDA_VISIBLE_DEVICES"), "", kind)
            self.assertNotIn("limits", self.container(kind).get("resources", {}), kind)
        for kind in ("Chief", "Worker"):
            self.assertEqual(self.container(kind)["resources"]["limits"]["nvidia.com/gpu"], 1)


if __name__ == "__main__":
    unittest.main()
