"""The step-time model of docs/scaling.md: fitted to bench/scale_bench.py's cells, checked against
them, and extrapolated to 64 GPUs on 8 hosts.

  bench/scale_model.py --cells cells.json --transport transport.txt [--step_ms 35]

cells.json: `scale_bench.py --json`; transport.txt: the output of pstrain-bench-ps-transport
(its small-variable lines give the per-message and per-tensor costs). Every constant printed is
derived here from those two files and the model's size; nothing else is assumed but what the
arguments say (link rate, cores and GPUs of the extrapolation).
"""

import argparse
import json
import re

PARAMS = 25_557_032  # ResNet-50 (configs/resnet50.yaml), as the chief logs it
M = 4 * PARAMS  # bytes a push (gradients and batch-norm statistics), and a pull
TENSORS = 161  # ResNet-50's variables, as the chief logs them
BATCH = 64


def fit(cells):
    """Per-byte CPU costs from every cell: server and worker CPU seconds per byte moved."""
    ps_cpu = sum(p["cpu_seconds"] for c in cells for p in c["ps"])
    ps_bytes = sum(p["bytes"] for c in cells for p in c["ps"])
    all_cpu = sum(c["all_cores"] * c["seconds"] for c in cells)
    steps = sum(c["steps"] for c in cells)
    return {"c_server": ps_cpu / ps_bytes,  # s per byte in or out of a server
            "c_worker": (all_cpu - ps_cpu) / ps_bytes,  # workers' s per byte they push or pull
            "cpu_per_step": all_cpu / steps}


def transport_costs(text):
    many = re.search(r"small variables, (\d+) x (\d+) floats per push: (\d+) updates/s "
                     r"\((\d+) pushes/s\)", text)
    one = re.search(r"small variables, 1 x (\d+) floats per push: (\d+) updates/s", text)
    return {"c_message": 1 / float(one.group(2)),  # a one-tensor push, answered
            "c_tensor": 1 / float(many.group(3))}  # a tensor more in one push


def exchange_time(link_bps, servers, k, client_threads=1, server_hosts=None):
    """Seconds of one worker's push and pull alone, as a pipeline whose slowest stage sets the
    pace: its link (push of M, then the last server host's answer of M/S), the server processes'
    CPU on M/S in and out each (in parallel), its own CPU on 2M (over `client_threads`); plus
    the messages and tensors, paid once."""
    wire = (M + M / (server_hosts or servers)) * 8 / link_bps
    return (max(wire, 2 * M / servers * k["c_server"], 2 * M * k["c_worker"] / client_threads) +
            servers * k["c_message"] + TENSORS * k["c_tensor"])


