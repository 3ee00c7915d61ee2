"""Slurm mode (`pstrain-launch --slurm`): the cluster is the allocation the launcher runs in
(an sbatch script or salloc), and every role is an srun step on its node.

Horovod and BytePS leave Slurm to the user, who writes the host lists by hand. Here the nodes
come from Slurm's own variables (SLURM_JOB_NODELIST expanded by `scontrol show hostnames`,
SLURM_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE, the GPUs of the allocation), the roles are
placed by a small layout (servers per node, workers per node or per GPU, evaluators on the last
nodes), and the TensorFlow flags come from roles.build_roles as in the other modes.

Each role runs as `srun --nodes=1 --ntasks=1 --nodelist=NODE --overlap`, so Slurm tracks,
signals (scancel, the time limit) and cleans up every process. --overlap rather than --exact:
a step of its own holds its CPUs, memory and GPUs, so a node's second role would wait for the
first to end (Slurm 22.05: "step creation temporarily disabled"), and --exact would bind a
worker to one CPU. The roles of a node share what the job holds there; the launcher splits the
threads (OMP_NUM_THREADS) and hands each worker its GPUs, as local mode does.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import uuid
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Tuple

from .cluster import Cluster, Evaluator, Server, SshSettings, Worker
from .roles import Role

# SLURM_* variables of the batch step that srun would read as options of every role's step
# (tasks and nodes of the whole job); each step says its own.
SRUN_DROPPED_ENV = ("SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NTASKS_PER_NODE",
                    "SLURM_NTASKS_PER_SOCKET", "SLURM_NTASKS_PER_CORE", "SLURM_NNODES",
                    "SLURM_DISTRIBUTION", "SLURM_ARBITRARY_NODELIST")
CHECK_TIMEOUT_S = 120.0
PORTS_PER_JOB = 20  # default ports: 20000 + 20 * (job id % 600), below Linux's ephemeral range

# Runs inside a GPU worker's step as `sh -c SCRIPT pstrain-launch SLOTS BINARY FLAGS...`. SLOTS
# are positions among the GPUs the step sees: Slurm sets CUDA_VISIBLE_DEVICES per step (with
# cgroups, renumbered from 0), so the worker's own GPUs are looked up there. Without a list the
# positions are the device numbers.
GPU_PICKER = (
    'slots=$1; shift; set -f; seen=${CUDA_VISIBLE_DEVICES-}; '
    'case $seen in NoDevFiles) seen= ;; esac; mine=; IFS=,; '
    'for s in $slots; do d=$s; '
    'if [ -n "$seen" ]; then i=0; d=; '
    'for v in $seen; do [ "$i" = "$s" ] && d=$v; i=$((i+1)); done; '
    'if [ -z "$d" ]; then echo "pstrain-launch: ${SLURMD_NODENAME-}: GPU position $s is not '
    'among the $i GPU(s) of this step (CUDA_VISIBLE_DEVICES=$seen)" >&2; exit 2; fi; fi; '
    'mine=${mine:+$mine,}$d; done; unset IFS; '
    'CUDA_VISIBLE_DEVICES=$mine; export CUDA_VISIBLE_DEVICES; exec "$@"')

# Runs once on every node before any role starts: does the node see the launcher's token file in
# the train_dir, the binary and the config? Prints one line per problem.
NODE_CHECK = (
    'node=${SLURMD_NODENAME:-$(hostname)}; token=$1; want=$2; binary=$3; config=$4; '
    'if [ "$(cat "$token" 2>/dev/null)" != "$want" ]; then '
    'echo "$node: does not see $token (written by the launcher on this job\'s first node)"; fi; '
    '[ -x "$binary" ] || echo "$node: $binary is not an executable file"; '
    '[ -r "$config" ] || echo "$node: $config is not readable"; true')


class SlurmError(Exception):
    """Why the allocation cannot hold the asked-for cluster; nothing was started."""


@dataclass
class Allocation:
    """What the job holds, as Slurm describes it to the batch script."""
    job_id: str
    nodes: List[str]              # in the order of SLURM_JOB_NODELIST
    addresses: Dict[str, str]     # node -> the address roles connect to (scontrol's NodeAddr)
    tasks: Dict[str, int]         # Slurm tasks per node (SLURM_TASKS_PER_NODE)
    cpus: Dict[str, int]          # CPUs the job holds per node (SLURM_JOB_CPUS_PER_NODE)
    gpus_per_node: int
    gpus_from: str                # which variable said so, for --dry_run and errors
    ntasks_per_node: Optional[int] = None  # SLURM_NTASKS_PER_NODE, when the job asked for it


@dataclass
class Layout:
    """Where the roles go, from pstrain-launch's command line."""
    ps: Optional[int] = None             # servers in all, round-robin from the first node
    ps_per_node: int = 1                 # used when ps is None
    workers_per_node: Optional[str] = None  # "gpu", a number, or None: from the allocation
    evaluators: int = 1                  # on the last nodes
    port: Optional[int] = None           # first port on each address; None: from the job id
    gpus_per_node: Optional[int] = None  # None: from the allocation


