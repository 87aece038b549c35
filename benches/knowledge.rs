//! Retrieval, for `make bench`: the labelled Chinese and English set of `bench/knowledge` (documents and
//! questions written for it) read, cut and indexed as a knowledge base is, then every question searched:
//! recall@5 and MRR. Then 10,000 passages (the set's own, and passages made from their sentences)
//! indexed on disk: index time per MB, search p50/p99 and the process's RSS; and what a small knowledge
//! base (the labelled set) holds in memory while idle, over 20 of them. Writes the passages and the
//! numbers as JSON, so that the peer (`scripts/bench_knowledge.py`: rank-bm25 with jieba) indexes the same
//! passages and is judged by the same labels.
//!
//! `cargo bench --bench knowledge -- [--chunks N] [--out DIR]` (under `cargo test`, 500 passages: a check
//! that the bench still works, nothing measured).

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Deserialize;
use serde_json::json;
use yuxi_operator::knowledge::chunk::Passage;
use yuxi_operator::knowledge::index::{Hit, KnowledgeIndex};
use yuxi_operator::knowledge::prepare;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// One labelled question: the document and section whose passage answers it.
#[derive(Deserialize)]
struct Question {
    q: String,
    doc: String,
    section: String,
}

/// How many small knowledge bases are held idle to measure what one holds.
const IDLE_BASES: usize = 20;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// [`rss_kib`] once the allocator has returned the memory it holds free (as the binary does at rest), so
/// that two readings differ by what is in use, not by when the allocator last purged.
fn collected_rss_kib() -> u64 {
    // SAFETY: `mi_collect` takes no pointers; it may be called at any time.
    unsafe { libmimalloc_sys::mi_collect(true) };
    rss_kib()
}

