"""Hosts for tests: Linux network namespaces on one bridge, each with its own address and sshd.

Every distributed test elsewhere runs on 127.0.0.1; here each "host" is a network namespace
with one link (a veth pair) to a bridge, its own address in 10.213.0.0/24 and its own sshd on
port 22, so the launcher's ssh mode reaches it as it would a machine (roles listen on the host's
address, traffic crosses a link that can be shaped, cut or made lossy). The hosts share this
machine's file systems (as a cluster shares an NFS checkout) and CPUs.

    with NetnsHosts(4, tmp_dir) as hosts:           # h1..h4 = 10.213.0.1..4
        hosts.control_argv(["ssh", ...])             # run something on the control host (.100)
        hosts.link_down(3); hosts.link_up(3)         # pull and replug host 3's cable
        hosts.set_loss(2, 1)                         # 1% of host 2's packets lost, each way
        hosts.power_off(4); hosts.boot(4)            # host 4 dies and comes back fresh

Layout, everything in namespaces of its own (the root namespace gets no interface, address or
route): `pstmh-<pid>-net` holds the bridge; `pstmh-<pid>-hK` is host K, its `eth0` the far end
of the bridge port `hK`; `pstmh-<pid>-ctl` is where the launcher and ssh run (10.213.0.100).
<pid> is the owning process: a later run deletes the namespaces (and their processes) of an
owner that is gone, e.g. a test killed by SIGKILL; concurrent runs do not see each other (each
has its own bridge, the same addresses on it).

Links: `rate` (tc tbf, both directions of each host's link, default 1gbit). No delay: this
kernel has no netem qdisc (nor tc's gact action), so every link has the bridge's ~0 ms latency.
Loss: nftables in the host's namespace drops `percent`% of packets at random in each direction
(`numgen random mod 100`); needs `nft` (Debian: nftables).

Teardown (kill every process in the namespaces, delete them) runs on leaving the `with`, at
exit (atexit) and on SIGTERM/SIGINT/SIGHUP, whichever comes first. If this process is killed
outright (a ctest timeout), a watchdog it started (`netns_hosts.py --reap TAG`, its own session)
sees its pipe close and does the same: a host whose link was down holds roles no ssh can stop.
A later run deletes whatever is still left.
"""

import atexit
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import time

PREFIX = "pstmh-"
SUBNET = "10.213.0"
CONTROL_ADDRESS = f"{SUBNET}.100"
SSHD = "/usr/sbin/sshd"
NETNS_DIR = "/run/netns"


def missing_tools():
    """What this machine lacks for NetnsHosts, as `what (Debian package)` strings; [] if none."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (network namespaces, veth, tc and sshd need it)")
    for tool, package in (("ip", "iproute2"), ("tc", "iproute2"), ("ssh", "openssh-client"),
                          ("ssh-keygen", "openssh-client")):
        if not shutil.which(tool, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin"):
            missing.append(f"{tool} ({package})")
    if not os.path.exists(SSHD):
        missing.append(f"{SSHD} (openssh-server)")
    if not missing:
        missing += _kernel_missing()
    return missing


def _kernel_missing():
    """What the kernel (or the container) refuses of what NetnsHosts uses, tried in a probe."""
    ns = f"{PREFIX}{os.getpid()}-probe"
    steps = [["ip", "netns", "add", ns],
             ["ip", "-n", ns, "link", "add", "br0", "type", "bridge"],
             ["ip", "-n", ns, "link", "add", "name", "probe0", "type", "veth", "peer", "name",
              "probe1"],
             ["tc", "-n", ns, "qdisc", "add", "dev", "probe0", "root", "tbf", "rate", "1gbit",
              "burst", "1mb", "latency", "100ms"]]
    try:
        for argv in steps:
            result = run(*argv, check=False)
            if result.returncode != 0:
                return [f"network namespaces with a bridge, veth and tc tbf (`{' '.join(argv)}`: "
                        f"{result.stdout.strip()})"]
        return []
    finally:
        run("ip", "netns", "del", ns, check=False)


def nft_path():
    return shutil.which("nft", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def run(*argv, check=True):
    result = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}): {result.stdout}")
    return result


def _pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def die_with_parent(sig=signal.SIGTERM):
    """A preexec_fn: Linux sends the child `sig` when this process dies, even by SIGKILL (a
    ctest timeout), so nothing started here outlives the test; the namespaces left behind are
    deleted by the next run."""
    parent = os.getpid()
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec():
        prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os.kill(os.getpid(), sig)

    return preexec


def namespace_pids(ns):
    out = run("ip", "netns", "pids", ns, check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def kill_namespace(ns, timeout=5.0):
    """SIGKILLs every process in ns until none is left (they may fork meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        pids = [p for p in namespace_pids(ns) if p != os.getpid()]
        if not pids or time.monotonic() > deadline:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)


