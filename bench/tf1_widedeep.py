#!/usr/bin/env python3
"""Reference for `bench/run.sh ctr`: a click model in TensorFlow's own v1 parameter-server runtime
(tf.compat.v1 on PyPI's tensorflow-cpu: tf.distribute.Server, tf.train.ClusterSpec,
replica_device_setter, MonitoredTrainingSession; between-graph replication, asynchronous updates).

The model is built from a pstrain config given as JSON (--spec; bench/ctr_job.py writes it from
configs/widedeep.yaml), layer by layer as pstrain reads the same list:
  - embedding: a table of the feature's hash_buckets rows, a partitioned variable (one part per
    ps task), looked up with tf.nn.embedding_lookup_sparse and the layer's combiner (sum unless
    it says mean); its gradient is sparse (IndexedSlices over the batch's distinct ids) and the
    `tables:` optimizer applies it; rows start as the table's initializer says (zeros, normal
    with stddev `scale`, uniform in [-scale, scale]);
  - fully_connected (glorot_uniform or truncated he_normal weights, zero bias), concat, relu,
    add, softmax_cross_entropy (the batch's mean), updated by `train.optimizer`.
Ids are hashed into buckets in the input pipeline by the function pstrain's feature reader uses
(common/data/feature_example.cc HashId), written in TensorFlow's uint64 ops. Each worker reads
every workers-th record of the training file (Dataset.shard), reshuffled each epoch, the
epoch's last partial batch dropped; training stops at epochs x (examples // batch) global steps.
The chief then evaluates the whole test file: the ROC AUC of class 1's softmax probability
(tied scores share their mean rank) and the mean log loss (probabilities clamped to
[1e-7, 1 - 1e-7]), as common/binary_metrics.cc computes them.

  python tf1_widedeep.py --spec SPEC.json --epochs 2   # 1 ps + 2 workers on loopback

Prints a JSON line per worker, then one line `TF1_WIDEDEEP {...}`: examples/s over the run (all
workers' examples over the time from the first worker's first step to the last one's last),
wall seconds, CPU-seconds of every process, test AUC and log loss, global steps, and the tensor
bytes per step that travel between the workers and the server as the graph says: each dense
variable pulled and its gradient pushed, each table's rows of the batch's distinct ids pulled and
their gradient rows pushed (ids not counted), counted every BYTES_EVERY-th step.
"""
import argparse
import faulthandler
import functools
import json
import os
import resource
import signal
import subprocess
import sys
import time

BYTES_EVERY = 10  # steps between two counts of a step's bytes
LAYERS = ("embedding", "concat", "fully_connected", "relu", "add", "softmax_cross_entropy")


def fail(what):
    sys.exit(f"tf1_widedeep: {what}")


def hash_ids(tf, ids, buckets):
    """HashId of common/data/feature_example.cc: a 64-bit mixing finaliser, then modulo."""
    u64 = lambda v: tf.constant(v, tf.uint64)  # noqa: E731
    x = tf.bitcast(ids, tf.uint64) + u64(0x9E3779B97F4A7C15)
    x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, u64(30))) * u64(0xBF58476D1CE4E5B9)
    x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, u64(27))) * u64(0x94D049BB133111EB)
    x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, u64(31)))
    return tf.cast(tf.math.floormod(x, u64(buckets)), tf.int64)


def parse_batch(tf, spec, records):
    """A batch of serialized Examples as the model's named inputs (ids hashed) and labels."""
    inp = spec["input"]
    features = {inp.get("label", "label"): tf.io.FixedLenFeature([1], tf.int64)}
    for f in inp["features"]:
        if f["type"] == "float":
            features[f["name"]] = tf.io.FixedLenFeature([f.get("size", 1)], tf.float32)
        else:
            features[f["name"]] = tf.io.VarLenFeature(tf.int64)
    parsed = tf.io.parse_example(records, features)
    out = {}
    for f in inp["features"]:
        v = parsed[f["name"]]
        if f["type"] != "float" and f.get("hash_buckets", 0) > 0:
            v = tf.SparseTensor(v.indices, hash_ids(tf, v.values, f["hash_buckets"]),
                                v.dense_shape)
        out[f["name"]] = v
    return out, tf.reshape(parsed[inp.get("label", "label")], [-1])


