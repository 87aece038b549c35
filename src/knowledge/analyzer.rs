//! How the full-text index cuts text into words ([`analyzer`]): jieba's words (search mode: a long
//! Chinese word also yields the words inside it), without those that hold no letter or digit (spaces,
//! punctuation), lower-cased, without stop words, English stemmed. Stop words are Snowball's English
//! list, as tantivy ships it, and common Chinese particles and pronouns: a word nearly every passage holds
//! tells nothing, yet BM25 as tantivy scores it still adds to long passages. Passages and queries are cut
//! alike.

use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer, Token, TokenStream, Tokenizer,
};

/// Chinese words too common to tell passages apart (particles, pronouns, question words), dropped as
/// the English stop words are (Snowball's list, as tantivy ships it).
const CHINESE_STOP_WORDS: &[&str] = &[
    "的",
    "了",
    "是",
    "在",
    "和",
    "与",
    "或",
    "及",
    "其",
    "而",
    "也",
    "都",
    "就",
    "会",
    "要",
    "把",
    "被",
    "让",
    "对",
    "吗",
    "呢",
    "吧",
    "啊",
    "这",
    "那",
    "这个",
    "那个",
    "一个",
    "我们",
    "你们",
    "他们",
    "它们",
    "我",
    "你",
    "他",
    "她",
    "它",
    "怎么",
    "怎样",
    "什么",
    "如何",
    "为什么",
    "哪些",
    "哪个",
    "多少",
];

/// jieba's words, without those that hold no letter or digit, lower-cased, without stop words (English
/// and Chinese), English stemmed.
pub fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(Words(tantivy_jieba::JiebaTokenizer::new()))
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(StopWordFilter::new(Language::English).expect("tantivy ships English stop words"))
        .filter(StopWordFilter::remove(CHINESE_STOP_WORDS.iter().map(|w| w.to_string())))
        .filter(Stemmer::new(Language::English))
        .build()
}

/// A tokenizer that passes on the tokens of another that hold a letter or a digit.
#[derive(Clone)]
struct Words<T>(T);

impl<T: Tokenizer> Tokenizer for Words<T> {
    type TokenStream<'a> = WordStream<T::TokenStream<'a>>;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        WordStream(self.0.token_stream(text))
    }
}

struct WordStream<S>(S);

impl<S: TokenStream> TokenStream for WordStream<S> {
    fn advance(&mut self) -> bool {
        while self.0.advance() {
            if self.0.token().text.chars().any(char::is_alphanumeric) {
                return true;
            }
        }
        false
    }
    fn token(&self) -> &Token {
        self.0.token()
    }
    fn token_mut(&mut self) -> &mut Token {
        self.0.token_mut()
    }
}
