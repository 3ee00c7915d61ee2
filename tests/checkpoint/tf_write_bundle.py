"""TensorFlow 1 trains RefNet two steps and saves it (tf.compat.v1.train.Saver: OUT_DIR/
model.ckpt-STEP and OUT_DIR/checkpoint); the values, in pstrain's names and layouts, go to
OUT_DIR/expected.safetensors for the pstrain side to compare.
  tf_write_bundle.py OUT_DIR STEP"""
import os, sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
from safetensors.numpy import save_file
import tensorflow as tf
import tf_refnet

out_dir, step = sys.argv[1], int(sys.argv[2])
tf.compat.v1.disable_eager_execution()
with tf.Graph().as_default():
    x, y, train_op, gs = tf_refnet.build()
    rng = np.random.default_rng(3)
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        for _ in range(2):  # so that Adam's slots hold something
            sess.run(train_op, {x: rng.standard_normal((8, 28, 28, 1), np.float32),
                                y: rng.integers(0, 10, 8)})
        sess.run(gs.assign(step))
        tf.compat.v1.train.Saver().save(sess, os.path.join(out_dir, "model.ckpt"), global_step=step)
        expected = {}
        for v in tf.compat.v1.global_variables():
            if v.op.name not in ("global_step", "beta1_power", "beta2_power"):
                name, value = tf_refnet.to_pstrain(v.op.name, sess.run(v))
                expected[name] = value
save_file(expected, os.path.join(out_dir, "expected.safetensors"))
