"""Starts every role, reports progress, and stops them all on the first failure or a signal."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from .cluster import RestartPolicy
from .control import ControlServer, parse_task
from .progress import ClusterProgress, RoleProgress, accuracy_collapse, format_elapsed, tail
from .roles import Role

POLL_S = 0.2
SSH_EXTRA_GRACE_S = 5.0  # the remote watcher's own grace period runs first
SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
USAGE_EXIT = 2  # a role's bad flag or config: restarting it would fail the same way
MAX_BACKOFF_S = 60.0


def exit_code(returncode: int) -> int:
    """A shell-style exit code: 128+N for death by signal N."""
    return returncode if returncode >= 0 else 128 - returncode


def describe_exit(returncode: int) -> str:
    if returncode >= 0:
        return f"exit {returncode}"
    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"killed by signal {-returncode}"


def short_exit(returncode: Optional[int]) -> str:
    """`0`, `3`, `SIGKILL` or `not started`."""
    if returncode is None:
        return "not started"
    return describe_exit(returncode).split()[-1]


def _parent_death_signal() -> Optional[Callable[[], None]]:
    """A preexec_fn asking Linux to SIGTERM the child if the launcher dies without cleaning up
    (e.g. SIGKILL); None where prctl is unavailable."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def set_it() -> None:
        prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the launcher died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return set_it


@dataclass
class Elastic:
    """Workers joining and leaving (cluster key min_workers): add-worker starts the lowest task
    index below max_workers that is not running, made by new_worker(index)."""
    min_workers: int
    max_workers: int
    new_worker: Callable[[int], "RoleProcess"]


