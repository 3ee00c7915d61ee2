"""pstrain-train resumes from a checkpoint TensorFlow's Saver wrote: the real binary, given
--checkpoint_path=<TF prefix> (tf_write_bundle.py: RefNet after two Adam steps, global step 123),
says it restored TensorFlow's tensors at that step, trains on from step 124, and the checkpoint
it writes after that one step holds TensorFlow's values moved by at most one Adam update (a
fresh initialisation would be off by far more). `pstrain-checkpoint to_tf --config` writes that
checkpoint back with Adam's beta powers from the config's betas (beta1 0.85 here, not TF's 0.9).

Needs the test venv (scripts/test-venv.sh: tensorflow) and Fashion-MNIST; skipped without.
  tf_resume_test.py   (PSTRAIN_TRAIN, PSTRAIN_CHECKPOINT, PSTRAIN_TEST_PYTHON in the environment)
"""
import json
import os
import re
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TRAIN = os.environ.get("PSTRAIN_TRAIN", "")
CHECKPOINT = os.environ.get("PSTRAIN_CHECKPOINT", "")
PYTHON = os.environ.get("PSTRAIN_TEST_PYTHON", "")
FASHION_MNIST = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
STEP = 123
LEARNING_RATE = 0.001  # configs/refnet.yaml's initial rate
BETA1 = 0.85

# Run by the venv's Python: each variable's largest change between two bundles, and the second
# one's beta powers.
COMPARE = """
import json, sys
import numpy as np
import tensorflow as tf
before, after = tf.train.load_checkpoint(sys.argv[1]), tf.train.load_checkpoint(sys.argv[2])
changes = {}
for name, _ in tf.train.list_variables(sys.argv[1]):
    if name in ("global_step", "beta1_power", "beta2_power") or "/Adam" in name:
        continue
    a, b = before.get_tensor(name), after.get_tensor(name)
    changes[name] = float(np.max(np.abs(a - b))) if a.shape == b.shape else None
print(json.dumps({"changes": changes, "step": int(after.get_tensor("global_step")),
                  "beta1_power": float(after.get_tensor("beta1_power")),
                  "beta2_power": float(after.get_tensor("beta2_power"))}))
"""


def venv_has_tensorflow():
    return bool(PYTHON) and subprocess.run(
        [PYTHON, "-c", "import tensorflow, safetensors"], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL).returncode == 0


@unittest.skipIf(not TRAIN or not CHECKPOINT, "PSTRAIN_TRAIN and PSTRAIN_CHECKPOINT are not set")
@unittest.skipIf(not os.path.exists(FASHION_MNIST), "Fashion-MNIST is not installed")
@unittest.skipIf(not venv_has_tensorflow(), f"no TensorFlow in {PYTHON!r} (scripts/test-venv.sh)")
class TfResumeTest(unittest.TestCase):
    def test_pstrain_train_starts_from_tensorflows_values_and_step(self):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS="1")
        with tempfile.TemporaryDirectory() as tmp:
            wrote = subprocess.run([PYTHON, f"{HERE}/tf_write_bundle.py", f"{tmp}/tf", str(STEP)],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   env=env)
            self.assertEqual(wrote.returncode, 0, wrote.stdout)
            with open(f"{REPO}/configs/refnet.yaml") as f:
                config = f.read()
            self.assertIn("beta1: 0.9,", config)
            with open(f"{tmp}/refnet.yaml", "w") as f:
                f.write(config.replace("beta1: 0.9,", f"beta1: {BETA1},"))
            prefix = f"{tmp}/tf/model.ckpt-{STEP}"
            run = subprocess.run(
                [TRAIN, f"--config={tmp}/refnet.yaml", f"--train_dir={tmp}/run",
                 f"--checkpoint_path={prefix}", f"--max_steps={STEP + 2}",
                 "--save_checkpoints_steps=1", "--log_every_n_steps=1",
                 "--histogram_every_n_steps=0"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=300)
            self.assertEqual(run.returncode, 0, run.stdout)
            self.assertRegex(run.stdout, rf"restored 24 tensors at global step {STEP} from "
                                         rf"{re.escape(prefix)} \(a TensorFlow checkpoint\)")
            steps = re.findall(r"trainer: step (\d+)/", run.stdout)
            self.assertEqual(steps, [str(STEP + 1), str(STEP + 2)], run.stdout)

            after = f"{tmp}/run/model.ckpt-{STEP + 1}"
            back = subprocess.run([CHECKPOINT, "to_tf", after, f"{tmp}/back",
                                   f"--config={tmp}/refnet.yaml"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.assertEqual(back.returncode, 0, back.stdout)
            compared = subprocess.run(
                [PYTHON, "-c", COMPARE, prefix, f"{tmp}/back/model.ckpt-{STEP + 1}"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            self.assertEqual(compared.returncode, 0, compared.stderr)
            result = json.loads(compared.stdout.strip().splitlines()[-1])

        self.assertEqual(result["step"], STEP + 1)
        self.assertEqual(len(result["changes"]), 8, result)
        # One Adam update moves a value by lr * sqrt(1 - beta2^t) / (1 - beta1^t) * |m / sqrt(v)|:
        # well under 10 lr here. RefNet's Glorot-initialised kernels spread over +-0.1 and more,
        # so a run that started from its own initial values would be far outside.
        for name, change in result["changes"].items():
            self.assertIsNotNone(change, f"{name}: another shape after the step")
            self.assertLessEqual(change, 10 * LEARNING_RATE,
                                 f"{name}: moved by {change} in one step from TensorFlow's value")
        self.assertGreater(max(result["changes"].values()), 0, "the step changed nothing")
        print("largest change in one step:", max(result["changes"].values()))
        self.assertAlmostEqual(result["beta1_power"] / BETA1 ** (STEP + 2), 1, places=5)
        self.assertAlmostEqual(result["beta2_power"] / 0.999 ** (STEP + 2), 1, places=5)


if __name__ == "__main__":
    unittest.main(verbosity=2)
