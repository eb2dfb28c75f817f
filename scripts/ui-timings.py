#!/usr/bin/env python3
"""The inspector's click-to-drawn times and the evidence trace's cost, measured.

Starts `submem serve` on a scratch directory with the embedded defaults,
writes a namespace of --turns synthetic turns, then:

* reads it over HTTP with and without a traced source id (alternating, the
  server's own `latency_ms`), for the trace's added cost;
* drives headless Chromium (Debian's `chromium` and `chromium-driver`,
  `scripts/chromium.sh install`) over WebDriver: the playground's render and
  the side-by-side comparison, from the click on the form's button to the
  next animation frame after the result is in the DOM, at each budget. The
  first comparison builds its substrates (it is followed as a job when the
  build outlasts the request); later ones are served from the kept builds.

Prints one JSON object (also written to --out). Standard library only.

    cargo build --release -p submem-cli
    scripts/ui-timings.py --bin target/release/submem --turns 1000 --budgets 512,8192
"""

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

WORDS = ("harbour lighthouse ferry timetable violin garden trains groceries weather museum "
         "recipe bicycle mountain library concert painting river market festival camera "
         "kitchen ticket birthday office holiday").split()
PEOPLE = "Ingrid Tomas Aiko Ravi Lena Mateo Sofia Kwame".split()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, timeout=600):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text = r.read()
            return r.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def wait_ready(url, what, proc, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{what} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.2)
    sys.exit(f"{what} not ready at {url} after {seconds} s")


def turns(n, seed=7):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        who, a, b, c = rng.choice(PEOPLE), *rng.sample(WORDS, 3)
        out.append({"kind": "turn", "session_id": f"s{i // 50}", "speaker": rng.choice(["user", "assistant"]),
                    "source_id": f"D{i // 50 + 1}:{i % 50}",
                    "text": f"{who} talked about the {a}, the {b} and the {c} on day {i}; "
                            f"turn {i} adds that the {a} was {rng.choice(['early', 'late', 'closed', 'busy'])}."})
    out[0]["text"] = "my violin teacher is Ingrid and she lives in Lyon"
    return out


class Browser:
    """Just enough of WebDriver: a session, navigation, scripts."""

    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"
        binary = next((p for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser") if os.path.exists(p)), "chromium")
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": binary, "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                                       "--disable-dev-shm-usage", "--window-size=1280,1800"]}}}}
        st, v = http("POST", self.base + "/session", caps)
        if st != 200:
            sys.exit(f"no WebDriver session: {v}")
        self.session = v["value"]["sessionId"]
        self.call("POST", "/timeouts", {"script": 900_000})

    def call(self, method, path, body=None):
        st, v = http(method, f"{self.base}/session/{self.session}{path}", body, timeout=960)
        if st != 200:
            sys.exit(f"WebDriver {method} {path}: {v}")
        return v["value"]

    def js(self, script, *args):
        return self.call("POST", "/execute/sync", {"script": script, "args": list(args)})

    def timed(self, script, *args):
        """Runs an async script whose last argument is its callback."""
        return self.call("POST", "/execute/async", {"script": script, "args": list(args)})

    def wait(self, script, seconds=120):
        deadline = time.time() + seconds
        while time.time() < deadline:
            v = self.js(script)
            if v:
                return v
            time.sleep(0.05)
        sys.exit(f"timed out waiting for: {script}")

    def quit(self):
        http("DELETE", f"{self.base}/session/{self.session}")


# Clicks `button`, then resolves on the first animation frame after `done()`
# holds: milliseconds from the click to drawn, or an error text.
CLICK_TO_DRAWN = """
const [button, done, reset, done_cb] = arguments;
new Function(reset)();
const isDone = new Function(done);
const t0 = performance.now();
document.querySelector(button).click();
(function poll() {
  let v;
  try { v = isDone(); } catch (e) { return done_cb('error: ' + e.message); }
  if (typeof v === 'string') return done_cb('error: ' + v);
  if (v) return requestAnimationFrame(() => done_cb(performance.now() - t0));
  setTimeout(poll, 2);
})();
"""


