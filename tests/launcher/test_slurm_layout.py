"""--slurm without Slurm: Slurm's variables and scontrol's answers -> nodes, roles, ports, GPUs and
srun command lines; the flags --slurm refuses; the scripts that run inside a step."""

import os
import subprocess
import sys
import tempfile
import unittest

from launcher_testlib import FAKE, REPO, LAUNCHER, write

from pstrain_launch import slurm
from pstrain_launch.roles import LaunchOptions, build_roles

SHOW_NODE = """\
NodeName=gpu07 Arch=x86_64 CoresPerSocket=16 NodeAddr=10.1.0.7 NodeHostName=gpu07 Port=0
NodeName=gpu08 Arch=x86_64 CoresPerSocket=16 NodeAddr=10.1.0.8 NodeHostName=gpu08 Port=0
NodeName=gpu09 Arch=x86_64 CoresPerSocket=16 NodeAddr=gpu09 NodeHostName=gpu09 Port=0
"""
OPTS = LaunchOptions(config="configs/refnet.yaml", train_dir="runs/r", logdir="runs/r/logs",
                     extra_flags=[])


def fake_scontrol(nodes, show_node=SHOW_NODE):
    calls = []

    def scontrol(args):
        calls.append(args)
        if args[:2] == ["show", "hostnames"]:
            return "\n".join(nodes) + "\n"
        if args[:3] == ["-o", "show", "node"]:
            return show_node
        raise AssertionError(f"unexpected scontrol {args}")

    scontrol.calls = calls
    return scontrol


def allocation(**env):
    base = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "gpu[07-09]",
            "SLURM_TASKS_PER_NODE": "1(x3)", "SLURM_JOB_CPUS_PER_NODE": "32(x3)"}
    base.update(env)
    return slurm.read_allocation({k: v for k, v in base.items() if v is not None},
                                 fake_scontrol(["gpu07", "gpu08", "gpu09"]))


def placed(cluster):
    """[(role, node, port, gpus)] in start order."""
    return ([("ps", s.host, s.port, "") for s in cluster.ps] +
            [("worker", w.host, w.port, w.gpus) for w in cluster.worker] +
            [("evaluator", e.host, None, "") for e in cluster.evaluator])