@dataclass
class Plan:
    cluster: Cluster
    job_id: str
    notes: List[str] = field(default_factory=list)  # how the layout was decided, for the logs


def expand_counts(text: str, count: int, name: str) -> List[int]:
    """Slurm's compressed per-node counts: "2(x3),1" -> [2, 2, 2, 1]."""
    out: List[int] = []
    for part in filter(None, text.split(",")):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not m:
            raise SlurmError(f"{name}={text}: expected counts like 2(x3),1")
        out += [int(m.group(1))] * int(m.group(2) or 1)
    if len(out) != count:
        raise SlurmError(f"{name}={text} gives {len(out)} node(s), expected {count} (one per node "
                         f"of SLURM_JOB_NODELIST)")
    return out


def gpus_on_node(env: Mapping[str, str]) -> Tuple[int, str]:
    """GPUs the job holds on each node (the batch node's count; Slurm nodes of one job are
    usually alike) and the variable that said so."""
    value = env.get("SLURM_GPUS_ON_NODE", "")
    if value.isdigit():
        return int(value), "SLURM_GPUS_ON_NODE"
    value = env.get("SLURM_GPUS_PER_NODE", "")  # "4" or "a100:4"
    count = value.rsplit(":", 1)[-1]
    if count.isdigit():
        return int(count), "SLURM_GPUS_PER_NODE"
    value = env.get("CUDA_VISIBLE_DEVICES", "")
    if value and value != "NoDevFiles":
        return len([d for d in value.split(",") if d]), "CUDA_VISIBLE_DEVICES"
    return 0, "no GPU in the allocation"


def _scontrol(args: List[str], timeout: float = 60.0) -> str:
    try:
        result = subprocess.run(["scontrol"] + args, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, timeout=timeout)
    except FileNotFoundError:
        raise SlurmError("scontrol is not on PATH (Slurm's client commands: Debian's "
                         "slurm-client)") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"scontrol {' '.join(args)} timed out after {timeout:g} s") from None
    if result.returncode != 0:
        raise SlurmError(f"scontrol {' '.join(args)} failed (exit {result.returncode}): "
                         f"{result.stderr.strip()}")
    return result.stdout


def node_addresses(nodes: List[str], show_node: str) -> Dict[str, str]:
    """NodeAddr of each node from `scontrol -o show node` (one line per node); a node's name
    where the line has none."""
    found = {}
    for line in show_node.splitlines():
        name = re.search(r"\bNodeName=(\S+)", line)
        addr = re.search(r"\bNodeAddr=(\S+)", line)
        if name and addr and addr.group(1) not in ("(null)", ""):
            found[name.group(1)] = addr.group(1)
    return {n: found.get(n, n) for n in nodes}


def read_allocation(env: Mapping[str, str],
                    scontrol: Callable[[List[str]], str] = _scontrol) -> Allocation:
    job_id = env.get("SLURM_JOB_ID", "")
    nodelist = env.get("SLURM_JOB_NODELIST", "") or env.get("SLURM_NODELIST", "")
    if not job_id or not nodelist:
        raise SlurmError("--slurm: not inside a Slurm allocation (SLURM_JOB_ID and "
                         "SLURM_JOB_NODELIST are not set); run it from an sbatch script or "
                         "under salloc")
    # The batch script has no step id; salloc's shell may run in the interactive step.
    if env.get("SLURM_STEP_ID") not in (None, "", "batch", "4294967294", "interactive",
                                        "4294967290"):
        raise SlurmError(f"--slurm: running inside step {job_id}.{env['SLURM_STEP_ID']} (under "
                         "srun); run pstrain-launch once from the batch script or salloc's "
                         "shell: it starts an srun step for every role itself")
    nodes = scontrol(["show", "hostnames", nodelist]).split()
    if not nodes:
        raise SlurmError(f"scontrol show hostnames {nodelist} printed no node names")
    try:
        addresses = node_addresses(nodes, scontrol(["-o", "show", "node", nodelist]))
    except SlurmError:
        addresses = {n: n for n in nodes}  # a name that resolves is the usual case
    tasks = expand_counts(env.get("SLURM_TASKS_PER_NODE", f"1(x{len(nodes)})"), len(nodes),
                          "SLURM_TASKS_PER_NODE")
    cpus_text = env.get("SLURM_JOB_CPUS_PER_NODE", "")
    cpus = (expand_counts(cpus_text, len(nodes), "SLURM_JOB_CPUS_PER_NODE") if cpus_text
            else [os.cpu_count() or 1] * len(nodes))
    gpus, gpus_from = gpus_on_node(env)
    per_node = env.get("SLURM_NTASKS_PER_NODE", "")
    return Allocation(job_id, nodes, addresses, dict(zip(nodes, tasks)), dict(zip(nodes, cpus)),
                      gpus, gpus_from, int(per_node) if per_node.isdigit() else None)


