"""pstrain-launch's command line: read the cluster file, build the roles, run or print them."""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from . import control, keys, slurm
from .cluster import LAUNCHER_FLAGS, Cluster, ConfigError, load_cluster, where_set
from .roles import (LaunchOptions, added_worker, build_roles, describe, local_argv, local_binary,
                    ssh_argv)
from .supervisor import Elastic, RoleProcess, Supervisor

USAGE_EXIT = 2
# Layout flags of --slurm; a cluster file says all of this itself.
SLURM_ONLY = ("ps", "ps_per_node", "workers_per_node", "evaluators", "port", "gpus_per_node",
              "binary")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pstrain-launch",
        usage="pstrain-launch (--cluster FILE | --slurm [layout]) --config FILE "
              "[--train_dir DIR] [--logdir DIR] [--dry_run] [options] [-- FLAG...]\n"
              "       pstrain-launch add-worker --train_dir DIR\n"
              "       pstrain-launch remove-worker --train_dir DIR --task N",
        description="Start every parameter server, worker and evaluator of a cluster config "
                    "(locally or over ssh) or of a Slurm allocation, show their progress, and "
                    "stop them all when one fails. Flags after -- go to every role. With "
                    "min_workers in the cluster file, add-worker and remove-worker start and "
                    "stop workers of the running launch (see their --help).")
    p.add_argument("--cluster", help="cluster config, e.g. configs/clusters/local.yaml")
    p.add_argument("--config", required=True, help="training config passed to every role, "
                   "e.g. configs/refnet.yaml (on the remote hosts: relative to remote_dir)")
    p.add_argument("--train_dir", default="runs/dist", help="checkpoints (default: runs/dist); "
                   "the launcher's per-role logs go to TRAIN_DIR/launcher/")
    p.add_argument("--logdir", help="TensorBoard logs (default: TRAIN_DIR/logs)")
    p.add_argument("--dry_run", action="store_true",
                   help="print every role's command line and environment, start nothing")
    p.add_argument("--grace_period", type=float, default=10.0, metavar="S",
                   help="seconds between SIGTERM and SIGKILL when stopping roles (default: 10)")
    p.add_argument("--shutdown_timeout", type=float, default=60.0, metavar="S",
                   help="seconds the servers and evaluators get to exit after the last worker "
                        "(default: 60)")
    p.add_argument("--progress_interval", type=float, default=5.0, metavar="S",
                   help="seconds between progress lines, 0 for none (default: 5)")
    p.add_argument("--max_accuracy_drop", type=float, default=0.1, metavar="A",
                   help="fail a run whose final test accuracy lies more than A below the best an "
                        "evaluator measured during it (default: 0.1; 1 turns it off)")
    curve = p.add_mutually_exclusive_group()
    curve.add_argument("--curve", dest="curve", action="store_true", default=True,
                       help="CurveZMQ between the roles: fresh keys per launch, each role gets "
                            "its own (the default, local runs included)")
    curve.add_argument("--no_curve", dest="curve", action="store_false",
                       help="plaintext, unauthenticated traffic: local roles listen on loopback "
                            "only; ssh and Slurm roles get --insecure and anyone who reaches a "
                            "port is believed")
    p.add_argument("--keygen", metavar="PATH", help="pstrain-keygen on this machine (default: "
                   "beside the binary in local and Slurm mode, build/pstrain-keygen in ssh mode)")
    g = p.add_argument_group(
        "Slurm", "--slurm inside an allocation (sbatch, salloc): the nodes come from Slurm, every "
        "role runs as an srun step on its node, and these flags place the roles")
    g.add_argument("--slurm", action="store_true",
                   help="take the cluster from the Slurm allocation this runs in")
    g.add_argument("--ps", type=int, metavar="N",
                   help="parameter servers in all, one per node from the first node on")
    g.add_argument("--ps_per_node", type=int, metavar="N",
                   help="parameter servers on every node (default: 1)")
    g.add_argument("--workers_per_node", metavar="N|gpu",
                   help="workers on every node, or gpu: one per GPU (default: "
                        "SLURM_NTASKS_PER_NODE if the job set it, else one per GPU, else "
                        "Slurm's tasks per node)")
    g.add_argument("--evaluators", type=int, metavar="N",
                   help="evaluators, on the last node(s) (default: 1)")
    g.add_argument("--port", type=int, metavar="P", help="first port on each node (default: "
                   "20000 + 20 * (job id %% 600), so jobs sharing a node differ)")
    g.add_argument("--gpus_per_node", type=int, metavar="N",
                   help="GPUs per node (default: the allocation's: SLURM_GPUS_ON_NODE, "
                        "SLURM_GPUS_PER_NODE or CUDA_VISIBLE_DEVICES); 0 for CPU workers")
    g.add_argument("--binary", metavar="PATH",
                   help="the pstrain binary every node runs (default: build/pstrain of this "
                        "checkout, which every node must see at the same path)")
    return p


