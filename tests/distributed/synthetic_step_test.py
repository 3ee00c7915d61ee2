"""--synthetic_step_ms with real processes: one server and one RefNet worker on loopback.

  synthetic_step_test.py --pstrain BUILD/pstrain [--checkpoint_tool BUILD/pstrain-checkpoint
                         --python VENV_PYTHON]

A worker in synthetic compute sleeps N ms a step in place of forward and backward and pushes
constant gradients of the model's real sizes (worker/distributed/training_step.h). Proved here:
every step takes at least N ms and not much more on loopback, the log says the mode is
synthetic, the server receives every push at the model's full size (its tensor bytes in, the
`ps/bytes_in_total` scalar it writes at shutdown, against pushes x 4 bytes x parameters), and a
bad value stops the worker at start with an error naming the flag. A second short run pushes
with --push_dtype=bf16: the server counts 2 bytes a parameter a push and about half the bytes
out, and a --push_dtype it does not know stops every role at start naming the value. A few seconds
on 2 cores.

The same run has the chief write TensorFlow checkpoints (--tf_checkpoints, a checkpoint every 5
steps, --max_to_keep=2): <train_dir>/tf holds the newest two committed steps' bundles and a
`checkpoint` file listing them, older ones deleted, and TensorFlow (the test venv's) reads the
newest one whole, as a Saver restoring RefNet's graph, equal to the server's shard file of that
step as `pstrain-checkpoint to_tf` converts it.
"""

import argparse
import datetime
import glob
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import unittest

PSTRAIN = None
CHECKPOINT_TOOL = None
PYTHON = None
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEP_MS = 100
STEPS = 20
SAVE_EVERY = 5
KEEP = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def glog_time(line):
    """The wall time of a glog line (I20261123 18:34:38.548666 ...), in seconds."""
    m = re.match(r"[IWE]\d{8} (\d\d):(\d\d):(\d\d\.\d+)", line)
    return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))


