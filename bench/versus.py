#!/usr/bin/env python3
"""The parameter server's transport bench, this build against another (an older commit's), in one
command: is a change within noise of before?

Runs pstrain-bench-ps-transport from --old and --new alternately (--rounds each, so that the
machine's drift falls on both), reads from each run the push+pull rate of the large variable and
the update rate of one small variable per push (a push's whole path through the server: its
checks, the update policy, the reply), and prints the medians and `ratio: X.XX`, new over old for
the small pushes (the figure a server's per-push work moves). Flags after `--` go to both runs
(e.g. --curve for the rates over CurveZMQ).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

LARGE = re.compile(r"push\+pull through the parameter server .*?: ([0-9.]+) GB/s")
LARGE_CURVE = re.compile(r"median: plaintext ([0-9.]+) GB/s, CURVE ([0-9.]+) GB/s")
SMALL = re.compile(r"1 x \d+ floats per push: ([0-9.]+) updates/s")
SMALL_CURVE = re.compile(r"1 x \d+ floats per push.*?CURVE ([0-9.]+) updates/s")


def run(binary, flags):
    env = dict(os.environ, GLIBC_TUNABLES="glibc.malloc.hugetlb=1", OMP_WAIT_POLICY="PASSIVE")
    out = subprocess.run([binary] + flags, env=env, capture_output=True, text=True, check=True)
    text = out.stdout
    curve = "--curve" in flags
    large = LARGE_CURVE.search(text) if curve else LARGE.search(text)
    small = (SMALL_CURVE if curve else SMALL).search(text)
    if large is None or small is None:
        sys.exit(f"bench/versus.py: no rates in the output of {binary}:\n{text}")
    return float(large.group(2 if curve else 1)), float(small.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--old", required=True, help="the other build's pstrain-bench-ps-transport")
    p.add_argument("--new", required=True, help="this build's pstrain-bench-ps-transport")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("flags", nargs="*")
    a = p.parse_args()
    for b in (a.old, a.new):
        if not os.access(b, os.X_OK):
            sys.exit(f"bench/versus.py: {b} is not an executable (build the bench target there)")
    rates = {"old": [], "new": []}
    for r in range(a.rounds):
        for side in ("old", "new"):
            large, small = run(getattr(a, side), a.flags)
            rates[side].append((large, small))
            print(f"round {r} {side}: {large:.2f} GB/s large push+pull, {small:.0f} small updates/s",
                  flush=True)
    med = {s: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
           for s, v in rates.items()}
    for s in ("old", "new"):
        print(f"{s} (median): {med[s][0]:.2f} GB/s large push+pull, {med[s][1]:.0f} small updates/s")
    print(f"large push+pull, new over old: {med['new'][0] / med['old'][0]:.2f}")
    print(f"ratio: {med['new'][1] / med['old'][1]:.2f}")


if __name__ == "__main__":
    main()
