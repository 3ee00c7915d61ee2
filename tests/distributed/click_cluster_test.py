"""A click model trained by a cluster (issue 30): the shipped configs/widedeep.yaml on a synthetic
click log (pstrain-synth-ctr) under pstrain-launch with 2 servers, 2 workers and an evaluator. The
embedding rows live on the servers, sharded by id; each worker reads its shard of the log, pulls
its batch's rows and pushes their gradients back. Asserted afterwards:
  - a worker given a flag a click model cannot take (--device=gpu, --intra_node_sync,
    --elastic_data, --synthetic_step_ms) stops at start naming it;
  - the run ends "done" (launcher exit 0; its summary shows the AUC) with a test AUC within 0.03 of what pstrain-train
    reaches in one process on the same config, data and epochs, and above 0.6 (it learned);
  - every server took row pushes (far more pushes than updates) and refused or dropped none,
    in async mode and in a second, sync-mode run (a row push goes before the dense push; its rows
    are applied once per window, their mean, and the run's AUC above 0.6): an honest
    worker's row pushes each follow its pull (ps/row_pull_ledger.h); its TensorBoard run shows
    the rows it holds (within 10% of the other's: rows spread by id) and its resident memory;
  - the evaluator reported the AUC while training ran;
  - model.safetensors holds the dense variables only (the tables stay in the servers'
    checkpoints), and no embedding layer's gathered rows.

  click_cluster_test.py --pstrain BUILD/pstrain --train BUILD/pstrain-train
                        --synth BUILD/pstrain-synth-ctr
Environment: PSTRAIN_CLICK_KEEP=1 keeps the directories.
"""

import argparse
import json
import os
import re
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "summary"))
from decode_events import decode_event, read_records  # noqa: E402
from launched_run import LocalRun, click_config, read  # noqa: E402

EPOCHS = 4


def auc_of(text, what, problems):
    m = re.search(r"test AUC ([0-9.]+)", text)
    if not m:
        problems.append(f"{what} reported no test AUC")
        return None
    return float(m.group(1))


def last_scalars(run_dir):
    """Each tag's last scalar in the event files of `run_dir`."""
    last = {}
    for name in sorted(os.listdir(run_dir)) if os.path.isdir(run_dir) else []:
        with open(os.path.join(run_dir, name), "rb") as f:
            for record in read_records(f.read()):
                for v in decode_event(record).get("values", []):
                    if v["kind"] == "scalar":
                        last[v["tag"]] = v["value"]
    return last


def check_server_took_rows(ps_log, who, problems):
    """The server's stop line: far more pushes than updates (the row pushes), none rejected and
    none dropped as stale (a row push lands in its step's window in every update mode)."""
    stop = re.search(r"stopped at global step \d+ \((\d+) pushes, \d+ pulls, (\d+) updates, "
                     r"(\d+) stale dropped, (\d+) rejected", ps_log)
    if not stop:
        problems.append(f"{who} logged no stop line")
        return
    pushes, updates, stale, rejected = (int(g) for g in stop.groups())
    print(f"{who}: {pushes} pushes, {updates} updates, {stale} stale dropped, {rejected} rejected",
          flush=True)
    if pushes < 10 * updates:
        problems.append(f"{who} took {pushes} pushes for {updates} updates: no row pushes?")
    if rejected != 0 or stale != 0:
        problems.append(f"{who} rejected {rejected} and dropped {stale} pushes of honest workers")


