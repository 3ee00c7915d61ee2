"""Follows the roles' log files and condenses their last progress lines into one summary."""

from __future__ import annotations

import os
import re
from collections import deque
from typing import List, Optional

# `... trainer: step 300/1872 (epoch 0.64) loss 0.3671 lr 0.0010 1649.3 examples/s`
_STEP = re.compile(
    r"\bstep (\d+)/(\d+)\b(?:.*?\bloss ([-+]?(?:[0-9.]+(?:[eE][-+]?\d+)?|nan|inf)))?")
# `done: global step 1872, test accuracy 0.9102, ...` (chief) and `test accuracy 0.9012` (evaluator)
_DONE = re.compile(r"\bdone: global step (\d+)")
_ACCURACY = re.compile(r"\btest accuracy ([0-9.]+)")

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

    def update(self) -> None:
        for line in self._log.new_lines():
            done = _DONE.search(line)
            if done:
                total = self.step.split("/")[1] if self.step and "/" in self.step else None
                self.step = f"{done.group(1)}/{total}" if total else done.group(1)
            else:
                step = _STEP.search(line)
                if step:
                    self.step = f"{step.group(1)}/{step.group(2)}"
                    if step.group(3):
                        self.loss = step.group(3)
            accuracy = _ACCURACY.search(line)
            if accuracy:
                self.accuracy = accuracy.group(1)

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