def throughput(n, servers, step_s, link_bps, k, cores=None):
    """(steps/s, bottleneck) of n workers against `servers` servers: the least of n over one
    worker's step, the servers' links (M/S in and out a step each) and, when `cores` is given,
    the cores all roles share (this machine: every host's CPU is the same 2 cores)."""
    bounds = {"one worker's step": n / (step_s + exchange_time(link_bps, servers, k)),
              "server links": servers * link_bps / 8 / M}
    if cores:
        bounds["shared cores"] = cores / (2 * M * (k["c_server"] + k["c_worker"]))
    name = min(bounds, key=bounds.get)
    return bounds[name], name


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cells", required=True)
    p.add_argument("--transport", required=True)
    p.add_argument("--step_ms", type=float, default=35)
    p.add_argument("--probe_gbit", type=float, default=None,
                   help="what one TCP stream carried through a shaped link here (scale_bench's "
                        "first lines); the cells' links carry the least of it and the rate")
    p.add_argument("--client_threads", type=int, default=3,
                   help="threads of a GPU host's leader moving its bytes (ZeroMQ's 2 I/O threads "
                        "and the role's own)")
    a = p.parse_args()
    cells = json.load(open(a.cells))
    k = fit(cells)
    k.update(transport_costs(open(a.transport).read()))
    step_s = a.step_ms / 1000
    print(f"model: {M / 1e6:.1f} MB a push and a pull ({PARAMS:,} floats, {TENSORS} tensors)")
    print(f"server CPU per byte moved (in or out): {k['c_server'] * 1e9:.2f} s/GB "
          f"({1 / k['c_server'] / 1e9:.2f} GB/s a core)")
    print(f"worker CPU per byte pushed or pulled:  {k['c_worker'] * 1e9:.2f} s/GB")
    print(f"per message (a one-tensor push, answered): {k['c_message'] * 1e6:.1f} us; "
          f"per tensor in a push: {k['c_tensor'] * 1e6:.2f} us")
    print(f"all roles' CPU per step: {k['cpu_per_step']:.3f} s")

    print("\n== the cells: measured against the model with the cores our roles got")
    print("| link | ps | w | measured img/s | model img/s | bound | link bound img/s |")
    print("|---|---|---|---|---|---|---|")
    for c in cells:
        rate = float(re.match(r"(\d+)", c["rate"]).group(1)) * 1e9
        link = min(rate, a.probe_gbit * 1e9) if a.probe_gbit else rate
        x, name = throughput(c["workers"], c["servers"], step_s, link, k, cores=c["all_cores"])
        xl = c["servers"] * link / 8 / M
        print(f"| {c['rate']} | {c['servers']} | {c['workers']} | {c['images_per_sec']:.0f} | "
              f"{x * BATCH:.0f} | {name} | {xl * BATCH:.0f} |")

    print("\n== 64 GPUs: 8 hosts x 8 GPUs, 100 Gbit/s links, one push per host "
          "(--intra_node_sync=nccl), servers on hosts of their own")
    link = 100e9
    one_gpu = BATCH / step_s
    # The host average over NVLink (~150 GB/s bus bandwidth): 2 x 7/8 x M.
    nvlink = 2 * 7 / 8 * M / 150e9
    ring = 2 * 7 / 8 * M
    print(f"one GPU alone: {one_gpu:.0f} img/s; ideal for 64: {64 * one_gpu:.0f} img/s")
    print(f"bytes each host sends (and receives) a step: PS {M / 1e6:.1f} MB; ring all-reduce "
          f"over the 8 hosts 2(N-1)/N x M = {ring / 1e6:.1f} MB ({ring / M:.2f} x); over 64 "
          f"flat ranks {2 * 63 / 64 * M / 1e6:.1f} MB a GPU")
    # The exchange runs after backward (pstrain now), or under backward (BytePS, Horovod:
    # per-layer pushes while backward goes on; backward is ~2/3 of a step).
    for overlap, hidden in (("push after backward (pstrain now)", 0.0),
                            ("push under backward (BytePS, Horovod)", 2 / 3)):
        print(f"\n-- {overlap}; the leader's client on {a.client_threads} threads")
        print("| server hosts | cores each | server processes | img/s | efficiency vs 64 x one GPU"
              " | bound | server link use |")
        print("|---|---|---|---|---|---|---|")
        for servers in (1, 2, 3, 4, 8):
            for cores in (8, 16, 32):
                # A server process keeps ~3 cores busy (its loop and ZeroMQ's 2 I/O threads):
                # a host runs cores/3 of them, each with its share of the variables.
                procs = servers * max(1, cores // 3)
                exposed = max(0.0, exchange_time(link, procs, k, a.client_threads, servers) -
                              hidden * step_s)
                bounds = {"host step": 8 / (step_s + nvlink + exposed),
                          "server links": servers * link / 8 / M,
                          "server CPU": servers * cores / (2 * M * k["c_server"])}
                name = min(bounds, key=bounds.get)
                x = bounds[name]
                use = x * M * 8 / (servers * link)
                print(f"| {servers} | {cores} | {procs} | {x * 8 * BATCH:.0f} | "
                      f"{x * 8 * BATCH / (64 * one_gpu) * 100:.1f}% | {name} | {use * 100:.0f}% |")
    need = 0.9 * 8 / step_s * M  # bytes a second into (and out of) the servers at 90%
    print(f"\nat 90%: {need / 1e9:.1f} GB/s into the servers and as much out: "
          f">= {need * 8 / link:.2f} server links of 100 Gbit/s, "
          f">= {2 * need * k['c_server']:.1f} server cores at {k['c_server'] * 1e9:.2f} s/GB")


if __name__ == "__main__":
    main()
