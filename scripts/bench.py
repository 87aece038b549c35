"""`make bench`: yuxi-operator's local mode (in-process store and Redis) side by side with LangGraph's
in-memory API server (`langgraph dev`), on loopback, driven by the same client (httpx), in one run.

Both sides do the same work: a run whose "model" echoes its input (yuxi: the scripted echo model of a
subagent started with `task`; LangGraph: the echo graph in bench/langgraph). Prints one table with
ratios (how many times better yuxi-operator is; below 1 means worse) and writes it to
.run/bench.md.

With `--traces`, two more sides measure what traces cost: the same binary exporting every span to an
OTLP/HTTP receiver that accepts and drops them ("traces on"), and, with `--baseline BINARY`, a build
without trace export at all (`git worktree add /tmp/base <commit> && cargo build --release` there):
"in-process" against it is what traces cost when off.

Usage: python scripts/bench.py BINARY [--runs N] [--traces] [--baseline BINARY]
       (REDIS_URL names the Redis of the Redis side)
"""

import argparse
import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import json

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = {"Authorization": "Bearer alice-token"}
# How many runs the burst starts at once.
BURST = 1000
TICKS = os.sysconf("SC_CLK_TCK")
# How long each server is left without requests before its memory at rest is read (seconds).
REST_SECONDS = 80


# The Python client (httpx) measures latency; throughput is measured with wrk too (Debian's `wrk`), as
# one Python process tops out near a few hundred requests per second.


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree(pid):
    """pid and all its descendants."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                children.setdefault(int(fields[1]), []).append(int(entry))
            except OSError:
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def rss_mib(pid, field="VmRSS"):
    """The resident memory of pid and its descendants, in MiB: all of it (VmRSS), or only what is not a
    file's pages (RssAnon: the heap and stacks, what a container's working set mostly counts)."""
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith(field + ":"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def cpu_seconds(pid):
    """CPU time of the process tree, reaped children included."""
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
            total += utime + stime + (cutime + cstime if p == pid else 0)
        except OSError:
            pass
    return total / TICKS


WRK_SCRIPT = r"""
local n = 0
local body_template = os.getenv("BENCH_BODY") or ""
local method = os.getenv("BENCH_METHOD") or "GET"
local auth = os.getenv("BENCH_AUTH")
function setup(thread)
  thread:set("tid", tostring(math.random(1, 1000000000)))
end
function request()
  n = n + 1
  local headers = {["content-type"] = "application/json"}
  if auth then headers["authorization"] = auth end
  local body = nil
  if method == "POST" then body = string.gsub(body_template, "%%ID%%", tid .. "-" .. n) end
  return wrk.format(method, nil, headers, body)
end
"""


def wrk(url, method="GET", body="", auth=None, seconds=8, connections=50):
    """Requests/s, p99 in ms and failed requests of `wrk` against `url` (a fresh id in each POST body
    where the body says %ID%)."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(WRK_SCRIPT)
    env = dict(os.environ, BENCH_BODY=body, BENCH_METHOD=method)
    if auth:
        env["BENCH_AUTH"] = auth
    out = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--timeout", "60s", "--latency", "-s", f.name, url],
                         capture_output=True, text=True, env=env).stdout
    rate = float(next(l.split()[1] for l in out.splitlines() if l.startswith("Requests/sec:")))
    p99 = next(l.split()[1] for l in out.splitlines() if l.strip().startswith("99%"))
    p99_ms = float(p99[:-2]) if p99.endswith("ms") else float(p99[:-1]) * 1000 if p99.endswith("s") else float(p99[:-2]) / 1000
    failed = sum(int(l.split(":")[1]) for l in out.splitlines() if "Non-2xx" in l)
    if failed:
        print(f"bench: {failed} answers to {url} were not 2xx", file=sys.stderr)
    return rate, p99_ms, failed


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


