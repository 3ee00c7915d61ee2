#!/usr/bin/env python3
"""bench/tf1_widedeep.py (the TensorFlow side of `bench/run.sh ctr`) against pstrain's own code:
  - its ids' buckets, hashed in TensorFlow's uint64 ops, equal pstrain's HashId
    (pstrain-bench-hash-ids) for edge and random ids and several bucket counts, also through the
    input pipeline's parse of tf.train.Examples;
  - its test AUC is the pairwise definition (a positive above a negative counts 1, a tie 1/2) and
    its log loss clamps probabilities to [1e-7, 1 - 1e-7], as common/binary_metrics.cc.

  tf1_widedeep_test.py --hash_ids BUILD/bench/pstrain-bench-hash-ids [--venv DIR]
Runs itself again under a Python with tensorflow-cpu: PSTRAIN_BENCH_VENV, else --venv (the bench
venv, scripts/bench-venv.sh); exits 77 (skipped) when neither has one.
"""
import argparse
import math
import os
import random
import subprocess
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))


def tf_python(venv):
    for d in filter(None, [os.environ.get("PSTRAIN_BENCH_VENV"), venv]):
        py = os.path.join(d, "bin", "python3")
        if os.access(py, os.X_OK) and subprocess.run(
                [py, "-c", "import tensorflow, numpy"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL).returncode == 0:
            return py
    return None


def check_hash(tf, tfw, hash_ids_bin, problems):
    rng = random.Random(5)
    ids = [0, 1, 2, 2**31 - 1, 2**32, 2**40 + 7, 2**63 - 1] + [rng.randrange(2**63)
                                                                 for _ in range(300)]
    for buckets in (1, 7, 100000, 2**31 + 11):
        ours = subprocess.run([hash_ids_bin, str(buckets)] + [str(i) for i in ids], check=True,
                              stdout=subprocess.PIPE, text=True).stdout.split()
        theirs = tfw.hash_ids(tf, tf.constant(ids, tf.int64), buckets).numpy().tolist()
        bad = [(i, o, t) for i, o, t in zip(ids, ours, theirs) if int(o) != t]
        if len(ours) != len(ids) or bad:
            problems.append(f"{buckets} buckets: (id, pstrain, TensorFlow) differ: {bad[:3]} "
                            f"({len(ours)} answers for {len(ids)} ids)")
    # Through the pipeline: an Example's id feature, parsed and hashed by the spec's buckets.
    spec = {"input": {"label": "label", "features": [
        {"name": "dense", "type": "float", "size": 2},
        {"name": "C1", "type": "int64", "max_length": 1, "hash_buckets": 1000}]}}
    records = []
    for i in ids[:20]:
        ex = tf.train.Example(features=tf.train.Features(feature={
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2])),
            "dense": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5, 1.5])),
            "C1": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))}))
        records.append(ex.SerializeToString())
    inputs, labels = tfw.parse_batch(tf, spec, tf.constant(records))
    ours = subprocess.run([hash_ids_bin, "1000"] + [str(i) for i in ids[:20]], check=True,
                          stdout=subprocess.PIPE, text=True).stdout.split()
    if inputs["C1"].values.numpy().tolist() != [int(o) for o in ours]:
        problems.append(f"the pipeline's C1 buckets {inputs['C1'].values.numpy().tolist()[:5]} "
                        f"are not pstrain's {ours[:5]}")
    if labels.numpy().tolist() != [i % 2 for i in ids[:20]]:
        problems.append("the pipeline's labels are not the Examples'")


def pairwise_auc(scores, labels):
    pos = [s for s, y in zip(scores, labels) if y == 1]
    neg = [s for s, y in zip(scores, labels) if y == 0]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def check_metrics(np, tfw, problems):
    rng = random.Random(9)
    scores = [round(rng.random(), 1) for _ in range(400)]  # one decimal: many ties
    labels = [1 if rng.random() < s + 0.1 else 0 for s in scores]
    auc, _ = tfw.auc_and_log_loss(np, np.array(scores), np.array(labels))
    want = pairwise_auc(scores, labels)
    if abs(auc - want) > 1e-12:
        problems.append(f"AUC {auc}, the pairwise definition gives {want}")
    _, loss = tfw.auc_and_log_loss(np, np.array([1.0, 0.0, 0.75]), np.array([0, 1, 1]))
    want = (-math.log(1e-7) * 2 - math.log(0.75)) / 3
    if abs(loss - want) > 1e-9:
        problems.append(f"log loss {loss}, expected {want} (certain mistakes clamped at 1e-7)")


def inside(a):
    import numpy as np
    import tensorflow as tf
    sys.path.insert(0, BENCH)
    import tf1_widedeep as tfw
    problems = []
    check_hash(tf, tfw, a.hash_ids, problems)
    check_metrics(np, tfw, problems)
    if problems:
        print("FAIL:\n  " + "\n  ".join(problems), flush=True)
        return 1
    print("PASS: tf1_widedeep.py hashes ids as pstrain does and scores as it does", flush=True)
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--hash_ids", required=True)
    p.add_argument("--venv", default="")
    p.add_argument("--inside", action="store_true")
    a = p.parse_args()
    if a.inside:
        return inside(a)
    py = tf_python(a.venv)
    if py is None:
        print("SKIP: no Python with tensorflow-cpu (set PSTRAIN_BENCH_VENV)", flush=True)
        return 77
    return subprocess.run([py, os.path.abspath(__file__), "--inside", "--hash_ids",
                           a.hash_ids]).returncode


if __name__ == "__main__":
    sys.exit(main())