def delete_namespace(ns):
    kill_namespace(ns)
    run("ip", "netns", "del", ns, check=False)


def delete_namespaces(tag):
    try:
        names = os.listdir(NETNS_DIR)
    except OSError:
        return
    for name in names:
        if name.startswith(tag + "-"):
            delete_namespace(name)


def clean_leftovers():
    """Deletes the namespaces of earlier runs whose owner process is gone. Returns their names."""
    try:
        names = os.listdir(NETNS_DIR)
    except OSError:
        return []
    gone = []
    for name in names:
        m = re.match(re.escape(PREFIX) + r"(\d+)-", name)
        if not m:
            continue
        owner = int(m.group(1))
        if owner != os.getpid() and _pid_alive(owner):
            continue  # another run, still going
        delete_namespace(name)
        gone.append(name)
    return gone


class NetnsHosts:
    def __init__(self, count, tmp_dir, rate="1gbit", ssh_env=None):
        """count hosts (at most 99); tmp_dir holds the sshd configs, keys and logs; ssh_env: the
        environment sshd gives every session (sshd_config SetEnv), e.g. {"OMP_NUM_THREADS": 1}."""
        self.count = count
        self.tmp = tmp_dir
        self.rate = rate
        self.ssh_env = ssh_env or {}
        self.tag = f"{PREFIX}{os.getpid()}"
        self.net = f"{self.tag}-net"
        self.control = f"{self.tag}-ctl"
        self.sshd = {}      # host -> Popen of `ip netns exec ... sshd -D`
        self.loss = {}      # host -> percent
        self.up = False
        self.identity = os.path.join(tmp_dir, "user_key")
        self.known_hosts = os.path.join(tmp_dir, "known_hosts")
        self._old_handlers = {}

    # ---- names ----
    def ns(self, host):
        return f"{self.tag}-h{host}"

    def address(self, host):
        return f"{SUBNET}.{host}"

    def control_argv(self, argv):
        """argv run on the control host (the launcher's machine)."""
        return ["ip", "netns", "exec", self.control] + list(argv)

    def ssh_options(self):
        return [f"UserKnownHostsFile={self.known_hosts}", "LogLevel=ERROR"]

    # ---- lifecycle ----
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.teardown()
        return False

    def start(self):
        self.cleaned = clean_leftovers()
        self.reaper = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--reap",
                                        self.tag], stdin=subprocess.PIPE,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       start_new_session=True)
        atexit.register(self.teardown)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, self._on_signal)
        self.up = True
        try:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation
            run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", self.identity)
            shutil.copy(self.identity + ".pub", os.path.join(self.tmp, "authorized_keys"))
            run("ip", "netns", "add", self.net)
            run("ip", "-n", self.net, "link", "add", "br0", "type", "bridge")
            run("ip", "-n", self.net, "link", "set", "br0", "up")
            self._plug(self.control, "ctl", CONTROL_ADDRESS)
            for host in range(1, self.count + 1):
                run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", self._host_key(host))
                self.boot(host)
        except BaseException:
            self.teardown()
            raise

    def _on_signal(self, signum, _frame):
        self.teardown()
        raise SystemExit(128 + signum)

    def teardown(self):
        if not self.up:
            return
        self.up = False
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old)
        for host in range(1, self.count + 1):
            delete_namespace(self.ns(host))
        delete_namespace(self.control)
        delete_namespace(self.net)  # the bridge and every port with it
        for proc in self.sshd.values():
            proc.poll()
        self.reaper.stdin.close()  # nothing left for it
        self.reaper.wait()

    # ---- hosts ----
    def _host_key(self, host):
        return os.path.join(self.tmp, f"host_key_h{host}")

    def _plug(self, ns, port, address):
        """Creates namespace ns with eth0 = `address`, its cable into the bridge as `port`.
        eth0's MAC address comes from the IP address: a rebooted host keeps its NIC, so its
        peers' ARP caches stay right."""
        mac = "02:00:" + ":".join(f"{int(b):02x}" for b in address.split("."))
        run("ip", "netns", "add", ns)
        run("ip", "-n", self.net, "link", "add", port, "type", "veth", "peer", "name", "eth0",
            "address", mac, "netns", ns)
        run("ip", "-n", self.net, "link", "set", port, "master", "br0", "up")
        run("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
        run("ip", "-n", ns, "link", "set", "eth0", "up")
        run("ip", "-n", ns, "link", "set", "lo", "up")

    def boot(self, host):
        """(Re)creates host `host`: a fresh namespace (no state of an earlier life), its link
        shaped to `rate` and lossy as set before, and its sshd listening."""
        ns, address = self.ns(host), self.address(host)
        self._plug(ns, f"h{host}", address)
        for where, dev in ((ns, "eth0"), (self.net, f"h{host}")):  # both directions
            run("tc", "-n", where, "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
                self.rate, "burst", "1mb", "latency", "100ms")
        if self.loss.get(host):
            self.set_loss(host, self.loss[host])
        config = os.path.join(self.tmp, f"sshd_config_h{host}")
        lines = [f"ListenAddress {address}:22", f"HostKey {self._host_key(host)}",
                 f"AuthorizedKeysFile {self.tmp}/authorized_keys", "StrictModes no",
                 f"PidFile {self.tmp}/sshd_h{host}.pid", "PasswordAuthentication no",
                 "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password",
                 "UsePAM no", "MaxStartups 50", "MaxSessions 50"]
        if self.ssh_env:
            lines.append("SetEnv " + " ".join(f"{k}={v}" for k, v in self.ssh_env.items()))
        with open(config, "w") as f:
            f.write("\n".join(lines) + "\n")
        log_path = os.path.join(self.tmp, f"sshd_h{host}.log")
        with open(log_path, "a") as log:
            self.sshd[host] = subprocess.Popen(
                ["ip", "netns", "exec", ns, SSHD, "-D", "-e", "-f", config],
                stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent(signal.SIGKILL))
        deadline = time.monotonic() + 10
        while True:  # the login itself proves the address, the route and sshd
            probe = run(*self.control_argv(
                ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new",
                 "-o", "ConnectTimeout=2"] + sum((["-o", o] for o in self.ssh_options()), [])
                + ["-i", self.identity, f"root@{address}", "true"]), check=False)
            if probe.returncode == 0:
                return
            if self.sshd[host].poll() is not None or time.monotonic() > deadline:
                with open(log_path) as f:
                    raise RuntimeError(f"sshd on host {host} ({address}) does not take logins: "
                                       f"{probe.stdout.strip()}; sshd log:\n{f.read()}")
            time.sleep(0.1)

    def power_off(self, host):
        """Host `host` dies at once: its cable goes dead first (nothing it sends leaves, no FIN
        or RST), then every process on it is killed and the namespace deleted, as a power loss
        loses a machine's kernel state. Its peers learn only from silence."""
        self.link_down(host)
        delete_namespace(self.ns(host))
        run("ip", "-n", self.net, "link", "del", f"h{host}", check=False)
        proc = self.sshd.pop(host, None)
        if proc:
            proc.wait()

    # ---- links ----
    def link_down(self, host):
        """Pulls host's cable: its bridge port goes down (the host sees no carrier)."""
        run("ip", "-n", self.net, "link", "set", f"h{host}", "down")

    def link_up(self, host):
        run("ip", "-n", self.net, "link", "set", f"h{host}", "up")

    def set_loss(self, host, percent):
        """Drops percent% of host's packets at random, in each direction (nftables)."""
        nft = nft_path()
        if not nft:
            raise RuntimeError("nft is missing (Debian: apt-get install nftables)")
        self.loss[host] = percent
        rules = (f"table inet pstmh_loss {{\n"
                 f"  chain in {{ type filter hook input priority 0; "
                 f"numgen random mod 100 < {percent} counter drop; counter; }}\n"
                 f"  chain out {{ type filter hook output priority 0; "
                 f"numgen random mod 100 < {percent} counter drop; counter; }}\n}}\n")
        run("ip", "netns", "exec", self.ns(host), nft, "delete", "table", "inet", "pstmh_loss",
            check=False)
        proc = subprocess.run(["ip", "netns", "exec", self.ns(host), nft, "-f", "-"], input=rules,
                              text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            raise RuntimeError(f"nft on host {host}: {proc.stdout}")

    def loss_counts(self, host):
        """(dropped, passed) packets of host's loss rules so far, both directions."""
        out = run("ip", "netns", "exec", self.ns(host), nft_path(), "list", "table", "inet",
                  "pstmh_loss").stdout
        counts = [int(n) for n in re.findall(r"counter packets (\d+)", out)]
        # Per chain: the drop rule's counter, then the counter of what went on.
        return counts[0] + counts[2], counts[1] + counts[3]


if __name__ == "__main__":
    # The watchdog: `netns_hosts.py --reap TAG` deletes TAG's namespaces once its stdin closes.
    if len(sys.argv) == 3 and sys.argv[1] == "--reap":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sys.stdin.read()
        delete_namespaces(sys.argv[2])
