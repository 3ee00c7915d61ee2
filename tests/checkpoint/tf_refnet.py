"""RefNet's variables as TensorFlow 1 creates them (the TensorFlow side of bench/run.sh tf1: get_variable names,
HWIO conv kernels, [in, out] dense kernels, AdamOptimizer's slots and beta powers, global_step),
for the tests where TensorFlow reads pstrain's checkpoints and writes its own."""
import numpy as np
import tensorflow as tf

v1 = tf.compat.v1


def build():
    """RefNet's graph in the default graph: (x, y, train_op, global_step)."""
    x = v1.placeholder(tf.float32, [None, 28, 28, 1])
    y = v1.placeholder(tf.int64, [None])
    logits = forward(x)
    loss = v1.losses.sparse_softmax_cross_entropy(y, logits)
    gs = v1.train.get_or_create_global_step()
    train_op = v1.train.AdamOptimizer(1e-3).minimize(loss, global_step=gs)
    return x, y, train_op, gs


def forward(x):
    """RefNet's logits for NHWC images x (dropout left out: as evaluated)."""
    init = v1.glorot_uniform_initializer()

    def conv(h, name, cin, cout):
        w = v1.get_variable(name + "/weights", [5, 5, cin, cout], initializer=init)
        b = v1.get_variable(name + "/bias", [cout], initializer=v1.zeros_initializer())
        h = tf.nn.relu(tf.nn.conv2d(h, w, 1, "SAME") + b)
        return tf.nn.max_pool2d(h, 2, 2, "VALID")

    def dense(h, name, cin, cout):
        w = v1.get_variable(name + "/weights", [cin, cout], initializer=init)
        b = v1.get_variable(name + "/bias", [cout], initializer=v1.zeros_initializer())
        return tf.matmul(h, w) + b

    h = conv(x, "conv1", 1, 32)
    h = conv(h, "conv2", 32, 64)
    h = tf.reshape(h, [-1, 7 * 7 * 64])
    h = tf.nn.relu(dense(h, "fc1", 3136, 1024))
    return dense(h, "fc2", 1024, 10)


def to_pstrain(name, value):
    """TF's name and layout -> pstrain's, written out independently of the C++ mapping."""
    if value.ndim == 4:  # HWIO -> [out, in, kh, kw]
        value = np.transpose(value, (3, 2, 0, 1))
    elif value.ndim == 2:  # [in, out] -> [out, in]
        value = value.T
    base, _, last = name.rpartition("/")
    slot = {"Adam": "m", "Adam_1": "v"}.get(last)
    return (base + "/" + slot if slot else name), np.ascontiguousarray(value)
