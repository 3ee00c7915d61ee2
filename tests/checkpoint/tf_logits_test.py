"""TensorFlow computes what pstrain computes from a converted checkpoint: the real pstrain-train
trains RefNet a step and saves; `pstrain-export` writes that model as ONNX and onnxruntime gives
its logits for random images; `pstrain-checkpoint to_tf --config` converts the checkpoint, and
TensorFlow's own RefNet graph (tf_refnet.py, NHWC as TensorFlow lays images out), restored by a
TF-1 Saver, gives the same logits. Converted without --config, fc1 (which reads the flattened
[64, 7, 7] feature map that TensorFlow flattens as [7, 7, 64]) keeps pstrain's row order and
TensorFlow's logits are far off: the case proves the comparison can fail.

Needs the test venv (scripts/test-venv.sh: tensorflow, onnxruntime) and Fashion-MNIST.
  tf_logits_test.py   (PSTRAIN_TRAIN, PSTRAIN_CHECKPOINT, PSTRAIN_EXPORT, PSTRAIN_TEST_PYTHON)
"""
import json
import os
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TRAIN = os.environ.get("PSTRAIN_TRAIN", "")
CHECKPOINT = os.environ.get("PSTRAIN_CHECKPOINT", "")
EXPORT = os.environ.get("PSTRAIN_EXPORT", "")
PYTHON = os.environ.get("PSTRAIN_TEST_PYTHON", "")
FASHION_MNIST = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"

# Run by the venv's Python: the largest difference between onnxruntime's logits of the ONNX
# model and TensorFlow's of the bundle, relative to the largest logit.
COMPARE = """
import json, sys
import numpy as np
import onnxruntime as ort
import tensorflow as tf
sys.path.insert(0, sys.argv[3])
import tf_refnet
x = np.random.default_rng(7).random((8, 1, 28, 28), dtype=np.float32)
session = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
ours = session.run(["logits"], {session.get_inputs()[0].name: x})[0]
v1 = tf.compat.v1
graph = tf.Graph()
with graph.as_default():
    images = v1.placeholder(tf.float32, [None, 28, 28, 1])
    logits = tf_refnet.forward(images)
    with v1.Session(graph=graph) as s:
        v1.train.Saver().restore(s, sys.argv[2])
        theirs = s.run(logits, {images: np.transpose(x, (0, 2, 3, 1))})
print(json.dumps({"relative": float(np.max(np.abs(ours - theirs)) / np.max(np.abs(ours)))}))
"""


@unittest.skipUnless(PYTHON and os.path.exists(FASHION_MNIST),
                     "needs the test venv (PSTRAIN_TEST_PYTHON) and Fashion-MNIST")
class TfLogitsTest(unittest.TestCase):
    def test_tensorflow_computes_pstrains_logits_from_the_converted_checkpoint(self):
        env = dict(os.environ, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
        with tempfile.TemporaryDirectory() as tmp:
            config = f"--config={REPO}/configs/refnet.yaml"
            run = subprocess.run(
                [TRAIN, config, f"--train_dir={tmp}/run", "--max_steps=1",
                 "--save_checkpoints_steps=1", "--histogram_every_n_steps=0"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=300)
            self.assertEqual(run.returncode, 0, run.stdout)
            onnx = f"{tmp}/refnet.onnx"
            exported = subprocess.run(
                [EXPORT, "--format=onnx", config, f"--checkpoint={tmp}/run", f"--output={onnx}"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
            self.assertEqual(exported.returncode, 0, exported.stdout)

            relative = {}
            for name, flags in (("with --config", [config]), ("without", [])):
                out = f"{tmp}/tf-{len(flags)}"
                converted = subprocess.run([CHECKPOINT, "to_tf", f"{tmp}/run", out] + flags,
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                           text=True)
                self.assertEqual(converted.returncode, 0, converted.stdout)
                if not flags:
                    self.assertIn("no --config", converted.stdout)
                compared = subprocess.run(
                    [PYTHON, "-c", COMPARE, onnx, f"{out}/model.ckpt-1", HERE],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                self.assertEqual(compared.returncode, 0, compared.stderr)
                relative[name] = json.loads(compared.stdout.strip().splitlines()[-1])["relative"]
            print("TensorFlow's logits against onnxruntime's, relative:", relative)
            self.assertLess(relative["with --config"], 1e-4, relative)
            self.assertGreater(relative["without"], 1e-2, relative)


if __name__ == "__main__":
    unittest.main(verbosity=2)