def initializer(v1, init, what):
    kind = init.get("type", "normal")
    scale = float(init.get("scale", 0.01))
    if kind == "zeros":
        return v1.zeros_initializer()
    if kind == "normal":
        return v1.random_normal_initializer(stddev=scale)
    if kind == "uniform":
        return v1.random_uniform_initializer(-scale, scale)
    fail(f"{what}: initializer type '{kind}', expected zeros, normal or uniform")


def optimizer(v1, section, what):
    """The tf.compat.v1.train optimizer of a pstrain optimizer and learning_rate section."""
    rate = section.get("learning_rate", {})
    if set(rate) - {"initial"}:
        fail(f"{what}.learning_rate: only 'initial' (a constant rate) is built, got {sorted(rate)}")
    lr = float(rate.get("initial", 0.01))
    opt = section.get("optimizer", {})
    kind = opt.get("type", "sgd")
    if kind == "adam":
        return v1.train.AdamOptimizer(lr, beta1=opt.get("beta1", 0.9),
                                      beta2=opt.get("beta2", 0.999),
                                      epsilon=opt.get("epsilon", 1e-8))
    if kind == "adagrad":
        return v1.train.AdagradOptimizer(
            lr, initial_accumulator_value=opt.get("initial_accumulator_value", 0.1))
    if kind == "sgd":
        return v1.train.GradientDescentOptimizer(lr)
    fail(f"{what}.optimizer: type '{kind}', expected adam, adagrad or sgd")


class ClickModel:
    """The config's layer list as a TensorFlow graph; build() may run twice (train and test
    inputs) over the same variables."""

    def __init__(self, tf, spec, num_ps):
        self.tf, self.v1, self.spec, self.num_ps = tf, tf.compat.v1, spec, num_ps
        self.tables = {t["name"]: t for t in spec["tables"]["list"]}
        self.features = {f["name"]: f for f in spec["input"]["features"]}
        self.table_vars, self.dense_vars = [], []
        self.row_bytes = {}  # embedding layer -> (its feature, bytes of one row)

    def variable(self, name, shape, init, table=False):
        kw = {"partitioner": self.v1.fixed_size_partitioner(self.num_ps)} if table else {}
        var = self.v1.get_variable(name, shape, initializer=init, **kw)
        if not self.v1.get_variable_scope().reuse:  # the first build makes them
            (self.table_vars if table else self.dense_vars).extend(list(var) if table else [var])
        return var

    def embedding(self, layer, x):
        name = layer["name"]
        table = self.tables.get(layer.get("table", name))
        if table is None:
            fail(f"layer '{name}': no table '{layer.get('table', name)}' in tables.list")
        feature = self.features[layer["inputs"]]
        buckets = feature.get("hash_buckets", 0)
        if buckets <= 0:
            fail(f"feature '{feature['name']}': this reference needs hash_buckets > 0 (a table "
                 "of that many rows)")
        dim = int(table["dimension"])
        init = initializer(self.v1, table.get("initializer", {}), f"tables '{table['name']}'")
        var = self.variable(name + "/table", [buckets, dim], init, table=True)
        self.row_bytes[name] = (feature["name"], 4 * dim)
        # "div": the partitioner's parts hold consecutive rows.
        y = self.v1.nn.embedding_lookup_sparse(var, x[0], None, partition_strategy="div",
                                               combiner=layer.get("combiner", "sum"))
        return self.tf.reshape(y, [-1, dim])

    def fully_connected(self, layer, x):
        name, units = layer["name"], int(layer["units"])
        fan_in = int(x[0].shape[-1])
        init = (self.v1.variance_scaling_initializer(2.0, "fan_in", "truncated_normal")
                if layer.get("init") == "he_normal" else self.v1.glorot_uniform_initializer())
        y = self.tf.matmul(x[0], self.variable(name + "/weights", [fan_in, units], init))
        if layer.get("use_bias", True):
            y += self.variable(name + "/bias", [units], self.v1.zeros_initializer())
        return y

    def build(self, inputs, labels):
        """The logits and the mean loss of a batch."""
        tf = self.tf
        outs, prev, logits, loss = dict(inputs), None, None, None
        for layer in self.spec["model"]["layers"]:
            kind, names = layer["type"], layer.get("inputs", prev)
            x = [outs[n] for n in ([names] if isinstance(names, str) else names)]
            if kind == "embedding":
                y = self.embedding(layer, x)
            elif kind == "fully_connected":
                y = self.fully_connected(layer, x)
            elif kind == "concat":
                y = tf.concat(x, axis=1)
            elif kind == "relu":
                y = tf.nn.relu(x[0])
            elif kind == "add":
                y = tf.add_n(x)
            elif kind == "softmax_cross_entropy":
                logits, y = x[0], self.v1.losses.sparse_softmax_cross_entropy(labels, x[0])
                loss = y
            else:
                fail(f"layer '{layer['name']}': type '{kind}' is not built here (known: "
                     f"{', '.join(LAYERS)})")
            outs[layer["name"]] = y
            prev = layer["name"]
        if loss is None:
            fail("the model has no softmax_cross_entropy layer")
        return logits, loss

    def bytes_per_step(self, inputs):
        """Tensor bytes a step moves: dense variables and their gradients, each table's rows of
        the batch's distinct ids and their gradient rows."""
        tf = self.tf
        dense = sum(int(v.shape.num_elements()) for v in self.dense_vars) * 4 * 2
        distinct = {f: tf.size(tf.unique(inputs[f].values)[0], out_type=tf.int64)
                    for f, _ in self.row_bytes.values()}
        rows = tf.add_n([distinct[f] * (2 * b) for f, b in self.row_bytes.values()])
        return rows + dense