class Yuxi:
    """The local mode, started as a user starts it, with the scripted echo model."""

    def __init__(self, binary, redis_url, label, extra_env=None):
        self.label = label
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.data = tempfile.mkdtemp(prefix="bench-yuxi-")
        env = dict(os.environ)
        env.pop("REDIS_URL", None)
        if redis_url:
            env["REDIS_URL"] = redis_url
        env["RUST_LOG"] = "warn"
        env.update(extra_env or {})
        self.log = open(os.path.join(self.data, "local.log"), "w")
        self.proc = subprocess.Popen(
            [binary, "local", "--manifests", os.path.join(ROOT, "examples"), "--listen", f"127.0.0.1:{self.port}",
             "--users", os.path.join(ROOT, "examples/local-users.yaml"), "--data-dir", os.path.join(self.data, "d"),
             "--default-model", "scripted/auto", "--scripts-dir", os.path.join(ROOT, "examples/scripts"),
             "--max-runs-per-user", "100000", "--max-runs", "100000", "--max-streams-per-user", "1000",
             "--max-concurrent-runs", "64"],
            stdout=subprocess.DEVNULL, stderr=self.log, env=env, cwd=ROOT)

    def parent(self):
        return {"agent": "deep-research", "run_id": "bench-" + uuid.uuid4().hex, "thread_id": "bench-" + uuid.uuid4().hex}

    async def blocking_run(self, client):
        body = {"parent": self.parent(), "description": "echo this", "subagent_slug": "fact-verifier"}
        r = await client.post(f"{self.base}/api/tools/task", json=body, headers=TOKEN, timeout=120)
        r.raise_for_status()
        assert r.json().get("status") == "completed", r.text
        return r.json()

    async def first_event(self, client):
        started = time.perf_counter()
        body = {"parent": self.parent(), "description": "echo this", "subagent_slug": "fact-verifier"}
        r = await client.post(f"{self.base}/api/tools/subagent_start", json=body, headers=TOKEN)
        r.raise_for_status()
        run_id = r.json()["run_id"]
        async with client.stream("GET", f"{self.base}/api/agent/runs/{run_id}/events", headers=TOKEN, timeout=60) as s:
            async for line in s.aiter_lines():
                if line.startswith("event:"):
                    return time.perf_counter() - started

    def wrk_run(self):
        body = ('{"parent": {"agent": "deep-research", "run_id": "bench-%ID%", "thread_id": "bench-%ID%"}, '
                '"description": "echo this", "subagent_slug": "fact-verifier"}')
        return f"{self.base}/api/tools/task", "POST", body, TOKEN["Authorization"]

    async def wrk_status(self, client):
        parent = self.parent()
        body = {"parent": parent, "description": "echo this", "subagent_slug": "fact-verifier"}
        run_id = (await client.post(f"{self.base}/api/tools/task", json=body, headers=TOKEN, timeout=60)).json()["run_id"]
        return f"{self.base}/api/tools/subagent_status", "POST", json.dumps({"parent": parent, "run_id": run_id}), TOKEN["Authorization"]

    async def status_target(self, client):
        parent = self.parent()
        body = {"parent": parent, "description": "echo this", "subagent_slug": "fact-verifier"}
        r = await client.post(f"{self.base}/api/tools/task", json=body, headers=TOKEN, timeout=60)
        run_id = r.json()["run_id"]
        return lambda: client.post(f"{self.base}/api/tools/subagent_status",
                                   json={"parent": parent, "run_id": run_id}, headers=TOKEN)


    async def main_run(self, client):
        """A main agent's run, start to end: deep-research with its example script (two subagents started
        and awaited, a report written), followed over its event stream until `end`."""
        r = await client.post(f"{self.base}/api/agent/runs", headers=TOKEN, timeout=60,
                              json={"query": "How do warm pools change sandbox start-up?", "agent_slug": "deep-research"})
        r.raise_for_status()
        run_id = r.json()["run_id"]
        async with client.stream("GET", f"{self.base}/api/agent/runs/{run_id}/events", headers=TOKEN, timeout=120) as s:
            async for _ in s.aiter_lines():
                pass
        result = (await client.get(f"{self.base}/api/agent/runs/{run_id}/result", headers=TOKEN)).json()
        assert result.get("status") == "completed", result

    async def burst(self, client, n):
        """Starts `n` runs at once, awaits each; returns (completed, lost): lost is a run that did not
        end completed with exactly one `end` event in its stream."""
        async def start():
            body = {"parent": self.parent(), "description": "echo this", "subagent_slug": "fact-verifier"}
            r = await client.post(f"{self.base}/api/tools/subagent_start", json=body, headers=TOKEN, timeout=120)
            r.raise_for_status()
            return body["parent"], r.json()["run_id"]
        started = await asyncio.gather(*(start() for _ in range(n)))

        async def finish(parent, run_id):
            try:
                return await ended_once(parent, run_id)
            except httpx.HTTPError as err:
                print(f"bench: {self.label}: run {run_id}: {err!r}", file=sys.stderr)
                return False

        async def ended_once(parent, run_id):
            for _ in range(20):
                r = await client.post(f"{self.base}/api/tools/subagent_await", headers=TOKEN, timeout=120,
                                      json={"parent": parent, "run_id": run_id, "timeout_seconds": 60})
                if not r.json().get("wait_timed_out"):
                    break
            ends = 0
            async with client.stream("GET", f"{self.base}/api/agent/runs/{run_id}/events", headers=TOKEN, timeout=60) as s:
                async for line in s.aiter_lines():
                    ends += line == "event: end"
            return r.json().get("status") == "completed" and ends == 1
        ok = await asyncio.gather(*(finish(p, r) for p, r in started))
        return sum(ok), n - sum(ok)


