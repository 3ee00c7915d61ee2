"""TensorFlow reads a bundle pstrain wrote: tf.train.list_variables, load_checkpoint().get_tensor
and a TF-1 Saver restoring RefNet's graph, each value compared with the pstrain checkpoint's
(safetensors, pstrain's names and layouts; or another bundle's prefix, taken into pstrain's
names and layouts by tf_refnet.to_pstrain).
  tf_read_bundle.py PREFIX EXPECTED STEP   -> JSON {"checked": n, "problems": [...]}"""
import json, os, sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
from safetensors.numpy import load_file
import tensorflow as tf
import tf_refnet

prefix, expected_path, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
if expected_path.endswith(".safetensors"):
    expected = load_file(expected_path)
else:
    ref = tf.train.load_checkpoint(expected_path)
    expected = dict(tf_refnet.to_pstrain(n, ref.get_tensor(n))
                    for n, _ in tf.train.list_variables(expected_path)
                    if n not in ("global_step", "beta1_power", "beta2_power"))
problems, checked = [], 0


def check(where, name, got):
    global checked
    ours, value = tf_refnet.to_pstrain(name, np.asarray(got))
    checked += 1
    if ours not in expected:
        problems.append(f"{where}: '{name}' is not in the pstrain checkpoint")
    elif value.dtype != np.float32 or not np.array_equal(value, expected[ours]):
        problems.append(f"{where}: '{name}' {value.dtype}{list(got.shape)} differs from "
                        f"pstrain's '{ours}' {list(expected[ours].shape)}")


shapes = dict(tf.train.list_variables(prefix))
reader = tf.train.load_checkpoint(prefix)
for name, shape in shapes.items():
    if name in ("global_step", "beta1_power", "beta2_power"):
        continue
    if reader.get_tensor(name).shape != tuple(shape):
        problems.append(f"list_variables: '{name}' {shape}")
    check("load_checkpoint", name, reader.get_tensor(name))
if reader.get_tensor("global_step") != step:
    problems.append(f"global_step {reader.get_tensor('global_step')}, expected {step}")
if len(shapes) != len(expected) + 3:
    problems.append(f"list_variables: {sorted(shapes)}, expected {sorted(expected)} + 3")

tf.compat.v1.disable_eager_execution()
with tf.Graph().as_default():
    tf_refnet.build()
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as sess:
        saver.restore(sess, prefix)
        for v in tf.compat.v1.global_variables():
            value = sess.run(v)
            name = v.op.name
            if name == "global_step":
                if value != step:
                    problems.append(f"Saver: global_step {value}")
            elif name.startswith("beta"):
                beta = 0.9 if name == "beta1_power" else 0.999
                if not np.isclose(value, beta ** (step + 1), rtol=1e-5):
                    problems.append(f"Saver: {name} {value}, expected {beta ** (step + 1)}")
            else:
                check("Saver.restore", name, value)
print(json.dumps({"checked": checked, "problems": problems}))