def _workers_per_node(alloc: Allocation, layout: Layout, gpus: int) -> Tuple[Dict[str, int], str]:
    choice = layout.workers_per_node
    if choice == "gpu":
        if gpus == 0:
            raise SlurmError("--workers_per_node gpu: the allocation has no GPUs (none of "
                             "SLURM_GPUS_ON_NODE, SLURM_GPUS_PER_NODE, CUDA_VISIBLE_DEVICES); ask "
                             "for them (sbatch --gpus-per-node=N) or give a number of workers")
        return {n: gpus for n in alloc.nodes}, "one per GPU"
    if choice is not None:
        return {n: int(choice) for n in alloc.nodes}, "--workers_per_node"
    if alloc.ntasks_per_node:
        return ({n: alloc.ntasks_per_node for n in alloc.nodes},
                "SLURM_NTASKS_PER_NODE (sbatch --ntasks-per-node)")
    if gpus:
        return {n: gpus for n in alloc.nodes}, f"one per GPU ({alloc.gpus_from})"
    return dict(alloc.tasks), "Slurm's tasks per node (SLURM_TASKS_PER_NODE)"


def _gpu_slots(count: int, gpus: int, node: str) -> List[str]:
    """Each worker's GPU positions on a node: an equal contiguous share, "" without GPUs."""
    if gpus == 0:
        return [""] * count
    if count > gpus:
        raise SlurmError(f"{node}: {count} workers but {gpus} GPU(s) per node; expected at most "
                         "one worker per GPU (--workers_per_node), or --gpus_per_node 0 for "
                         "workers on the CPU")
    share = gpus // count
    return [",".join(str(k * share + j) for j in range(share)) for k in range(count)]


def default_port(job_id: str) -> int:
    digits = re.match(r"\d+", job_id)
    return 20000 + PORTS_PER_JOB * (int(digits.group(0)) % 600 if digits else 0)


def plan_cluster(alloc: Allocation, layout: Layout, binary: str) -> Plan:
    """Places every role on a node of the allocation; raises SlurmError if it cannot."""
    nodes = alloc.nodes
    gpus = alloc.gpus_per_node if layout.gpus_per_node is None else layout.gpus_per_node
    gpus_from = alloc.gpus_from if layout.gpus_per_node is None else "--gpus_per_node"
    if layout.ps is not None:
        ps_nodes = [nodes[i % len(nodes)] for i in range(layout.ps)]
    else:
        ps_nodes = [n for n in nodes for _ in range(layout.ps_per_node)]
    counts, counts_from = _workers_per_node(alloc, layout, gpus)
    worker_places = [(n, slots) for n in nodes for slots in _gpu_slots(counts[n], gpus, n)]
    if not ps_nodes:
        raise SlurmError("no parameter server: expected --ps or --ps_per_node of at least 1")
    if not worker_places:
        raise SlurmError(f"no worker: {counts_from} gives 0 per node")
    eval_nodes = [nodes[-1 - i % len(nodes)] for i in range(layout.evaluators)]

    first = layout.port if layout.port is not None else default_port(alloc.job_id)
    next_port: Dict[str, int] = {}

    def port_on(node: str) -> int:
        address = alloc.addresses[node]  # roles of several nodes may share one address
        port = next_port.get(address, first)
        if port > 65535:
            raise SlurmError(f"ports from {first} run past 65535 on {address}; expected a lower "
                             "--port")
        next_port[address] = port + 1
        return port

    servers = [Server(n, port_on(n)) for n in ps_nodes]
    workers = [Worker(n, port_on(n), slots) for n, slots in worker_places]
    cluster = Cluster(f"Slurm job {alloc.job_id}", "slurm", binary, servers, workers,
                      [Evaluator(n) for n in eval_nodes], {}, SshSettings(),
                      addresses=dict(alloc.addresses), cores=dict(alloc.cpus))
    cpus = sorted(set(alloc.cpus.values()))
    notes = [f"Slurm job {alloc.job_id}: {len(nodes)} node(s) {', '.join(nodes)}; "
             f"{'/'.join(map(str, cpus))} CPU(s) and {gpus} GPU(s) per node ({gpus_from})",
             f"{len(servers)} ps, {len(workers)} worker(s) (per node: {counts_from}), "
             f"{len(eval_nodes)} evaluator(s); ports from {first} on each address"]
    return Plan(cluster, alloc.job_id, notes)