class RoleProcess:
    """One role's child: the binary itself (local), or the ssh (ssh) or srun (Slurm) that runs
    it. Each child leads its own process group, so stopping it stops whatever it started too;
    srun passes SIGTERM on to its step."""

    def __init__(self, role: Role, argv: List[str], ssh: bool,
                 env: Optional[Dict[str, str]] = None):
        self.role = role
        self.argv = argv
        self.ssh = ssh
        self.env = env  # the child's whole environment (Slurm mode: srun's); None: the launcher's
        self.popen: Optional[subprocess.Popen] = None
        self.returncode: Optional[int] = None
        self.stopped_by_launcher = False
        self.progress = RoleProgress(role.log_path)
        self.restarts = 0
        self.restart_at: Optional[float] = None  # monotonic time of a scheduled restart
        self.removed_at: Optional[float] = None  # remove-worker's SIGTERM (monotonic)
        self.append_log = False  # a task index started again by add-worker: its log goes on

    def start(self, preexec: Optional[Callable[[], None]]) -> None:
        if self.env is not None:
            env = dict(self.env)  # the role's own variables are set in its srun step
        else:
            env = dict(os.environ)
            if not self.ssh:
                env.update(self.role.env)  # ssh mode sets them in the remote command
        self.returncode = None
        # A restarted role's log goes on after its earlier life's, with a line between.
        mode = "ab" if self.restarts or self.append_log else "wb"
        with open(self.role.log_path, mode) as log:
            if self.append_log and not self.restarts:
                log.write(f"==== [launcher] add-worker: {self.role.name} again ====\n".encode())
                log.flush()
            if self.restarts:
                log.write(f"==== [launcher] restart {self.restarts} of {self.role.name} "
                          f"====\n".encode())
                log.flush()
            # ssh mode keeps ssh's stdin open: closing it tells the remote watcher to stop.
            self.popen = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE if self.ssh else subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                preexec_fn=preexec)

    @property
    def running(self) -> bool:
        return self.popen is not None and self.returncode is None

    def poll(self) -> Optional[int]:
        if self.running:
            self.returncode = self.popen.poll()
        return self.returncode

    def signal_group(self, sig: int) -> bool:
        try:
            os.killpg(self.popen.pid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def request_stop(self) -> None:
        """SIGTERM locally; over ssh, close ssh's stdin so the remote watcher sends it."""
        if not self.running:
            return
        self.stopped_by_launcher = True
        if self.ssh:
            try:
                self.popen.stdin.close()
            except OSError:
                pass
        else:
            self.signal_group(signal.SIGTERM)

    def kill(self) -> None:
        self.signal_group(signal.SIGKILL)

    def group_alive(self) -> bool:
        return self.popen is not None and self.signal_group(0)


class Supervisor:
    def __init__(self, processes: List[RoleProcess], log_dir: str, grace_period: float,
                 shutdown_timeout: float, progress_interval: float,
                 restart: Optional[RestartPolicy] = None,
                 ended_outside: Optional[Callable[[], Optional[str]]] = None,
                 outputs: Optional[List[tuple]] = None, elastic: Optional[Elastic] = None,
                 max_accuracy_drop: float = 0.1):
        self.procs = processes
        # A run whose final accuracy falls further below the evaluators' best fails.
        self.max_accuracy_drop = max_accuracy_drop
        self.collapse: Optional[str] = None
        self.elastic = elastic
        self.control: Optional[ControlServer] = None
        # Where a run's results are, for the final table: (what, path) pairs.
        self.outputs = outputs or []
        self.cluster = ClusterProgress()
        # Why the roles may be ending from outside, e.g. "Slurm job 12 is CANCELLED"; None while
        # nothing outside is stopping them. Asked when a role fails or a signal comes.
        self.ended_outside = ended_outside
        self.outside: Optional[str] = None
        self.restart = restart or RestartPolicy()
        self.log_dir = log_dir
        self.grace_period = grace_period
        self.shutdown_timeout = shutdown_timeout
        self.progress_interval = progress_interval
        self.signal: Optional[int] = None
        self.stopping = False
        self.hurry = False
        self.failure: Optional[RoleProcess] = None
        self.failure_code = 0
        self.start_time = time.monotonic()
        self._last_summary = ""
        self._last_print = 0.0

    # ---- output ----
    @staticmethod
    def say(message: str, err: bool = False) -> None:
        stream = sys.stderr if err else sys.stdout
        try:
            print(f"[launcher] {message}", file=stream, flush=True)
        except BrokenPipeError:
            pass

    def _of(self, job: str) -> List[RoleProcess]:
        return [p for p in self.procs if p.role.job == job]

    def cluster_line(self) -> str:
        """Step, examples/s of all workers, accuracy and ETA; "" before the chief's first line."""
        workers = self._of("worker")
        return self.cluster.line(time.monotonic(), workers[0].progress if workers else None,
                                 [w.progress for w in workers],
                                 [e.progress for e in self._of("evaluator")])

    def summary(self) -> str:
        parts = []
        for p in self.procs:
            p.progress.update()
            info = p.progress.describe()
            if p.popen is None:
                state = "not started"
            elif p.returncode is None:
                state = info or "up"
            else:
                state = f"{info} {describe_exit(p.returncode)}".strip()
            parts.append(f"{p.role.name} {state}")
        cluster = self.cluster_line()
        return (f"{cluster} | " if cluster else "") + "  ".join(parts)

    def _print_progress(self, force: bool = False) -> None:
        if self.progress_interval <= 0 and not force:
            return
        now = time.monotonic()
        text = self.summary()
        since = now - self._last_print
        if force or (text != self._last_summary and since >= self.progress_interval) or \
                since >= max(60.0, self.progress_interval):
            self.say(f"{format_elapsed(now - self.start_time)}  {text}")
            self._last_summary, self._last_print = text, now

    def _print_table(self, code: int) -> None:
        """One table at the end: how it went, and where everything is."""
        workers = self._of("worker")
        chief = workers[0].progress if workers else None
        rates = [w.progress.examples_per_sec for w in workers
                 if w.progress.examples_per_sec is not None]
        evaluators = [e.progress.accuracy for e in self._of("evaluator") if e.progress.accuracy]
        if code == 0:
            result = "done"
        elif self.collapse is not None:
            result = f"failed (exit {code}): {self.collapse}"
        elif self.outside is not None:
            result = f"ended from outside (exit {code}): {self.outside}"
        elif self.failure is None and self.signal is not None:
            result = f"stopped by signal {self.signal} (exit {code})"
        else:
            result = f"failed (exit {code})"
        rows = [("result", result),
                ("time", format_elapsed(time.monotonic() - self.start_time)),
                ("global step", chief.step if chief and chief.step else "-"),
                ("test accuracy", (chief.accuracy if chief and chief.accuracy else None)
                 or (evaluators[-1] if evaluators else "-")),
                ("throughput", f"{sum(rates):.0f} examples/s (last, all workers)" if rates
                 else "-"),
                *([("test AUC", chief.auc)] if chief and chief.auc else []),
                ("restarts", ", ".join(f"{p.role.name} {p.restarts}" for p in self.procs
                                       if p.restarts) or "none"),
                ("role logs", self.log_dir)]
        rows += [(what, path) for what, path in self.outputs]
        width = max(len(what) for what, _ in rows)
        self.say("summary:")
        for what, value in rows:
            try:
                print(f"  {what.ljust(width)}  {value}", flush=True)
            except BrokenPipeError:
                pass

    # ---- signals ----
    def _on_signal(self, signum: int, _frame) -> None:
        if self.signal is None and not self.stopping:
            self.signal = signum
        else:
            self.hurry = True  # a second Ctrl-C: SIGKILL now

    def _install_signal_handlers(self) -> None:
        for sig in SIGNAL_EXIT:
            signal.signal(sig, self._on_signal)

    # ---- lifecycle ----
    def _reap(self) -> None:
        for p in self.procs:
            if not p.running or p.poll() is None:
                continue
            how = describe_exit(p.returncode)
            if p.stopped_by_launcher:
                self.say(f"{p.role.where} stopped ({how})")
            elif p.returncode == 0:
                self.say(f"{p.role.where} finished ({how})")
            elif self.stopping or self.signal is not None or self.failure is not None:
                self.say(f"{p.role.where} {how}")  # the cause is known already
            elif self.outside is None and self._outside():
                # Not this role's failure: e.g. Slurm cancelled the job and ends every step.
                self.say(f"{p.role.where} {how}: {self.outside}; stopping every role", err=True)
            elif self.outside is not None:
                self.say(f"{p.role.where} {how}")
            elif self._schedule_restart(p, how):
                pass
            else:
                self.failure, self.failure_code = p, exit_code(p.returncode)
                self.say(f"{p.role.where} failed ({how}); stopping the other roles", err=True)

    def _schedule_restart(self, p: RoleProcess, how: str) -> bool:
        """Under restart policy on_failure, schedules a failed role's restart and says so."""
        policy = self.restart
        if self.stopping or self.signal is not None or policy.policy != "on_failure":
            return False
        if p.returncode == USAGE_EXIT:
            self.say(f"{p.role.where} failed ({how}: a bad flag or config); not restarting it",
                     err=True)
            return False
        if p.restarts >= policy.max_restarts:
            self.say(f"{p.role.where} failed ({how}) after {p.restarts} restart(s), the most "
                     f"restart.max_restarts allows", err=True)
            return False
        delay = min(policy.backoff_secs * (2 ** p.restarts), MAX_BACKOFF_S)
        p.restarts += 1
        p.restart_at = time.monotonic() + delay
        self.say(f"{p.role.where} failed ({how}); restarting it in {delay:g} s "
                 f"(restart {p.restarts} of at most {policy.max_restarts})", err=True)
        return True

    def _restart_due(self) -> None:
        now = time.monotonic()
        for p in self.procs:
            if p.restart_at is None or now < p.restart_at:
                continue
            p.restart_at = None
            try:
                p.start(_parent_death_signal())
            except OSError as e:
                self.say(f"cannot restart {p.role.where} ({p.argv[0]}): {e.strerror}", err=True)
                self.failure, self.failure_code = p, 126 if e.errno == 13 else 127
                return
            self.say(f"restarted {p.role.where} (pid {p.popen.pid}) -> {p.role.log_path}")

    def _start_all(self) -> bool:
        preexec = _parent_death_signal()
        for p in self.procs:
            if self.signal is not None:
                return False
            try:
                p.start(preexec)
            except OSError as e:
                self.say(f"cannot start {p.role.where} ({p.argv[0]}): {e.strerror}", err=True)
                self.failure, self.failure_code = p, 126 if e.errno == 13 else 127
                return False
            self.say(f"started {p.role.where} (pid {p.popen.pid}) -> {p.role.log_path}")
        return True

    def _stop_all(self) -> None:
        self.stopping = True
        for p in self.procs:
            p.request_stop()
        grace = self.grace_period + (SSH_EXTRA_GRACE_S if any(p.ssh for p in self.procs) else 0)
        deadline = time.monotonic() + grace
        killed = False
        while any(p.running for p in self.procs):
            self._reap()
            if not killed and (self.hurry or time.monotonic() >= deadline):
                for p in self.procs:
                    if p.running:
                        self.say(f"{p.role.where} still running; sending SIGKILL")
                        p.kill()
                killed = True
            time.sleep(0.05)
        self._reap()
        # Whatever a role left behind in its process group goes too.
        stragglers = [p for p in self.procs if not p.ssh and p.group_alive()]
        for p in stragglers:
            p.signal_group(signal.SIGTERM)
        if stragglers:
            time.sleep(1.0)
        for p in stragglers:
            p.kill()

    def _outside(self) -> Optional[str]:
        if self.outside is None and self.ended_outside is not None:
            self.outside = self.ended_outside()
        return self.outside

    def _signal_exit(self) -> int:
        note = f": {self._outside()}" if self.signal == signal.SIGTERM and self._outside() else ""
        self.say(f"got {signal.Signals(self.signal).name}{note}; stopping every role", err=True)
        return SIGNAL_EXIT[self.signal]

    def _wait(self) -> int:
        """Polls until every role is done or one fails; returns the launcher's exit code."""
        workers_done_at = None
        while True:
            self._reap()
            self._restart_due()
            if self.failure is not None:
                return self.failure_code
            if self.signal is not None:
                return self._signal_exit()
            if self.outside is not None:
                return SIGNAL_EXIT[signal.SIGTERM]  # as if the outside had sent it
            now = time.monotonic()
            workers = [p for p in self.procs if p.role.job == "worker" and p.removed_at is None]
            self._serve_control(now)
            if all(p.returncode == 0 for p in workers):
                running = [p for p in self.procs if p.running or p.restart_at is not None]
                if not running:
                    return 0
                if workers_done_at is None:
                    workers_done_at = now
                    self.say(f"all workers finished; waiting up to {self.shutdown_timeout:g} s "
                             f"for {', '.join(p.role.name for p in running)}")
                elif now - workers_done_at > self.shutdown_timeout:
                    stuck = [p for p in running if p.role.job == "ps"]
                    late = f"still running {self.shutdown_timeout:g} s after the workers finished"
                    if stuck:
                        self.say(f"{', '.join(p.role.where for p in stuck)} {late}; expected the "
                                 "servers to exit after the chief's shutdown", err=True)
                        self.failure, self.failure_code = stuck[0], 1
                        return 1
                    self.say(f"{', '.join(p.role.name for p in running)} {late}; stopping")
                    return 0
            self._print_progress()
            time.sleep(POLL_S)

    # ---- add-worker, remove-worker (control.py) ----
    def _serve_control(self, now: float) -> None:
        if self.control is None:
            return
        self.control.poll(self.handle_control)
        for p in self.procs:  # a removed worker that ignores SIGTERM gets the grace period
            if p.running and p.removed_at is not None and now - p.removed_at > self.grace_period:
                self.say(f"{p.role.where} still running {self.grace_period:g} s after "
                         "remove-worker; sending SIGKILL")
                p.kill()
                p.removed_at = now + 3600  # once

    def handle_control(self, request: dict) -> Tuple[bool, str]:
        """One add-worker or remove-worker request: (done, what the client prints)."""
        op = request.get("op")
        if self.elastic is None:
            return False, "this launch's cluster file sets no min_workers: its workers are fixed"
        if self.stopping or self.signal is not None or self.failure is not None:
            return False, "the launcher is stopping every role"
        workers = [p for p in self.procs if p.role.job == "worker"]
        if op == "add-worker":
            busy = {p.role.index for p in workers if p.running or p.restart_at is not None}
            free = [i for i in range(self.elastic.max_workers) if i not in busy]
            if not free:
                return False, (f"all {self.elastic.max_workers} worker tasks run (max_workers: "
                               f"{self.elastic.max_workers})")
            p = self.elastic.new_worker(free[0])
            p.append_log = any(w.role.index == free[0] for w in workers)
            try:
                p.start(_parent_death_signal())
            except OSError as e:
                return False, f"cannot start {p.role.where} ({p.argv[0]}): {e.strerror}"
            self.procs.append(p)
            self.say(f"add-worker: started {p.role.where} (pid {p.popen.pid}) -> "
                     f"{p.role.log_path}")
            return True, f"started worker {p.role.index} (pid {p.popen.pid}), log {p.role.log_path}"
        if op == "remove-worker":
            task = parse_task(request)
            if task is None:
                return False, "remove-worker: expected a task index (a whole number)"
            if task == 0:
                return False, ("worker 0 is the chief and cannot leave: it commits the "
                               "checkpoints and shuts the servers down")
            live = [p for p in workers if p.role.index == task and p.removed_at is None
                    and (p.running or p.restart_at is not None)]
            if not live:
                return False, f"worker {task} is not running"
            p = live[0]
            p.removed_at = time.monotonic()
            p.restart_at = None
            if not p.running:
                return True, f"worker {task} was waiting to restart; it will not be"
            p.request_stop()
            self.say(f"remove-worker: SIGTERM to {p.role.where} (pid {p.popen.pid})")
            return True, (f"sent SIGTERM to worker {task} (pid {p.popen.pid}): it leaves after "
                          "its current step")
        return False, f"unknown op {op!r}: expected add-worker or remove-worker"

    def run(self) -> int:
        self._install_signal_handlers()
        os.makedirs(self.log_dir, exist_ok=True)
        if self.elastic is not None:
            try:
                self.control = ControlServer(self.log_dir)
            except OSError as e:
                self.say(f"no add-worker/remove-worker: {e}", err=True)
            else:
                self.say(f"add-worker and remove-worker: {self.control.path}")
        names = ", ".join(os.path.basename(p.role.log_path) for p in self.procs)
        self.say(f"logs: {self.log_dir}/ ({names})")
        if self._start_all():
            code = self._wait()
        else:
            code = self.failure_code if self.failure else self._signal_exit()
        if self.control is not None:
            self.control.close()
        self._stop_all()
        if code == 0:
            for p in self.procs:
                p.progress.update()  # the last lines, written as the roles exited
            workers = self._of("worker")
            self.collapse = accuracy_collapse(workers[0].progress if workers else None,
                                              [e.progress for e in self._of("evaluator")],
                                              self.max_accuracy_drop)
            if self.collapse is not None:
                code = 1
        self._print_progress(force=True)
        self._print_table(code)
        self.say("exit codes: " + ", ".join(
            f"{p.role.name} {short_exit(p.returncode)}"
            + (" (stopped)" if p.stopped_by_launcher else "") for p in self.procs))
        if self.failure is not None:
            self.say(f"last lines of {self.failure.role.log_path} ({self.failure.role.where}):",
                     err=True)
            for line in tail(self.failure.role.log_path, 20):
                try:
                    print(f"  | {line}", file=sys.stderr, flush=True)
                except BrokenPipeError:
                    pass
            self.say(f"exit {code}: {self.failure.role.where} failed", err=True)
        elif self.outside is not None:
            self.say(f"exit {code}: {self.outside}", err=True)
        elif self.collapse is not None:
            self.say(f"exit {code}: {self.collapse}", err=True)
        return code
