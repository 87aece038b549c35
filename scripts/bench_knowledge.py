"""`make bench`, retrieval: yuxi-operator's knowledge index (`benches/knowledge.rs`: tantivy BM25 with
jieba words) side by side with a peer that does the same job the way a Python retrieval service commonly
does it: rank-bm25 (BM25Okapi) over jieba's search-mode words, lower-cased.

Both index the same passages (the Rust bench writes them, `.run/knowledge-passages.json`) and answer the
same labelled questions (`bench/knowledge/questions.yaml`), judged by the same rule: a hit answers a
question when it is from the question's document and section. Prints one table with ratios (how many
times better yuxi-operator is; below 1 means worse) and writes it to `.run/bench-knowledge.md`.

Usage: python scripts/bench_knowledge.py YUXI_JSON PASSAGES_JSON     (the peer runs in a child process,
       python scripts/bench_knowledge.py --peer PASSAGES_JSON OUT_JSON  so that its RSS is its own)
"""

import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORD = re.compile(r"\w", re.UNICODE)
# How many small knowledge bases are held idle to measure what one holds (as benches/knowledge.rs).
IDLE_BASES = 20


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def questions():
    """The labelled questions: a small reader for the flow mappings of questions.yaml."""
    found = []
    pattern = re.compile(r'^- \{q: "(.*)", doc: (\S+), section: (.+)\}$')
    with open(os.path.join(ROOT, "bench/knowledge/questions.yaml"), encoding="utf-8") as f:
        for line in f:
            match = pattern.match(line.strip())
            if match:
                found.append({"q": match.group(1), "doc": match.group(2), "section": match.group(3)})
    return found


def peer(passages_file, out_file):
    import jieba
    from rank_bm25 import BM25Okapi

    jieba.setLogLevel(60)
    jieba.initialize()

    def words(text):
        return [w.lower() for w in jieba.cut_for_search(text) if WORD.search(w)]

    with open(passages_file, encoding="utf-8") as f:
        data = json.load(f)
    passages, labelled = data["passages"], data["labelled"]
    asked = questions()

    # Quality, over the labelled passages alone (as the Rust side measures it).
    small = passages[:labelled]
    index = BM25Okapi([words(p["text"]) for p in small])
    found, reciprocal, misses = 0, 0.0, []
    for q in asked:
        scores = index.get_scores(words(q["q"]))
        top = sorted(range(len(small)), key=lambda i: -scores[i])[:5]
        rank = next((r + 1 for r, i in enumerate(top) if small[i]["document"] == q["doc"] and q["section"] in small[i]["location"] and scores[i] > 0), None)
        if rank:
            found += 1
            reciprocal += 1 / rank
        else:
            misses.append(q["q"])

    # Small knowledge bases held while idle: each an index of the labelled passages, searched once.
    idle_before = rss_mib()
    idle = []
    for _ in range(IDLE_BASES):
        base = BM25Okapi([words(p["text"]) for p in small])
        base.get_scores(words(asked[0]["q"]))
        idle.append(base)
    idle_kib_per_base = max(0.0, rss_mib() - idle_before) * 1024 / IDLE_BASES
    del idle

    rss_before = rss_mib()
    size = sum(len(p["text"].encode()) for p in passages)
    started = time.perf_counter()
    large = BM25Okapi([words(p["text"]) for p in passages])
    index_s = time.perf_counter() - started
    latencies = []
    found_large, reciprocal_large = 0, 0.0
    for repeat in range(10):
        for q in asked:
            started = time.perf_counter()
            scores = large.get_scores(words(q["q"]))
            top = sorted(range(len(passages)), key=lambda i: -scores[i])[:5]
            latencies.append((time.perf_counter() - started) * 1000)
            if repeat == 0:
                rank = next((r + 1 for r, i in enumerate(top) if passages[i]["document"] == q["doc"] and q["section"] in passages[i]["location"] and scores[i] > 0), None)
                if rank:
                    found_large += 1
                    reciprocal_large += 1 / rank
    latencies.sort()
    rss_after = rss_mib()
    with open(out_file, "w") as f:
        json.dump(
            {
                "recall_at_5": found / len(asked),
                "mrr": reciprocal / len(asked),
                "misses": misses,
                "passages": len(passages),
                "recall_at_5_large": found_large / len(asked),
                "mrr_large": reciprocal_large / len(asked),
                "index_s_per_mb": index_s / (size / 1e6),
                "search_p50_ms": latencies[len(latencies) // 2],
                "search_p99_ms": latencies[round((len(latencies) - 1) * 0.99)],
                "rss_mib": rss_after,
                "rss_growth_mib": max(0.0, rss_after - rss_before),
                "idle_kib_per_base": idle_kib_per_base,
            },
            f,
        )


def main():
    if sys.argv[1] == "--peer":
        peer(sys.argv[2], sys.argv[3])
        return
    yuxi_file, passages_file = sys.argv[1], sys.argv[2]
    with open(yuxi_file) as f:
        yuxi = json.load(f)
    peer_file = os.path.join(os.path.dirname(yuxi_file), "knowledge-peer.json")
    subprocess.run([sys.executable, __file__, "--peer", passages_file, peer_file], check=True)
    with open(peer_file) as f:
        other = json.load(f)
    higher_better = ["recall_at_5", "mrr", "recall_at_5_large", "mrr_large"]
    lower_better = ["index_s_per_mb", "search_p50_ms", "search_p99_ms", "rss_mib", "idle_kib_per_base"]
    lines = [
        f"Retrieval: {yuxi['questions']} labelled questions (Chinese and English) over {yuxi['labelled_passages']} passages; "
        f"then among {yuxi['passages']} passages (`_large`: the labelled ones and passages made of their sentences), "
        "with speed and memory. Peer: rank-bm25 (BM25Okapi) with jieba.",
        "",
        "| measure | target | yuxi-operator | rank-bm25 + jieba | ratio (yuxi better when > 1) |",
        "| --- | --- | --- | --- | --- |",
    ]
    # The targets: ratios to the peer on the large set, a bound on what an idle base holds.
    ratio_targets = {"recall_at_5_large": 1.2, "mrr_large": 1.2}
    bound_targets = {"idle_kib_per_base": 2048.0}
    for key in higher_better + lower_better:
        mine, theirs = yuxi[key], other[key]
        if key in higher_better:
            ratio = mine / theirs if theirs else float("inf")
        else:
            ratio = theirs / mine if mine else float("inf")
        if key in ratio_targets:
            target = f"ratio ≥ {ratio_targets[key]:g} {'✓' if ratio >= ratio_targets[key] else '✗'}"
        elif key in bound_targets:
            target = f"≤ {bound_targets[key]:g} {'✓' if mine <= bound_targets[key] else '✗'}"
        else:
            target = "–"
        lines.append(f"| {key} | {target} | {mine:.3f} | {theirs:.3f} | {ratio:.2f} |")
    lines.append("")
    lines.append(f"Missed at 5 by yuxi-operator: {yuxi['misses'] or 'none'}; by the peer: {other['misses'] or 'none'}.")
    lines.append("RSS is the whole process's (yuxi-operator: the bench binary, index on disk; the peer: Python with its index in memory).")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(ROOT, ".run", "bench-knowledge.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