/// The rank (from 1) of the first hit that answers `question`, if any.
fn rank(hits: &[Hit], question: &Question) -> Option<usize> {
    hits.iter().position(|h| h.document == question.doc && h.location.contains(&question.section)).map(|p| p + 1)
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// A small deterministic generator, so that every run makes the same passages.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % below as u64) as usize
    }
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let chunks: usize = arg("--chunks").and_then(|c| c.parse().ok()).unwrap_or(if measuring { 10_000 } else { 500 });
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/knowledge");
    // A check under `cargo test` writes nowhere that lasts.
    let scratch = tempfile::TempDir::new().expect("dir");
    let out = arg("--out").map(PathBuf::from).unwrap_or_else(|| match measuring {
        true => Path::new(env!("CARGO_MANIFEST_DIR")).join(".run"),
        false => scratch.path().to_path_buf(),
    });
    std::fs::create_dir_all(&out).expect("the output folder");
    let questions: Vec<Question> =
        serde_norway::from_str(&std::fs::read_to_string(root.join("questions.yaml")).expect("questions"))
            .expect("a list of questions");

    // The labelled set, as a knowledge base indexes it.
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(root.join("documents")).expect("documents").map(|e| e.expect("entry").path()).collect();
    files.sort();
    let mut documents: Vec<(String, Vec<Passage>, String)> = Vec::new();
    for file in &files {
        let name = file.file_name().expect("name").to_string_lossy().into_owned();
        let bytes = std::fs::read(file).expect("a document");
        let prepared = prepare(yuxi_operator::knowledge::isolated::SOURCES_READER, &name, &bytes)
            .expect("a labelled document reads");
        documents.push((name, prepared.passages, prepared.content_hash));
    }
    let dir = tempfile::TempDir::new().expect("dir");
    std::fs::create_dir_all(dir.path().join("labelled")).expect("dir");
    let index = KnowledgeIndex::open(&dir.path().join("labelled")).expect("an index");
    for (name, passages, hash) in &documents {
        index.put_document(name, hash, passages).expect("indexed");
    }
    let mut found = 0;
    let mut reciprocal = 0.0;
    let mut misses = Vec::new();
    let mut not_first = Vec::new();
    for question in &questions {
        let hits = index.search(&question.q, 5).expect("a search");
        match rank(&hits, question) {
            Some(r) => {
                found += 1;
                reciprocal += 1.0 / r as f64;
                if r > 1 {
                    not_first.push(json!({"q": question.q, "rank": r}));
                }
            }
            None => misses.push(question.q.clone()),
        }
    }
    let recall_at_5 = found as f64 / questions.len() as f64;
    let mrr = reciprocal / questions.len() as f64;

    // Small knowledge bases held while idle: each holds the labelled set, indexed and searched once,
    // then left; what each adds to the process's RSS (what the word segmenter shares is loaded above).
    let idle_rss_before = collected_rss_kib();
    let idle: Vec<KnowledgeIndex> = (0..IDLE_BASES)
        .map(|n| {
            let path = dir.path().join(format!("idle-{n}"));
            std::fs::create_dir_all(&path).expect("dir");
            let base = KnowledgeIndex::open(&path).expect("an index");
            for (name, passages, hash) in &documents {
                base.put_document(name, hash, passages).expect("indexed");
            }
            base.search(&questions[0].q, 5).expect("a search");
            base
        })
        .collect();
    let idle_kib_per_base = collected_rss_kib().saturating_sub(idle_rss_before) as f64 / IDLE_BASES as f64;
    drop(idle);

    // 10,000 passages: the set's own, then passages of three sentences drawn from them, each in a
    // document of its own.
    let sentences: Vec<String> = documents
        .iter()
        .flat_map(|(_, passages, _)| passages.iter())
        .flat_map(|p| {
            p.text
                .split_inclusive(['.', '。'])
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    let mut corpus: Vec<(String, String, String)> = documents
        .iter()
        .flat_map(|(name, passages, _)| passages.iter().map(move |p| (name.clone(), p.location(), p.text.clone())))
        .collect();
    let labelled = corpus.len();
    let mut lcg = Lcg(20261202);
    while corpus.len() < chunks {
        let n = corpus.len();
        let text: Vec<&str> = (0..3).map(|_| sentences[lcg.next(sentences.len())].as_str()).collect();
        corpus.push((format!("generated-{}.md", (n - labelled) / 100), String::new(), text.join(" ")));
    }
    let corpus_bytes: usize = corpus.iter().map(|(_, _, t)| t.len()).sum();
    let rss_before = rss_kib();
    std::fs::create_dir_all(dir.path().join("large")).expect("dir");
    let large = KnowledgeIndex::open(&dir.path().join("large")).expect("an index");
    let started = Instant::now();
    // The labelled documents as themselves, the made passages 100 to a document, as a knowledge base
    // of a few hundred documents holds them.
    for (name, passages, hash) in &documents {
        large.put_document(name, hash, passages).expect("indexed");
    }
    let labelled_count: usize = documents.iter().map(|(_, p, _)| p.len()).sum();
    for (batch, group) in corpus[labelled_count..].chunks(100).enumerate() {
        let passages: Vec<Passage> = group
            .iter()
            .enumerate()
            .map(|(i, (_, _, text))| Passage { position: i, heading: None, lines: (i + 1, i + 1), text: text.clone() })
            .collect();
        large.put_document(&format!("generated-{batch}.md"), "h", &passages).expect("indexed");
    }
    let index_s = started.elapsed().as_secs_f64();
    // Quality again, among the made passages: each repeats sentences of the labelled ones.
    let (mut found_large, mut reciprocal_large) = (0, 0.0);
    let mut misses_large = Vec::new();
    let mut latencies = Vec::new();
    for round in 0..10 {
        for question in &questions {
            let started = Instant::now();
            let hits = large.search(&question.q, 5).expect("a search");
            latencies.push(started.elapsed().as_secs_f64() * 1000.0);
            if round == 0 {
                match rank(&hits, question) {
                    Some(r) => {
                        found_large += 1;
                        reciprocal_large += 1.0 / r as f64;
                    }
                    None => misses_large.push(question.q.clone()),
                }
            }
        }
    }
    latencies.sort_by(f64::total_cmp);
    let rss_after = rss_kib();
    assert_eq!(large.passage_count() as usize, corpus.len());

    let passages_json: Vec<_> =
        corpus.iter().map(|(d, l, t)| json!({"document": d, "location": l, "text": t})).collect();
    std::fs::write(
        out.join("knowledge-passages.json"),
        serde_json::to_string(&json!({"labelled": labelled_count, "passages": passages_json})).expect("JSON"),
    )
    .expect("the passages");
    let numbers = json!({
        "questions": questions.len(),
        "labelled_passages": labelled_count,
        "recall_at_5": recall_at_5,
        "mrr": mrr,
        "misses": misses,
        "not_first": not_first,
        "passages": corpus.len(),
        "recall_at_5_large": found_large as f64 / questions.len() as f64,
        "misses_large": misses_large,
        "mrr_large": reciprocal_large / questions.len() as f64,
        "index_s_per_mb": index_s / (corpus_bytes as f64 / 1e6),
        "search_p50_ms": percentile(&latencies, 0.5),
        "search_p99_ms": percentile(&latencies, 0.99),
        "rss_mib": rss_after as f64 / 1024.0,
        "rss_growth_mib": rss_after.saturating_sub(rss_before) as f64 / 1024.0,
        "idle_kib_per_base": idle_kib_per_base,
    });
    std::fs::write(out.join("knowledge-yuxi.json"), numbers.to_string()).expect("the numbers");
    println!("{numbers:#}");
}
