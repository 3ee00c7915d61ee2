"""What a user sees: TensorBoard, in a real (headless) Chromium, showing real pstrain runs.

pstrain-train trains configs/refnet.yaml for a few dozen steps on a slice of Fashion-MNIST, and
the launcher runs a short cluster (1 parameter server, 2 workers) on the same slice; a
TensorBoard server from the test venv serves both logdirs (runs single/... and cluster/...) on
127.0.0.1; Chromium loads the Scalars page and the Graphs tab, and the test reads what the pages
drew (through their shadow DOM): the chief's, each worker's and the server's scalars side by
side, and the model's graph.
read_with_tensorboard.py and read_graph_with_tensorboard.py check the data TensorBoard serves;
this checks that its web app renders it.

Skips, naming what is missing, without Chromium (Debian: chromium, scripts/install-deps.sh),
TensorBoard (scripts/test-venv.sh BUILD_DIR), Fashion-MNIST or the pstrain-train binary.
Environment (ctest sets them): PSTRAIN_TRAIN, PSTRAIN_BINARY (pstrain, for the cluster),
PSTRAIN_TEST_PYTHON; PSTRAIN_BROWSER_SCREENSHOTS, a
folder to keep screenshots of the pages in.
"""
import gzip
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from headless_chromium import BrowserError, HeadlessChromium, find_chromium

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
STEPS = 24
CLUSTER_STEPS = 40
TRAIN_EXAMPLES = 2048  # 16 steps of 128 an epoch: evaluations at steps 16 and 24
TEST_EXAMPLES = 512

# Every element of the page, through the shadow roots of its web components (Polymer's).
DEEP = "const deep = (root, out = []) => { for (const e of root.querySelectorAll('*')) {" \
       " out.push(e); if (e.shadowRoot) deep(e.shadowRoot, out); } return out; };"
# The text an element shows, shadow DOM included, without style sheets.
SHOWN = "const shown = (e) => { let t = ''; const visit = (n) => {" \
        " if (n.nodeType === 3) { t += n.textContent; return; }" \
        " if (n.nodeType === 1 && ['STYLE', 'SCRIPT', 'TEMPLATE'].includes(n.tagName)) return;" \
        " if (n.shadowRoot) visit(n.shadowRoot); for (const c of n.childNodes) visit(c); };" \
        " visit(e); return t.replace(/\\s+/g, ' ').trim(); };"

# Each scalar card: its heading and how many run lines its chart drew (a path with points).
SCALAR_CARDS = "(() => { %s %s return deep(document)" \
               ".filter(e => e.localName === 'tf-scalar-card').map(card => {" \
               " const inside = deep(card.shadowRoot);" \
               " const heading = inside.find(e => e.localName === 'tf-card-heading');" \
               " const lines = inside.filter(e => e.localName === 'path' &&" \
               " e.classList.contains('line') && (e.getAttribute('d') || '').length > 20);" \
               " return {tag: heading ? shown(heading) : '', lines: lines.length}; }); })()" \
               % (DEEP, SHOWN)
# The graph's drawn nodes (SVG groups the graph dashboard names after the node or name scope),
# with their width on the screen.
GRAPH_NODES = "(() => { %s return deep(document).filter(e => e.localName === 'g' &&" \
              " e.classList.contains('node')).map(e => ({name: e.getAttribute('data-name')," \
              " label: e.textContent, width: e.getBoundingClientRect().width})); })()" % DEEP
# The edges and their labels (the shape of the tensor each carries).
GRAPH_EDGES = "(() => { %s const edges = deep(document).filter(e => e.localName === 'g' &&" \
              " e.classList.contains('edge')); return {count: edges.length, labels:" \
              " edges.map(e => e.textContent).filter(t => t)}; })()" % DEEP