def _check_slurm_args(args: argparse.Namespace) -> Optional[str]:
    given = [name for name in SLURM_ONLY if getattr(args, name) is not None]
    if not args.slurm:
        if given:
            return (f"--{given[0]}: only with --slurm (a cluster file lists its roles, hosts "
                    f"and binary)")
        if not args.cluster:
            return ("expected --cluster FILE, or --slurm inside a Slurm allocation (see "
                    "launcher/README.md)")
        return None
    if args.cluster:
        return ("--cluster: with --slurm the cluster is the Slurm allocation; place the roles "
                "with --ps, --ps_per_node, --workers_per_node and --evaluators instead")
    if args.ps is not None and args.ps_per_node is not None:
        return "--ps and --ps_per_node: expected one of them"
    for name, low in (("ps", 1), ("ps_per_node", 1), ("evaluators", 0), ("gpus_per_node", 0),
                      ("port", 1)):
        value = getattr(args, name)
        if value is not None and (value < low or (name == "port" and value > 65535)):
            expected = "from 1 to 65535" if name == "port" else f"of at least {low}"
            return f"--{name} {value}: expected a number {expected}"
    w = args.workers_per_node
    if w is not None and w != "gpu" and not (w.isdigit() and int(w) >= 1):
        return f"--workers_per_node {w}: expected a number of at least 1, or gpu"
    return None


def _slurm_layout(args: argparse.Namespace) -> slurm.Layout:
    return slurm.Layout(ps=args.ps, ps_per_node=args.ps_per_node or 1,
                        workers_per_node=args.workers_per_node,
                        evaluators=1 if args.evaluators is None else args.evaluators,
                        port=args.port, gpus_per_node=args.gpus_per_node)


def _split_extra(argv: List[str]):
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def _check_extra_flags(extra: List[str]) -> Optional[str]:
    for flag in extra:
        if not flag.startswith("-") or flag.lstrip("-") == "":
            return f"extra flag {flag!r} after --: expected --name=value"
        name = flag.lstrip("-").split("=", 1)[0]
        if name in LAUNCHER_FLAGS:
            return (f"extra flag {flag!r} after --: --{name} is set by the launcher "
                    f"({where_set(name)})")
    return None


