//! The full-text index of one knowledge base: its documents' passages, searched with BM25.
//!
//! Text is cut into words as [`super::analyzer`] says (jieba's words, lower-cased, without stop words,
//! English stemmed). A passage's headings (the sections it is under) are indexed beside its text. A
//! query is cut the same way and matches passages holding any of its words, in their text or their
//! headings, best first, a word in a heading counting [`HEADING_BOOST`] times a word of the text: no
//! query syntax, so nothing a model or a person types is an error.

use std::path::Path;
use std::sync::Mutex;

use tantivy::collector::{DocSetCollector, TopDocs};
use tantivy::query::{AllQuery, BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TantivyDocument, TextFieldIndexing, TextOptions, Value,
};
use tantivy::{Index, IndexReader, ReloadPolicy, Term, doc};

use super::analyzer::analyzer;
use super::chunk::Passage;

/// The name the analyzer is registered under in each index. It is part of the schema, so a new name
/// makes every index of the earlier one be made again ([`KnowledgeIndex::open`]): change it whenever
/// [`analyzer`] cuts text differently (v2: stop words dropped).
const ANALYZER: &str = "yuxi_words_v2";

/// How much more a query's word found in a passage's headings counts than in its text (BM25 scores,
/// summed): the headings say what a passage is about. Chosen on the labelled set of `bench/knowledge`
/// (docs/benchmarks.md).
pub const HEADING_BOOST: f32 = 1.5;

/// The memory an index writer may use before it writes a segment, in bytes (tantivy's least, 15 MB).
const WRITER_MEMORY_BYTES: usize = 15_000_000;

/// An error of the index: its files could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("knowledge index: {0}")]
pub struct IndexError(#[from] tantivy::TantivyError);

impl From<tantivy::directory::error::OpenDirectoryError> for IndexError {
    fn from(err: tantivy::directory::error::OpenDirectoryError) -> Self {
        Self(err.into())
    }
}

/// A document as the index holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexedDocument {
    /// Its name in the knowledge base.
    pub name: String,
    /// The hash of the contents it was indexed from (re-indexing skips a document whose hash is the same).
    pub content_hash: String,
    /// How many passages it has.
    pub passages: usize,
}

/// A passage that matched a search.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// The document it is from.
    pub document: String,
    /// Where it is in the document ([`Passage::location`]).
    pub location: String,
    /// Its place among the document's passages, from 0.
    pub position: u64,
    /// Its text.
    pub text: String,
    /// Its BM25 score: higher is better; comparable within one index.
    pub score: f32,
}

#[derive(Clone, Copy)]
struct Fields {
    document: Field,
    content_hash: Field,
    position: Field,
    location: Field,
    text: Field,
    heading: Field,
    vector: Field,
}

/// The index of one knowledge base, on disk ([`KnowledgeIndex::open`]) or in memory.
pub struct KnowledgeIndex {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    /// Writes one at a time: tantivy allows one writer per index.
    writing: Mutex<()>,
    /// The passages that have a vector, read from the index on the first dense search after a change.
    vectors: std::sync::RwLock<Option<std::sync::Arc<Vec<Embedded>>>>,
}

/// A passage with its vector, as dense search reads them.
type Embedded = (Hit, Vec<f32>);

impl KnowledgeIndex {
    /// The index in the folder `dir`, made there when it is not yet (the folder must exist). An index of
    /// an earlier shape (written before a field was added, or with an earlier analyzer) is removed (its
    /// files alone) and made again: its knowledge base indexes its documents again, as it does a new one.
    ///
    /// Errors: the folder cannot be read or emptied.
    pub fn open(dir: &Path) -> Result<Self, IndexError> {
        let directory = tantivy::directory::MmapDirectory::open(dir)?;
        if Index::exists(&directory).map_err(tantivy::TantivyError::from)?
            && Index::open(directory.clone())?.schema() != schema().0
        {
            remove_index_files(dir).map_err(|e| tantivy::TantivyError::SystemError(e.to_string()))?;
        }
        let directory = tantivy::directory::MmapDirectory::open(dir)?;
        Self::with(Index::open_or_create(directory, schema().0)?)
    }

    /// An index kept in memory only.
    pub fn in_memory() -> Result<Self, IndexError> {
        Self::with(Index::create_in_ram(schema().0))
    }