class AllocationTest(unittest.TestCase):
    def test_nodes_come_from_scontrol_in_nodelist_order_with_their_node_addresses(self):
        scontrol = fake_scontrol(["gpu07", "gpu08", "gpu09"])
        alloc = slurm.read_allocation({"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "gpu[07-09]"},
                                      scontrol)
        self.assertEqual(scontrol.calls[0], ["show", "hostnames", "gpu[07-09]"])
        self.assertEqual(alloc.nodes, ["gpu07", "gpu08", "gpu09"])
        self.assertEqual(alloc.addresses, {"gpu07": "10.1.0.7", "gpu08": "10.1.0.8",
                                           "gpu09": "gpu09"})
        self.assertEqual(alloc.tasks, {"gpu07": 1, "gpu08": 1, "gpu09": 1})

    def test_compressed_per_node_counts_expand_and_a_wrong_count_is_named(self):
        self.assertEqual(slurm.expand_counts("2(x3),1", 4, "X"), [2, 2, 2, 1])
        self.assertEqual(slurm.expand_counts("16", 1, "X"), [16])
        with self.assertRaisesRegex(slurm.SlurmError, r"X=2\(x2\) gives 2 node\(s\), expected 3"):
            slurm.expand_counts("2(x2)", 3, "X")
        with self.assertRaisesRegex(slurm.SlurmError, "expected counts like 2"):
            slurm.expand_counts("two", 1, "X")

    def test_gpus_come_from_gpus_on_node_then_gpus_per_node_then_cuda_visible_devices(self):
        self.assertEqual(slurm.gpus_on_node({"SLURM_GPUS_ON_NODE": "4",
                                             "CUDA_VISIBLE_DEVICES": "0,1"}),
                         (4, "SLURM_GPUS_ON_NODE"))
        self.assertEqual(slurm.gpus_on_node({"SLURM_GPUS_PER_NODE": "a100:2"}),
                         (2, "SLURM_GPUS_PER_NODE"))
        self.assertEqual(slurm.gpus_on_node({"CUDA_VISIBLE_DEVICES": "2,3,5"}),
                         (3, "CUDA_VISIBLE_DEVICES"))
        self.assertEqual(slurm.gpus_on_node({"CUDA_VISIBLE_DEVICES": "NoDevFiles"})[0], 0)
        self.assertEqual(slurm.gpus_on_node({})[0], 0)

    def test_outside_an_allocation_or_inside_a_step_it_says_where_to_run(self):
        with self.assertRaisesRegex(slurm.SlurmError, "not inside a Slurm allocation.*sbatch"):
            slurm.read_allocation({}, fake_scontrol([]))
        with self.assertRaisesRegex(slurm.SlurmError, r"inside step 4242\.0 \(under srun\)"):
            allocation(SLURM_STEP_ID="0")
        allocation(SLURM_STEP_ID="batch")  # the batch script itself is fine
        allocation(SLURM_STEP_ID="4294967290")  # and salloc's shell in its interactive step


class LayoutTest(unittest.TestCase):
    def test_default_is_a_server_per_node_a_worker_per_task_and_an_evaluator_on_the_last(self):
        plan = slurm.plan_cluster(allocation(), slurm.Layout(), "build/pstrain")
        p = slurm.default_port("4242")
        self.assertEqual(p, 20000 + 20 * (4242 % 600))
        self.assertEqual(placed(plan.cluster), [
            ("ps", "gpu07", p, ""), ("ps", "gpu08", p, ""), ("ps", "gpu09", p, ""),
            ("worker", "gpu07", p + 1, ""), ("worker", "gpu08", p + 1, ""),
            ("worker", "gpu09", p + 1, ""), ("evaluator", "gpu09", None, "")])
        self.assertIn("per node: Slurm's tasks per node (SLURM_TASKS_PER_NODE)", plan.notes[1])

    def test_one_worker_per_gpu_each_with_its_own_gpu(self):
        alloc = allocation(SLURM_GPUS_ON_NODE="4")
        plan = slurm.plan_cluster(alloc, slurm.Layout(ps=1, evaluators=0, port=3000), "b")
        workers = [(w.host, w.port, w.gpus) for w in plan.cluster.worker]
        self.assertEqual(workers[:5], [("gpu07", 3001, "0"), ("gpu07", 3002, "1"),
                                       ("gpu07", 3003, "2"), ("gpu07", 3004, "3"),
                                       ("gpu08", 3000, "0")])
        self.assertEqual(len(workers), 12)
        self.assertEqual(plan.cluster.evaluator, [])
        self.assertIn("4 GPU(s) per node (SLURM_GPUS_ON_NODE)", plan.notes[0])

    def test_ntasks_per_node_sets_workers_per_node_and_they_share_the_gpus(self):
        alloc = allocation(SLURM_GPUS_ON_NODE="4", SLURM_NTASKS_PER_NODE="2",
                           SLURM_TASKS_PER_NODE="2(x3)")
        plan = slurm.plan_cluster(alloc, slurm.Layout(), "b")
        self.assertEqual([w.gpus for w in plan.cluster.worker], ["0,1", "2,3"] * 3)
        alloc = allocation(SLURM_GPUS_ON_NODE="2")
        plan = slurm.plan_cluster(alloc, slurm.Layout(workers_per_node="1"), "b")
        self.assertEqual([w.gpus for w in plan.cluster.worker], ["0,1"] * 3)

    def test_more_workers_than_gpus_is_refused_unless_gpus_per_node_is_0(self):
        alloc = allocation(SLURM_GPUS_ON_NODE="2")
        with self.assertRaisesRegex(slurm.SlurmError,
                                    "gpu07: 3 workers but 2 GPU.*--gpus_per_node 0"):
            slurm.plan_cluster(alloc, slurm.Layout(workers_per_node="3"), "b")
        plan = slurm.plan_cluster(alloc, slurm.Layout(workers_per_node="3", gpus_per_node=0), "b")
        self.assertEqual([w.gpus for w in plan.cluster.worker], [""] * 9)
        with self.assertRaisesRegex(slurm.SlurmError, "--workers_per_node gpu: the allocation "
                                                      "has no GPUs"):
            slurm.plan_cluster(allocation(), slurm.Layout(workers_per_node="gpu"), "b")

    def test_servers_and_evaluators_go_round_the_nodes(self):
        plan = slurm.plan_cluster(allocation(), slurm.Layout(ps=4, evaluators=2, port=5000), "b")
        self.assertEqual([(s.host, s.port) for s in plan.cluster.ps],
                         [("gpu07", 5000), ("gpu08", 5000), ("gpu09", 5000), ("gpu07", 5001)])
        self.assertEqual([e.host for e in plan.cluster.evaluator], ["gpu09", "gpu08"])
        plan = slurm.plan_cluster(allocation(), slurm.Layout(ps_per_node=2, port=5000), "b")
        self.assertEqual([s.host for s in plan.cluster.ps],
                         ["gpu07", "gpu07", "gpu08", "gpu08", "gpu09", "gpu09"])

    def test_nodes_sharing_an_address_get_different_ports(self):
        same = "".join(f"NodeName=node{i} NodeAddr=127.0.0.1 Port={6817 + i}\n" for i in (1, 2, 3))
        alloc = slurm.read_allocation(
            {"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "node[1-3]"},
            fake_scontrol(["node1", "node2", "node3"], same))
        plan = slurm.plan_cluster(alloc, slurm.Layout(ps=1, port=7000), "b")
        ports = [s.port for s in plan.cluster.ps] + [w.port for w in plan.cluster.worker]
        self.assertEqual(ports, [7000, 7001, 7002, 7003])

    def test_roles_get_tensorflow_flags_with_node_addresses_and_the_nodes_cpus(self):
        alloc = allocation(SLURM_JOB_CPUS_PER_NODE="8,16(x2)")
        cluster = slurm.plan_cluster(alloc, slurm.Layout(ps=1, port=2222), "b").cluster
        roles = build_roles(cluster, OPTS)
        self.assertEqual([r.where for r in roles],
                         ["ps0 on gpu07", "worker0 on gpu07", "worker1 on gpu08",
                          "worker2 on gpu09", "evaluator0 on gpu09"])
        self.assertEqual(roles[1].flags[:5], [
            "--job_name=worker", "--task_index=0", "--ps_hosts=10.1.0.7:2222",
            "--worker_hosts=10.1.0.7:2223,10.1.0.8:2222,gpu09:2222", "--evaluators=1"])
        threads = {r.name: r.env["OMP_NUM_THREADS"] for r in roles}
        self.assertEqual(threads, {"ps0": "1", "worker0": "8", "worker1": "16", "worker2": "16",
                                   "evaluator0": "1"})

    def test_srun_runs_one_task_on_the_roles_node_and_sets_its_environment_inside(self):
        alloc = allocation(SLURM_GPUS_ON_NODE="2")
        cluster = slurm.plan_cluster(alloc, slurm.Layout(ps=1, port=2222), "b").cluster
        roles = build_roles(cluster, OPTS)
        ps = slurm.srun_argv(roles[0], "/opt/pstrain/build/pstrain")
        self.assertEqual(ps[:7], ["srun", "--nodes=1", "--ntasks=1", "--nodelist=gpu07",
                                  "--overlap", "--job-name=ps0", "env"])
        self.assertIn("CUDA_VISIBLE_DEVICES=", ps)  # a server sees no GPU
        self.assertEqual(ps[ps.index("/opt/pstrain/build/pstrain") + 1:], roles[0].flags)
        worker = slurm.srun_argv(roles[2], "b")
        self.assertEqual(worker[worker.index("sh"):worker.index("b")],
                         ["sh", "-c", slurm.GPU_PICKER, "pstrain-launch", "1"])
        self.assertIn("--intra_node_sync=nccl", roles[2].flags)  # a GPU each, hosts shared
        env = slurm.srun_env({"SLURM_NTASKS": "6", "SLURM_NTASKS_PER_NODE": "2",
                              "SLURM_JOB_ID": "4242", "PATH": "/bin"})
        self.assertEqual(env, {"SLURM_JOB_ID": "4242", "PATH": "/bin"})


class StepScriptTest(unittest.TestCase):
    """The shell scripts that run inside srun steps, run here with sh."""

    def pick(self, slots, visible):
        env = dict(os.environ, SLURMD_NODENAME="gpu07")
        env.pop("CUDA_VISIBLE_DEVICES", None)
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
        return subprocess.run(["sh", "-c", slurm.GPU_PICKER, "pstrain-launch", slots, "sh", "-c",
                               'echo "[$CUDA_VISIBLE_DEVICES]" "$@"', "x", "--flag=a b"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def test_a_worker_gets_the_gpus_at_its_positions_among_those_slurm_gave_the_step(self):
        self.assertEqual(self.pick("1", "4,5,6,7").stdout, "[5] --flag=a b\n")
        self.assertEqual(self.pick("2,3", "4,5,6,7").stdout, "[6,7] --flag=a b\n")
        self.assertEqual(self.pick("1", None).stdout, "[1] --flag=a b\n")  # no list: positions
        result = self.pick("2", "0,1")
        self.assertEqual(result.returncode, 2)
        self.assertIn("gpu07: GPU position 2 is not among the 2 GPU(s) of this step "
                      "(CUDA_VISIBLE_DEVICES=0,1)", result.stderr)

    def test_the_node_check_names_what_a_node_does_not_see(self):
        with tempfile.TemporaryDirectory() as tmp:
            token = write(os.path.join(tmp, "token"), "abc")
            check = ["sh", "-c", slurm.NODE_CHECK, "check"]
            env = dict(os.environ, SLURMD_NODENAME="gpu08")
            ok = subprocess.run(check + [token, "abc", sys.executable, token], env=env,
                                stdout=subprocess.PIPE, text=True)
            self.assertEqual(ok.stdout, "")
            bad = subprocess.run(check + [token, "xyz", f"{tmp}/pstrain", f"{tmp}/c.yaml"],
                                 env=env, stdout=subprocess.PIPE, text=True)
            self.assertEqual(bad.stdout.splitlines(), [
                f"gpu08: does not see {token} (written by the launcher on this job's first "
                "node)", f"gpu08: {tmp}/pstrain is not an executable file",
                f"gpu08: {tmp}/c.yaml is not readable"])


class SlurmFlagsTest(unittest.TestCase):
    def launch(self, *args, env=None):
        base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        base.update(env or {})
        return subprocess.run([sys.executable, LAUNCHER] + list(args), env=base,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def assertRefused(self, result, message):
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assertIn(message, result.stderr)
        self.assertEqual(result.stdout, "")

    def test_flags_that_make_no_sense_with_or_without_slurm_stop_at_start(self):
        config = os.path.join(REPO, "configs", "refnet.yaml")
        cluster = os.path.join(REPO, "configs", "clusters", "local.yaml")
        self.assertRefused(self.launch("--slurm", "--cluster", cluster, "--config", config),
                           "--cluster: with --slurm the cluster is the Slurm allocation")
        self.assertRefused(self.launch("--cluster", cluster, "--config", config, "--ps", "2"),
                           "--ps: only with --slurm")
        self.assertRefused(self.launch("--config", config), "expected --cluster FILE, or --slurm")
        self.assertRefused(self.launch("--slurm", "--config", config, "--ps", "1",
                                       "--ps_per_node", "1"),
                           "--ps and --ps_per_node: expected one of them")
        self.assertRefused(self.launch("--slurm", "--config", config, "--workers_per_node", "0"),
                           "--workers_per_node 0: expected a number of at least 1, or gpu")
        self.assertRefused(self.launch("--slurm", "--config", config, "--port", "70000"),
                           "--port 70000: expected a number from 1 to 65535")
        self.assertRefused(self.launch("--slurm", "--config", config, "--binary", FAKE),
                           "--slurm: not inside a Slurm allocation")
        self.assertRefused(self.launch("--slurm", "--config", config, "--", "--ps_hosts=x:1"),
                           "--ps_hosts is set by the launcher")


if __name__ == "__main__":
    unittest.main()
