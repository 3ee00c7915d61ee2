"""Follows the roles' log files and condenses their last progress lines into one summary."""

from __future__ import annotations

import os
import re
from collections import deque
from typing import List, Optional

# `worker 1: step 300/1872 (epoch 0.64) loss 0.3671 lr 0.0010 1649.3 examples/s ...`, as the
# roles write it with FormatProgressLine (worker/training/progress_line.h): change both ends together.
# tests/launcher/test_progress_contract.py feeds this the real pstrain-train's output.
_STEP = re.compile(
    r"\bstep (\d+)/(\d+)\b(?:.*?\bloss ([-+]?(?:[0-9.]+(?:[eE][-+]?\d+)?|nan|inf)))?"
    r"(?:.*? ([0-9.]+) examples/s)?")
# `done: global step 1872, test accuracy 0.9102, ...` (chief) and `test accuracy 0.9012` (evaluator)
_DONE = re.compile(r"\bdone: global step (\d+)")
_ACCURACY = re.compile(r"\btest accuracy ([0-9.]+)")
# A click model's `..., test AUC 0.7503, test log loss 0.5296` (chief and evaluator).
_AUC = re.compile(r"\btest AUC ([0-9.]+)")

_MAX_READ = 1 << 20  # a poll reads at most this much; only the last progress line matters


class LogFollower:
    """Returns the complete lines appended to a file since the last call."""

    def __init__(self, path: str):
        self.path = path
        self._offset = 0
        self._partial = b""

    def new_lines(self) -> List[str]:
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < self._offset:  # truncated: start over
                    self._offset, self._partial = 0, b""
                if size - self._offset > _MAX_READ:
                    self._offset, self._partial = size - _MAX_READ, b""
                f.seek(self._offset)
                data = f.read(size - self._offset)
        except OSError:
            return []
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        return [line.decode("utf-8", "replace").rstrip("\r") for line in lines]


class RoleProgress:
    """The latest step, loss and accuracy a role has logged."""

    def __init__(self, path: str):
        self._log = LogFollower(path)
        self.step: Optional[str] = None
        self.loss: Optional[str] = None
        self.accuracy: Optional[str] = None
        self.auc: Optional[str] = None  # a click model's test AUC
        self.examples_per_sec: Optional[float] = None
        self.best_accuracy: Optional[float] = None  # the highest test accuracy it logged
        self.done = False  # the chief's "done:" line came

    def global_step(self) -> Optional[int]:
        return int(self.step.split("/")[0]) if self.step else None

    def total_steps(self) -> Optional[int]:
        return int(self.step.split("/")[1]) if self.step and "/" in self.step else None

    def update(self) -> None:
        for line in self._log.new_lines():
            done = _DONE.search(line)
            if done:
                total = self.total_steps()
                # Async updates in flight may take the global step past the total.
                step = min(int(done.group(1)), total) if total else int(done.group(1))
                self.step = f"{step}/{total}" if total else str(step)
                self.done = True
            else:
                step = _STEP.search(line)
                if step:
                    total = int(step.group(2))
                    self.step = f"{min(int(step.group(1)), total)}/{total}"
                    if step.group(3):
                        self.loss = step.group(3)
                    if step.group(4):
                        self.examples_per_sec = float(step.group(4))
            auc = _AUC.search(line)
            if auc:
                self.auc = auc.group(1)
            accuracy = _ACCURACY.search(line)
            if accuracy:
                self.accuracy = accuracy.group(1)
                value = float(accuracy.group(1))
                if self.best_accuracy is None or value > self.best_accuracy:
                    self.best_accuracy = value

    def describe(self) -> str:
        parts = []
        if self.step:
            parts.append(f"step {self.step}")
        if self.loss:
            try:
                parts.append(f"loss {float(self.loss):.3f}")
            except ValueError:
                parts.append(f"loss {self.loss}")
        if self.accuracy:
            parts.append(f"acc {self.accuracy}")
        return " ".join(parts)


class ClusterProgress:
    """What a user asks first of a running cluster: how far (the chief's global step), how fast
    (the workers' examples/s summed), how good (the evaluator's latest accuracy, or the chief's)
    and how long still (an ETA from the step rate over the last minute).

    The rate is taken between the times each new step was first seen, not between then and now:
    a step that moves in strides (a line every N local steps, N x workers global steps apart)
    would otherwise make the rate sag between lines and leap at each one. Between lines the ETA
    counts down from the last one."""

    WINDOW_S = 60.0

    def __init__(self):
        self._seen: List[tuple] = []  # (time a step was first seen, that global step)

    def line(self, now: float, chief: Optional[RoleProgress], workers: List[RoleProgress],
             evaluators: List[RoleProgress]) -> str:
        if chief is None or chief.global_step() is None:
            return ""
        step, total = chief.global_step(), chief.total_steps()
        if not self._seen or step != self._seen[-1][1]:
            self._seen.append((now, step))
        # The last minute's samples, and the one before them to measure from.
        while len(self._seen) > 2 and now - self._seen[1][0] > self.WINDOW_S:
            self._seen.pop(0)
        parts = [f"step {chief.step}"]
        rates = [w.examples_per_sec for w in workers if w.examples_per_sec is not None]
        if rates:
            parts.append(f"{sum(rates):.0f} examples/s")
        # The chief's final evaluation once it is done; the evaluator's latest before.
        accuracy = chief.accuracy if chief.done else next(
            (e.accuracy for e in reversed(evaluators) if e.accuracy), chief.accuracy)
        if accuracy:
            parts.append(f"accuracy {accuracy}")
        eta = self.eta(now, total)
        if eta is not None:
            parts.append(f"ETA {format_elapsed(eta)}")
        return ", ".join(parts)

    def eta(self, now: float, total: Optional[int]) -> Optional[float]:
        """Seconds until `total`, at the step rate of the last minute; None before two steps."""
        if not total or len(self._seen) < 2:
            return None
        (t0, s0), (t1, s1) = self._seen[0], self._seen[-1]
        if s1 >= total or s1 <= s0 or t1 <= t0:
            return None
        return max(0.0, (total - s1) * (t1 - t0) / (s1 - s0) - (now - t1))


def format_elapsed(seconds: float) -> str:
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s // 60 % 60:02d}m"


def tail(path: str, count: int = 20) -> List[str]:
    """The last `count` lines of a file (reads at most its last 256 KiB)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - (256 << 10)))
            data = f.read()
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    return list(deque(lines, maxlen=count))


def accuracy_collapse(chief: Optional[RoleProgress], evaluators: List[RoleProgress],
                      max_drop: float) -> Optional[str]:
    """Why a run whose chief said "done" still failed: its final test accuracy lies more than
    `max_drop` below the best an evaluator measured during the run (a model that broke late, by a
    wild gradient or a bad batch, must not end "done"). None when it did not, or nothing to
    compare."""
    if chief is None or not chief.done or chief.accuracy is None:
        return None
    best = max((e.best_accuracy for e in evaluators if e.best_accuracy is not None), default=None)
    final = float(chief.accuracy)
    if best is None or best - final <= max_drop:
        return None
    return (f"the chief's final test accuracy {final:.4f} is {best - final:.4f} below the best "
            f"an evaluator measured during the run, {best:.4f} (more than --max_accuracy_drop="
            f"{max_drop:g}): the model broke late; the last good checkpoints are in the train_dir")