    fn with(index: Index) -> Result<Self, IndexError> {
        index.tokenizers().register(ANALYZER, analyzer());
        let fields = schema().1;
        let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
        Ok(Self { index, reader, fields, writing: Mutex::new(()), vectors: std::sync::RwLock::new(None) })
    }

    /// Puts the document `name` with its `passages`, in place of what it held under that name, in one
    /// commit: a search sees the old passages or the new, never a mix or none.
    pub fn put_document(&self, name: &str, content_hash: &str, passages: &[Passage]) -> Result<(), IndexError> {
        self.put_document_with_vectors(name, content_hash, passages, None)
    }

    /// [`put_document`](Self::put_document), each passage with its embedding vector (`vectors[i]` of
    /// `passages[i]`) when `vectors` is given, for [`nearest`](Self::nearest).
    pub fn put_document_with_vectors(
        &self,
        name: &str,
        content_hash: &str,
        passages: &[Passage],
        vectors: Option<&[Vec<f32>]>,
    ) -> Result<(), IndexError> {
        self.write(|writer, f| {
            writer.delete_term(Term::from_field_text(f.document, name));
            for (i, passage) in passages.iter().enumerate() {
                let mut document = doc!(
                    f.document => name,
                    f.content_hash => content_hash,
                    f.position => passage.position as u64,
                    f.location => passage.location(),
                    f.text => passage.text.as_str(),
                );
                if let Some(heading) = &passage.heading {
                    document.add_text(f.heading, heading);
                }
                if let Some(vector) = vectors.and_then(|v| v.get(i)) {
                    document.add_bytes(f.vector, &super::vectors::encode(vector));
                }
                writer.add_document(document)?;
            }
            Ok(())
        })
    }

    /// The `top_k` passages whose vectors are nearest `vector` (cosine), best first, scored by the
    /// similarity; none when no passage has a vector.
    pub fn nearest(&self, vector: &[f32], top_k: usize) -> Result<Vec<Hit>, IndexError> {
        let cached = self.vectors.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let entries = match cached {
            Some(entries) => entries,
            None => {
                let searcher = self.reader.searcher();
                let mut entries = Vec::new();
                for address in searcher.search(&AllQuery, &DocSetCollector)? {
                    let stored: TantivyDocument = searcher.doc(address)?;
                    let Some(vector) = stored
                        .get_first(self.fields.vector)
                        .and_then(|v| v.as_bytes())
                        .and_then(super::vectors::decode)
                    else {
                        continue;
                    };
                    entries.push((self.hit(&stored, 0.0), vector));
                }
                let entries = std::sync::Arc::new(entries);
                *self.vectors.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(entries.clone());
                entries
            }
        };
        let mut scored: Vec<Hit> =
            entries.iter().map(|(hit, v)| Hit { score: super::vectors::cosine(vector, v), ..hit.clone() }).collect();
        scored.sort_by(|a, b| b.score.total_cmp(&a.score));
        scored.truncate(top_k);
        Ok(scored)
    }

    fn hit(&self, stored: &TantivyDocument, score: f32) -> Hit {
        Hit {
            document: text_of(stored, self.fields.document),
            location: text_of(stored, self.fields.location),
            position: stored.get_first(self.fields.position).and_then(|v| v.as_u64()).unwrap_or_default(),
            text: text_of(stored, self.fields.text),
            score,
        }
    }

    /// Removes the document `name` and its passages; nothing when it is not there.
    pub fn remove_document(&self, name: &str) -> Result<(), IndexError> {
        self.write(|writer, f| {
            writer.delete_term(Term::from_field_text(f.document, name));
            Ok(())
        })
    }

    fn write(
        &self,
        change: impl FnOnce(&tantivy::IndexWriter<TantivyDocument>, Fields) -> tantivy::Result<()>,
    ) -> Result<(), IndexError> {
        let _one = self.writing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut writer = self.index.writer_with_num_threads(1, WRITER_MEMORY_BYTES)?;
        if let Err(err) = change(&writer, self.fields) {
            writer.rollback()?;
            return Err(err.into());
        }
        writer.commit()?;
        writer.wait_merging_threads()?;
        self.reader.reload()?;
        *self.vectors.write().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        Ok(())
    }

