#!/usr/bin/env python3
"""PyTorch DistributedDataParallel (gloo) on the namespace hosts that measure pstrain: the
all-reduce anchor beside tests/multihost/overlap_bench.py (issue 27).

  python3 bench/ddp_anchor.py [--config configs/resnet50.yaml] [--hosts 2 --ranks 2] \
      [--rate 1gbit] [--step_ms 800] [--steps 8] [--python /work/bench-venv/bin/python] \
      [--json out.json]

Hosts of tests/multihost/netns_hosts.py (one bridge, each host's link shaped with tc tbf to
--rate each way), --ranks rank processes on each of the --hosts hosts h2..h(H+1), where
overlap_bench.py puts pstrain's workers; h1 (pstrain's server) stays idle, rank 0's host keeps
the TCPStore. Rank r of host h is global rank h x R + r, so gloo's ring (ranks in order) crosses
each host's link once out and once in; ranks of one host reach each other over the namespace's
loopback, which no tbf shapes.

Compute is synthetic, the DDP is real: the model is one "layer" per layer of --config that has
variables (as pstrain builds it: build/bench/pstrain-bench-model-table prints them), holding
parameters of that layer's real trainable sizes in layer order (flat: DDP
buckets by bytes), each a custom autograd Function whose forward waits to its share of N/3 ms and
whose backward waits to its share of 2N/3 ms and returns constant gradients: the deadlines of
pstrain's --synthetic_step_ms (shares of every variable, batch-norm statistics included; last
layer first in backward). DDP's reducer fills its buckets (1 MiB first, then 25 MB) as backward
hands them out and all-reduces each while the earlier layers still "compute"; backward returns
once every bucket is reduced, as with a GPU. No optimizer step (a GPU applies it inside its
compute); one intra-op thread per rank. M is the trainable parameters' bytes (ResNet-50:
25,557,032 floats in 161 tensors); pstrain also pushes the batch-norm statistics (0.2% more),
which DDP would broadcast as buffers from rank 0 (none here).

Bound: the ring moves 2(N-1)/N x M over each host's link each way a step (N ranks, M the
gradient bytes), so a step takes at least max(compute, that / --rate); and since nothing is ready
during the forward third, at least forward + ring as well (printed beside it). The host links'
counters (bytes a step, the whole run, DDP's first broadcast of M included) show what crossed.
Step time is rank 0's mean over --steps after --warmup steps; CPU-s a step is every rank's
process CPU time (gloo's threads included) over the measured steps, summed, and the launcher's
children's over the whole run (importing torch included), as overlap_bench.py counts pstrain's.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "multihost"))

PORT = 29500
GRADIENT = 1e-5  # what pstrain's synthetic compute fills every gradient with


# ---- the model's variables, from the config ----

def layer_table(config_path, model_table):
    """[(layer name, [trainable sizes], all floats incl. batch-norm statistics)] in layer order,
    of the model pstrain builds from the config (`model_table`: pstrain-bench-model-table)."""
    out = subprocess.run([model_table, f"--config={config_path}"], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"ddp_anchor.py: {model_table} --config={config_path}: {out.stderr}")
    table = []
    for layer in json.loads(out.stdout):
        sizes = [1] * len(layer["variables"])
        for i, v in enumerate(layer["variables"]):
            for d in v["shape"]:
                sizes[i] *= d
        trainable = [n for n, v in zip(sizes, layer["variables"]) if v["trainable"]]
        table.append((layer["layer"], trainable, sum(sizes)))
    return table


# ---- one rank (run inside its host's namespace, with the venv's python) ----

def rank_main(a):
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    with open(a.table) as f:
        table = json.load(f)
    total = sum(t[2] for t in table)
    forward_s, backward_s = (a.step_ms // 3) / 1000, (a.step_ms - a.step_ms // 3) / 1000
    # Deadlines after the step's start, as pstrain's SyntheticCompute: forward up to its share of
    # the parameters, layers first to last; backward last to first.
    fwd_at, done = [], 0
    for t in table:
        done += t[2]
        fwd_at.append(forward_s * done / total)
    bwd_at, done = [0.0] * len(table), 0
    for i in reversed(range(len(table))):
        done += table[i][2]
        bwd_at[i] = forward_s + backward_s * done / total
    clock = {"start": 0.0}

    def wait_until(offset):
        delay = clock["start"] + offset - time.perf_counter()
        if delay > 0:
            time.sleep(delay)

    class SyntheticLayer(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, index, *params):
            ctx.index = index
            ctx.sizes = [p.numel() for p in params]
            wait_until(fwd_at[index])
            return x + 0

        @staticmethod
        def backward(ctx, grad):
            wait_until(bwd_at[ctx.index])
            return (grad, None) + tuple(torch.full((n,), GRADIENT) for n in ctx.sizes)

    class Layers(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.params = torch.nn.ParameterList(
                torch.nn.Parameter(torch.zeros(n)) for t in table for n in t[1])
            self.groups, i = [], 0
            for t in table:
                self.groups.append(list(range(i, i + len(t[1]))))
                i += len(t[1])

        def forward(self, x):
            for index, group in enumerate(self.groups):
                x = SyntheticLayer.apply(x, index, *(self.params[j] for j in group))
            return x

    dist.init_process_group("gloo", init_method=f"tcp://{a.master}:{PORT}", rank=a.rank,
                            world_size=a.world)
    model = DDP(Layers())
    x = torch.zeros(1)
    times, cpu0 = [], None
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            cpu0 = time.process_time()
        clock["start"] = t0 = time.perf_counter()
        model(x).sum().backward()  # returns once DDP's reducer has every bucket all-reduced
        for p in model.parameters():
            p.grad = None
        times.append(time.perf_counter() - t0)
    cpu = time.process_time() - cpu0
    dist.barrier()
    logged = model._get_ddp_logging_data()  # the buckets as rebuilt after the first step
    buckets = str(logged.get("rebuilt_bucket_sizes") or logged.get("bucket_sizes", ""))
    print(json.dumps({"rank": a.rank, "step_s": times, "measured_s": sum(times[a.warmup:]),
                      "cpu_s": cpu, "bucket_bytes": [int(b) for b in buckets.split(",") if b],
                      "params": sum(p.numel() for p in model.parameters()),
                      "tensors": len(list(model.parameters()))}), flush=True)
    dist.destroy_process_group()


# ---- the launcher (root: namespaces) ----

def port_bytes(hosts, host):
    """(bytes out of, bytes into) host over its link so far: its bridge port's counters."""
    out = subprocess.run(["ip", "-n", hosts.net, "-s", "-j", "link", "show", f"h{host}"],
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    stats = json.loads(out)[0]["stats64"]
    return stats["rx"]["bytes"], stats["tx"]["bytes"]  # the port receives what the host sends


def wait_all(procs, timeout):
    """Exit codes once every rank is done; a rank that fails ends the others at once (they would
    wait in gloo for it until its timeout)."""
    deadline = time.monotonic() + timeout
    while any(proc.poll() is None for proc in procs):
        if any(proc.poll() not in (None, 0) for proc in procs) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
    return [proc.wait() for proc in procs]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=os.path.join(ROOT, "configs", "resnet50.yaml"))
    p.add_argument("--hosts", type=int, default=2, help="worker hosts (h2..)")
    p.add_argument("--ranks", type=int, default=2, help="DDP ranks on each worker host")
    p.add_argument("--rate", default="1gbit", help="tc tbf rate of every host's link, each way")
    p.add_argument("--step_ms", type=int, default=800, help="synthetic compute a step (> 0)")
    p.add_argument("--steps", type=int, default=8, help="measured steps, after --warmup")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, help="examples a rank a step (default: the config's)")
    p.add_argument("--python", default="/work/bench-venv/bin/python",
                   help="a python with torch (scripts/bench-venv.sh)")
    p.add_argument("--json", help="write the cell's numbers here")
    p.add_argument("--model_table",
                   default=os.path.join(ROOT, "build", "bench", "pstrain-bench-model-table"),
                   help="pstrain's tool that prints the config's model, layer by layer")
    p.add_argument("--rank", type=int, help=argparse.SUPPRESS)  # set: run one rank
    p.add_argument("--world", type=int, help=argparse.SUPPRESS)
    p.add_argument("--master", help=argparse.SUPPRESS)
    p.add_argument("--table", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.rank is not None:
        return rank_main(a)
    if a.hosts < 1 or a.ranks < 1 or a.step_ms <= 0 or a.steps < 1 or a.warmup < 1:
        p.error("--hosts, --ranks, --step_ms, --steps and --warmup must be at least 1")
    import netns_hosts
    from overlap_bench import rate_bits
    missing = netns_hosts.missing_tools()
    if not os.access(a.model_table, os.X_OK):
        missing.append(f"{a.model_table} (cmake --build build --target pstrain-bench-model-table)")
    if not os.access(a.python, os.X_OK):
        missing.append(f"{a.python} (bash scripts/bench-venv.sh /work/bench-venv)")
    if missing:
        print("ddp_anchor.py: missing: " + ", ".join(missing), file=sys.stderr)
        return 2
    table = layer_table(a.config, a.model_table)
    if a.batch is None:
        import yaml
        with open(a.config) as f:
            a.batch = yaml.safe_load(f)["train"]["batch_size"]
    tensors = sum(len(t[1]) for t in table)
    params = sum(sum(t[1]) for t in table)
    world = a.hosts * a.ranks
    tmp = tempfile.mkdtemp(prefix="pstrain-ddp-anchor-")
    table_path = os.path.join(tmp, "layers.json")
    with open(table_path, "w") as f:
        json.dump(table, f)
    with open("/proc/loadavg") as f:
        load_before = " ".join(f.read().split()[:3])
    print(f"== load before: {load_before} ({os.cpu_count()} cores, shared with other users); "
          f"logs in {tmp}",
          flush=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE",
               GLOO_SOCKET_IFNAME="eth0")  # the host's address; peers on it go over loopback
    procs, logs = [], []
    t_start = time.monotonic()
    with netns_hosts.NetnsHosts(1 + a.hosts, tmp, rate=a.rate) as hosts:
        master = hosts.address(2)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        for rank in range(world):
            host = 2 + rank // a.ranks
            logs.append(os.path.join(tmp, f"rank{rank}.log"))
            argv = ["ip", "netns", "exec", hosts.ns(host), a.python, os.path.abspath(__file__),
                    "--rank", str(rank), "--world", str(world), "--master", master,
                    "--table", table_path, "--step_ms", str(a.step_ms), "--steps", str(a.steps),
                    "--warmup", str(a.warmup)]
            with open(logs[-1], "w") as f:
                procs.append(subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env,
                                              preexec_fn=netns_hosts.die_with_parent()))
        try:
            codes = wait_all(procs, timeout=900)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        link_bytes = [port_bytes(hosts, 2 + h) for h in range(a.hosts)]
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # As overlap_bench.py counts pstrain's: every process, start (here: importing torch) included.
    cpu_whole = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / (
        a.warmup + a.steps)
    wall = time.monotonic() - t_start
    with open("/proc/loadavg") as f:
        load_after = " ".join(f.read().split()[:3])
    results = []
    for rank, (code, log) in enumerate(zip(codes, logs)):
        with open(log, errors="replace") as f:
            text = f.read()
        lines = [l for l in text.splitlines() if l.startswith("{")]
        if code != 0 or not lines:
            print(f"rank {rank} exited {code}: {log}\n{text[-3000:]}", file=sys.stderr)
            return 1
        results.append(json.loads(lines[-1]))
    step = results[0]["measured_s"] / a.steps
    cpu = sum(r["cpu_s"] for r in results) / a.steps
    model_bytes = 4 * params
    # Every host's link carries one edge of the ring each way; with one host, none.
    ring_bytes = 2 * (world - 1) / world * model_bytes if a.hosts > 1 else 0.0
    ring = ring_bytes * 8 / rate_bits(a.rate)
    compute = a.step_ms / 1000
    bound = max(compute, ring)
    examples = world * a.batch / step
    print(f"ddp (gloo, {results[0]['tensors']} tensors, {results[0]['params']} parameters): "
          f"{step * 1000:.0f} ms a step, {cpu:.3f} CPU-s a step (every rank, measured steps; "
          f"{cpu_whole:.3f} over the whole run, start included); "
          f"steps {' '.join(f'{s * 1000:.0f}' for s in results[0]['step_s'])} ms; wall "
          f"{wall:.0f} s; buckets (MB) "
          f"{' '.join(f'{b / 1e6:.1f}' for b in results[0]['bucket_bytes'])}", flush=True)
    print(f"== load after: {load_after}")
    # Whole run: DDP's first broadcast of the parameters from rank 0 and the warm-up included.
    n = a.warmup + a.steps
    print(f"host links, MB out/in a step over the whole run ({n} steps): " +
          ", ".join(f"h{2 + h} {o / 1e6 / n:.1f}/{i / 1e6 / n:.1f}"
                    for h, (o, i) in enumerate(link_bytes)))
    print(f"model {model_bytes / 1e6:.1f} MB in {tensors} tensors; {a.hosts} worker host(s) x "
          f"{a.ranks} rank(s) = {world}; link {a.rate} each way: the ring moves 2(N-1)/N x M = "
          f"{ring_bytes / 1e6:.1f} MB over each host's link each way a step, {ring * 1000:.0f} ms; "
          f"compute {compute * 1000:.0f} ms; nothing is ready to leave in the forward third: "
          f"forward + ring {(a.step_ms // 3 / 1000 + ring) * 1000:.0f} ms")
    print("| variant | step ms | examples/s | compute + ring | max(compute, ring) | step / max |")
    print(f"| {'ddp':>7} | {step * 1000:7.0f} | {examples:10.0f} | "
          f"{(compute + ring) * 1000:14.0f} | {bound * 1000:18.0f} | {step / bound:10.2f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"hosts": a.hosts, "ranks": a.ranks, "rate": a.rate, "step_ms": a.step_ms,
                       "steps": a.steps, "warmup": a.warmup, "batch": a.batch,
                       "params": params, "tensors": tensors, "step_s": step,
                       "examples_per_s": examples, "ring_bytes": ring_bytes, "ring_s": ring,
                       "bound_s": bound, "forward_plus_ring_s": a.step_ms // 3 / 1000 + ring,
                       "cpu_s_per_step": cpu, "cpu_s_per_step_whole_run": cpu_whole,
                       "load_before": load_before,
                       "load_after": load_after, "link_bytes_out_in": link_bytes,
                       "per_rank": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
