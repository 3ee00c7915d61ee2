#!/usr/bin/env python3
"""A click model, pstrain against TensorFlow's own parameter-server runtime, back to back
(`bench/run.sh ctr`).

configs/widedeep.yaml (Wide & Deep: 26 hashed id features, 13 dense floats; dense variables by
`train.optimizer`, embedding rows by the `tables:` optimizer) on a synthetic click log made once
by pstrain-synth-ctr (kept in BUILD/bench-ctr/data-N-M for later runs). Both sides run 1 parameter
server and 2 workers on this machine, no evaluator, asynchronous updates, the config's batch per
worker, for epochs x (N // batch) global steps; each chief then tests the final weights on the
whole test file. pstrain runs through launcher/pstrain-launch; TensorFlow runs
bench/tf1_widedeep.py (the same model from the same config, read as JSON) with the bench venv's
Python.

Measured per side: examples/s (all workers' examples over the time from the first worker's first
step to the last worker's last), wall time and CPU-seconds (user+sys) of the whole process tree
(wait4 of the launcher / the TF script), test AUC and log loss, and tensor bytes per step
(pstrain: what its server counted in and out over the whole run, divided by the global steps;
TensorFlow: the graph's dense variables and gradients and the batch's distinct rows both ways).
The last line, `ratio: X.XX`, is pstrain's examples/s over TensorFlow's.
"""
import argparse
import datetime
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import yaml

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, os.path.join(REPO, "tests", "summary"))
from decode_events import decode_event, read_records  # noqa: E402
from tf1_job import wait_rusage  # noqa: E402


def make_data(a):
    """The click log of --train_examples/--test_examples, made once."""
    data = os.path.join(REPO, a.build_dir, "bench-ctr",
                        f"data-{a.train_examples}-{a.test_examples}")
    if not os.path.exists(os.path.join(data, "best.json")):
        os.makedirs(data, exist_ok=True)
        subprocess.run([os.path.join(REPO, a.build_dir, "pstrain-synth-ctr"), f"--out_dir={data}",
                        f"--train_examples={a.train_examples}",
                        f"--test_examples={a.test_examples}"], check=True,
                       stdout=subprocess.DEVNULL)
    with open(os.path.join(data, "best.json")) as f:
        return data, json.load(f)


def write_config(work, data):
    """configs/widedeep.yaml reading this run's data: its path, and its contents as a dict."""
    with open(os.path.join(REPO, "configs", "widedeep.yaml")) as f:
        text = f.read()
    if "data/ctr/" not in text:
        sys.exit("ctr_job: configs/widedeep.yaml names no data/ctr/ files to point at the data")
    path = os.path.join(work, "widedeep.yaml")
    with open(path, "w") as f:
        f.write(text.replace("data/ctr/", data + "/"))
    with open(path) as f:
        return path, yaml.safe_load(f)


_GLOG = re.compile(r"^[IWE](\d{8} \d\d:\d\d:\d\d\.\d+)")


def glog_time(line):
    m = _GLOG.match(line)
    return datetime.datetime.strptime(m.group(1), "%Y%m%d %H:%M:%S.%f").timestamp() if m else None


def worker_span(log):
    """(first step's start, last step's end, local steps) of one worker's log, or None."""
    start = next((glog_time(l) for l in log.splitlines() if ": training " in l), None)
    reached = [l for l in log.splitlines() if "reached step" in l]
    m = re.search(r"after (\d+) local steps", reached[-1]) if reached else None
    if start is None or not m:
        return None
    return start, glog_time(reached[-1]), int(m.group(1))


def server_bytes(logdir):
    """The server's last ps/bytes_in_total + ps/bytes_out_total (its TensorBoard run)."""
    totals = {}
    for path in sorted(glob.glob(os.path.join(logdir, "ps-*", "events.out.tfevents.*"))):
        with open(path, "rb") as f:
            for record in read_records(f.read()):
                for v in decode_event(record).get("values", []):
                    if v["tag"] in ("ps/bytes_in_total", "ps/bytes_out_total"):
                        totals[(path, v["tag"])] = v["value"]
    return sum(totals.values()) if totals else None


def run_pstrain(a, work, config, batch):
    cluster = os.path.join(work, "cluster.yaml")
    p = a.port
    with open(cluster, "w") as f:
        f.write(f"mode: local\nbinary: {os.path.join(REPO, a.build_dir, 'pstrain')}\n"
                f"ps:\n  - {{host: 127.0.0.1, port: {p}}}\n"
                f"worker:\n  - {{host: 127.0.0.1, port: {p + 1}}}\n"
                f"  - {{host: 127.0.0.1, port: {p + 2}}}\nflags: {{}}\n")
    run = os.path.join(work, "run")
    cmd = [os.path.join(REPO, "launcher/pstrain-launch"), "--cluster", cluster, "--config", config,
           "--train_dir", run, "--keygen", os.path.join(REPO, a.build_dir, "pstrain-keygen")]
    if a.no_curve:
        cmd.append("--no_curve")
    cmd += ["--", f"--epochs={a.epochs}"] if a.epochs else []
    print("== pstrain:", " ".join(cmd), flush=True)
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    out = proc.stdout.read()
    cpu = wait_rusage(proc)
    wall = time.time() - t0
    logs = os.path.join(run, "launcher")
    if proc.returncode != 0:
        sys.stdout.write(out)
        sys.exit(f"ctr_job: pstrain-launch exited {proc.returncode}; logs in {logs}")
    with open(os.path.join(logs, "worker-0.log")) as f:
        done = re.search(r"done: global step (\d+).*test AUC ([0-9.]+), test log loss ([0-9.]+)",
                         f.read())
    if not done:
        sys.exit(f"ctr_job: pstrain's chief printed no 'done:' line with an AUC; logs in {logs}")
    print(done.group(0), flush=True)
    spans = []
    for path in sorted(glob.glob(os.path.join(logs, "worker-*.log"))):
        with open(path) as f:
            spans.append(worker_span(f.read()))
    if None in spans:
        sys.exit(f"ctr_job: a worker log in {logs} lacks its 'training' or 'reached step' line")
    seconds = max(s[1] for s in spans) - min(s[0] for s in spans)
    examples = sum(s[2] for s in spans) * batch
    steps = int(done.group(1))
    moved = server_bytes(os.path.join(run, "logs"))
    return {"examples_per_sec": examples / seconds if seconds > 0 else None, "wall_s": wall,
            "cpu_s": cpu, "auc": float(done.group(2)), "log_loss": float(done.group(3)),
            "global_steps": steps, "bytes_per_step": moved / steps if moved else None}