class LangGraph:
    """`langgraph dev` (the in-memory API server) with the echo graph."""

    def __init__(self, python, label):
        self.label = label
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.dir = tempfile.mkdtemp(prefix="bench-langgraph-")
        for name in ("echo_graph.py", "langgraph.json"):
            shutil.copy(os.path.join(ROOT, "bench/langgraph", name), self.dir)
        env = dict(os.environ, LANGGRAPH_CLI_NO_ANALYTICS="1", LANGSMITH_TRACING="false", LOG_LEVEL="WARNING")
        langgraph = os.path.join(os.path.dirname(python), "langgraph")
        self.log = open(os.path.join(self.dir, "langgraph.log"), "w")
        self.proc = subprocess.Popen([langgraph, "dev", "--no-browser", "--no-reload", "--port", str(self.port)],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=self.dir)

    def input(self):
        return {"assistant_id": "echo", "input": {"messages": [{"role": "user", "content": "echo this"}]}}

    async def blocking_run(self, client):
        r = await client.post(f"{self.base}/runs/wait", json=self.input(), timeout=120)
        r.raise_for_status()
        return r.json()

    async def first_event(self, client):
        started = time.perf_counter()
        async with client.stream("POST", f"{self.base}/runs/stream", json=self.input(), timeout=60) as s:
            async for line in s.aiter_lines():
                if line.startswith("event:"):
                    return time.perf_counter() - started

    def wrk_run(self):
        return f"{self.base}/runs/wait", "POST", json.dumps(self.input()), None

    async def wrk_status(self, client):
        thread = (await client.post(f"{self.base}/threads", json={})).json()["thread_id"]
        run = (await client.post(f"{self.base}/threads/{thread}/runs", json=self.input())).json()["run_id"]
        await client.get(f"{self.base}/threads/{thread}/runs/{run}/join", timeout=60)
        return f"{self.base}/threads/{thread}/runs/{run}", "GET", "", None

    async def status_target(self, client):
        thread = (await client.post(f"{self.base}/threads", json={})).json()["thread_id"]
        run = (await client.post(f"{self.base}/threads/{thread}/runs", json=self.input())).json()["run_id"]
        await client.get(f"{self.base}/threads/{thread}/runs/{run}/join", timeout=60)
        return lambda: client.get(f"{self.base}/threads/{thread}/runs/{run}")


    async def burst(self, client, n):
        """Starts `n` runs at once on new threads, joins each; returns (completed, lost)."""
        async def one():
            thread = (await client.post(f"{self.base}/threads", json={})).json()["thread_id"]
            run = (await client.post(f"{self.base}/threads/{thread}/runs", json=self.input())).json()["run_id"]
            return thread, run
        started = await asyncio.gather(*(one() for _ in range(n)))

        async def finish(thread, run):
            try:
                await client.get(f"{self.base}/threads/{thread}/runs/{run}/join", timeout=600)
                r = await client.get(f"{self.base}/threads/{thread}/runs/{run}")
                return r.json().get("status") == "success"
            except httpx.HTTPError as err:
                print(f"bench: {self.label}: run {run}: {err!r}", file=sys.stderr)
                return False
        ok = await asyncio.gather(*(finish(t, r) for t, r in started))
        return sum(ok), n - sum(ok)


async def wait_up(side, client):
    deadline = time.time() + 120
    path = "/healthz" if isinstance(side, Yuxi) else "/ok"
    while time.time() < deadline:
        try:
            if (await client.get(side.base + path)).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        await asyncio.sleep(0.2)
    raise SystemExit(f"{side.label} did not start")