def train_dataset(tf, spec, a, batch):
    ds = tf.data.TFRecordDataset(spec["input"]["train_tfrecord"]).shard(a.workers, a.task)
    ds = ds.cache().shuffle(1 << 20, seed=spec["train"].get("seed", 1) + a.task,
                            reshuffle_each_iteration=True)
    ds = ds.batch(batch, drop_remainder=True).repeat()
    ds = ds.map(lambda r: parse_batch(tf, spec, r)).prefetch(1)
    options = tf.data.Options()
    options.threading.private_threadpool_size = a.threads
    return ds.with_options(options)


def auc_and_log_loss(np, probs, labels):
    """ROC AUC of probs (tied scores share their mean rank) and the clamped mean log loss."""
    order = np.argsort(probs, kind="stable")
    sorted_p = probs[order]
    ranks = np.empty(len(probs))
    i = 0
    while i < len(probs):
        j = i
        while j < len(probs) and sorted_p[j] == sorted_p[i]:
            j += 1
        ranks[order[i:j]] = (i + 1 + j) / 2.0
        i = j
    pos = float(labels.sum())
    neg = len(labels) - pos
    auc = (ranks[labels == 1].sum() - pos * (pos + 1) / 2) / (pos * neg) if pos and neg else -1.0
    p = np.clip(probs, 1e-7, 1 - 1e-7)
    log_loss = float(-np.mean(np.where(labels == 1, np.log(p), np.log(1 - p))))
    return float(auc), log_loss


def test_probabilities(tf, spec, model):
    """Class 1's probability and the label of each test example, in the file's order (built
    before training: the training session finalizes the graph)."""
    v1 = tf.compat.v1
    ds = tf.data.TFRecordDataset(spec["input"]["test_tfrecord"]).batch(1024)
    it = v1.data.make_one_shot_iterator(ds.map(lambda r: parse_batch(tf, spec, r)))
    inputs, labels = it.get_next()
    with v1.variable_scope("model", reuse=True):
        logits, _ = model.build(inputs, labels)
    return tf.nn.softmax(logits)[:, 1], labels