def job_ended(job_id: str) -> Optional[str]:
    """Why the job is ending once Slurm ends it (scancel, the time limit, a node failure) and
    with it every step; None while it runs. A role's step that ends then did not fail on its own,
    and SIGTERM may reach the launcher before or after the steps have ended."""
    try:
        out = _scontrol(["-o", "show", "job", job_id], timeout=10.0)
    except SlurmError:
        return None
    state = re.search(r"\bJobState=(\S+)", out)
    if not state or state.group(1) in ("RUNNING", "PENDING", "CONFIGURING", "SUSPENDED"):
        return None
    if state.group(1) == "COMPLETING":  # Slurm shows no more while the steps are being ended
        return f"Slurm is ending job {job_id} (scancel, its time limit or a node failure)"
    return f"Slurm job {job_id} is {state.group(1)}"


def srun_argv(role: Role, binary: str) -> List[str]:
    """One srun step for one role, its environment set inside the step (Slurm sets
    CUDA_VISIBLE_DEVICES and the like for every step; `env` has the last word)."""
    env = dict(role.env)
    slots = env.pop("CUDA_VISIBLE_DEVICES", "")
    argv = ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={role.host}", "--overlap",
            f"--job-name={role.name}", "env"]
    argv += [f"{k}={v}" for k, v in env.items()]
    if slots:
        argv += ["sh", "-c", GPU_PICKER, "pstrain-launch", slots]
    else:
        argv.append("CUDA_VISIBLE_DEVICES=")
    return argv + [binary] + role.flags


def srun_env(base: Mapping[str, str]) -> Dict[str, str]:
    return {k: v for k, v in base.items() if k not in SRUN_DROPPED_ENV}


def check_nodes(nodes: List[str], train_dir: str, binary: str, config: str) -> None:
    """Before any role starts: every node must see the train_dir (CURVE keys, checkpoints), the
    binary and the config where this node does. One step over all nodes; skipped on one node."""
    if len(nodes) < 2:
        return
    check_dir = os.path.join(train_dir, "launcher")
    os.makedirs(check_dir, exist_ok=True)
    token = uuid.uuid4().hex
    path = os.path.join(check_dir, f".shared-check-{token[:8]}")
    with open(path, "w") as f:
        f.write(token)
    argv = ["srun", f"--nodes={len(nodes)}", f"--ntasks={len(nodes)}", "--ntasks-per-node=1",
            f"--nodelist={','.join(nodes)}", "--overlap", "--job-name=pstrain-check",
            "sh", "-c", NODE_CHECK, "pstrain-check", path, token, binary, config]
    try:
        result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                timeout=CHECK_TIMEOUT_S, env=srun_env(os.environ))
    except subprocess.TimeoutExpired:
        raise SlurmError(f"checking the nodes with srun timed out after {CHECK_TIMEOUT_S:.0f} s "
                         f"({' '.join(shlex.quote(a) for a in argv[:7])} ...)") from None
    except FileNotFoundError:
        raise SlurmError("srun is not on PATH (Slurm's client commands: Debian's "
                         "slurm-client)") from None
    finally:
        os.unlink(path)
    problems = [line for line in result.stdout.splitlines() if line.strip()]
    if result.returncode != 0 or problems:
        hint = ""
        if any("does not see" in p for p in problems):
            hint = (f"\n--train_dir {train_dir} must be on a file system every node shares "
                    "(NFS, Lustre, ...): each role reads its CURVE keys there, and the servers "
                    "and the chief write checkpoints there")
        raise SlurmError("a node cannot run its roles:\n  " + "\n  ".join(
            problems or [f"srun exit {result.returncode}"]) + hint)