def _fields(data):
    """(field number, value) of a serialized protobuf message: varints, 64-bit and 32-bit values
    as raw bytes, length-delimited ones as bytes."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            length, i = _varint(data, i)
            value, i = data[i:i + length], i + length
        yield number, value


def _varint(data, i):
    result = shift = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return result, i


def last_scalar(events_glob, tag):
    """The last simple_value of `tag` in TensorBoard event files (TFRecord framing, Event ->
    Summary -> Value), or None."""
    last = None
    for path in sorted(glob.glob(events_glob)):
        with open(path, "rb") as f:
            data = f.read()
        i = 0
        while i + 12 <= len(data):
            (length,) = struct.unpack_from("<Q", data, i)
            event = data[i + 12:i + 12 + length]
            i += 12 + length + 4
            for number, summary in _fields(event):
                if number != 5:
                    continue
                for _, value in _fields(summary):
                    fields = dict(_fields(value))
                    if fields.get(1) == tag.encode() and 2 in fields:
                        last = struct.unpack("<f", fields[2])[0]
    return last


class SyntheticStepTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pstrain-synthetic-")
        ps, worker = free_port(), free_port()
        cls.cluster = [f"--ps_hosts=127.0.0.1:{ps}", f"--worker_hosts=127.0.0.1:{worker}",
                       f"--config={SOURCE}/configs/refnet.yaml", f"--train_dir={cls.tmp}/td",
                       "--ps_unavailable_timeout_secs=30", f"--logdir={cls.tmp}/logs"]
        cls.env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
        cls.worker = cls.run_cluster(cls.cluster, [
            "--log_every_n_steps=1", "--tf_checkpoints", f"--save_checkpoints_steps={SAVE_EVERY}",
            f"--max_to_keep={KEEP}"], f"{cls.tmp}/ps.log")

    @classmethod
    def run_cluster(cls, cluster, worker_flags, ps_log_path, role_flags=()):
        """One server and one synthetic worker of STEPS steps; the worker's completed process."""
        with open(ps_log_path, "w") as ps_log:
            server = subprocess.Popen(
                [PSTRAIN, "--job_name=ps", "--task_index=0"] + cluster + list(role_flags),
                stdout=ps_log, stderr=subprocess.STDOUT, env=cls.env)
        try:
            worker = subprocess.run(
                [PSTRAIN, "--job_name=worker", "--task_index=0", "--device=cpu",
                 f"--synthetic_step_ms={STEP_MS}", f"--max_steps={STEPS}",
                 "--histogram_every_n_steps=0"] + worker_flags + cluster + list(role_flags),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=cls.env,
                timeout=120)
            server.wait(timeout=60)  # it ends once the chief is done, writing its last scalars
        finally:
            if server.poll() is None:
                server.kill()
            server.wait()
        return worker

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)  # RefNet's shard files and bundles: 200 MB

    def test_steps_take_the_synthetic_time_and_push_full_sized_gradients(self):
        worker = self.worker
        out = worker.stdout
        self.assertEqual(worker.returncode, 0, out)
        self.assertIn(f"done: global step {STEPS} (synthetic compute: no evaluation)", out)

        progress = [l for l in out.splitlines() if re.search(r": step \d+/\d+ ", l)]
        self.assertEqual(len(progress), STEPS, out)
        for line in progress:
            self.assertIn(f"synthetic compute ({STEP_MS} ms a step, no forward/backward)", line)
        times = [glog_time(l) for l in progress]
        # The step after each checkpoint also waits for the servers' files and the TensorFlow
        # bundle (the test below); the others are the synthetic time and the exchange.
        gaps = [b - a for i, (a, b) in enumerate(zip(times, times[1:]), start=1)
                if i % SAVE_EVERY != 0]
        print(f"step times: min {min(gaps) * 1000:.1f} ms, mean "
              f"{sum(gaps) / len(gaps) * 1000:.1f} ms, max {max(gaps) * 1000:.1f} ms "
              f"(--synthetic_step_ms={STEP_MS})")
        self.assertGreaterEqual(min(gaps), STEP_MS / 1000 * 0.99)  # glog's clock vs the sleep's
        # RefNet's exchange on loopback is a few ms; a step several times N would mean work
        # beyond the fill (or a machine far too busy to say anything).
        self.assertLess(sum(gaps) / len(gaps), 3 * STEP_MS / 1000)

        params = int(re.search(r"(\d+) parameters", out).group(1))
        with open(f"{self.tmp}/ps.log") as f:
            ps_out = f.read()
        # One update a step, whether its push went whole or in parts (the default per-layer
        # pulls push in parts, on loopback too).
        updates = int(re.search(r"(\d+) updates,", ps_out).group(1))
        self.assertEqual(updates, STEPS, ps_out)
        # Each step's push carries every gradient (4 bytes a parameter; the batch-norm statistics
        # are values, pushed too); the chief's initialisation adds one copy of the values.
        model_bytes = 4 * params
        bytes_in = last_scalar(f"{self.tmp}/logs/ps-0/events.out.tfevents.*", "ps/bytes_in_total")
        self.assertIsNotNone(bytes_in, ps_out)
        print(f"server: {bytes_in:.0f} tensor bytes in for {updates} steps of a {params}-parameter"
              f" model ({bytes_in / (updates + 1) / model_bytes:.4f} x its size a step)")
        self.assertGreaterEqual(bytes_in, (updates + 1) * model_bytes * 0.98)
        self.assertLessEqual(bytes_in, (updates + 1) * model_bytes * 1.02)

    def test_bf16_pushes_halve_the_bytes_the_server_counts(self):
        ps, worker = free_port(), free_port()
        cluster = [f"--ps_hosts=127.0.0.1:{ps}", f"--worker_hosts=127.0.0.1:{worker}",
                   f"--config={SOURCE}/configs/refnet.yaml", f"--train_dir={self.tmp}/bf16",
                   "--ps_unavailable_timeout_secs=30", f"--logdir={self.tmp}/bf16_logs",
                   "--save_checkpoints_secs=0"]
        # Every role gets the flag, as the launcher passes flags after `--` to all of them.
        run = self.run_cluster(cluster, [], f"{self.tmp}/bf16_ps.log",
                               role_flags=["--push_dtype=bf16"])
        self.assertEqual(run.returncode, 0, run.stdout)
        self.assertIn("--push_dtype=bf16: gradients go out in bfloat16", run.stdout)
        self.assertEqual(self.worker.returncode, 0, self.worker.stdout)
        params = int(re.search(r"(\d+) parameters", run.stdout).group(1))

        def totals(logdir):
            events = f"{logdir}/ps-0/events.out.tfevents.*"
            return (last_scalar(events, "ps/bytes_in_total"),
                    last_scalar(events, "ps/bytes_out_total"))

        fp32_in, fp32_out = totals(f"{self.tmp}/logs")
        bf16_in, bf16_out = totals(f"{self.tmp}/bf16_logs")
        self.assertIsNotNone(bf16_in, run.stdout)
        # The chief's initial values go in float32 (4 bytes a parameter), then STEPS pushes of
        # 2 bytes a parameter; RefNet has no batch-norm statistics, which would stay float32.
        per_push = (bf16_in - 4 * params) / STEPS
        print(f"server bytes with --push_dtype=bf16: {per_push:.0f} in a push for {params} "
              f"parameters ({per_push / params:.3f} a parameter); in {bf16_in:.0f} against "
              f"{fp32_in:.0f} with fp32 ({bf16_in / fp32_in:.3f}x), out {bf16_out:.0f} against "
              f"{fp32_out:.0f} ({bf16_out / fp32_out:.3f}x)")
        self.assertAlmostEqual(per_push / params, 2.0, delta=0.02)
        self.assertAlmostEqual(bf16_in / fp32_in, (4 + 2 * STEPS) / (4 + 4 * STEPS), delta=0.02)
        # Out: each step's pull in bfloat16; the worker's first pull and the chief's final one stay
        # float32, so that the saved and evaluated model is the servers' own.
        self.assertLess(bf16_out, 0.5 * fp32_out + 3 * 4 * params)
        self.assertGreaterEqual(bf16_out, 2 * params * STEPS)

    def test_an_unknown_push_dtype_stops_every_role_at_start_naming_it(self):
        for job in ("ps", "worker", "evaluator"):
            for bad, says in (("fp8", "--push_dtype must be fp32 or bf16, got 'fp8'"),
                              ("fp16", "--push_dtype=fp16 is not supported")):
                r = subprocess.run([PSTRAIN, f"--job_name={job}", "--task_index=0",
                                    f"--push_dtype={bad}"] + self.cluster,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   env=self.env, timeout=30)
                self.assertEqual(r.returncode, 2, r.stdout)
                self.assertIn(says, r.stdout)

    def test_a_bad_io_threads_stops_every_role_at_start_naming_it(self):
        for job in ("ps", "worker", "evaluator"):
            r = subprocess.run([PSTRAIN, f"--job_name={job}", "--task_index=0",
                                "--io_threads=99"] + self.cluster,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=self.env, timeout=30)
            self.assertEqual(r.returncode, 2, r.stdout)
            self.assertIn("--io_threads=99: ZeroMQ I/O threads must be 1 to 16, got 99", r.stdout)

    def test_the_chief_keeps_the_newest_committed_steps_as_tensorflow_checkpoints(self):
        self.assertEqual(self.worker.returncode, 0, self.worker.stdout)
        td, tf_dir = f"{self.tmp}/td", f"{self.tmp}/td/tf"
        newest = [STEPS - SAVE_EVERY * i for i in reversed(range(KEEP))]  # 15, 20
        state_path = f"{tf_dir}/checkpoint"
        self.assertTrue(os.path.exists(state_path), f"{state_path}: missing\n{self.worker.stdout}")
        with open(state_path) as f:
            state = f.read()
        expected = f'model_checkpoint_path: "model.ckpt-{STEPS}"\n' + "".join(
            f'all_model_checkpoint_paths: "model.ckpt-{s}"\n' for s in newest)
        self.assertEqual(state, expected, state_path)
        with open(f"{td}/committed_checkpoints") as f:
            committed = f.read()
        for step in newest:
            self.assertIn(f'"model.ckpt-{step}"', committed, f"{td}/committed_checkpoints")
        files = sorted(os.listdir(tf_dir))
        self.assertEqual(files, ["checkpoint"] + [
            f"model.ckpt-{s}.{ext}" for s in newest for ext in ("data-00000-of-00001", "index")],
                         f"{tf_dir}: older bundles must be deleted")
        self.assertIn(f"wrote TensorFlow checkpoint {tf_dir}/model.ckpt-{SAVE_EVERY}",
                      self.worker.stdout)
        written = re.findall(r"wrote TensorFlow checkpoint \S+ of committed step \d+ in (\d+) ms",
                             self.worker.stdout)
        print(f"TensorFlow checkpoints: {len(written)} written, {', '.join(written)} ms each")
        if not CHECKPOINT_TOOL or not PYTHON or subprocess.run(
                [PYTHON, "-c", "import tensorflow, safetensors"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL).returncode != 0:
            self.skipTest(f"no TensorFlow in {PYTHON!r} (scripts/test-venv.sh) or no "
                          "--checkpoint_tool: the bundle is not read back")
        shard = f"{td}/ps-0-of-1/model.ckpt-{STEPS}"
        ref = subprocess.run([CHECKPOINT_TOOL, "to_tf", shard, f"{self.tmp}/ref",
                              f"--config={SOURCE}/configs/refnet.yaml"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(ref.returncode, 0, ref.stdout)
        read = subprocess.run(
            [PYTHON, f"{SOURCE}/tests/checkpoint/tf_read_bundle.py", f"{tf_dir}/model.ckpt-{STEPS}",
             f"{self.tmp}/ref/model.ckpt-{STEPS}", str(STEPS)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONPATH=f"{SOURCE}/tests/checkpoint",
                     TF_CPP_MIN_LOG_LEVEL="2"))
        self.assertEqual(read.returncode, 0, read.stderr)
        result = json.loads(read.stdout.strip().splitlines()[-1])
        self.assertEqual(result["problems"], [], f"{tf_dir}/model.ckpt-{STEPS}")
        self.assertGreater(result["checked"], 0)

    def test_progress_lines_come_every_n_seconds_whatever_the_step_count(self):
        # A second short run: a line every 0.5 s though --log_every_n_steps is never reached, so
        # that the launcher's progress line follows the global step between step-count lines.
        ps, worker = free_port(), free_port()
        cluster = [f"--ps_hosts=127.0.0.1:{ps}", f"--worker_hosts=127.0.0.1:{worker}",
                   f"--config={SOURCE}/configs/refnet.yaml", f"--train_dir={self.tmp}/timed",
                   "--ps_unavailable_timeout_secs=30", "--save_checkpoints_secs=0"]
        with open(f"{self.tmp}/timed_ps.log", "w") as ps_log:
            server = subprocess.Popen([PSTRAIN, "--job_name=ps", "--task_index=0"] + cluster,
                                      stdout=ps_log, stderr=subprocess.STDOUT, env=self.env)
        try:
            run = subprocess.run(
                [PSTRAIN, "--job_name=worker", "--task_index=0", "--device=cpu",
                 f"--synthetic_step_ms={STEP_MS}", "--max_steps=40", "--log_every_n_steps=1000",
                 "--log_every_n_secs=0.5", "--histogram_every_n_steps=0"] + cluster,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env,
                timeout=120)
            server.wait(timeout=60)
        finally:
            if server.poll() is None:
                server.kill()
            server.wait()
        self.assertEqual(run.returncode, 0, run.stdout)
        lines = [l for l in run.stdout.splitlines() if re.search(r": step \d+/\d+ ", l)]
        times = [glog_time(l) for l in lines]
        gaps = [b - a for a, b in zip(times, times[1:])]
        print(f"timed progress lines: {len(lines)}, gaps {[round(g, 2) for g in gaps]} s")
        # 40 steps of at least 100 ms: 4 s or more, so at least 4 timed lines and the last one.
        self.assertGreaterEqual(len(lines), 5, run.stdout)
        self.assertLessEqual(len(lines), 40 * STEP_MS / 1000 / 0.5 + 2, run.stdout)
        for gap in gaps[:-1]:  # the last line is the final step's, whenever it comes
            self.assertGreaterEqual(gap, 0.5 * 0.98, run.stdout)

    def test_a_bad_value_stops_the_worker_at_start_naming_the_flag(self):
        for bad in ("-5", "600001", "fast"):
            started = datetime.datetime.now()
            r = subprocess.run([PSTRAIN, "--job_name=worker", "--task_index=0",
                                f"--synthetic_step_ms={bad}"] + self.cluster,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=self.env, timeout=30)
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertIn("synthetic_step_ms", r.stdout)
            self.assertLess((datetime.datetime.now() - started).total_seconds(), 10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--pstrain", required=True)
    parser.add_argument("--checkpoint_tool", default="")
    parser.add_argument("--python", default="")
    args, rest = parser.parse_known_args()
    PSTRAIN, CHECKPOINT_TOOL, PYTHON = args.pstrain, args.checkpoint_tool, args.python
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
