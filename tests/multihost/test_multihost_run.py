"""One training run (SmallNet; PSTRAIN_MULTIHOST_CONFIG=refnet.yaml for RefNet) over real hosts (netns_hosts: network namespaces, each with its own address,
link and sshd), started by the launcher's ssh mode, with the faults only hosts have:

  h1 10.213.0.1  ps0, evaluator0
  h2 10.213.0.2  ps1                     its link loses 1% of packets each way, the whole run
  h3 10.213.0.3  worker0 (chief), worker1  its link goes down for 10 s, then back
  h4 10.213.0.4  worker2, worker3          the host dies (link dead, every process killed,
                                           its kernel state gone), boots 5 s later; the
                                           launcher restarts its roles

CURVE is on (the launcher's default). The workers of a host average over its host hub, one
pushing for the host (--intra_node_sync=cpu); this test found the hub failing under CURVE (its
leader joined its own hub without a server key), fixed in worker/distributed/intra_node.cc.
Links run at 1 Gbit/s (tc tbf) with no added delay: this kernel has no netem. Each test method
checks one claim against the same run and prints its numbers. Skipped, naming what is missing,
without root, ip/tc/sshd/ssh, the built binaries or Fashion-MNIST; the loss check alone is
skipped without nft.

  PSTRAIN_BINARY=build/pstrain PSTRAIN_KEYGEN=build/pstrain-keygen python3 -m unittest -v \\
      test_multihost_run
PSTRAIN_MULTIHOST_KEEP=1 keeps the train_dir and sshd logs; PSTRAIN_MULTIHOST_STEPS the global steps; PSTRAIN_MULTIHOST_CURVE=0 runs
everything in plaintext (--no_curve: the roles get --insecure), e.g. to try the host hub.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from netns_hosts import NetnsHosts, die_with_parent, missing_tools, nft_path

HERE = os.path.dirname(os.path.realpath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PSTRAIN = os.environ.get("PSTRAIN_BINARY", "")
KEYGEN = os.environ.get("PSTRAIN_KEYGEN", "")
DATA_DIR = "/usr/share/datasets/fashion-mnist"
CURVE = os.environ.get("PSTRAIN_MULTIHOST_CURVE", "1") != "0"

# The model: the test is of hosts' faults, not of a model's accuracy; SmallNet, a tenth of RefNet,
# leaves the 2 cores' time to the faults.
CONFIG = os.environ.get("PSTRAIN_MULTIHOST_CONFIG", "smallnet.yaml")
MODEL = CONFIG.rsplit(".", 1)[0]
# Global steps: one batch of 128 each without the hub, half as many (a host's average of two
# batches each) with it, so that both runs compute as much. SmallNet's steps are quicker: more of
# them keep the run long enough for a 10 s link cut and a host's death and reboot. On an idle
# machine SmallNet makes some 40 global steps a second with the hub, and the other hosts go on
# through the link cut: 1,000 of them ended the run before h4's restarted worker could step, and
# so did 1,500 once (2026-11-27, CI on an idle machine: the 515 steps after the death took 10 s);
# 2,500 leave it some 25 s at 50 steps a second.
STEPS = int(os.environ.get("PSTRAIN_MULTIHOST_STEPS", "5000" if MODEL == "smallnet" else "800"))
# The test accuracy at the end: RefNet's 4 async pushers reach 0.834 after 600 steps, 0.844 after
# 900 (RefNet reaches ~0.88 after 936 with 2 workers, tests/launcher/test_slurm_train.py).
TARGET = 0.85 if MODEL == "smallnet" else 0.82
LOSS_PERCENT = 1
FLAP_S = 10
DEAD_S = 5
RUN_TIMEOUT_S = 420


def skip_reason():
    missing = missing_tools()
    if not PSTRAIN or not os.path.exists(PSTRAIN):
        missing.append("the pstrain binary (PSTRAIN_BINARY)")
    if not KEYGEN or not os.path.exists(KEYGEN):
        missing.append("pstrain-keygen (PSTRAIN_KEYGEN)")
    if not os.path.exists(os.path.join(DATA_DIR, "train-images-idx3-ubyte.gz")):
        missing.append(f"Fashion-MNIST in {DATA_DIR} (dataset-fashion-mnist)")
    return "missing: " + ", ".join(missing) if missing else None


SKIP_REASON = skip_reason()


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def say(message):
    print(f"  multihost| {message}", file=sys.stderr, flush=True)


class Launcher:
    """pstrain-launch on the control host; its lines kept with the time each arrived."""

    def __init__(self, argv):
        # Killed with the test (a ctest timeout), it still stops every role it started.
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, preexec_fn=die_with_parent())
        self.lines, self.lock = [], threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.lock:
                self.lines.append((time.monotonic(), line))
            if "restart" in line or "failed" in line or "summary" in line:
                say("launcher: " + line.rstrip())

    def first(self, pattern, after=0.0):
        """The time of the first line matching pattern that came after `after`, or None."""
        with self.lock:
            return next((t for t, line in self.lines if t >= after and re.search(pattern, line)),
                        None)

    def output(self):
        self.reader.join(timeout=10)
        if not self.reader.is_alive():
            self.proc.stdout.close()
        with self.lock:
            return "".join(line for _, line in self.lines)


def steps(log_text):
    """Every `step N/M` progress line's N, in order."""
    return [int(s) for s in re.findall(r"\bstep (\d+)/\d+ \(epoch", log_text)]


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class MultihostRunTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pstrain-multihost-")
        cls.hosts = NetnsHosts(4, cls.tmp, rate="1gbit",
                               ssh_env={"OMP_NUM_THREADS": 1})  # 7 roles share 2 cores
        cls.started = time.monotonic()
        cls.hosts.start()
        cls.addClassCleanup(cls.cleanup)
        say(f"4 hosts up in {time.monotonic() - cls.started:.1f} s (netns, veth, tc tbf "
            f"{cls.hosts.rate} each way, sshd); no delay: the kernel has no netem"
            + (f"; removed leftovers {cls.hosts.cleaned}" if cls.hosts.cleaned else ""))
        cls.intra_node_sync = "cpu"
        cls.loss_on = bool(nft_path())
        if cls.loss_on:
            cls.hosts.set_loss(2, LOSS_PERCENT)
        else:
            say("nft is missing (Debian: nftables): h2's link runs without loss")
        cls.train_dir = os.path.join(cls.tmp, "run")
        cls.log_dir = os.path.join(cls.train_dir, "launcher")
        cls.events = {}
        cls.run_cluster()

    @classmethod
    def cleanup(cls):
        launcher = getattr(cls, "launcher", None)
        if launcher and launcher.proc.poll() is None:
            launcher.proc.kill()
        cls.hosts.teardown()
        if os.environ.get("PSTRAIN_MULTIHOST_KEEP") == "1":
            say(f"kept {cls.tmp}")
        else:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def cluster_yaml(cls, ps_hosts, worker_hosts, evaluator_hosts, flags, restart="on_failure"):
        a = cls.hosts.address
        options = cls.hosts.ssh_options() + [
            # A dead host is noticed after 3 s x 8 unanswered keepalives at most; a 10 s cut is
            # not mistaken for one.
            "ConnectTimeout=5", "ServerAliveInterval=3", "ServerAliveCountMax=8"]
        lines = ["mode: ssh", f"binary: {PSTRAIN}", "ps:"]
        lines += [f"  - {{host: {a(h)}, port: 2222}}" for h in ps_hosts]
        lines += ["worker:"]
        ports = {}
        for h in worker_hosts:  # 2232, 2233, ... on each host
            ports[h] = ports.get(h, 2231) + 1
            lines.append(f"  - {{host: {a(h)}, port: {ports[h]}}}")
        if evaluator_hosts:
            lines += ["evaluator:"] + [f"  - {{host: {a(h)}}}" for h in evaluator_hosts]
        flags = dict(flags, data_dir=DATA_DIR)
        lines += [f"flags: {{{', '.join(f'{k}: {json.dumps(str(v))}' for k, v in flags.items())}}}",
                  "ssh:", "  user: root", f"  identity_file: {cls.hosts.identity}",
                  f"  remote_dir: {REPO}", f"  options: {options}",
                  f"restart: {{policy: {restart}, max_restarts: 3, backoff_secs: 1}}"]
        return "\n".join(lines) + "\n"

    @classmethod
    def launch(cls, name, train_dir, cluster_text):
        cluster = os.path.join(cls.tmp, f"{name}.yaml")
        with open(cluster, "w") as f:
            f.write(cluster_text)
        return Launcher(cls.hosts.control_argv([
            sys.executable, os.path.join(REPO, "launcher", "pstrain-launch"),
            "--cluster", cluster, "--config", os.path.join(REPO, "configs", CONFIG),
            "--train_dir", train_dir, "--keygen", KEYGEN, "--progress_interval", "20",
            "--grace_period", "3"] + ([] if CURVE else ["--no_curve"])))

    @classmethod
    def global_step(cls):
        return max([0] + [s for k in range(4) for s in
                          steps(read(os.path.join(cls.log_dir, f"worker-{k}.log")))[-1:]])

    @classmethod
    def wait_until(cls, what, condition, timeout):
        deadline = time.monotonic() + timeout
        while not condition():
            if cls.launcher.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{what} did not happen; launcher output:\n"
                                     + cls.launcher.output()[-4000:])
            time.sleep(0.2)

    @classmethod
    def run_cluster(cls):
        cls.steps = STEPS // 2 if cls.intra_node_sync == "cpu" else STEPS
        cls.launcher = cls.launch("cluster", cls.train_dir, cls.cluster_yaml(
            [1, 2], [3, 3, 4, 4], [1], {"intra_node_sync": cls.intra_node_sync,
                                        "max_steps": cls.steps, "log_every_n_steps": 10,
                                        "eval_interval_secs": 60}))
        ev = cls.events
        launched = time.monotonic()
        try:
            # h3 (the chief's host) loses its link for FLAP_S seconds at a quarter of the run.
            cls.wait_until("a quarter of the steps",
                           lambda: cls.global_step() >= cls.steps // 4, 300)
            chief = os.path.join(cls.log_dir, "worker-0.log")
            ev["flap_step"] = cls.global_step()
            say(f"h3 link down at global step {ev['flap_step']}")
            ev["flap_down"] = time.monotonic()
            cls.hosts.link_down(3)
            time.sleep(1)  # a line of a step made before the cut may still be on its way
            ev["flap_chief_step"] = steps(read(chief))[-1]
            time.sleep(FLAP_S - 1)
            ev["flap_chief_step_at_up"] = steps(read(chief))[-1]
            ev["flap_step_at_up"] = cls.global_step()
            cls.hosts.link_up(3)
            ev["flap_up"] = time.monotonic()
            say(f"h3 link up after {ev['flap_up'] - ev['flap_down']:.1f} s at global step "
                f"{ev['flap_step_at_up']}")
            # h4 dies at half the run and boots DEAD_S seconds later.
            cls.wait_until("half the steps", lambda: cls.global_step() >= cls.steps // 2, 300)
            ev["death_step"] = cls.global_step()
            say(f"h4 dies at global step {ev['death_step']}")
            ev["death"] = time.monotonic()
            cls.hosts.power_off(4)
            time.sleep(DEAD_S)
            cls.hosts.boot(4)
            ev["booted"] = time.monotonic()
            say(f"h4 booted {ev['booted'] - ev['death']:.1f} s after its death")
            for k in (2, 3):
                cls.wait_until(f"the launcher's restart of worker{k}",
                               lambda k=k: cls.launcher.first(rf"restarted worker{k} ",
                                                              ev["death"]), 60)
                ev[f"restart{k}"] = cls.launcher.first(rf"restarted worker{k} ", ev["death"])
            log2 = os.path.join(cls.log_dir, "worker-2.log")
            cls.wait_until("a step of the restarted worker2", lambda: steps(
                read(log2).rsplit("==== [launcher] restart", 1)[-1]), 120)
            ev["rejoined"] = time.monotonic()
            cls.code = cls.launcher.proc.wait(timeout=RUN_TIMEOUT_S)
        finally:
            if cls.launcher.proc.poll() is None:
                cls.launcher.proc.kill()
            cls.output = cls.launcher.output()
            cls.logs = {os.path.basename(p)[:-4]: read(os.path.join(cls.log_dir, p))
                        for p in os.listdir(cls.log_dir)} if os.path.isdir(cls.log_dir) else {}
            cls.elapsed = time.monotonic() - launched
            if cls.loss_on:
                cls.loss_counts = cls.hosts.loss_counts(2)
            say(f"run: launcher exited {cls.launcher.proc.returncode} after {cls.elapsed:.0f} s")

    def explain(self):
        return (f"--- launcher\n{self.output[-5000:]}" + "".join(
            f"--- {name}.log (end)\n{text[-2500:]}" for name, text in sorted(self.logs.items())))

    def test_the_model_trains_to_the_target_over_ssh_on_four_hosts(self):
        self.assertEqual(self.code, 0, self.explain())
        self.assertIn("exit codes: ps0 0, ps1 0, worker0 0, worker1 0, worker2 0, worker3 0",
                      self.output, self.explain())
        for k in (0, 1):
            if CURVE:
                self.assertIn("CURVE authentication on", self.logs[f"ps-{k}"], self.explain())
        if self.intra_node_sync == "cpu":  # one pusher per worker host
            for k in range(4):
                self.assertRegex(self.logs[f"worker-{k}"], rf"syncs with workers \[\d,\d\] on "
                                 rf"host {re.escape(self.hosts.address(3 + k // 2))} over the "
                                 "host hub", self.explain())
        done = re.search(r"done: global step (\d+), test accuracy ([0-9.]+)", self.logs["worker-0"])
        self.assertIsNotNone(done, self.explain())
        say(f"{MODEL} over 4 netns hosts ({'CURVE' if CURVE else 'plaintext'}, "
            f"--intra_node_sync={self.intra_node_sync}): "
            f"global step {done.group(1)}, test accuracy "
            f"{done.group(2)} (target {TARGET}), run {self.elapsed:.0f} s, whole test "
            f"{time.monotonic() - self.started:.0f} s")
        self.assertGreaterEqual(float(done.group(2)), TARGET, self.explain())

    def test_a_worker_host_cut_off_for_10_s_goes_on_without_a_restart(self):
        ev = self.events
        # While h3 was cut off its chief made no step, the other host's workers went on.
        self.assertEqual(ev["flap_chief_step_at_up"], ev["flap_chief_step"])
        self.assertGreater(ev["flap_step_at_up"], ev["flap_step"])
        after = self.logs["worker-0"]
        self.assertRegex(after, r"chief 0: ps 0 \(10\.213\.0\.1:2222\) has not answered "
                         r"heartbeats for", self.explain())
        back = [float(s) for s in
                re.findall(r"chief 0: ps \d \([0-9.:]+\) is back after ([0-9.]+) s", after)]
        self.assertTrue(back, self.explain())
        self.assertNotRegex(self.output, r"worker[01] failed", self.explain())
        self.assertEqual(self.code, 0, self.explain())
        say(f"link flap: h3 cut off {ev['flap_up'] - ev['flap_down']:.1f} s at global step "
            f"{ev['flap_step']}; the chief stayed at step {ev['flap_chief_step']} while h4 took "
            f"the global step to {ev['flap_step_at_up']}; the chief presumed both servers dead "
            f"after 3 s and saw them back {max(back):.1f} s later; worker0/1 not restarted; the "
            "run finished")

    def test_a_dead_host_is_restarted_by_the_launcher_and_its_workers_rejoin(self):
        ev = self.events
        for k in (2, 3):
            self.assertRegex(self.output, rf"worker{k} failed \([^)]*\); restarting it",
                             self.explain())
            self.assertIn(f"==== [launcher] restart 1 of worker{k} ====", self.logs[f"worker-{k}"])
        rejoined = self.logs["worker-2"].rsplit("==== [launcher] restart", 1)[-1]
        resumed = re.search(rf"training {MODEL} from global step (\d+)", rejoined)
        self.assertIsNotNone(resumed, self.explain())
        self.assertTrue(steps(rejoined), self.explain())
        # It rejoins at the cluster's step, not from 0.
        self.assertGreaterEqual(int(resumed.group(1)), ev["death_step"], self.explain())
        self.assertEqual(self.code, 0, self.explain())
        say(f"host death: h4 died at global step {ev['death_step']}, booted after "
            f"{ev['booted'] - ev['death']:.1f} s; the launcher restarted worker2 "
            f"{ev['restart2'] - ev['death']:.1f} s and worker3 "
            f"{ev['restart3'] - ev['death']:.1f} s after the death; worker2 resumed at global "
            f"step {resumed.group(1)} and logged step "
            f"{steps(rejoined)[0]} {ev['rejoined'] - ev['death']:.1f} s after the death; the run "
            "finished")

    def test_a_link_losing_1_percent_of_packets_still_finishes(self):
        if not self.loss_on:
            self.skipTest("nft is missing (Debian: nftables): no loss was injected")
        dropped, passed = self.loss_counts
        self.assertGreater(dropped, 0)
        self.assertEqual(self.code, 0, self.explain())
        say(f"lossy link: h2 (ps1) dropped {dropped} of {dropped + passed} packets "
            f"({100.0 * dropped / (dropped + passed):.2f}%) over the run, which finished")


if __name__ == "__main__":
    unittest.main()
