"""Headless Chromium driven over the DevTools protocol, with nothing but the standard library.

Chromium's --remote-debugging-pipe speaks the protocol on file descriptors 3 (commands in) and 4
(replies and events out), each message JSON ended by a NUL byte: the transport Puppeteer uses,
with no WebSocket client and no WebDriver (selenium, chromium-driver) to install.

    with HeadlessChromium() as browser:
        browser.navigate("http://127.0.0.1:6006/#scalars")
        browser.wait_for("document.title", lambda title: title, timeout=30)
"""
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time


def find_chromium():
    """The Chromium binary (Debian's `chromium`, or $PSTRAIN_CHROMIUM), or None."""
    for name in (os.environ.get("PSTRAIN_CHROMIUM"), "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class BrowserError(Exception):
    pass


class HeadlessChromium:
    def __init__(self, binary=None, width=1400, height=1000):
        self.binary = binary or find_chromium()
        if not self.binary:
            raise BrowserError("no chromium on PATH (Debian: apt-get install chromium)")
        self.size = (width, height)
        self.proc = None
        self.session = None
        self._next_id = 0
        self._buffer = b""

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self):
        self.profile = tempfile.mkdtemp(prefix="pstrain_chromium_")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def pipes_as_3_and_4():  # in the child, before exec: the fds the protocol names
            # Out of the way first: either pipe may itself be 3 or 4. dup2 makes 3 and 4
            # inheritable.
            high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        args = [self.binary, "--headless", "--remote-debugging-pipe", "--no-sandbox",
                "--disable-gpu", "--disable-dev-shm-usage", "--disable-extensions",
                "--no-first-run", "--no-default-browser-check", "--mute-audio",
                "--user-data-dir=" + self.profile,
                "--window-size=%d,%d" % self.size, "about:blank"]
        self.log = open(os.path.join(self.profile, "chromium.log"), "wb")
        # close_fds=False: Python's own descriptors are not inheritable anyway; 3 and 4, made by
        # dup2, are.
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, close_fds=False,
                                     preexec_fn=pipes_as_3_and_4)
        os.close(to_browser_r)
        os.close(from_browser_w)
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = self.send("Target.attachToTarget",
                             {"targetId": target["targetId"], "flatten": True}, session=False)
        self.session = attached["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")

    def close(self):
        if self.proc and self.proc.poll() is None:
            try:
                self.send("Browser.close", session=False, timeout=5)
            except BrowserError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for fd in (getattr(self, "_to_browser", None), getattr(self, "_from_browser", None)):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        if getattr(self, "log", None):
            self.log.close()
        if getattr(self, "profile", None):
            shutil.rmtree(self.profile, ignore_errors=True)

    def browser_log(self):
        try:
            with open(os.path.join(self.profile, "chromium.log"), "rb") as f:
                return f.read().decode("utf-8", "replace")[-4000:]
        except OSError:
            return ""

    def send(self, method, params=None, session=True, timeout=30):
        """Sends one command and returns its result; events that arrive meanwhile are dropped."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        data = json.dumps(message).encode("utf-8") + b"\0"
        try:
            while data:
                data = data[os.write(self._to_browser, data):]
        except BrokenPipeError:
            raise BrowserError("chromium exited (sending %s); its log:\n%s" %
                               (method, self.browser_log()))
        deadline = time.time() + timeout
        while True:
            reply = self._read(deadline - time.time(), method)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError("%s: %s" % (method, reply["error"]))
                return reply.get("result", {})

    def _read(self, timeout, waiting_for):
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_browser], [], [], max(0, timeout))
            if not ready:
                raise BrowserError("no reply to %s in time" % waiting_for)
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError("chromium exited (waiting for %s); its log:\n%s" %
                                   (waiting_for, self.browser_log()))
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def navigate(self, url):
        result = self.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise BrowserError("cannot open %s: %s" % (url, result["errorText"]))

    def evaluate(self, expression):
        """The value of a JavaScript expression in the page (awaited if a promise)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError("%s: %s" % (expression[:80], result["exceptionDetails"]))
        return result["result"].get("value")

    def wait_for(self, expression, accept, timeout):
        """Evaluates `expression` until accept(value) is true; returns the last value either way."""
        deadline = time.time() + timeout
        while True:
            try:
                value = self.evaluate(expression)
            except BrowserError:  # e.g. the page was still loading: its context went away
                value = None
            if accept(value) or time.time() > deadline:
                return value
            time.sleep(0.25)

    def screenshot(self, path):
        import base64
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
