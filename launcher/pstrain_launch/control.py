"""Adding and removing workers of a running cluster (docs/replication.md section 6).

`pstrain-launch add-worker --train_dir D` and `remove-worker --train_dir D --task N` talk to the
supervisor of the launch that uses D, over a Unix socket in D/launcher/ that only its user can
reach: the directory is made mode 0700, the socket 0600 (connecting needs write permission), and
the supervisor answers only a peer of its own user id (SO_PEERCRED; root could pass the modes).
One JSON line each way: {"op": "add-worker"} or {"op": "remove-worker", "task": N}, answered
{"ok": true|false, "message": "..."}. The supervisor opens the socket only when the cluster file
sets min_workers (workers may join and leave); see Supervisor.handle_control.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import time
from typing import Callable, List, Optional, Tuple

SOCKET_NAME = "control.sock"
MAX_REQUEST = 4096
IO_TIMEOUT_S = 2.0
EXIT_REFUSED = 1
EXIT_USAGE = 2
# A Unix socket path is at most 107 bytes on Linux (sun_path).
MAX_PATH = 107


def socket_path(train_dir: str) -> str:
    return os.path.join(train_dir, "launcher", SOCKET_NAME)


class ControlServer:
    """The supervisor's end: non-blocking accept, one request per connection."""

    def __init__(self, log_dir: str):
        self.path = os.path.join(log_dir, SOCKET_NAME)
        if len(self.path.encode()) > MAX_PATH:
            raise OSError(f"the control socket's path {self.path} is longer than the {MAX_PATH} "
                          f"bytes a Unix socket allows; use a shorter --train_dir")
        os.makedirs(log_dir, exist_ok=True)
        os.chmod(log_dir, 0o700)  # like the keys: the socket's directory is the user's alone
        if os.path.lexists(self.path):
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(self.path)
                raise OSError(f"{self.path}: another launcher is running with this --train_dir")
            except (ConnectionRefusedError, FileNotFoundError):
                os.unlink(self.path)  # a dead launcher's
            finally:
                probe.close()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            self.sock.bind(self.path)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        self.sock.listen(8)
        self.sock.setblocking(False)

    def poll(self, handle: Callable[[dict], Tuple[bool, str]]) -> None:
        """Answers every waiting connection with handle(request)."""
        while True:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            with conn:
                conn.settimeout(IO_TIMEOUT_S)
                try:
                    ok, message = self._answer(conn, handle)
                    conn.sendall((json.dumps({"ok": ok, "message": message}) + "\n").encode())
                except OSError:
                    pass  # the client went away: nothing to tell it

    @staticmethod
    def _answer(conn: socket.socket, handle) -> Tuple[bool, str]:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _, uid, _ = struct.unpack("3i", creds)
        if uid != os.getuid():
            return False, f"refused: user id {uid} is not the launcher's ({os.getuid()})"
        # The whole request within IO_TIMEOUT_S, not each read: a client dripping a byte at a
        # time would otherwise hold the supervisor's loop (and every role's restart) for hours.
        deadline = time.monotonic() + IO_TIMEOUT_S
        data = b""
        while not data.endswith(b"\n") and len(data) <= MAX_REQUEST:
            left = deadline - time.monotonic()
            if left <= 0:
                return False, f"refused: the request did not arrive within {IO_TIMEOUT_S:g} s"
            conn.settimeout(left)
            try:
                chunk = conn.recv(MAX_REQUEST)
            except socket.timeout:
                return False, f"refused: the request did not arrive within {IO_TIMEOUT_S:g} s"
            if not chunk:
                break
            data += chunk
        if len(data) > MAX_REQUEST:
            return False, f"refused: a request longer than {MAX_REQUEST} bytes"
        try:
            request = json.loads(data.decode())
        except (UnicodeDecodeError, ValueError):
            return False, "refused: expected one JSON line like {\"op\": \"add-worker\"}"
        if not isinstance(request, dict):
            return False, "refused: expected a JSON object like {\"op\": \"add-worker\"}"
        return handle(request)

    def close(self) -> None:
        self.sock.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


def send(train_dir: str, request: dict) -> Tuple[bool, str]:
    """The client's end: one request, one answer; (False, why) when nobody answers."""
    path = socket_path(train_dir)
    if not os.path.exists(path):
        return False, (f"no launcher control socket at {path}: is a launcher running with "
                       f"--train_dir {train_dir} and a cluster file that sets min_workers?")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10.0)
    try:
        sock.connect(path)
        sock.sendall((json.dumps(request) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError as e:
        return False, f"{path}: {e.strerror or e}"
    finally:
        sock.close()
    try:
        reply = json.loads(data.decode())
        return bool(reply["ok"]), str(reply["message"])
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        return False, f"{path}: the launcher's answer was not understood: {data[:200]!r}"


def _parser(command: str) -> argparse.ArgumentParser:
    if command == "add-worker":
        p = argparse.ArgumentParser(
            prog="pstrain-launch add-worker",
            description="Start one more worker in the running launch that uses TRAIN_DIR: the "
                        "lowest worker task index below the cluster file's max_workers that is "
                        "not running, with the same flags as the other workers. A task beyond "
                        "the cluster file's worker list runs on the host of its last worker, "
                        "with that worker's gpus, and its --worker_hosts entry is that host "
                        "with port 0: a worker listens on its port only for --intra_node_sync, "
                        "which min_workers rules out, so an added worker takes no port. Its "
                        "CURVE keys were made at launch, for max_workers workers.")
    else:
        p = argparse.ArgumentParser(
            prog="pstrain-launch remove-worker",
            description="Stop worker TASK of the running launch that uses TRAIN_DIR with "
                        "SIGTERM: it finishes its current step and says goodbye to the "
                        "servers, which stop counting it at once. Worker 0, the chief, cannot "
                        "leave.")
        p.add_argument("--task", type=int, required=True, help="the worker's task index")
    p.add_argument("--train_dir", required=True,
                   help="the launch's --train_dir (its control socket is TRAIN_DIR/launcher/"
                        f"{SOCKET_NAME})")
    return p


COMMANDS = ("add-worker", "remove-worker")


def main(argv: List[str]) -> int:
    """`add-worker ...` or `remove-worker ...`; prints the launcher's answer."""
    command = argv[0]
    args = _parser(command).parse_args(argv[1:])
    request: dict = {"op": command}
    if command == "remove-worker":
        request["task"] = args.task
    ok, message = send(args.train_dir, request)
    print(f"pstrain-launch {command}: {message}", file=sys.stdout if ok else sys.stderr)
    return 0 if ok else EXIT_REFUSED


def parse_task(request: dict) -> Optional[int]:
    task = request.get("task")
    return task if isinstance(task, int) and not isinstance(task, bool) else None