async def measure(side, runs):
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        await wait_up(side, client)
        for _ in range(5):  # warm up
            await side.blocking_run(client)
        # At rest: long enough for what a server holds only while used (the word dictionary, a minute
        # after its last use) to go.
        await asyncio.sleep(REST_SECONDS)
        out = {"rss_idle": rss_mib(side.proc.pid), "anon_idle": rss_mib(side.proc.pid, "RssAnon")}

        latencies = []
        for _ in range(runs):
            t = time.perf_counter()
            await side.blocking_run(client)
            latencies.append(time.perf_counter() - t)
        out["blocking_p50"] = pct(latencies, 0.5) * 1000
        out["blocking_p99"] = pct(latencies, 0.99) * 1000

        if hasattr(side, "main_run"):
            mains = []
            for _ in range(max(10, runs // 5)):
                t = time.perf_counter()
                await side.main_run(client)
                mains.append(time.perf_counter() - t)
            out["main_run_p50"] = pct(mains, 0.5) * 1000
        else:
            out["main_run_p50"] = float("nan")

        firsts = [await side.first_event(client) for _ in range(max(10, runs // 5))]
        out["first_event_p50"] = pct(firsts, 0.5) * 1000

        in_flight, total = 50, runs * 4
        done, lat = 0, []
        cpu0, t0 = cpu_seconds(side.proc.pid), time.perf_counter()

        async def worker():
            nonlocal done
            while done < total:
                done += 1
                t = time.perf_counter()
                await side.blocking_run(client)
                lat.append(time.perf_counter() - t)

        await asyncio.gather(*(worker() for _ in range(in_flight)))
        elapsed = time.perf_counter() - t0
        out["runs_per_s_50"] = len(lat) / elapsed
        out["p99_at_50"] = pct(lat, 0.99) * 1000
        await asyncio.sleep(1)
        out["cpu_ms_per_run"] = (cpu_seconds(side.proc.pid) - cpu0) * 1000 / len(lat)

        read = await side.status_target(client)
        count, t0 = 0, time.perf_counter()

        failed = 0

        async def reader():
            nonlocal count, failed
            while time.perf_counter() - t0 < 3:
                try:
                    (await read()).raise_for_status()
                    count += 1
                except httpx.HTTPError:
                    failed += 1

        await asyncio.gather(*(reader() for _ in range(50)))
        out["status_per_s"] = count / (time.perf_counter() - t0)
        if failed:
            print(f"bench: {side.label}: {failed} status reads failed", file=sys.stderr)

        # The same with a C load client (wrk), which the Python client cannot keep up with.
        url, method, body, auth = side.wrk_run()
        cpu0 = cpu_seconds(side.proc.pid)
        rate, p99, _ = wrk(url, method, body, auth)
        out["wrk_runs_per_s"], out["wrk_p99"] = rate, p99
        await asyncio.sleep(1)
        out["wrk_cpu_ms_per_run"] = (cpu_seconds(side.proc.pid) - cpu0) * 1000 / max(1, rate * 8)
        url, method, body, auth = await side.wrk_status(client)
        out["wrk_status_per_s"] = wrk(url, method, body, auth, seconds=5)[0]
        out["rss_after"] = rss_mib(side.proc.pid)
        out["anon_after"] = rss_mib(side.proc.pid, "RssAnon")

        t0 = time.perf_counter()
        out["burst_completed"], out["burst_lost"] = await side.burst(client, BURST)
        out["burst_seconds"] = time.perf_counter() - t0
        mains_done = 3 * max(10, runs // 5) if hasattr(side, "main_run") else 0  # a parent and its two children
        out["runs_done"] = 5 + runs + mains_done + len(firsts) + len(lat) + 2 + int(out["wrk_runs_per_s"] * 8)
        return out


def stop(side):
    for p in reversed(tree(side.proc.pid)):
        try:
            os.kill(p, signal.SIGTERM)
        except OSError:
            pass
    try:
        side.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        side.proc.kill()


# Each row: its title, its key, whether lower or higher is better, and the target it has (a bound on
# the in-process and Redis figures, printed beside them and marked met or not; None for no target; a
# pair for a bound on one side's figure only).
ROWS = [
    ("blocking run, sequential, p50 (ms)", "blocking_p50", "lower", None),
    ("blocking run, sequential, p99 (ms)", "blocking_p99", "lower", None),
    ("first event after start, p50 (ms)", "first_event_p50", "lower", None),
    ("main agent run start to end, p50 (ms; deep-research: two subagents and a report; no peer graph)", "main_run_p50", "lower", None),
    ("runs/s at 50 in flight", "runs_per_s_50", "higher", None),
    ("p99 at 50 in flight (ms)", "p99_at_50", "lower", None),
    ("CPU per run at 50 in flight (ms, server and its children)", "cpu_ms_per_run", "lower", None),
    ("status reads/s of a finished run (50 clients)", "status_per_s", "higher", None),
    ("wrk: runs/s at 50 in flight", "wrk_runs_per_s", "higher", None),
    ("wrk: p99 at 50 in flight (ms)", "wrk_p99", "lower", 100.0),
    ("wrk: CPU per run (ms; target in process)", "wrk_cpu_ms_per_run", "lower", (1.0, ("yuxi in-process",))),
    ("wrk: status reads/s of a finished run (50 connections)", "wrk_status_per_s", "higher", None),
    (f"server RSS at rest (MiB, with children; {REST_SECONDS} s after the warm-up)", "rss_idle", "lower", 32.0),
    ("of which anonymous (MiB: heap and stacks, not the executable's pages)", "anon_idle", "lower", None),
    ("server RSS after the runs (MiB)", "rss_after", "lower", 48.0),
    ("of which anonymous (MiB)", "anon_after", "lower", None),
    (f"{BURST} runs started at once: completed", "burst_completed", "higher", None),
    (f"{BURST} runs started at once: lost (not completed, or not exactly one end)", "burst_lost", "lower", None),
    (f"{BURST} runs started at once: seconds until all ended", "burst_seconds", "lower", None),
]


def target_cell(results, peer, key, better, target):
    """The row's target and whether every side but the peer meets it (✓) or not (✗)."""
    if target is None:
        return "–"
    target, sides = target if isinstance(target, tuple) else (target, None)
    figures = [results[l][key] for l in results
               if l != peer and (sides is None or l in sides) and results[l][key] == results[l][key]]
    met = all(f <= target if better == "lower" else f >= target for f in figures)
    return f"{'≤' if better == 'lower' else '≥'} {target:g} {'✓' if met else '✗'}"


def table(results, peer):
    labels = list(results)
    head = "| what | target | " + " | ".join(labels) + " | " + " | ".join(f"{l} vs {peer}" for l in labels if l != peer) + " |"
    lines = [head, "|" + " --- |" * (2 + len(labels) + len(labels) - 1)]
    for title, key, better, target in ROWS:
        cells = ["–" if results[l][key] != results[l][key] else f"{results[l][key]:.1f}" for l in labels]
        ratios = []
        for l in labels:
            if l == peer:
                continue
            ours, theirs = results[l][key], results[peer][key]
            ratio = (theirs / ours if better == "lower" else ours / theirs) if ours and theirs else float("nan")
            ratios.append("–" if ratio != ratio else f"{ratio:.1f}×")
        target_text = target_cell(results, peer, key, better, target)
        lines.append(f"| {title} | {target_text} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    return "\n".join(lines)


def null_otlp_receiver():
    """An OTLP/HTTP receiver that accepts every export and keeps nothing; answers its base URL."""
    import http.server
    import threading

    class Drop(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Drop)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--traces", action="store_true", help="also measure with every span exported")
    parser.add_argument("--baseline", help="a build without trace export, measured in-process")
    args = parser.parse_args()
    sides = [Yuxi(args.binary, None, "yuxi in-process"), Yuxi(args.binary, os.environ.get("REDIS_URL"), "yuxi Redis")]
    if args.traces:
        sides.append(Yuxi(args.binary, None, "yuxi in-process, traces on",
                          {"OTEL_EXPORTER_OTLP_ENDPOINT": null_otlp_receiver()}))
    if args.baseline:
        sides.append(Yuxi(args.baseline, None, "yuxi in-process, no trace code"))
    sides.append(LangGraph(sys.executable, "langgraph dev"))
    results = {}
    try:
        for side in sides:
            print(f"bench: {side.label}...", file=sys.stderr)
            results[side.label] = asyncio.run(measure(side, args.runs))
            stop(side)
    finally:
        for side in sides:
            if side.proc.poll() is None:
                stop(side)
    # Each side's folder (its data, hundreds of MiB after the runs, and its log) goes once every side
    # was measured; after a failure it stays, for its log to be read.
    for side in sides:
        shutil.rmtree(getattr(side, "data", None) or side.dir, ignore_errors=True)
    text = table(results, "langgraph dev")
    cores = os.cpu_count()
    per_side = ", ".join(f"{k}: {v['runs_done']}" for k, v in results.items())
    text += (f"\n\n{cores} cores; {args.runs} sequential runs, {args.runs * 4} at 50 in flight; "
             f"runs per side {per_side}. Ratios: how many times better yuxi-operator is (below 1: worse).\n")
    print(text)
    os.makedirs(os.path.join(ROOT, ".run"), exist_ok=True)
    with open(os.path.join(ROOT, ".run/bench.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