    /// The documents indexed, by name.
    pub fn documents(&self) -> Result<Vec<IndexedDocument>, IndexError> {
        let searcher = self.reader.searcher();
        let mut documents = std::collections::BTreeMap::<String, IndexedDocument>::new();
        for address in searcher.search(&AllQuery, &DocSetCollector)? {
            let stored: TantivyDocument = searcher.doc(address)?;
            let name = text_of(&stored, self.fields.document);
            let entry = documents.entry(name.clone()).or_insert_with(|| IndexedDocument {
                name,
                content_hash: text_of(&stored, self.fields.content_hash),
                passages: 0,
            });
            entry.passages += 1;
        }
        Ok(documents.into_values().collect())
    }

    /// How many passages are indexed.
    pub fn passage_count(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// The `top_k` passages that best match `query`, best first; none for a query with no words.
    pub fn search(&self, query: &str, top_k: usize) -> Result<Vec<Hit>, IndexError> {
        let Some(query) = self.query(query) else { return Ok(Vec::new()) };
        let searcher = self.reader.searcher();
        let mut hits = Vec::new();
        for (score, address) in searcher.search(&query, &TopDocs::with_limit(top_k.max(1)).order_by_score())? {
            let stored: TantivyDocument = searcher.doc(address)?;
            hits.push(self.hit(&stored, score));
        }
        Ok(hits)
    }

    /// Any of the query's words, each once, in the text or (boosted) the headings.
    fn query(&self, text: &str) -> Option<Box<dyn Query>> {
        let mut analyzer = analyzer();
        let mut stream = analyzer.token_stream(text);
        let mut words = std::collections::BTreeSet::new();
        while let Some(token) = stream.next() {
            words.insert(token.text.clone());
        }
        let term = |field: Field, word: &str| -> Box<dyn Query> {
            Box::new(TermQuery::new(Term::from_field_text(field, word), IndexRecordOption::WithFreqs))
        };
        let clauses: Vec<(Occur, Box<dyn Query>)> = words
            .iter()
            .flat_map(|word| {
                let heading: Box<dyn Query> = Box::new(BoostQuery::new(term(self.fields.heading, word), HEADING_BOOST));
                [(Occur::Should, term(self.fields.text, word)), (Occur::Should, heading)]
            })
            .collect();
        (!clauses.is_empty()).then(|| Box::new(BooleanQuery::new(clauses)) as Box<dyn Query>)
    }
}

/// Removes the files of the tantivy index in `dir`: those its `.managed.json` lists, and its meta and lock
/// files. Nothing else in the folder is touched, should it hold anything else.
fn remove_index_files(dir: &Path) -> std::io::Result<()> {
    let managed: Vec<String> = std::fs::read(dir.join(".managed.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    let fixed = ["meta.json", ".managed.json", ".tantivy-meta.lock", ".tantivy-writer.lock"].map(String::from);
    for name in managed.into_iter().chain(fixed) {
        // Only a plain name in the folder: never a path out of it.
        if name.contains(['/', '\\']) || name == ".." || name.is_empty() {
            continue;
        }
        match std::fs::remove_file(dir.join(&name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

fn text_of(document: &TantivyDocument, field: Field) -> String {
    document.get_first(field).and_then(|v| v.as_str()).unwrap_or_default().to_string()
}

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let text_options = TextOptions::default()
        .set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(ANALYZER)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        )
        .set_stored();
    let heading_options = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default().set_tokenizer(ANALYZER).set_index_option(IndexRecordOption::WithFreqs),
    );
    let fields = Fields {
        document: builder.add_text_field("document", STRING | STORED),
        content_hash: builder.add_text_field("content_hash", STORED),
        position: builder.add_u64_field("position", INDEXED | STORED),
        location: builder.add_text_field("location", STORED),
        text: builder.add_text_field("text", text_options),
        vector: builder.add_bytes_field("vector", STORED),
        heading: builder.add_text_field("heading", heading_options),
    };
    (builder.build(), fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knowledge::chunk::passages;

    fn indexed() -> KnowledgeIndex {
        let index = KnowledgeIndex::in_memory().expect("an index");
        let en = "# Leases\n\nThe keeper renews each run's lease every ten seconds.\n\n\
                  # Sandboxes\n\nCommands run under bubblewrap with no network.\n";
        let zh = "# 租约\n\n守护进程每十秒续期一次运行的租约。\n\n# 沙箱\n\n命令在没有网络的沙箱中执行。\n";
        index.put_document("guide.md", "h1", &passages(en, true).expect("cuts")).expect("put");
        index.put_document("指南.md", "h2", &passages(zh, true).expect("cuts")).expect("put");
        index
    }

    #[test]
    fn english_and_chinese_queries_find_their_passage_first() {
        let index = indexed();
        let hits = index.search("how often are leases renewed?", 3).expect("search");
        assert_eq!((hits[0].document.as_str(), hits[0].location.as_str()), ("guide.md", "Leases, line 3"));
        assert!(hits[0].score > 0.0);
        let hits = index.search("租约多久续期", 3).expect("search");
        assert_eq!((hits[0].document.as_str(), hits[0].location.as_str()), ("指南.md", "租约, line 3"));
        let hits = index.search("沙箱网络", 3).expect("search");
        assert_eq!(hits[0].text, "命令在没有网络的沙箱中执行。");
    }

    #[test]
    fn queries_without_words_or_with_syntax_answer_without_error() {
        let index = indexed();
        assert!(index.search("  ?！。 ", 5).expect("no words").is_empty());
        assert!(!index.search("lease AND (\"unclosed: [", 5).expect("no syntax").is_empty());
    }

    #[test]
    fn a_document_put_again_replaces_its_passages_and_a_removed_one_is_gone() {
        let index = indexed();
        assert_eq!(index.passage_count(), 4);
        index.put_document("guide.md", "h3", &passages("Only quotas now.", false).expect("cuts")).expect("again");
        assert!(index.search("keeper lease", 5).expect("search").iter().all(|h| h.document != "guide.md"));
        let documents = index.documents().expect("documents");
        let guide = documents.iter().find(|d| d.name == "guide.md").expect("kept");
        assert_eq!((guide.content_hash.as_str(), guide.passages), ("h3", 1));
        index.remove_document("指南.md").expect("remove");
        assert_eq!(index.documents().expect("documents").len(), 1);
        assert!(index.search("租约", 5).expect("search").is_empty());
    }

    #[test]
    fn an_index_on_disk_is_found_again_when_opened() {
        let dir = tempfile::tempdir().expect("a folder");
        {
            let index = KnowledgeIndex::open(dir.path()).expect("made");
            index.put_document("a.txt", "h", &passages("persisted words", false).expect("cuts")).expect("put");
        }
        let again = KnowledgeIndex::open(dir.path()).expect("opened");
        assert_eq!(again.search("persisted", 1).expect("search")[0].document, "a.txt");
    }

    #[test]
    fn a_word_only_in_a_passages_headings_finds_it_first_above_a_passage_holding_it_in_its_text() {
        let index = KnowledgeIndex::in_memory().expect("an index");
        let under = "# Quotas\n\nEach user may run twenty at once.\n";
        let beside = "Runs are counted; quotas are kept per user and checked at once.\n";
        index.put_document("limits.md", "h1", &passages(under, true).expect("cuts")).expect("put");
        index.put_document("notes.md", "h2", &passages(beside, false).expect("cuts")).expect("put");
        let hits = index.search("quotas", 2).expect("search");
        assert_eq!(hits.len(), 2, "both hold the word, one in its heading");
        assert_eq!(hits[0].document, "limits.md", "the heading counts more: {hits:?}");
    }

    #[test]
    fn an_index_of_an_earlier_shape_is_made_again_when_opened() {
        let dir = tempfile::tempdir().expect("a folder");
        {
            let mut builder = Schema::builder();
            let document = builder.add_text_field("document", STRING | STORED);
            let old = Index::create_in_dir(dir.path(), builder.build()).expect("an old index");
            let mut writer = old.writer_with_num_threads(1, WRITER_MEMORY_BYTES).expect("a writer");
            writer.add_document(doc!(document => "old.md")).expect("added");
            writer.commit().expect("committed");
        }
        std::fs::write(dir.path().join("notes.md"), "not the index's").expect("a file beside it");
        let index = KnowledgeIndex::open(dir.path()).expect("made again");
        assert!(dir.path().join("notes.md").exists(), "only the index's own files are removed");
        assert_eq!(index.passage_count(), 0, "its knowledge base indexes its documents again");
        index.put_document("a.txt", "h", &passages("fresh words", false).expect("cuts")).expect("put");
        assert_eq!(
            KnowledgeIndex::open(dir.path()).expect("opened").search("fresh", 1).expect("search")[0].document,
            "a.txt"
        );
    }
}
