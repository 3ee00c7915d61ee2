"""CURVE keys for a cluster's roles (CurveZMQ between all of them; see launcher/README.md).

pstrain-keygen writes one private directory per role holding that role's secret certificate and
every role's public one; each role gets --curve_keys=TRAIN_DIR/keys/<job>-<index>. Locally the
keys are written there directly. In ssh mode they are written to a private temporary directory
on this machine, each role's directory is copied to that role's host over ssh, and the temporary
copy is removed: a host holds the secrets of its own roles only. In Slurm mode they are written
to the train_dir as locally, which every node of the job must share. Every launch makes fresh
keys.
"""

from __future__ import annotations

import io
import os
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import List

from .cluster import Cluster
from .roles import Role, _remote_dir_word, ssh_prefix

KEYGEN = "pstrain-keygen"
COPY_TIMEOUT_S = 60.0
COPY_PARALLEL = 8


class KeySetupError(Exception):
    """Why the keys could not be made or handed out; nothing was started."""


def keys_dir(train_dir: str) -> str:
    return os.path.join(train_dir, "keys")


def default_keygen(cluster: Cluster, repo_root: str, local_binary: str) -> str:
    """Beside the binary in local and Slurm mode (a checkout every node shares); in ssh mode the
    keys are made on this machine, by the local checkout's build."""
    if cluster.mode in ("local", "slurm"):
        return os.path.join(os.path.dirname(local_binary), KEYGEN)
    return os.path.join(repo_root, "build", KEYGEN)


def worker_keys(cluster: Cluster) -> int:
    """Keys for every worker task a cluster may run: max_workers when workers may join (each
    server lets in every key it has, so an added worker needs its key from the start)."""
    return max(len(cluster.worker), cluster.max_workers)


def generate(keygen: str, out_dir: str, cluster: Cluster) -> None:
    if not os.path.isfile(keygen) or not os.access(keygen, os.X_OK):
        raise KeySetupError(f"CURVE keys need {keygen}, which is not an executable file (build it: "
                            f"cmake --build build --target {KEYGEN}, or pass --keygen PATH)")
    result = subprocess.run(
        [keygen, f"--out_dir={out_dir}", f"--ps={len(cluster.ps)}",
         f"--worker={worker_keys(cluster)}", f"--evaluator={len(cluster.evaluator)}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        raise KeySetupError(f"{keygen} failed (exit {result.returncode}): "
                            f"{result.stderr.strip() or result.stdout.strip()}")


def prepare_local(keygen: str, train_dir: str, cluster: Cluster) -> None:
    """Fresh keys under TRAIN_DIR/keys (the last run's are removed: they must not stay valid)."""
    target = keys_dir(train_dir)
    if os.path.isdir(target) and not os.path.islink(target):
        shutil.rmtree(target)
    os.makedirs(train_dir, exist_ok=True)
    generate(keygen, target, cluster)


def _archive(role_dir: str) -> bytes:
    """The role's key files as a tar archive: secret files 0600, public ones 0644."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name in sorted(os.listdir(role_dir)):
            with open(os.path.join(role_dir, name), "rb") as f:
                data = f.read()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o600 if name.endswith("_secret") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def copy_command(train_dir: str, role: Role, cluster: Cluster) -> str:
    """The remote shell command that replaces TRAIN_DIR/keys/<role> with the archive on stdin."""
    keys = shlex.quote(keys_dir(train_dir))
    target = shlex.quote(os.path.join(keys_dir(train_dir), f"{role.job}-{role.index}"))
    return (f"cd {_remote_dir_word(cluster.ssh.remote_dir)} && mkdir -p {keys} && "
            f"chmod 700 {keys} && umask 077 && rm -rf {target} && mkdir {target} && "
            f"tar -x --no-same-owner -f - -C {target}")


def _copy(role: Role, role_dir: str, train_dir: str, cluster: Cluster) -> None:
    argv = ssh_prefix(cluster, role.host) + [copy_command(train_dir, role, cluster)]
    try:
        result = subprocess.run(argv, input=_archive(role_dir), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, timeout=COPY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise KeySetupError(f"copying {role.name}'s CURVE keys to {role.host} timed out after "
                            f"{COPY_TIMEOUT_S:.0f} s") from None
    if result.returncode != 0:
        raise KeySetupError(f"copying {role.name}'s CURVE keys to {role.host} failed (exit "
                            f"{result.returncode}): "
                            f"{result.stderr.decode(errors='replace').strip()}")


def prepare_ssh(keygen: str, train_dir: str, cluster: Cluster, roles: List[Role]) -> None:
    """Makes the keys here and copies each role's directory to its host."""
    with tempfile.TemporaryDirectory(prefix="pstrain-keys-") as tmp:  # mode 0700
        generated = os.path.join(tmp, "keys")
        generate(keygen, generated, cluster)
        with ThreadPoolExecutor(max_workers=COPY_PARALLEL) as pool:
            copies = [pool.submit(_copy, r, os.path.join(generated, f"{r.job}-{r.index}"),
                                  train_dir, cluster) for r in roles]
            for copy in copies:
                copy.result()  # the first failure, in role order
