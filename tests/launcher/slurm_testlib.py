"""A private Slurm cluster on this machine for the --slurm tests: Debian's munged, slurmctld and
one slurmd per node (Slurm's multiple-slurmd mode: NodeName=node[1-N] NodeHostname=localhost,
a port each), all started by hand in the foreground from a generated slurm.conf in a temporary
directory, on ports the kernel hands out and with their own StateSaveLocation, SlurmdSpoolDir,
munge socket and key, so a system Slurm (if any) is neither used nor disturbed.

stop() tears everything down, also after a failed test: it cancels the jobs, stops the daemons,
and kills whatever process still carries this cluster's SLURM_CONF in its environment (job
steps, slurmstepd). If the test process dies without stop() (a ctest timeout kills it), a
detached reaper started with the cluster does the killing and removes the directory. Needs root
(slurmd runs jobs as their user) and the binaries; skip_reason() says what is missing.
"""

import os
import random
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "scontrol", "scancel", "squeue", "sinfo")
FASHION_MNIST = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                "BOOT_FAIL", "DEADLINE", "PREEMPTED")


def which(name):
    return shutil.which(name, path=SBIN_PATH)


def skip_reason():
    missing = [b for b in DAEMONS + CLIENTS if not which(b)]
    if missing:
        return (f"Slurm or munge is not installed ({', '.join(missing)} missing; Debian: "
                "apt-get install slurmctld slurmd slurm-client munge)")
    if os.geteuid() != 0:
        return "starting munged, slurmctld and slurmd for the test needs root"
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(count):
    """`count` consecutive ports below the ephemeral range that nothing listens on."""
    while True:
        first = random.randint(20000, 32000 - count)
        try:
            for port in range(first, first + count):
                with socket.socket() as s:
                    s.bind(("0.0.0.0", port))
            return first
        except OSError:
            pass


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return f"({path} unreadable)"


