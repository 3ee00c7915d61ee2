"""Reads and checks a cluster config (configs/clusters/*.yaml) into a Cluster."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import yaml

# Flags the launcher sets itself for every role; a cluster file or `-- extra` may not set them.
LAUNCHER_FLAGS = ("job_name", "task_index", "ps_hosts", "worker_hosts", "evaluators", "config",
                  "train_dir", "logdir", "curve_keys", "replicas", "min_workers", "max_workers")
# Cluster keys that become the same flag for every role (docs/replication.md): a shard's backups,
# and workers joining and leaving (the launcher makes keys for max_workers, and add-worker and
# remove-worker need them).
CLUSTER_FLAG_KEYS = ("replicas", "min_workers", "max_workers")

TOP_KEYS = ("mode", "binary", "ps", "worker", "evaluator", "flags", "ssh", "restart") + \
    CLUSTER_FLAG_KEYS
RESTART_KEYS = ("policy", "max_restarts", "backoff_secs")
RESTART_POLICIES = ("never", "on_failure")
PS_KEYS = ("host", "port")
WORKER_KEYS = ("host", "port", "gpus")
EVALUATOR_KEYS = ("host",)
SSH_KEYS = ("user", "port", "identity_file", "remote_dir", "options")

_GPUS = re.compile(r"^(\d+(,\d+)*)?$")
_FLAG_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def where_set(flag: str) -> str:
    """Where a user sets one of the LAUNCHER_FLAGS instead."""
    if flag in ("config", "train_dir", "logdir"):
        return f"use pstrain-launch --{flag}"
    if flag == "curve_keys":
        return "use pstrain-launch --curve or --no_curve: the launcher makes each role's keys"
    if flag in CLUSTER_FLAG_KEYS:
        return f"set the cluster file's top-level key {flag} instead"
    return "it comes from the cluster file's ps, worker and evaluator lists"


class ConfigError(Exception):
    """Every problem found in one cluster file, one `FILE: FIELD: message` line each."""

    def __init__(self, path: str, problems: List[str]):
        self.path = path
        self.problems = problems
        super().__init__("\n".join(f"{path}: {p}" for p in problems))


@dataclass(frozen=True)
class Server:
    host: str
    port: int


@dataclass(frozen=True)
class Worker:
    host: str
    port: int
    gpus: str  # CUDA_VISIBLE_DEVICES for this worker; "" hides every GPU


@dataclass(frozen=True)
class Evaluator:
    host: str


@dataclass
class SshSettings:
    user: str = ""          # "" leaves the user to ssh (its config or the local user name)
    port: Optional[int] = None
    identity_file: str = ""
    remote_dir: str = ""
    options: List[str] = field(default_factory=list)  # each becomes `-o OPTION`


@dataclass
class RestartPolicy:
    """What the launcher does when a role dies: `never` stops the cluster (the default);
    `on_failure` starts the role again, up to max_restarts times per role, waiting backoff_secs
    (doubled after each restart of that role, at most 60 s). A role that exits with code 2 (a bad
    flag or config) is never restarted: it would fail the same way."""
    policy: str = "never"
    max_restarts: int = 3
    backoff_secs: float = 1.0


@dataclass
class Cluster:
    path: str
    mode: str
    binary: str
    ps: List[Server]
    worker: List[Worker]
    evaluator: List[Evaluator]
    flags: Dict[str, str]
    ssh: SshSettings
    restart: RestartPolicy = field(default_factory=RestartPolicy)
    # Slurm mode (slurm.py): hosts are node names; the address each node's roles listen on
    # (NodeAddr) and the CPUs the job holds there. Empty for cluster files: hosts are addresses.
    addresses: Dict[str, str] = field(default_factory=dict)
    cores: Dict[str, int] = field(default_factory=dict)
    # --replicas, --min_workers, --max_workers for every role; 0: not passed (today's fixed
    # cluster). max_workers is then at least the worker list's length.
    replicas: int = 0
    min_workers: int = 0
    max_workers: int = 0

    @property
    def elastic(self) -> bool:
        """Workers may join and leave (add-worker, remove-worker)."""
        return self.min_workers > 0


def show(value: Any) -> str:
    """A YAML-looking rendering of a config value for error messages."""
    if isinstance(value, str):
        return '"' + value.replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "nothing (null)"
    return repr(value)


class _Checker:
    def __init__(self):
        self.problems: List[str] = []

    def fail(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")

    def mapping(self, value: Any, where: str, keys: tuple, hint: str = "") -> Optional[dict]:
        if not isinstance(value, dict):
            self.fail(where, f"expected a mapping with keys {', '.join(keys)}, got {show(value)}")
            return None
        for key in value:
            if key not in keys:
                close = difflib.get_close_matches(str(key), keys, n=1)
                guess = f'; did you mean "{close[0]}"?' if close else ""
                self.fail(f"{where}.{key}" if where else str(key),
                          f"unknown key (expected one of: {', '.join(keys)}){guess}{hint}")
        return value

    def string(self, value: Any, where: str, empty_ok: bool = False) -> Optional[str]:
        if not isinstance(value, str) or (not empty_ok and not value):
            kind = "string" if empty_ok else "non-empty string"
            self.fail(where, f"expected a {kind}, got {show(value)}")
            return None
        return value

    def host(self, value: Any, where: str) -> Optional[str]:
        if not isinstance(value, str) or not value or value.startswith("-") or any(
                c.isspace() for c in value):
            self.fail(where, f"expected a host name or address like 127.0.0.1, got {show(value)}")
            return None
        return value

    def port(self, value: Any, where: str) -> Optional[int]:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
            self.fail(where, f"expected a port number from 1 to 65535, got {show(value)}")
            return None
        return value

    def gpus(self, value: Any, where: str) -> Optional[str]:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return str(value)
        if not isinstance(value, str) or not _GPUS.match(value):
            self.fail(where, 'expected a comma-separated list of GPU indices like "0" or "0,1", '
                      f'or "" for none, got {show(value)}')
            return None
        return value

    def entries(self, value: Any, where: str, required: bool) -> list:
        if value is None and not required:
            return []
        if not isinstance(value, list) or (required and not value):
            self.fail(where, f"expected a {'non-empty ' if required else ''}list of "
                      f"{{host: ...}} entries, got {show(value)}")
            return []
        return value


def _read_servers(c: _Checker, raw: dict, taken: Dict[tuple, str]) -> List[Server]:
    servers = []
    for i, entry in enumerate(c.entries(raw.get("ps"), "ps", required=True)):
        where = f"ps[{i}]"
        entry = c.mapping(entry, where, PS_KEYS)
        if entry is None:
            continue
        host = c.host(entry.get("host"), f"{where}.host")
        port = c.port(entry.get("port"), f"{where}.port")
        if host is not None and port is not None:
            _claim(c, taken, host, port, where)
            servers.append(Server(host, port))
    return servers


def _read_workers(c: _Checker, raw: dict, taken: Dict[tuple, str]) -> List[Worker]:
    workers = []
    for i, entry in enumerate(c.entries(raw.get("worker"), "worker", required=True)):
        where = f"worker[{i}]"
        # `{gpus: 0,1}` in a flow mapping parses as key "1": say how to write it.
        hint = ""
        if isinstance(entry, dict) and any(str(k).isdigit() for k in entry):
            hint = ' (a GPU list inside {...} must be quoted: gpus: "0,1")'
        entry = c.mapping(entry, where, WORKER_KEYS, hint)
        if entry is None:
            continue
        host = c.host(entry.get("host"), f"{where}.host")
        port = c.port(entry.get("port"), f"{where}.port")
        gpus = c.gpus(entry.get("gpus", ""), f"{where}.gpus")
        if host is not None and port is not None:
            _claim(c, taken, host, port, where)
            if gpus is not None:
                workers.append(Worker(host, port, gpus))
    return workers


def _read_evaluators(c: _Checker, raw: dict) -> List[Evaluator]:
    evaluators = []
    for i, entry in enumerate(c.entries(raw.get("evaluator"), "evaluator", required=False)):
        where = f"evaluator[{i}]"
        entry = c.mapping(entry, where, EVALUATOR_KEYS)
        if entry is not None:
            host = c.host(entry.get("host"), f"{where}.host")
            if host is not None:
                evaluators.append(Evaluator(host))
    return evaluators


def _claim(c: _Checker, taken: Dict[tuple, str], host: str, port: int, where: str) -> None:
    if (host, port) in taken:
        c.fail(where, f"{host}:{port} is already used by {taken[(host, port)]}; expected a "
               "host:port that no other ps or worker uses")
    else:
        taken[(host, port)] = where


def _read_flags(c: _Checker, raw: dict) -> Dict[str, str]:
    value = raw.get("flags")
    if value is None:
        return {}
    if not isinstance(value, dict):
        c.fail("flags", f"expected a mapping of flag name to value like {{update_mode: async}}, "
               f"got {show(value)}")
        return {}
    flags = {}
    for name, v in value.items():
        where = f"flags.{name}"
        if not isinstance(name, str) or not _FLAG_NAME.match(name):
            c.fail(where, "expected a flag name like update_mode (letters, digits, _)")
        elif name in LAUNCHER_FLAGS:
            c.fail(where, f"is set by the launcher for every role; expected another flag "
                   f"({where_set(name)})")
        elif isinstance(v, bool):
            flags[name] = "true" if v else "false"
        elif isinstance(v, (str, int, float)):
            flags[name] = str(v)
        else:
            c.fail(where, f"expected a string, number or boolean, got {show(v)}")
    return flags


def _read_ssh(c: _Checker, raw: dict, mode: str) -> SshSettings:
    value = raw.get("ssh")
    ssh = SshSettings()
    if value is None:
        value = {}
    value = c.mapping(value, "ssh", SSH_KEYS)
    if value is None:
        return ssh
    if "user" in value:
        ssh.user = c.string(value["user"], "ssh.user", empty_ok=True) or ""
    if "port" in value:
        ssh.port = c.port(value["port"], "ssh.port")
    if "identity_file" in value:
        ssh.identity_file = c.string(value["identity_file"], "ssh.identity_file",
                                     empty_ok=True) or ""
    if "remote_dir" in value or mode == "ssh":
        ssh.remote_dir = c.string(value.get("remote_dir"), "ssh.remote_dir") or ""
    options = value.get("options", [])
    if options is None:
        options = []
    if not isinstance(options, list):
        c.fail("ssh.options", f"expected a list of ssh -o options like "
               f'["ConnectTimeout=10"], got {show(options)}')
    else:
        for i, opt in enumerate(options):
            if not isinstance(opt, str) or not opt or opt.startswith("-"):
                c.fail(f"ssh.options[{i}]", 'expected an ssh -o option like "ConnectTimeout=10" '
                       f"(without the -o), got {show(opt)}")
            else:
                ssh.options.append(opt)
    return ssh


def _read_restart(c: _Checker, raw: dict) -> RestartPolicy:
    policy = RestartPolicy()
    value = raw.get("restart")
    if value is None:
        return policy
    value = c.mapping(value, "restart", RESTART_KEYS)
    if value is None:
        return policy
    name = value.get("policy", "on_failure")
    if name not in RESTART_POLICIES:
        c.fail("restart.policy", f"expected one of {', '.join(RESTART_POLICIES)}, got {show(name)}")
    else:
        policy.policy = name
    n = value.get("max_restarts", policy.max_restarts)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        c.fail("restart.max_restarts", f"expected a whole number >= 0, got {show(n)}")
    else:
        policy.max_restarts = n
    b = value.get("backoff_secs", policy.backoff_secs)
    if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0 <= b <= 3600:
        c.fail("restart.backoff_secs", f"expected seconds from 0 to 3600, got {show(b)}")
    else:
        policy.backoff_secs = float(b)
    return policy


def _read_counts(c: _Checker, raw: dict, ps: int, workers: int, flags: Dict[str, str]):
    """replicas, min_workers, max_workers: whole numbers, checked against each other."""
    values = {}
    for key in CLUSTER_FLAG_KEYS:
        v = raw.get(key, 0)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            c.fail(key, f"expected a whole number >= 0, got {show(v)}")
            v = 0
        values[key] = v
    replicas, low, high = values["replicas"], values["min_workers"], values["max_workers"]
    if replicas and ps and replicas >= ps:
        c.fail("replicas", f"{replicas} backups per shard need more than {ps} ps; expected "
               f"from 0 to {ps - 1}")
    if high and not low:
        c.fail("max_workers", "needs min_workers >= 1 (workers joining and leaving); without it "
               "the workers are the worker list")
    if low:
        high = high or workers
        if high < workers:
            c.fail("max_workers", f"{high} is below the worker list's {workers} workers; expected "
                   "at least that many")
        elif low > high:
            c.fail("min_workers", f"{low} is above max_workers {high}; expected at most that")
        if flags.get("intra_node_sync", "off") != "off":
            c.fail("flags.intra_node_sync", f"{flags['intra_node_sync']} does not go with "
                   f"min_workers {low}: a host's group of workers is fixed at start; expected off")
    return replicas, low, high if low else 0


def parse_cluster(text: str, path: str) -> Cluster:
    """Parses and checks a cluster file's text; raises ConfigError listing every problem."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(path, [f"not valid YAML: {' '.join(str(e).split())}"]) from None
    c = _Checker()
    if c.mapping(raw, "", TOP_KEYS) is None:
        raise ConfigError(path, [f"expected a mapping with keys {', '.join(TOP_KEYS)}, "
                                 f"got {show(raw)}"])
    mode = raw.get("mode", "local")
    if mode not in ("local", "ssh"):
        c.fail("mode", f'expected "local" or "ssh", got {show(mode)}')
    binary = c.string(raw.get("binary", "build/pstrain"), "binary") or ""
    taken: Dict[tuple, str] = {}
    ps = _read_servers(c, raw, taken)
    workers = _read_workers(c, raw, taken)
    evaluators = _read_evaluators(c, raw)
    flags = _read_flags(c, raw)
    ssh = _read_ssh(c, raw, mode)
    restart = _read_restart(c, raw)
    replicas, min_workers, max_workers = _read_counts(c, raw, len(ps), len(workers), flags)
    if c.problems:
        raise ConfigError(path, c.problems)
    return Cluster(path, mode, binary, ps, workers, evaluators, flags, ssh, restart=restart,
                   replicas=replicas, min_workers=min_workers, max_workers=max_workers)


def load_cluster(path: str) -> Cluster:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(path, [f"cannot read the cluster file: {e.strerror}"]) from None
    return parse_cluster(text, path)