def safetensors_names(path):
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    return [name for name in header if name != "__metadata__"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pstrain", required=True)
    parser.add_argument("--train", required=True)
    parser.add_argument("--synth", required=True)
    args = parser.parse_args()
    config, data = click_config(args.synth, 20000, 4000, 3, "pstrain-click-data-")
    problems = []

    # Flags a click model cannot take stop a worker at start, naming the flag.
    refusals = {"--device=gpu": "--device=gpu", "--intra_node_sync=cpu": "--intra_node_sync=cpu",
                "--elastic_data": "--elastic_data", "--synthetic_step_ms=5": "--synthetic_step_ms"}
    for flag, named in refusals.items():
        r = subprocess.run([args.pstrain, "--job_name=worker", "--task_index=0",
                            "--ps_hosts=127.0.0.1:1", "--worker_hosts=127.0.0.1:2,127.0.0.1:3",
                            f"--config={config}", f"--train_dir={data}/refused", flag],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=60)
        if r.returncode == 0 or f"{named} is not for a model with sparse tables" not in r.stdout:
            problems.append(f"a worker with {flag} did not stop at start naming it: "
                            f"exit {r.returncode}\n{r.stdout[-1500:]}")

    local = subprocess.run([args.train, f"--config={config}", f"--epochs={EPOCHS}",
                            f"--train_dir={data}/local"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=600)
    if local.returncode != 0:
        raise SystemExit(f"FAIL: pstrain-train exited {local.returncode}:\n{local.stdout}")
    local_auc = auc_of(local.stdout, "pstrain-train", problems)

    run = LocalRun("pstrain-click-", args.pstrain, num_ps=2, num_workers=2,
                   flags=f"epochs: {EPOCHS}, log_every_n_steps: 50",
                   restart="policy: never",
                   extra="evaluator:\n  - {host: 127.0.0.1}\n", config=config)
    launcher = run.start()
    code = launcher.proc.wait(timeout=900)
    out = launcher.output()
    if code != 0:
        problems.append(f"the launcher exited {code}, expected 0:\n{out[-3000:]}")
    summary_auc = re.search(r"\n  test AUC +([0-9.]+)", out)
    if not summary_auc:
        problems.append("the launcher's summary shows no test AUC")
    chief = read(os.path.join(run.log_dir, "worker-0.log"))
    done = re.search(r"done: global step (\d+).*", chief)
    if not done:
        problems.append("the chief printed no 'done:' line")
    else:
        print(f"chief: {done.group(0)}", flush=True)
    auc = auc_of(done.group(0) if done else "", "the chief", problems)
    if auc is not None and local_auc is not None:
        print(f"test AUC: cluster {auc:.4f}, one process {local_auc:.4f}", flush=True)
        if auc < local_auc - 0.03 or auc < 0.6:
            problems.append(f"the cluster's AUC {auc} is below the one process's {local_auc} "
                            "by more than 0.03, or below 0.6")

    held = []
    for k in range(2):
        ps = read(os.path.join(run.log_dir, f"ps-{k}.log"))
        check_server_took_rows(ps, f"ps {k}", problems)
        scalars = last_scalars(os.path.join(run.train_dir, "logs", f"ps-{k}"))
        rows, memory = scalars.get("ps/table_rows", 0), scalars.get("ps/memory_mb", 0)
        print(f"ps {k}'s TensorBoard run: {rows:.0f} table rows, {memory:.1f} MiB resident",
              flush=True)
        if rows <= 0 or memory <= 0:
            problems.append(f"ps {k}'s TensorBoard run lacks its table rows or memory: {scalars}")
        held.append(rows)
    if len(held) == 2 and abs(held[0] - held[1]) > 0.1 * max(held):
        problems.append(f"rows are not spread by id over the servers: {held}")

    evaluator = read(os.path.join(run.log_dir, "evaluator-0.log"))
    if "test AUC" not in evaluator:
        problems.append("the evaluator reported no test AUC")

    model = os.path.join(run.train_dir, "model.safetensors")
    names = safetensors_names(model) if os.path.exists(model) else []
    if not names:
        problems.append("no model.safetensors, or an empty one")
    if any(n.endswith("/rows") for n in names):
        problems.append(f"model.safetensors holds gathered rows: {names}")
    if not any(n.startswith("deep1/") for n in names):
        problems.append(f"model.safetensors lacks the dense layers: {names}")

    # Sync mode: a worker's row pushes go before its dense push, so that they land in the step's
    # window (sent after it, every one was dropped as stale and the tables never learnt).
    sync = LocalRun("pstrain-click-sync-", args.pstrain, num_ps=2, num_workers=2,
                    flags="epochs: 1, update_mode: sync, log_every_n_steps: 50",
                    restart="policy: never", config=config)
    sync_code = sync.start().proc.wait(timeout=900)
    if sync_code != 0:
        problems.append(f"the sync-mode run's launcher exited {sync_code}")
    for k in range(2):
        check_server_took_rows(read(os.path.join(sync.log_dir, f"ps-{k}.log")),
                               f"sync mode, ps {k}", problems)
    # Its rows are applied once per window, as the mean of the window's pushes: it learns.
    sync_done = re.search(r"done: global step (\d+).*", read(os.path.join(sync.log_dir, "worker-0.log")))
    sync_auc = auc_of(sync_done.group(0) if sync_done else "", "the sync-mode chief", problems)
    if sync_auc is not None:
        print(f"sync mode: test AUC {sync_auc:.4f} after 1 epoch", flush=True)
        if sync_auc < 0.6:
            problems.append(f"the sync-mode run's test AUC {sync_auc:.4f} < 0.6: it did not learn")

    if problems:
        print(f"FAIL (kept {run.tmp}, {sync.tmp} and {data}):\n  " + "\n  ".join(problems), flush=True)
        return 1
    print("PASS: the cluster trained the click model with its rows on the servers", flush=True)
    run.remove(keep_env="PSTRAIN_CLICK_KEEP")
    sync.remove(keep_env="PSTRAIN_CLICK_KEEP")
    if os.environ.get("PSTRAIN_CLICK_KEEP") != "1":
        subprocess.run(["rm", "-rf", data], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
