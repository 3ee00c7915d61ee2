#!/usr/bin/env python3
"""Imports part of a GraphDef with TensorFlow's own importer and prints JSON.

The part is the nodes named on the command line and every node they read, transitively
(tf.compat.v1.graph_util.extract_sub_graph); tf.graph_util.import_graph_def then checks each node
against TensorFlow's op registry: its inputs, their types, and every attribute without a default.
Prints {"imported": {name: op}} for the nodes of the part. Exit status 3 when tensorflow cannot
be imported, so the C++ test can skip; 1 with TensorFlow's message when the import fails.
Usage: import_graph_with_tensorflow.py GRAPH.pb NODE...
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
try:
    import tensorflow as tf
except ImportError as e:
    print("cannot import tensorflow: %s" % e, file=sys.stderr)
    sys.exit(3)


def main():
    graph_def = tf.compat.v1.GraphDef()
    with open(sys.argv[1], "rb") as f:
        graph_def.ParseFromString(f.read())
    part = tf.compat.v1.graph_util.extract_sub_graph(graph_def, sys.argv[2:])
    with tf.Graph().as_default() as graph:
        try:
            tf.graph_util.import_graph_def(part, name="")
        except (ValueError, TypeError) as e:
            print("import_graph_def failed: %s" % e, file=sys.stderr)
            sys.exit(1)
        imported = {op.name: op.type for op in graph.get_operations()}
    json.dump({"imported": imported}, sys.stdout)


if __name__ == "__main__":
    main()