def run_tf(a, work, spec):
    path = os.path.join(work, "widedeep.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    epochs = a.epochs or int(spec["train"].get("epochs", 1))
    cmd = [a.python, os.path.join(BENCH, "tf1_widedeep.py"), "--spec", path, "--epochs",
           str(epochs), "--train_examples", str(a.train_examples), "--port", str(a.port + 10),
           "--log_dir", work]
    print("== TensorFlow:", " ".join(cmd), flush=True)
    # Its own session, so that a hung run is stopped whole.
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    timer = threading.Timer(a.tf_timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
    timer.start()
    out = proc.stdout.read()
    proc.wait()
    timer.cancel()
    sys.stdout.write(out)
    line = next((l for l in out.splitlines() if l.startswith("TF1_WIDEDEEP ")), None)
    if proc.returncode != 0 or line is None:
        sys.exit(f"ctr_job: tf1_widedeep.py exited {proc.returncode} (killed after --tf_timeout "
                 f"{a.tf_timeout} s?); role logs in {work}")
    return json.loads(line[len("TF1_WIDEDEEP "):])


def fmt(value, form):
    return "-" if value is None else form.format(value)


def print_table(ours, ref, best):
    version = (ref or {}).get("version", "")
    print(f"\n{'':26s}{'pstrain':>14s}{'TensorFlow ' + version:>20s}")
    rows = [("examples/s (all workers)", "examples_per_sec", "{:.0f}"),
            ("wall s", "wall_s", "{:.1f}"), ("CPU-seconds (all roles)", "cpu_s", "{:.1f}"),
            ("global steps", "global_steps", "{}"), ("test AUC", "auc", "{:.4f}"),
            ("test log loss", "log_loss", "{:.4f}"), ("tensor bytes per step", "bytes_per_step",
                                                       "{:.0f}")]
    for name, key, form in rows:
        print(f"{name:26s}{fmt((ours or {}).get(key), form):>14s}"
              f"{fmt((ref or {}).get(key), form):>20s}")
    print(f"{'best test AUC (best.json)':26s}{best['auc']:>14.4f}{best['auc']:>20.4f}")
    print(f"{'best test log loss':26s}{best['log_loss']:>14.4f}{best['log_loss']:>20.4f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    # 1.2 M examples a side: about 5 minutes on 2 cores, most of it TensorFlow's.
    p.add_argument("--train_examples", type=int, default=400000)
    p.add_argument("--test_examples", type=int, default=0, help="default: train_examples / 10")
    p.add_argument("--epochs", type=int, default=3, help="0: the config's train.epochs")
    p.add_argument("--build_dir", default="build")
    p.add_argument("--python", default=sys.executable, help="a Python with tensorflow-cpu")
    p.add_argument("--port", type=int, default=24600)
    p.add_argument("--tf_timeout", type=float, default=1800)
    p.add_argument("--only", choices=["pstrain", "tf"], help="run one side alone")
    p.add_argument("--no_curve", action="store_true", help="pstrain over plaintext, as TF's gRPC")
    a = p.parse_args()
    if a.train_examples < 1 or a.epochs < 0:
        sys.exit("ctr_job: --train_examples must be >= 1 and --epochs >= 0")
    a.test_examples = a.test_examples or max(1, a.train_examples // 10)
    work = os.path.join(REPO, a.build_dir, "bench-ctr", "run")
    shutil.rmtree(work, ignore_errors=True)  # a train_dir left over would resume its checkpoint
    os.makedirs(work)
    data, best = make_data(a)
    config, spec = write_config(work, data)
    batch = int(spec["train"]["batch_size"])
    print(f"== load average before: {open('/proc/loadavg').read().split()[:3]}, "
          f"{os.cpu_count()} cores; {a.train_examples} training and {a.test_examples} test "
          f"examples in {data}, batch {batch} per worker", flush=True)
    ours = run_pstrain(a, work, config, batch) if a.only != "tf" else None
    ref = run_tf(a, work, spec) if a.only != "pstrain" else None
    print(f"== load average after: {open('/proc/loadavg').read().split()[:3]}")
    print_table(ours, ref, best)
    print("pstrain's bytes: its server's count over the whole run (registration and the final "
          "test pass included); TensorFlow's: the graph's tensors of each step")
    if ours and ref and ours["examples_per_sec"] and ref["examples_per_sec"]:
        # Above 1 means pstrain is faster, as every bench/run.sh ratio.
        print(f"ratio: {ours['examples_per_sec'] / ref['examples_per_sec']:.2f}")


if __name__ == "__main__":
    main()
