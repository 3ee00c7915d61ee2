#!/usr/bin/env python3
"""Reads the graph of a run two ways TensorBoard does and prints JSON.

- "accumulator": EventAccumulator(RUN_DIR).Graph(), TensorBoard's own event loader;
- "server": a real TensorBoard server on LOGDIR, asked what the Graphs tab asks it
  (/data/plugins_listing, /data/plugin/graphs/info, /data/plugin/graphs/graph?run=RUN), the
  graph parsed back from the text proto it serves to the browser.

Each graph is a list of nodes: name, op, device, inputs, output_shapes (from "_output_shapes"),
and the dtype and shape attrs where present.
Exit status 3 when tensorboard cannot be imported, so the C++ test can skip.
Usage: read_graph_with_tensorboard.py LOGDIR RUN
"""
import json
import os
import sys
import time
import urllib.request

try:
    from google.protobuf import text_format
    from tensorboard import default, program
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.compat.proto import graph_pb2
except ImportError as e:
    print("cannot import tensorboard: %s" % e, file=sys.stderr)
    sys.exit(3)


def shape(proto):
    return [d.size for d in proto.dim]


def nodes(graph):
    out = []
    for n in graph.node:
        node = {"name": n.name, "op": n.op, "device": n.device, "inputs": list(n.input),
                "output_shapes": [shape(s) for s in n.attr["_output_shapes"].list.shape]}
        if "dtype" in n.attr:
            node["dtype"] = n.attr["dtype"].type
        if "shape" in n.attr:
            node["shape"] = shape(n.attr["shape"].shape)
        out.append(node)
    return out


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode("utf-8")


def main():
    logdir, run = sys.argv[1], sys.argv[2]
    acc = ea.EventAccumulator(os.path.join(logdir, run))
    acc.Reload()
    out = {"accumulator": {"has_graph": acc.Tags()["graph"], "nodes": nodes(acc.Graph())}}

    tb = program.TensorBoard(plugins=default.get_plugins())
    tb.configure(argv=[None, "--logdir", logdir, "--port", "0", "--host", "127.0.0.1",
                       "--load_fast", "false"])
    url = tb.launch()
    # The server loads the logdir in the background.
    deadline = time.time() + 60
    info = {}
    while time.time() < deadline:
        info = json.loads(get(url + "data/plugin/graphs/info"))
        if run in info:
            break
        time.sleep(0.2)
    listing = json.loads(get(url + "data/plugins_listing"))
    served = graph_pb2.GraphDef()
    text_format.Parse(get(url + "data/plugin/graphs/graph?run=%s&conceptual=false" % run), served)
    out["server"] = {"graphs_tab_enabled": listing.get("graphs", {}).get("enabled", False),
                     "run_graph": info.get(run, {}).get("run_graph", False),
                     "nodes": nodes(served)}
    json.dump(out, sys.stdout)
    sys.stdout.flush()
    # The server's threads are not daemons everywhere; leave without waiting for them.
    os._exit(0)


if __name__ == "__main__":
    main()