def evaluate(tf, np, prob, labels, global_step, target, cfg):
    """The test file through the trained variables: (AUC, log loss, the global step they are
    of)."""
    ps, ys = [], []
    with tf.compat.v1.Session(target, config=cfg) as sess:
        step = int(sess.run(global_step))
        while True:
            try:
                p, y = sess.run([prob, labels])
            except tf.errors.OutOfRangeError:
                break
            ps.append(p)
            ys.append(y)
    return auc_and_log_loss(np, np.concatenate(ps).astype(np.float64), np.concatenate(ys)) + (step,)


def build_graph(tf, spec, a, cluster, batch):
    """A worker's graph: the model on its training batches, both optimizers' apply as one op,
    a step's bytes, and on the chief the test probabilities."""
    v1 = tf.compat.v1
    v1.set_random_seed(int(spec["train"].get("seed", 1)))
    with v1.device(v1.train.replica_device_setter(worker_device=f"/job:worker/task:{a.task}",
                                                  cluster=cluster)):
        model = ClickModel(tf, spec, a.ps)
        batches = v1.data.make_one_shot_iterator(train_dataset(tf, spec, a, batch))
        inputs, labels = batches.get_next()
        with v1.variable_scope("model"):
            _, loss = model.build(inputs, labels)
        step_bytes = model.bytes_per_step(inputs)
        gs = v1.train.get_or_create_global_step()
        grads = v1.gradients(loss, model.dense_vars + model.table_vars)
        n_dense = len(model.dense_vars)
        dense_opt = optimizer(v1, spec["train"], "train")
        table_opt = optimizer(v1, spec["tables"], "tables")
        train_op = tf.group(
            dense_opt.apply_gradients(list(zip(grads[:n_dense], model.dense_vars)), global_step=gs),
            table_opt.apply_gradients(list(zip(grads[n_dense:], model.table_vars))))
        if not all(isinstance(g, tf.IndexedSlices) for g in grads[n_dense:]):
            fail("a table's gradient is dense, expected IndexedSlices")
        test = test_probabilities(tf, spec, model) if a.task == 0 else None
    return train_op, gs, step_bytes, test