def summary(xs):
    return {"median_ms": round(statistics.median(xs), 1), "min_ms": round(min(xs), 1),
            "max_ms": round(max(xs), 1), "n": len(xs), "all_ms": [round(x, 1) for x in xs]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="target/release/submem", help="the submem binary")
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--substrate", default="hybrid-fill", help="the namespace's own substrate")
    ap.add_argument("--compare", default="m2, m1-fill, hybrid-fill, flexa", help="side by side's substrates")
    ap.add_argument("--budgets", default="512,8192")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--reads", type=int, default=60, help="HTTP reads per arm for the trace's cost")
    ap.add_argument("--question", default="who is my violin teacher")
    ap.add_argument("--memory-llm", default="none", choices=["none", "local"],
                    help="the server's memory LLM: `none` (rule writers; the default, so the first comparison "
                         "times the page, not a 1,000-turn LLM build) or `local` (SmolLM2: FlexA-Mem's build then "
                         "runs for many minutes as a job)")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    a = ap.parse_args()
    if not os.path.exists(a.bin):
        sys.exit(f"{a.bin} not found: cargo build --release -p submem-cli")
    if not shutil.which("chromedriver"):
        sys.exit("chromedriver not found: scripts/chromium.sh install")
    budgets = [int(b) for b in a.budgets.split(",")]
    compared = [s.strip() for s in a.compare.split(",") if s.strip()]

    scratch = tempfile.mkdtemp(prefix="submem-ui-timings-")
    port, wd_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([a.bin, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", scratch],
                              env={**os.environ, "SUBMEM_MEMORY_LLM": a.memory_llm},
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(scratch, "serve.log"), "w"))
    driver = subprocess.Popen(["chromedriver", f"--port={wd_port}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    result = {"turns": a.turns, "substrate": a.substrate, "compare": compared, "budgets": budgets,
              "memory_llm": a.memory_llm}
    try:
        wait_ready(base + "/readyz", "submem serve", server)
        wait_ready(f"http://127.0.0.1:{wd_port}/status", "chromedriver", driver)
        st, v = http("POST", base + "/v1/namespaces", {"name": "long", "substrate": a.substrate})
        if st not in (200, 201):
            sys.exit(f"create: {st} {v}")
        events = turns(a.turns)
        t = time.perf_counter()
        for i in range(0, len(events), 200):
            st, v = http("POST", base + "/v1/namespaces/long/events", {"events": events[i:i + 200]})
            if st != 200:
                sys.exit(f"write: {st} {v}")
        result["write_s"] = round(time.perf_counter() - t, 2)

        # The trace's cost: reads alternating with and without a traced id.
        trace = {}
        for budget in budgets:
            plain, traced = [], []
            for i in range(a.reads * 2):
                body = {"question": a.question, "budget": budget}
                if i % 2:
                    body["trace"] = ["D1:0"]
                st, v = http("POST", base + "/v1/namespaces/long/read", body)
                if st != 200:
                    sys.exit(f"read: {st} {v}")
                (traced if i % 2 else plain).append(v["latency_ms"])
            p, q = statistics.median(plain[1:]), statistics.median(traced[1:])
            trace[str(budget)] = {"plain_ms": round(p, 3), "traced_ms": round(q, 3),
                                  "added": f"{100 * (q - p) / p:+.1f} %"}
        result["trace_cost"] = trace

        b = Browser(wd_port)
        try:
            b.call("POST", "/url", {"url": base + "/ui#v=playground&ns=long"})
            b.wait("return document.getElementById('current').textContent === 'long'")
            render = {}
            for budget in budgets:
                b.js("document.getElementById('question').value = arguments[0]; "
                     "const x = document.getElementById('budget'); x.value = String(arguments[1]); "
                     "x.dispatchEvent(new Event('input')); return true", a.question, budget)
                times = []
                for _ in range(a.repeats):
                    ms = b.timed(CLICK_TO_DRAWN, "#read-form button[type=submit]",
                                 "return document.getElementById('read-facts').dataset.renderMs !== undefined",
                                 "delete document.getElementById('read-facts').dataset.renderMs")
                    if isinstance(ms, str):
                        sys.exit(f"render at {budget}: {ms}")
                    times.append(ms)
                tokens = b.js("return Number(document.getElementById('read-facts').dataset.tokens)")
                blocks = b.js("return document.querySelectorAll('#blocks li').length")
                render[str(budget)] = {"first": round(times[0], 1), **summary(times[1:] or times),
                                       "tokens": tokens, "blocks": blocks}
            result["render_click_to_drawn"] = render

            b.js("document.querySelector(\"#views button[data-view='compare']\").click(); return true")
            compare = {}
            cols = len(compared)
            drawn = ("const e = document.getElementById('cmp-error').textContent; if (e) return e; "
                     f"return document.querySelectorAll('#cmp-grid .cmp-col').length === {cols}")
            for n, budget in enumerate(budgets):
                b.js("document.getElementById('cmp-substrates').value = arguments[0]; "
                     "document.getElementById('cmp-question').value = arguments[1]; "
                     "document.getElementById('cmp-budget').value = String(arguments[2]); return true",
                     ", ".join(compared), a.question, budget)
                times = []
                for i in range(a.repeats + (1 if n == 0 else 0)):
                    t = time.perf_counter()
                    ms = b.timed(CLICK_TO_DRAWN, "#cmp-form button[type=submit]", drawn,
                                 "document.getElementById('cmp-grid').replaceChildren(); return true")
                    if isinstance(ms, str):
                        sys.exit(f"compare at {budget}: {ms}")
                    if n == 0 and i == 0:
                        built = b.js("return [...document.querySelectorAll('#cmp-grid .cmp-col .meta')]"
                                     ".map(p => p.textContent).filter(t => / tokens /.test(t))")
                        compare["first_with_builds"] = {"ms": round(ms, 1),
                                                        "wall_s": round(time.perf_counter() - t, 2),
                                                        "columns": built}
                        continue
                    times.append(ms)
                tokens = b.js("return [...document.querySelectorAll('#cmp-grid .cmp-col')].map(c => "
                              "[c.dataset.substrate, c.querySelector('.meta').textContent.split(' /')[0]])")
                compare[str(budget)] = {**summary(times), "tokens": dict(tokens)}
            result["compare_click_to_drawn"] = compare
        finally:
            b.quit()
    finally:
        driver.terminate()
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(scratch, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
