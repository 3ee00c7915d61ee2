"""pstrain-launch's command line: read the cluster file, build the roles, run or print them."""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from . import keys
from .cluster import LAUNCHER_FLAGS, ConfigError, load_cluster, where_set
from .roles import LaunchOptions, build_roles, describe, local_argv, local_binary, ssh_argv
from .supervisor import RoleProcess, Supervisor

USAGE_EXIT = 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pstrain-launch",
        usage="pstrain-launch --cluster FILE --config FILE [--train_dir DIR] [--logdir DIR] "
              "[--dry_run] [options] [-- FLAG...]",
        description="Start every parameter server, worker and evaluator of a cluster config "
                    "(locally or over ssh), show their progress, and stop them all when one "
                    "fails. Flags after -- go to every role.")
    p.add_argument("--cluster", required=True,
                   help="cluster config, e.g. configs/clusters/local.yaml")
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
    curve = p.add_mutually_exclusive_group()
    curve.add_argument("--curve", dest="curve", action="store_true", default=True,
                       help="CurveZMQ between the roles: fresh keys per launch, each role gets "
                            "its own (the default, local runs included)")
    curve.add_argument("--no_curve", dest="curve", action="store_false",
                       help="plaintext, unauthenticated traffic: local roles listen on loopback "
                            "only; ssh roles get --insecure and anyone who reaches a port is "
                            "believed")
    p.add_argument("--keygen", metavar="PATH", help="pstrain-keygen on this machine (default: "
                   "beside the binary in local mode, build/pstrain-keygen in ssh mode)")
    return p


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
    own, extra = _split_extra(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(own)
    if repo_root is None:
        repo_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

    def fail(message: str) -> int:
        print(f"pstrain-launch: {message}", file=sys.stderr)
        return USAGE_EXIT

    problem = _check_extra_flags(extra)
    if problem:
        return fail(problem)
    try:
        cluster = load_cluster(args.cluster)
    except ConfigError as e:
        for line in str(e).splitlines():
            print(f"pstrain-launch: {line}", file=sys.stderr)
        return USAGE_EXIT
    ssh_mode = cluster.mode == "ssh"
    curve = args.curve  # keys take milliseconds to make: on for every cluster unless refused
    opts = LaunchOptions(config=args.config, train_dir=args.train_dir,
                         logdir=args.logdir or os.path.join(args.train_dir, "logs"),
                         extra_flags=extra, grace_period=args.grace_period,
                         curve_keys=keys.keys_dir(args.train_dir) if curve else "",
                         insecure=ssh_mode and not curve)
    roles = build_roles(cluster, opts)
    binary = local_binary(cluster, repo_root)
    keygen = args.keygen or keys.default_keygen(cluster, repo_root, binary)
    if ssh_mode and not curve:
        print(f"pstrain-launch: WARNING: --no_curve: traffic between the roles on "
              f"{len({r.host for r in roles})} host(s) is neither authenticated nor encrypted; "
              f"any process that reaches a server's port can pull and push variables",
              file=sys.stderr)
    argvs = [ssh_argv(r, cluster, opts.grace_period) if ssh_mode else local_argv(r, binary)
             for r in roles]
    log_dir = os.path.join(args.train_dir, "launcher")

    if args.dry_run:
        print(f"# {len(cluster.ps)} ps, {len(cluster.worker)} worker(s), "
              f"{len(cluster.evaluator)} evaluator(s); {cluster.mode} mode; logs would go to "
              f"{log_dir}/")
        print(f"# CURVE: {keygen} would write fresh keys to {opts.curve_keys}/<job>-<index>"
              if curve else "# no CURVE: plaintext, unauthenticated traffic")
        r = cluster.restart
        print(f"# restart: {r.policy}" + (f", up to {r.max_restarts} per role, backoff "
                                           f"{r.backoff_secs:g} s doubling"
                                           if r.policy != "never" else ""))
        for role, role_argv in zip(roles, argvs):
            print(f"# {role.name} > {role.log_path}")
            print(describe(role, role_argv, ssh_mode))
        return 0

    if not ssh_mode:
        if not os.path.isfile(binary) or not os.access(binary, os.X_OK):
            return fail(f"{cluster.path}: binary: {binary} is not an executable file (the path "
                        f"is relative to the repository root {repo_root}); build it first")
        if not os.path.isfile(args.config):
            return fail(f"--config: {args.config} is not a file")
    if curve:
        try:
            if ssh_mode:
                keys.prepare_ssh(keygen, args.train_dir, cluster, roles)
            else:
                keys.prepare_local(keygen, args.train_dir, cluster)
        except (keys.KeySetupError, OSError) as e:
            return fail(str(e))
        print(f"[launcher] CURVE: fresh keys, each role's in {opts.curve_keys}/<job>-<index>"
              + (" on its host" if ssh_mode else ""))
    processes = [RoleProcess(r, a, ssh_mode) for r, a in zip(roles, argvs)]
    return Supervisor(processes, log_dir, args.grace_period, args.shutdown_timeout,
                      args.progress_interval, restart=cluster.restart).run()
