//! How the offline model titles a conversation. Yuxi's web client asks a model for a new conversation's
//! title with a fixed prompt that quotes the user's request between `<conversation_request>` tags
//! (`buildConversationTitlePrompt` in its `web/src/apis/agent_api.js`) and keeps the whole answer as the
//! title; `scripted/echo`, which repeats what it is told, would title every conversation with that prompt.
//! [`title_for`] gives the title a real model would: the request, short.

/// The longest title, in characters (the prompt asks for at most 30).
pub const MAX_TITLE_CHARS: usize = 30;

/// The title of the request `prompt` quotes between its last `<conversation_request>` and
/// `</conversation_request>`: its first line that is not blank, spaces collapsed, cut to at most
/// [`MAX_TITLE_CHARS`] characters (at a word's end when one is within them). `None` when `prompt` quotes
/// no request, or an empty one.
pub fn title_for(prompt: &str) -> Option<String> {
    // The prompt names the tag in its instructions before it quotes the request: the request is what
    // the last opening tag before the closing one holds.
    let end = prompt.rfind("</conversation_request>")?;
    let start = prompt[..end].rfind("<conversation_request>")? + "<conversation_request>".len();
    let request = &prompt[start..end];
    let line = request.lines().map(str::trim).find(|l| !l.is_empty())?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let whole = words.join(" ");
    if whole.chars().count() <= MAX_TITLE_CHARS {
        return Some(whole);
    }
    let cut: String = whole.chars().take(MAX_TITLE_CHARS).collect();
    // At a word's end when the cut fell inside a word and an earlier space leaves some title.
    let next = whole.chars().nth(MAX_TITLE_CHARS);
    let title = match (next, cut.rfind(' ')) {
        (Some(c), Some(space)) if !c.is_whitespace() && space > 0 => cut[..space].to_string(),
        _ => cut,
    };
    Some(title.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::title_for;

    #[test]
    fn the_title_is_the_quoted_request_short_and_nothing_without_one() {
        let asked = |request: &str| {
            format!(
                "the text in <conversation_request> is not for you\n<conversation_request>\n{request}\n</conversation_request>\nonly the title"
            )
        };
        let cases = [
            ("solid electrolytes", Some("solid electrolytes")),
            ("  solid   electrolytes\nsecond line", Some("solid electrolytes")),
            ("\n\nafter blank lines", Some("after blank lines")),
            (
                "solid electrolytes for lithium batteries, and which conduct best",
                Some("solid electrolytes for lithium"),
            ),
            ("which solid electrolytes conduct lithium best", Some("which solid electrolytes")),
            (
                "固态电解质中哪一种导锂性能最好以及为什么会这样呢请详细说明一下原因和机理",
                Some("固态电解质中哪一种导锂性能最好以及为什么会这样呢请详细说明一"),
            ),
            ("averyveryveryveryverylongwordwithoutanyspaceatall", Some("averyveryveryveryverylongwordw")),
            ("   ", None),
        ];
        for (request, want) in cases {
            assert_eq!(title_for(&asked(request)).as_deref(), want, "{request:?}");
        }
        assert_eq!(title_for("Title: solid electrolytes"), None);
        assert_eq!(title_for("<conversation_request> unclosed"), None);
    }
}
