//! How the full-text index cuts text into words ([`analyzer`]): jieba's words (search mode: a long
//! Chinese word also yields the words inside it), without those that hold no letter or digit (spaces,
//! punctuation), lower-cased, without stop words, English stemmed. jieba's dictionary is held only while
//! text is being cut ([`DICTIONARY`]). Stop words are Snowball's English
//! list, as tantivy ships it, and common Chinese particles and pronouns: a word nearly every passage holds
//! tells nothing, yet BM25 as tantivy scores it still adds to long passages. Passages and queries are cut
//! alike.

use std::time::Duration;

use jieba_rs::Jieba;
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer, Token, TokenStream, Tokenizer,
};

use super::held::HeldWhileUsed;

/// jieba's dictionary (its own, built in: about 40 MiB in memory, a sixth of a second to load in a
/// release build), held while documents are indexed or questions searched and dropped after a minute
/// in which no text was cut: a process at rest does not carry it (only the dictionary's text, about 5 MiB,
/// which jieba-rs unpacks at the first load and keeps), and the first search after a quiet minute waits
/// for the load.
pub static DICTIONARY: HeldWhileUsed<Jieba> = HeldWhileUsed::new(Jieba::new, Duration::from_secs(60));

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
    TextAnalyzer::builder(Words)
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(StopWordFilter::new(Language::English).expect("tantivy ships English stop words"))
        .filter(StopWordFilter::remove(CHINESE_STOP_WORDS.iter().map(|w| w.to_string())))
        .filter(Stemmer::new(Language::English))
        .build()
}

/// jieba's words (search mode, with its hidden Markov model for words not in the dictionary) that hold
/// a letter or a digit. A word's position is the offset of its first character, in characters, and its
/// length its length in characters, so the words inside a long word overlap it (as tantivy-jieba has
/// them, which the indexes written before kept).
#[derive(Clone)]
struct Words;

impl Tokenizer for Words {
    type TokenStream<'a> = WordStream<'a>;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> WordStream<'a> {
        let words = DICTIONARY.get().cut_for_search(text, true);
        let words = words.into_iter().filter(|w| w.word.chars().any(char::is_alphanumeric)).collect();
        WordStream { words, next: 0, token: Token::default() }
    }
}

/// The words of one text, cut before the first is read.
struct WordStream<'a> {
    words: Vec<jieba_rs::Token<'a>>,
    next: usize,
    token: Token,
}

impl TokenStream for WordStream<'_> {
    fn advance(&mut self) -> bool {
        let Some(word) = self.words.get(self.next) else { return false };
        self.next += 1;
        self.token.offset_from = word.byte_start;
        self.token.offset_to = word.byte_end;
        self.token.position = word.start;
        self.token.position_length = word.end - word.start;
        self.token.text.clear();
        self.token.text.push_str(word.word);
        true
    }
    fn token(&self) -> &Token {
        &self.token
    }
    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(text: &str) -> Vec<(String, usize, usize, usize)> {
        let mut analyzer = analyzer();
        let mut stream = analyzer.token_stream(text);
        let mut words = Vec::new();
        while let Some(token) = stream.next() {
            words.push((token.text.clone(), token.position, token.position_length, token.offset_from));
        }
        words
    }

    #[test]
    fn words_are_jiebas_in_search_mode_with_positions_in_characters_and_offsets_in_bytes() {
        let words = cut("租约续期：北京大学的 Leases, renewed!");
        let texts: Vec<&str> = words.iter().map(|w| w.0.as_str()).collect();
        assert_eq!(texts, ["租约", "续期", "北京", "大学", "北京大学", "leas", "renew"]);
        // (text, position in characters, length in characters, offset in bytes)
        assert_eq!(words[2], ("北京".to_string(), 5, 2, 15));
        assert_eq!(words[4], ("北京大学".to_string(), 5, 4, 15));
        assert_eq!(words[5], ("leas".to_string(), 11, 6, 31));
    }

    #[test]
    fn text_without_words_cuts_to_nothing() {
        assert!(cut("  ?！。 ,, ").is_empty());
        assert!(cut("的 the 什么").is_empty(), "stop words only");
    }
}