def role(a):
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1` prints where a role waits
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.training import session_manager
    tf.compat.v1.disable_eager_execution()
    v1 = tf.compat.v1
    # A non-chief worker checks whether the chief has initialised the variables every
    # recovery_wait_secs (30 by default): 1, so that both workers train from the start.
    session_manager.SessionManager.__init__ = functools.partialmethod(
        session_manager.SessionManager.__init__, recovery_wait_secs=1)
    with open(a.spec) as f:
        spec = json.load(f)
    ps = [f"127.0.0.1:{a.port + k}" for k in range(a.ps)]
    workers = [f"127.0.0.1:{a.port + a.ps + i}" for i in range(a.workers)]
    cluster = tf.train.ClusterSpec({"ps": ps, "worker": workers})
    cfg = v1.ConfigProto(intra_op_parallelism_threads=a.threads,
                         inter_op_parallelism_threads=a.threads)
    server = tf.distribute.Server(cluster, job_name=a.job, task_index=a.task, config=cfg)
    if a.job == "ps":
        server.join()
        return
    # A worker's sessions see the servers and itself only: one that starts after another worker
    # has ended would otherwise wait for it forever.
    cfg.device_filters.extend(["/job:ps", f"/job:worker/task:{a.task}"])
    batch = int(spec["train"]["batch_size"])
    train_op, gs, step_bytes, test = build_graph(tf, spec, a, cluster, batch)
    last = a.epochs * (a.train_examples // batch)
    hooks = [v1.train.StopAtStepHook(last_step=last)]
    steps = total_bytes = step = 0
    start = None
    with v1.train.MonitoredTrainingSession(master=server.target, is_chief=a.task == 0, hooks=hooks,
                                           config=cfg, save_checkpoint_secs=None,
                                           save_summaries_steps=None,
                                           log_step_count_steps=None) as sess:
        while not sess.should_stop():
            start = start or time.time()
            if steps % BYTES_EVERY == 0:  # the distinct ids' count costs a little: sampled
                _, step, b = sess.run([train_op, gs, step_bytes])
                total_bytes += int(b)
            else:
                _, step = sess.run([train_op, gs])
            steps += 1
    end = time.time()
    counted = -(-steps // BYTES_EVERY)  # the steps whose bytes were counted
    result = {"task": a.task, "examples": steps * batch, "start": start, "end": end,
              "last_step": int(step), "bytes_per_step": total_bytes / counted if steps else None}
    if test:
        result["auc"], result["log_loss"], result["final_step"] = evaluate(
            tf, np, *test, gs, server.target, cfg)
    print(json.dumps(result), flush=True)


def tf_version():
    import importlib.metadata as md
    for name in ("tensorflow-cpu", "tensorflow"):
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            pass
    return "?"


def summary(runs, wall, cpu):
    """The one line bench/ctr_job.py reads."""
    started = [r["start"] for r in runs if r["start"]]
    examples = sum(r["examples"] for r in runs)
    seconds = max(r["end"] for r in runs) - min(started) if started else 0
    chief = next(r for r in runs if r["task"] == 0)
    byte_runs = [r for r in runs if r["bytes_per_step"] is not None]
    return {"examples": examples, "train_s": seconds,
            "examples_per_sec": examples / seconds if seconds > 0 else None,
            "wall_s": wall, "cpu_s": cpu, "auc": chief.get("auc"),
            "log_loss": chief.get("log_loss"),
            "global_steps": chief.get("final_step"),
            "bytes_per_step": (sum(r["bytes_per_step"] * r["examples"] for r in byte_runs) /
                               max(1, sum(r["examples"] for r in byte_runs))),
            "version": tf_version()}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--spec", required=True, help="the pstrain config as JSON")
    p.add_argument("--job")
    p.add_argument("--task", type=int, default=0)
    p.add_argument("--ps", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--train_examples", type=int, required=True,
                   help="records in the training file (global steps = epochs x this // batch)")
    p.add_argument("--port", type=int, default=24610)
    p.add_argument("--threads", type=int, default=1, help="intra- and inter-op threads per role")
    p.add_argument("--log_dir", default="/tmp", help="where each role's stderr goes")
    a = p.parse_args()
    if a.job:
        return role(a)
    me = [sys.executable, os.path.abspath(__file__)] + [
        f"--{k}={getattr(a, k)}" for k in ("spec", "ps", "workers", "epochs", "train_examples",
                                           "port", "threads")]
    t0 = time.time()

    def start(job, task, **kw):
        log = open(os.path.join(a.log_dir, f"tf1_widedeep_{job}{task}.log"), "w")
        return subprocess.Popen(me + ["--job", job, "--task", str(task)], stderr=log, **kw)

    servers = [start("ps", k) for k in range(a.ps)]
    workers = [start("worker", i, stdout=subprocess.PIPE, text=True) for i in range(a.workers)]
    outs = [w.communicate()[0] for w in workers]
    wall = time.time() - t0
    for s in servers:
        s.kill()
        s.wait()
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    for o in outs:
        print(o.strip())
    if any(w.returncode != 0 for w in workers):
        fail(f"worker exit codes {[w.returncode for w in workers]}; logs in {a.log_dir}")
    runs = [json.loads(line) for o in outs for line in o.splitlines() if line.startswith("{")]
    print("TF1_WIDEDEEP " + json.dumps(summary(runs, wall, ru.ru_utime + ru.ru_stime)), flush=True)


if __name__ == "__main__":
    main()