def processes_mentioning(text):
    """(pid, command line) of every process whose command line contains text."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append((int(entry), cmdline))
    return found


def tail(path, count=30):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-count:])
    except OSError:
        return f"({path} unreadable)\n"


def kill_processes_of(conf):
    """SIGKILL to every process that carries SLURM_CONF=conf in its environment: the daemons,
    slurmstepd and every process of every job."""
    marker = f"SLURM_CONF={conf}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    os.kill(int(entry), signal.SIGKILL)
        except OSError:
            pass


def reap_after(test_pid, tmp):
    """The reaper: forks away (so that killing the test's process tree misses it), waits until
    the test process is gone, and if stop() did not remove tmp, kills the cluster and removes it."""
    if os.fork():
        os._exit(0)
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    while os.path.isdir(tmp):
        try:
            os.kill(test_pid, 0)
        except ProcessLookupError:
            kill_processes_of(os.path.join(tmp, "slurm.conf"))
            shutil.rmtree(tmp, ignore_errors=True)
            break
        time.sleep(1)
    os._exit(0)


class SlurmCluster:
    def __init__(self, nodes=3, cpus_per_node=1, gpus_per_node=0):
        self.node_names = [f"node{i + 1}" for i in range(nodes)]
        self.cpus_per_node = cpus_per_node
        # GPUs as Slurm GRES on stand-in character devices (/dev/null's numbers): Slurm
        # allocates them and sets CUDA_VISIBLE_DEVICES per step as for real ones.
        self.gpus_per_node = gpus_per_node
        self.tmp = None
        self.daemons = []  # (name, Popen, log path)

    # ---- start and stop ----
    def start(self):
        self.tmp = tempfile.mkdtemp(prefix="pstrain-slurm-")
        os.chmod(self.tmp, 0o755)  # munged wants its socket's directories searchable by all
        self.conf = os.path.join(self.tmp, "slurm.conf")
        subprocess.run([sys.executable, os.path.realpath(__file__), "--reap", str(os.getpid()),
                        self.tmp], check=True)  # returns at once; the reaper goes on alone
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self):
        tmp = self.tmp
        key = os.path.join(tmp, "munge.key")
        subprocess.run([which("mungekey"), "--create", f"--keyfile={key}"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.chmod(key, 0o600)
        self.munge_socket = os.path.join(tmp, "munge.socket")
        self._daemon("munged", [which("munged"), "-F", "--force", f"--socket={self.munge_socket}",
                                f"--key-file={key}", f"--pid-file={tmp}/munged.pid",
                                f"--seed-file={tmp}/munged.seed",
                                f"--log-file={tmp}/munged.log"])
        self._wait(lambda: os.path.exists(self.munge_socket), "munged's socket", "munged")
        self._write_conf()
        self._daemon("slurmctld", [which("slurmctld"), "-D", "-i"])
        for node in self.node_names:
            os.makedirs(os.path.join(tmp, "spool", node))
            self._daemon(f"slurmd-{node}", [which("slurmd"), "-D", "-N", node])
        self._wait(self._all_idle, "every node idle in sinfo", "slurmctld")

    def _write_conf(self):
        tmp = self.tmp
        ports = [free_port() for _ in range(len(self.node_names) + 1)]
        host = socket.gethostname().split(".")[0]
        n = len(self.node_names)
        open(os.path.join(tmp, "plugstack.conf"), "w").close()
        lines = [
            "ClusterName=pstraintest", f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={ports[0]}", f"SlurmdPort={ports[1]}",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.munge_socket}",
            "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={tmp}/state", f"SlurmdSpoolDir={tmp}/spool/%n",
            f"SlurmctldPidFile={tmp}/slurmctld.pid", f"SlurmdPidFile={tmp}/slurmd-%n.pid",
            f"SlurmctldLogFile={tmp}/slurmctld.log", f"SlurmdLogFile={tmp}/slurmd-%n.log",
            f"PlugStackConfig={tmp}/plugstack.conf",
            # No cgroups: linuxproc follows a step's processes by parentage, which is enough
            # to signal and kill them all, and needs nothing from the machine.
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
            "SwitchType=switch/none", "SchedulerType=sched/builtin",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none", "ReturnToService=2", "KillWait=5", "MinJobAge=600",
            "InactiveLimit=0", "MessageTimeout=20", "SlurmctldDebug=info", "SlurmdDebug=info",
            f"NodeName=node[1-{n}] NodeHostname=localhost NodeAddr=127.0.0.1 "
            f"Port={','.join(map(str, ports[1:]))} CPUs={self.cpus_per_node} State=UNKNOWN"
            + (f" Gres=gpu:{self.gpus_per_node}" if self.gpus_per_node else ""),
            f"PartitionName=test Nodes=node[1-{n}] Default=YES MaxTime=INFINITE State=UP", ""]
        if self.gpus_per_node:
            lines.insert(0, "GresTypes=gpu")
            devices = [os.path.join(tmp, f"gpu{i}") for i in range(self.gpus_per_node)]
            for device in devices:
                os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            with open(os.path.join(tmp, "gres.conf"), "w") as f:
                f.write(f"NodeName=node[1-{n}] Name=gpu File={tmp}/gpu[0-"
                        f"{self.gpus_per_node - 1}]\n")
        os.makedirs(os.path.join(tmp, "state"))
        with open(self.conf, "w") as f:
            f.write("\n".join(lines))

    def _daemon(self, name, argv):
        log_path = os.path.join(self.tmp, f"{name}.stderr")
        with open(log_path, "w") as log:
            popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env(),
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.daemons.append((name, popen, log_path))

    def _wait(self, ready, what, daemon, timeout=60):
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [(n, p, log) for n, p, log in self.daemons if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                n, _, log = dead[0] if dead else [d for d in self.daemons if d[0] == daemon][0]
                logs = "".join(f"--- {path}\n{tail(path)}" for path in
                               (log, os.path.join(self.tmp, f"{daemon}.log")))
                why = f"{n} exited" if dead else f"no {what} after {timeout} s"
                raise RuntimeError(f"the test's Slurm did not start: {why}\n{logs}")
            time.sleep(0.2)

    def _all_idle(self):
        out = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False).stdout.split()
        states = dict(zip(out[::2], out[1::2]))
        return all(states.get(n) == "idle" for n in self.node_names)

    def stop(self):
        if self.tmp is None:
            return
        if any(p.poll() is None for n, p, _ in self.daemons if n == "slurmctld"):
            self.run(["scancel", "--full", "--user=root"], check=False)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and self.run(
                    ["squeue", "-h", "-t", "RUNNING,COMPLETING,PENDING", "-o", "%i"],
                    check=False).stdout.strip():
                time.sleep(0.5)
        for name, popen, _ in reversed(self.daemons):
            if popen.poll() is None:
                popen.terminate()
                try:
                    popen.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    popen.kill()
                    popen.wait()
        kill_processes_of(self.conf)
        shutil.rmtree(self.tmp, ignore_errors=True)  # also tells the reaper to leave
        self.tmp = None

    # ---- using it ----
    def env(self, **more):
        env = dict(os.environ, PATH=SBIN_PATH, SLURM_CONF=os.path.join(self.tmp, "slurm.conf"))
        env.update(more)
        return env

    def run(self, argv, check=True, **more_env):
        result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.env(**more_env), timeout=60)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed (exit {result.returncode}): "
                                 f"{result.stderr}")
        return result

    def sbatch(self, *args, **more_env):
        """Submits a job; returns its id."""
        out = self.run(["sbatch", "--parsable"] + list(args), **more_env).stdout.strip()
        return out.split(";")[0]

    def job(self, job_id):
        """JobState and ExitCode of a job, e.g. ("COMPLETED", "0:0")."""
        out = self.run(["scontrol", "-o", "show", "job", job_id], check=False).stdout
        state = re.search(r"\bJobState=(\S+)", out)
        code = re.search(r"\bExitCode=(\S+)", out)
        return (state.group(1) if state else "UNKNOWN", code.group(1) if code else "")

    def wait_job(self, job_id, timeout):
        deadline = time.monotonic() + timeout
        while True:
            state, code = self.job(job_id)
            if state in FINAL_STATES:
                return state, code
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} still {state} after {timeout} s")
            time.sleep(1)

    def logs(self):
        """The daemons' log tails, for a failing test's message."""
        paths = [os.path.join(self.tmp, "slurmctld.log")] + [
            os.path.join(self.tmp, f"slurmd-{n}.log") for n in self.node_names]
        return "".join(f"--- {p}\n{tail(p, 15)}" for p in paths)


if __name__ == "__main__" and sys.argv[1:2] == ["--reap"]:
    reap_after(int(sys.argv[2]), sys.argv[3])