def main(argv: Optional[List[str]] = None, repo_root: Optional[str] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in control.COMMANDS:  # to the running launch's supervisor
        return control.main(argv)
    own, extra = _split_extra(argv)
    args = _parser().parse_args(own)
    if repo_root is None:
        repo_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

    def fail(message: str) -> int:
        for line in message.splitlines():
            print(f"pstrain-launch: {line}", file=sys.stderr)
        return USAGE_EXIT

    problem = _check_extra_flags(extra) or _check_slurm_args(args)
    if not problem and not 0 <= args.max_accuracy_drop <= 1:
        problem = (f"--max_accuracy_drop must be from 0 to 1 (an accuracy difference), got "
                   f"{args.max_accuracy_drop:g}")
    if problem:
        return fail(problem)
    notes: List[str] = []
    job_id = ""
    try:
        if args.slurm:
            binary_setting = os.path.abspath(args.binary or os.path.join(repo_root, "build",
                                                                         "pstrain"))
            plan = slurm.plan_cluster(slurm.read_allocation(os.environ), _slurm_layout(args),
                                      binary_setting)
            cluster, notes, job_id = plan.cluster, plan.notes, plan.job_id
        else:
            cluster = load_cluster(args.cluster)
    except (ConfigError, slurm.SlurmError) as e:
        return fail(str(e))
    mode = cluster.mode
    curve = args.curve  # keys take milliseconds to make: on for every cluster unless refused
    opts = LaunchOptions(config=args.config, train_dir=args.train_dir,
                         logdir=args.logdir or os.path.join(args.train_dir, "logs"),
                         extra_flags=extra, grace_period=args.grace_period,
                         curve_keys=keys.keys_dir(args.train_dir) if curve else "",
                         insecure=mode != "local" and not curve)
    roles = build_roles(cluster, opts)
    binary = local_binary(cluster, repo_root)
    keygen = args.keygen or keys.default_keygen(cluster, repo_root, binary)
    if mode != "local" and not curve:
        print(f"pstrain-launch: WARNING: --no_curve: traffic between the roles on "
              f"{len({r.host for r in roles})} host(s) is neither authenticated nor encrypted; "
              f"any process that reaches a server's port can pull and push variables",
              file=sys.stderr)
    argvs = [_role_argv(r, cluster, binary, opts.grace_period) for r in roles]
    log_dir = os.path.join(args.train_dir, "launcher")

    if args.dry_run:
        _print_dry_run(cluster, roles, argvs, notes, log_dir, keygen, opts.curve_keys)
        return 0

    if mode != "ssh":
        if not os.path.isfile(binary) or not os.access(binary, os.X_OK):
            if mode == "slurm":
                return fail(f"--binary: {binary} is not an executable file" +
                            ("" if args.binary else "; build it first, or pass --binary PATH"))
            return fail(f"{cluster.path}: binary: {binary} is not an executable file (the path "
                        f"is relative to the repository root {repo_root}); build it first")
        if not os.path.isfile(args.config):
            return fail(f"--config: {args.config} is not a file")
    for note in notes:
        print(f"[launcher] {note}", flush=True)
    if mode == "slurm":
        try:
            used = {r.host for r in roles}
            slurm.check_nodes([n for n in cluster.addresses if n in used], args.train_dir,
                              binary, args.config)
        except (slurm.SlurmError, OSError) as e:
            return fail(str(e))
    if curve:
        try:
            if mode == "ssh":
                # An added worker's keys go to its host now, with everyone's.
                spares = [added_worker(cluster, opts, i)
                          for i in range(len(cluster.worker), cluster.max_workers)]
                keys.prepare_ssh(keygen, args.train_dir, cluster, roles + spares)
            else:
                keys.prepare_local(keygen, args.train_dir, cluster)
        except (keys.KeySetupError, OSError) as e:
            return fail(str(e))
        print(f"[launcher] CURVE: fresh keys, each role's in {opts.curve_keys}/<job>-<index>"
              + (" on its host" if mode == "ssh" else ""))
    srun_env = slurm.srun_env(os.environ) if mode == "slurm" else None
    processes = [RoleProcess(r, a, mode == "ssh", env=srun_env) for r, a in zip(roles, argvs)]
    ended = (lambda: slurm.job_ended(job_id)) if mode == "slurm" else None
    outputs = [("TensorBoard", f"tensorboard --logdir {opts.logdir}"),
               ("checkpoints", os.path.join(args.train_dir, "ps-*-of-*") +
                f" (committed steps: {os.path.join(args.train_dir, 'committed_checkpoints')})"),
               ("model", os.path.join(args.train_dir, "model.safetensors"))]
    elastic = None
    if cluster.elastic:
        def new_worker(index: int) -> RoleProcess:
            role = added_worker(cluster, opts, index)
            return RoleProcess(role, _role_argv(role, cluster, binary, opts.grace_period),
                               mode == "ssh", env=srun_env)
        elastic = Elastic(cluster.min_workers, cluster.max_workers, new_worker)
    return Supervisor(processes, log_dir, args.grace_period, args.shutdown_timeout,
                      args.progress_interval, restart=cluster.restart,
                      ended_outside=ended, outputs=outputs, elastic=elastic,
                      max_accuracy_drop=args.max_accuracy_drop).run()


def _role_argv(role, cluster: Cluster, binary: str, grace_period: float) -> List[str]:
    if cluster.mode == "ssh":
        return ssh_argv(role, cluster, grace_period)
    if cluster.mode == "slurm":
        return slurm.srun_argv(role, binary)
    return local_argv(role, binary)


def _print_dry_run(cluster: Cluster, roles, argvs, notes: List[str], log_dir: str, keygen: str,
                   curve_keys: str) -> None:
    print(f"# {len(cluster.ps)} ps, {len(cluster.worker)} worker(s), "
          f"{len(cluster.evaluator)} evaluator(s); {cluster.mode} mode; logs would go to "
          f"{log_dir}/")
    for note in notes:
        print(f"# {note}")
    print(f"# CURVE: {keygen} would write fresh keys to {curve_keys}/<job>-<index>"
          if curve_keys else "# no CURVE: plaintext, unauthenticated traffic")
    r = cluster.restart
    print(f"# restart: {r.policy}" + (f", up to {r.max_restarts} per role, backoff "
                                       f"{r.backoff_secs:g} s doubling"
                                       if r.policy != "never" else ""))
    for role, role_argv in zip(roles, argvs):
        print(f"# {role.where} > {role.log_path}")
        print(describe(role, role_argv, cluster.mode != "local"))