def idx_slice(source, target, count):
    """The first `count` items of a gzipped IDX file (the header's count rewritten)."""
    with gzip.open(source, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    item = 1
    for d in shape[1:]:
        item *= d
    header = data[:4] + count.to_bytes(4, "big") + data[8:4 + 4 * dims]
    with gzip.open(target, "wb", compresslevel=1) as f:
        f.write(header + data[4 + 4 * dims:4 + 4 * dims + count * item])


def why_skipped(train, python):
    if not find_chromium():
        return "chromium is not installed (Debian: chromium; scripts/install-deps.sh installs it)"
    if not train or not os.path.exists(train):
        return "PSTRAIN_TRAIN (the pstrain-train binary) is unset or missing; ctest sets it"
    if not os.path.exists(os.path.join(FASHION_MNIST, "t10k-labels-idx1-ubyte.gz")):
        return "Fashion-MNIST is not installed (dataset-fashion-mnist)"
    if not python or not os.path.exists(python) or subprocess.run(
            [python, "-c", "import tensorboard"], stderr=subprocess.DEVNULL).returncode != 0:
        return ("PSTRAIN_TEST_PYTHON (%r) cannot import tensorboard; run scripts/test-venv.sh "
                "BUILD_DIR" % python)
    return None


class TensorBoardInBrowserTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.started = time.time()
        train = os.environ.get("PSTRAIN_TRAIN")
        python = os.environ.get("PSTRAIN_TEST_PYTHON")
        reason = why_skipped(train, python)
        if reason:
            raise unittest.SkipTest(reason)
        cls.dir = tempfile.mkdtemp(prefix="tensorboard_in_browser_")
        cls.tensorboard = cls.browser = None
        cls.logdir = os.path.join(cls.dir, "logs")
        try:
            cls.train(train)
            cls.run_cluster(os.environ.get("PSTRAIN_BINARY"))
            cls.url = cls.start_tensorboard(python)
            cls.browser = HeadlessChromium()
            cls.browser.start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.browser:
            cls.browser.close()
        if cls.tensorboard and cls.tensorboard.poll() is None:
            cls.tensorboard.terminate()
            try:
                cls.tensorboard.wait(timeout=10)
            except subprocess.TimeoutExpired:
                cls.tensorboard.kill()
                cls.tensorboard.wait()
        shutil.rmtree(cls.dir, ignore_errors=True)
        print("\ntensorboard_in_browser: %.1f s in all" % (time.time() - cls.started),
              file=sys.stderr)

    @classmethod
    def run_cluster(cls, binary):
        """1 ps + 2 workers through the launcher, writing logs/cluster/{train,worker-k,ps-0}."""
        if not binary or not os.path.exists(binary):
            raise AssertionError("PSTRAIN_BINARY (the pstrain binary) is unset or missing")
        ports = []
        for _ in range(3):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                ports.append(s.getsockname()[1])
        cluster = os.path.join(cls.dir, "cluster.yaml")
        with open(cluster, "w") as f:
            f.write("mode: local\nbinary: %s\nps:\n  - {host: 127.0.0.1, port: %d}\n"
                    "worker:\n  - {host: 127.0.0.1, port: %d}\n  - {host: 127.0.0.1, port: %d}\n"
                    "flags: {max_steps: %d, data_dir: %s, log_every_n_steps: 4,"
                    " ps_summary_secs: 0.5, save_checkpoints_secs: 0}\n"
                    "restart: {policy: never}\n"
                    % (binary, ports[0], ports[1], ports[2], CLUSTER_STEPS, cls.data))
        run = subprocess.run(
            [sys.executable, os.path.join(SOURCE_DIR, "launcher", "pstrain-launch"),
             "--cluster", cluster, "--config", os.path.join(SOURCE_DIR, "configs", "refnet.yaml"),
             "--train_dir", os.path.join(cls.dir, "cluster"), "--logdir",
             os.path.join(cls.logdir, "cluster"), "--no_curve", "--progress_interval", "5"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=150)
        output = run.stdout.decode("utf-8", "replace")
        if run.returncode != 0:
            raise AssertionError("the cluster failed (%d):\n%s" % (run.returncode, output[-3000:]))

    @classmethod
    def train(cls, binary):
        data = cls.data = os.path.join(cls.dir, "fashion-mnist")
        os.makedirs(data)
        for split, count in (("train", TRAIN_EXAMPLES), ("t10k", TEST_EXAMPLES)):
            for kind in ("images-idx3", "labels-idx1"):
                name = "%s-%s-ubyte.gz" % (split, kind)
                idx_slice(os.path.join(FASHION_MNIST, name), os.path.join(data, name), count)
        run = subprocess.run(
            [binary, "--config=" + os.path.join(SOURCE_DIR, "configs", "refnet.yaml"),
             "--train_dir=" + os.path.join(cls.dir, "run"), "--data_dir=" + data,
             "--logdir=" + os.path.join(cls.logdir, "single"),
             "--max_steps=%d" % STEPS, "--log_every_n_steps=4", "--histogram_every_n_steps=12",
             "--save_checkpoints_secs=0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        output = run.stdout.decode("utf-8", "replace")
        if run.returncode != 0:
            raise AssertionError("pstrain-train failed (%d):\n%s" %
                                 (run.returncode, output[-3000:]))

    @classmethod
    def start_tensorboard(cls, python):
        log_path = os.path.join(cls.dir, "tensorboard.log")
        with open(log_path, "wb") as log:
            # --port 0: the system picks a free port; TensorBoard prints the address.
            cls.tensorboard = subprocess.Popen(
                [python, "-m", "tensorboard.main", "--logdir", cls.logdir, "--host", "127.0.0.1",
                 "--port", "0", "--load_fast", "false", "--reload_interval", "1"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            with open(log_path, "r", errors="replace") as f:
                text = f.read()
            m = re.search(r"(http://127\.0\.0\.1:\d+/)", text)
            if m:
                return m.group(1)
            if cls.tensorboard.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError("TensorBoard did not start:\n" + text[-3000:])

    def open(self, page):
        # From a blank page: TensorBoard reads the whole address (tab, run, tag filter) at load.
        self.browser.navigate("about:blank")
        self.browser.navigate(self.url + page)

    def keep_screenshot(self, name):
        folder = os.environ.get("PSTRAIN_BROWSER_SCREENSHOTS")
        if folder:
            os.makedirs(folder, exist_ok=True)
            self.browser.screenshot(os.path.join(folder, name + ".png"))

    def test_scalars_page_draws_the_loss_and_accuracy_cards_of_both_runs(self):
        # The tag filter (kept in the URL, as a user's bookmark would) puts both cards first.
        self.open("#scalars&tagFilter=%5E(loss%7Caccuracy)%24")

        def drawn(cards):
            by_tag = {c["tag"]: c["lines"] for c in cards or []}
            return by_tag.get("loss", 0) >= 2 and by_tag.get("accuracy", 0) >= 1
        cards = self.browser.wait_for(SCALAR_CARDS, drawn, timeout=60)
        self.keep_screenshot("scalars")
        tags = [c["tag"] for c in cards or []]
        self.assertIn("loss", tags, "no card headed 'loss' on the Scalars page: %s" % cards)
        self.assertIn("accuracy", tags, "no card headed 'accuracy' on the Scalars page: %s" % cards)
        by_tag = {c["tag"]: c["lines"] for c in cards}
        # Each run is two paths (smoothed and raw): train's and eval's loss, eval's accuracy.
        self.assertGreaterEqual(by_tag["loss"], 2, "the loss chart drew no line for a run")
        self.assertGreaterEqual(by_tag["accuracy"], 1, "the accuracy chart drew no line")

    def test_scalars_page_draws_the_chief_each_worker_and_the_server_side_by_side(self):
        # A worker's and a server's own scalars, not only the chief's.
        wanted = {"loss": 2, "worker/exchange_ms": 2, "worker/examples_per_sec": 2,
                  "ps/pushes_per_sec": 1, "ps/bytes_in_per_sec": 1}
        self.open("#scalars&tagFilter=%5E(loss%7Cworker%2Fexchange_ms%7Cworker%2Fexamples_per_sec"
                  "%7Cps%2Fpushes_per_sec%7Cps%2Fbytes_in_per_sec)%24")

        def drawn(cards):
            by_tag = {c["tag"]: c["lines"] for c in cards or []}
            return all(by_tag.get(tag, 0) >= n for tag, n in wanted.items())
        cards = self.browser.wait_for(SCALAR_CARDS, drawn, timeout=60)
        self.keep_screenshot("cluster_scalars")
        by_tag = {c["tag"]: c["lines"] for c in cards or []}
        for tag, lines in wanted.items():
            # worker/*: a line for each of the two workers' runs; ps/*: the one server's.
            self.assertGreaterEqual(by_tag.get(tag, 0), lines,
                                    "card %r drew fewer than %d lines: %s" % (tag, lines, cards))

    def test_graphs_tab_draws_the_model_layer_by_layer(self):
        self.open("#graphs&run=single%2Ftrain")
        layers = ["conv1", "pool1", "conv2", "pool2", "flatten", "fc1", "dropout", "fc2", "loss"]

        def drawn(nodes):
            # Laid out and zoomed to fit: the dashboard first draws the scene tiny, then zooms.
            width = {n["name"]: n["width"] for n in nodes or []}
            return all(width.get(layer, 0) > 30 for layer in layers)
        nodes = self.browser.wait_for(GRAPH_NODES, drawn, timeout=60)
        self.keep_screenshot("graphs")
        by_name = {n["name"]: n for n in nodes or []}
        for layer in layers:
            self.assertIn(layer, by_name, "the Graphs tab drew no node %r: %s" % (layer, nodes))
            # A name scope drawn as one box labelled with the layer's name.
            self.assertIn(layer, by_name[layer]["label"])
            self.assertGreater(by_name[layer]["width"], 30, "node %r is not on screen" % layer)
        edges = self.browser.evaluate(GRAPH_EDGES)
        self.assertGreaterEqual(edges["count"], len(layers) - 1)
        # Edges are labelled with the shapes the graph declares (unknown batch first).
        for shape in ("?\u00d732\u00d728\u00d728", "?\u00d764\u00d77\u00d77", "?\u00d73136"):
            self.assertIn(shape, edges["labels"], "no edge labelled %s: %s" % (shape, edges))


if __name__ == "__main__":
    unittest.main()
