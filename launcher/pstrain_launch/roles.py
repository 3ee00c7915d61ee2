"""Turns a Cluster into one command line and environment per role (ps, worker, evaluator)."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import Dict, List, Optional

from .cluster import Cluster

# Runs on the remote host as `sh -c SCRIPT pstrain-launch GRACE COMMAND...` in the process group
# sshd gives each session. Without -tt sshd sends no SIGHUP when ssh goes away, so a watcher
# reads the session's stdin: at EOF (the launcher stopping the role, or the launcher or ssh dying)
# it sends SIGTERM to the group, then SIGKILL after GRACE seconds. The shell survives SIGTERM to
# report the role's exit code, then stops whatever the role left in the group (it would hold
# the session's stdout open and keep ssh from exiting).
REMOTE_SUPERVISOR = (
    'g=$1; shift; exec 3<&0 0</dev/null; trap : TERM; '
    '{ trap "" TERM; while read -r _; do :; done; kill -TERM 0; n=0; '
    'while [ $n -lt $g ] && kill -0 $$; do sleep 1; n=$((n+1)); done; kill -KILL 0; '
    '} <&3 >/dev/null 2>&1 & w=$!; exec 3<&-; '
    '"$@"; c=$?; kill -KILL $w 2>/dev/null; kill -TERM 0 2>/dev/null; '
    '{ sleep 1; kill -KILL 0; } </dev/null >/dev/null 2>&1 & exit $c')


@dataclass
class Role:
    job: str       # ps | worker | evaluator
    index: int
    host: str
    flags: List[str]         # everything after the binary
    env: Dict[str, str]      # what the launcher sets: CUDA_VISIBLE_DEVICES, PSTRAIN_ROLE
    log_path: str
    node: str = ""           # the Slurm node it runs on (Slurm mode), named in its messages

    @property
    def name(self) -> str:
        """Short name for summaries: ps0, worker1, evaluator0."""
        return f"{self.job}{self.index}"

    @property
    def where(self) -> str:
        """ps0, or `ps0 on node1` in Slurm mode."""
        return f"{self.name} on {self.node}" if self.node else self.name


@dataclass
class LaunchOptions:
    config: str
    train_dir: str
    logdir: str
    extra_flags: List[str]
    grace_period: float = 10.0
    curve_keys: str = ""  # CURVE key directories, one per role (keys.py); "" for plaintext
    insecure: bool = False  # plaintext beyond loopback (ssh mode with --no_curve): --insecure


def host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def gpu_host_flags(cluster: Cluster) -> List[str]:
    """--intra_node_sync=nccl when workers share a host and each has its own GPUs (one worker
    per GPU, as Horovod and BytePS run them), unless the cluster file's flags choose; for every
    role, since servers then count one pusher per host."""
    if "intra_node_sync" in cluster.flags or cluster.elastic:  # a fixed group per host
        return []
    by_host: Dict[str, List[str]] = {}
    for w in cluster.worker:
        by_host.setdefault(w.host, []).append(w.gpus)
    shared = [gpus for gpus in by_host.values() if len(gpus) > 1]
    # NCCL takes one rank per GPU: each worker of a shared host needs GPUs of its own.
    if shared and all(all(g != "" for g in gpus) and len(set(gpus)) == len(gpus)
                      for gpus in shared):
        return ["--intra_node_sync=nccl"]
    return []


def cluster_flags(cluster: Cluster) -> List[str]:
    """The cluster file's replicas, min_workers and max_workers, as every role's flags (none
    when unset, so a fixed cluster's command lines are as before)."""
    flags = [f"--replicas={cluster.replicas}"] if cluster.replicas else []
    if cluster.elastic:
        flags += [f"--min_workers={cluster.min_workers}", f"--max_workers={cluster.max_workers}"]
    return flags


def _address(cluster: Cluster, host: str) -> str:
    return cluster.addresses.get(host, host)


def _worker_hosts(cluster: Cluster, up_to: int = 0) -> str:
    """--worker_hosts: the worker list's entries, then, up to task `up_to` for a worker added
    beyond it (control.py), the host of the list's last worker with port 0: workers listen on
    their port only for --intra_node_sync, which min_workers rules out."""
    entries = [host_port(_address(cluster, w.host), w.port) for w in cluster.worker]
    last = _address(cluster, cluster.worker[-1].host)
    entries += [host_port(last, 0) for _ in range(len(entries), up_to + 1)]
    return ",".join(entries)


def build_roles(cluster: Cluster, opts: LaunchOptions) -> List[Role]:
    """Roles in start order: every ps, then every worker, then every evaluator."""
    role = _role_maker(cluster, opts, _worker_hosts(cluster))
    roles = [role("ps", i, s.host, "") for i, s in enumerate(cluster.ps)]
    roles += [role("worker", i, w.host, w.gpus) for i, w in enumerate(cluster.worker)]
    roles += [role("evaluator", i, e.host, "") for i, e in enumerate(cluster.evaluator)]
    for r in roles:
        r.env.update(runtime_env(r, roles, cluster.mode, cluster.cores.get(r.host)))
    return roles


def added_worker(cluster: Cluster, opts: LaunchOptions, index: int) -> Role:
    """Worker `index` started by add-worker: as the others, on the worker list's entry when it
    has one, else on the host of the list's last worker with that worker's gpus."""
    w = cluster.worker[index] if index < len(cluster.worker) else cluster.worker[-1]
    role = _role_maker(cluster, opts, _worker_hosts(cluster, index))("worker", index, w.host,
                                                                     w.gpus)
    others = build_roles(cluster, opts)
    role.env.update(runtime_env(role, others + [role], cluster.mode, cluster.cores.get(role.host)))
    return role


def _role_maker(cluster: Cluster, opts: LaunchOptions, worker_hosts: str):
    ps_hosts = ",".join(host_port(_address(cluster, s.host), s.port) for s in cluster.ps)
    log_dir = os.path.join(opts.train_dir, "launcher")

    def role(job: str, index: int, host: str, gpus: str) -> Role:
        flags = [f"--job_name={job}", f"--task_index={index}", f"--ps_hosts={ps_hosts}",
                 f"--worker_hosts={worker_hosts}", f"--evaluators={len(cluster.evaluator)}",
                 f"--config={opts.config}",
                 f"--train_dir={opts.train_dir}", f"--logdir={opts.logdir}"]
        flags += cluster_flags(cluster)
        if opts.curve_keys:
            flags.append(f"--curve_keys={os.path.join(opts.curve_keys, f'{job}-{index}')}")
        if opts.insecure:
            flags.append("--insecure")
        flags += gpu_host_flags(cluster)  # before the user's flags, which win
        flags += [f"--{name}={value}" for name, value in cluster.flags.items()]
        flags += opts.extra_flags
        env = {"CUDA_VISIBLE_DEVICES": gpus, "PSTRAIN_ROLE": f"{job}:{index}"}
        return Role(job, index, host, flags, env, os.path.join(log_dir, f"{job}-{index}.log"),
                    node=host if cluster.mode == "slurm" else "")

    return role


def runtime_env(role: Role, roles: List[Role], mode: str,
                cores: Optional[int] = None) -> Dict[str, str]:
    """OpenMP and malloc settings for a role. Idle OpenMP threads sleep instead of spinning
    against other roles' threads, and large tensor buffers come from huge pages (glibc >= 2.35),
    which spares a page fault per 4 KiB of every received frame. In local mode the machine's
    cores are split among the roles: workers share them, servers and evaluators that share the
    host with workers take one thread each; in Slurm mode a node's `cores` (what the job holds
    there) are split the same way."""
    env = {"OMP_WAIT_POLICY": "PASSIVE", "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
    if mode == "local":
        cores = os.cpu_count() or 1
    elif cores is None:
        return env  # a remote host's cores are its own business
    workers_here = sum(1 for r in roles if r.job == "worker" and r.host == role.host)
    if role.job == "worker":
        threads = max(1, cores // max(1, workers_here))
    else:
        threads = 1 if workers_here else cores
    env["OMP_NUM_THREADS"] = str(threads)
    return env


def local_binary(cluster: Cluster, repo_root: str) -> str:
    """The binary's path for exec: relative to the repository root, shown relative to the
    current directory when it lies below it."""
    path = os.path.normpath(os.path.join(repo_root, cluster.binary))
    rel = os.path.relpath(path)
    if rel.startswith(".."):
        return path
    return rel if os.sep in rel else os.path.join(".", rel)


def local_argv(role: Role, binary: str) -> List[str]:
    return [binary] + role.flags


def _remote_dir_word(remote_dir: str) -> str:
    # Keep `~/` unquoted so the remote shell expands it.
    if remote_dir == "~":
        return "~"
    if remote_dir.startswith("~/"):
        return "~/" + shlex.quote(remote_dir[2:])
    return shlex.quote(remote_dir)


def remote_command(role: Role, cluster: Cluster, grace_period: float) -> str:
    """The command string ssh hands to the remote login shell."""
    binary = cluster.binary
    if not binary.startswith(("/", "~")) and "/" not in binary:
        binary = "./" + binary  # relative to remote_dir, not looked up in PATH
    command = ["env"] + [f"{k}={v}" for k, v in role.env.items()] + [binary] + role.flags
    return (f"cd {_remote_dir_word(cluster.ssh.remote_dir)} && exec sh -c "
            f"{shlex.quote(REMOTE_SUPERVISOR)} pstrain-launch {int(round(grace_period))} "
            + " ".join(shlex.quote(word) for word in command))


def ssh_argv(role: Role, cluster: Cluster, grace_period: float) -> List[str]:
    return ssh_prefix(cluster, role.host) + [remote_command(role, cluster, grace_period)]


def ssh_prefix(cluster: Cluster, host: str) -> List[str]:
    """`ssh [options] [user@]host`, for a remote command to follow."""
    ssh = cluster.ssh
    argv = ["ssh"]
    for option in ssh.options:  # first: ssh keeps the first value given for an option
        argv += ["-o", option]
    argv += ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new"]
    if ssh.port is not None:
        argv += ["-p", str(ssh.port)]
    if ssh.identity_file:
        argv += ["-i", os.path.expanduser(ssh.identity_file)]
    argv.append(f"{ssh.user}@{host}" if ssh.user else host)
    return argv


def describe(role: Role, argv: List[str], ssh_mode: bool) -> str:
    """A copy-pasteable shell line for --dry_run."""
    if ssh_mode:
        return " ".join(shlex.quote(word) for word in argv)
    env = [f"{k}={shlex.quote(v)}" for k, v in role.env.items()]
    return " ".join(["env"] + env + [shlex.quote(word) for word in argv])
