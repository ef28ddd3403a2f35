//! What a fetched body may be, and what we keep of it: text-like content types only
//! (decided from the headers, before the body is read), decoded by its declared charset,
//! HTML reduced to its readable text, everything capped in characters.
//!
//! Pages up to [`READABILITY_MAX_BYTES`] go through a Readability port (the main content
//! only: no scripts, styles, navigation, sidebars). Larger pages would cost it hundreds of
//! milliseconds for text we would mostly cut, so they are streamed through the HTML
//! tokenizer instead, skipping script/style/navigation/header/footer/aside content and
//! stopping as soon as the character cap is reached.

use std::cell::{Cell, RefCell};

use encoding_rs::{Encoding, UTF_8};
use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, CharacterTokens, EndTag, StartTag, TagToken, Token, TokenSink, TokenSinkResult,
    Tokenizer, TokenizerOpts,
};

use crate::text::cap_chars;

/// Whether a `Content-Type` is worth reading. A missing one is allowed (sniffed as text
/// later); binary types are refused before a byte of the body is read.
pub fn text_like(content_type: Option<&str>) -> bool {
    let Some(value) = content_type else {
        return true;
    };
    let mime = essence(value);
    mime.starts_with("text/")
        || matches!(
            mime.as_str(),
            "application/json" | "application/xml" | "application/xhtml+xml"
        )
        || mime.ends_with("+xml")
        || mime.ends_with("+json")
}

/// `text/HTML; charset=x` → `text/html`.
fn essence(value: &str) -> String {
    value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

fn charset(content_type: Option<&str>) -> Option<&'static Encoding> {
    content_type?
        .split(';')
        .skip(1)
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("charset"))
        .and_then(|(_, v)| Encoding::for_label(v.trim().trim_matches('"').as_bytes()))
}

fn is_html(content_type: Option<&str>, text: &str) -> bool {
    match content_type.map(essence) {
        Some(m) => m == "text/html" || m == "application/xhtml+xml",
        // No type: sniff the start, as a browser would.
        None => {
            let head: String = text.trim_start().chars().take(64).collect();
            let head = head.to_ascii_lowercase();
            head.starts_with("<!doctype html") || head.starts_with("<html")
        }
    }
}

/// The readable text of a page, and its title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    pub title: Option<String>,
    pub text: String,
    /// The text was cut at the character cap.
    pub truncated: bool,
}

/// Decodes and extracts. Invalid bytes become U+FFFD; a body that is mostly binary
/// despite its label is refused (mislabelled content).
pub fn extract(
    body: &[u8],
    content_type: Option<&str>,
    url: &str,
    max_chars: usize,
) -> Result<Extracted, String> {
    let encoding = charset(content_type)
        .or_else(|| Encoding::for_bom(body).map(|(e, _)| e))
        .unwrap_or(UTF_8);
    let (decoded, _, _) = encoding.decode(body);
    if looks_binary(&decoded) {
        return Err("the content is not text (binary data under a text content type)".to_owned());
    }
    let (title, text) = if is_html(content_type, &decoded) {
        if decoded.len() <= READABILITY_MAX_BYTES {
            readable(&decoded, url)
        } else {
            streamed(&decoded, max_chars)
        }
    } else {
        // Only what can survive the cap is copied (tidying shrinks text, so keep twice).
        let keep = decoded
            .char_indices()
            .nth(max_chars.saturating_mul(2))
            .map_or(decoded.len(), |(i, _)| i);
        (None, decoded[..keep].to_owned())
    };
    let text = tidy(&text);
    let truncated = text.chars().count() > max_chars;
    Ok(Extracted {
        title: title
            .map(|t| cap_chars(t.trim(), 300))
            .filter(|t| !t.is_empty()),
        text: if truncated {
            cap_chars(&text, max_chars)
        } else {
            text
        },
        truncated,
    })
}

fn readable(html: &str, url: &str) -> (Option<String>, String) {
    let config = dom_smoothie::Config {
        text_mode: dom_smoothie::TextMode::Raw,
        // Bounds the work a hostile page can cause (the body is already capped).
        max_elements_to_parse: 100_000,
        ..Default::default()
    };
    let parsed =
        dom_smoothie::Readability::new(html, Some(url), Some(config)).and_then(|mut r| r.parse());
    match parsed {
        Ok(article) => (Some(article.title), article.text_content.to_string()),
        // Nothing readable (e.g. an empty page): no text rather than raw markup.
        Err(_) => (None, String::new()),
    }
}

/// Above this many bytes of HTML, [`streamed`] extraction instead of Readability.
pub const READABILITY_MAX_BYTES: usize = 512 * 1024;

/// Elements whose content is never readable text.
const SKIPPED: [&str; 14] = [
    "script", "style", "noscript", "template", "svg", "math", "head", "nav", "header", "footer",
    "aside", "form", "select", "iframe",
];
/// Elements that start a new line of text.
const BLOCKS: [&str; 24] = [
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "table",
    "section",
    "article",
    "main",
    "blockquote",
    "pre",
    "figure",
    "hr",
];

/// Collects text from tokens; the tokenizer alone does not know which elements hold raw
/// text, so the sink tells it (as the tree builder would).
struct TextSink {
    text: RefCell<String>,
    title: RefCell<Option<String>>,
    in_title: Cell<bool>,
    /// Depth inside skipped elements.
    skip: Cell<usize>,
}

impl TokenSink for TextSink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        match token {
            TagToken(tag) => {
                let name: &str = &tag.name;
                let skipped = SKIPPED.contains(&name);
                match tag.kind {
                    StartTag => {
                        if name == "title" {
                            self.in_title.set(true);
                        } else if skipped && !tag.self_closing {
                            self.skip.set(self.skip.get() + 1);
                        }
                        if BLOCKS.contains(&name) {
                            self.text.borrow_mut().push('\n');
                        }
                        return match name {
                            "script" => TokenSinkResult::RawData(RawKind::ScriptData),
                            "style" | "xmp" | "iframe" | "noembed" | "noframes" => {
                                TokenSinkResult::RawData(RawKind::Rawtext)
                            }
                            "title" | "textarea" => TokenSinkResult::RawData(RawKind::Rcdata),
                            "plaintext" => TokenSinkResult::Plaintext,
                            _ => TokenSinkResult::Continue,
                        };
                    }
                    EndTag => {
                        if name == "title" {
                            self.in_title.set(false);
                        } else if skipped {
                            self.skip.set(self.skip.get().saturating_sub(1));
                        }
                        if BLOCKS.contains(&name) {
                            self.text.borrow_mut().push('\n');
                        }
                    }
                }
            }
            CharacterTokens(chars) => self.characters(&chars),
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

impl TextSink {
    fn characters(&self, chars: &StrTendril) {
        if self.in_title.get() {
            let mut title = self.title.borrow_mut();
            title.get_or_insert_with(String::new).push_str(chars);
            return;
        }
        if self.skip.get() > 0 {
            return;
        }
        // Runs of whitespace become one space; lines are made by block elements.
        let mut text = self.text.borrow_mut();
        for c in chars.chars() {
            if c.is_whitespace() {
                if !text.ends_with([' ', '\n']) && !text.is_empty() {
                    text.push(' ');
                }
            } else {
                text.push(c);
            }
        }
    }
}

/// Tokenizer-based extraction for large pages: fed in slices, stopped once the text
/// passes the cap (plus room for [`tidy`] to shrink it).
fn streamed(html: &str, max_chars: usize) -> (Option<String>, String) {
    const SLICE: usize = 64 * 1024;
    let sink = TextSink {
        text: RefCell::new(String::new()),
        title: RefCell::new(None),
        in_title: Cell::new(false),
        skip: Cell::new(0),
    };
    let tokenizer = Tokenizer::new(sink, TokenizerOpts::default());
    let input = BufferQueue::default();
    let mut rest = html;
    while !rest.is_empty() {
        let mut end = rest.len().min(SLICE);
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        input.push_back(StrTendril::from_slice(&rest[..end]));
        rest = &rest[end..];
        let _ = tokenizer.feed(&input);
        // Bytes of text bound characters from above: twice the cap is plenty.
        if tokenizer.sink.text.borrow().len() > max_chars.saturating_mul(2) + 1024 {
            break;
        }
    }
    tokenizer.end();
    let text = tokenizer.sink.text.take();
    let title = tokenizer
        .sink
        .title
        .take()
        .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "));
    (title, text)
}

/// More than 1 % control characters (other than whitespace) or U+FFFD: not text.
fn looks_binary(text: &str) -> bool {
    let sample: Vec<char> = text.chars().take(8192).collect();
    if sample.is_empty() {
        return false;
    }
    let odd = sample
        .iter()
        .filter(|c| (c.is_control() && !c.is_whitespace()) || **c == '\u{FFFD}')
        .count();
    odd * 100 > sample.len()
}

/// Trims lines and collapses runs of blank lines.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines().map(str::trim_end) {
        if line.trim().is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        for t in [
            "text/html",
            "text/plain; charset=utf-8",
            "TEXT/HTML",
            "application/json",
            "application/ld+json",
            "application/rss+xml",
            "application/xhtml+xml",
        ] {
            assert!(text_like(Some(t)), "{t}");
        }
        for t in [
            "application/pdf",
            "image/png",
            "application/octet-stream",
            "application/zip",
            "video/mp4",
            "application/javascript",
        ] {
            assert!(!text_like(Some(t)), "{t}");
        }
        assert!(text_like(None));
    }

    #[test]
    fn html_is_reduced_to_readable_text() {
        let html = r#"<!doctype html><html><head><title>The Title</title>
            <style>body{color:red}</style><script>var secret = "do not show";</script></head>
            <body><nav><a href="/">Home</a> | <a href="/about">About</a></nav>
            <article><h1>The Title</h1><p>First paragraph of the article, long enough to be
            considered real content by the readability heuristics, with several words.</p>
            <p>Second paragraph, also with content that a reader would want to see.</p></article>
            <footer>Copyright</footer></body></html>"#;
        let out = extract(
            html.as_bytes(),
            Some("text/html; charset=utf-8"),
            "https://example.org/a",
            10_000,
        )
        .unwrap();
        assert_eq!(out.title.as_deref(), Some("The Title"));
        assert!(out.text.contains("First paragraph"), "{}", out.text);
        assert!(
            !out.text.contains("do not show") && !out.text.contains("color:red"),
            "{}",
            out.text
        );
        assert!(!out.truncated);
    }

    #[test]
    fn large_pages_are_streamed_to_the_cap() {
        let para = "<p>Some   readable\n text &amp; more.</p>";
        let html = format!(
            "<html><head><title> Big  one </title><style>p{{}}</style><script>if (a < b) {{ var hidden = '</p>'; }}</script></head>\
             <body><nav>Menu items</nav><header>Site header</header><article>{}</article>\
             <aside>Sidebar</aside><footer>Footer</footer></body></html>",
            para.repeat(20_000)
        );
        assert!(html.len() > READABILITY_MAX_BYTES);
        let out = extract(html.as_bytes(), Some("text/html"), "https://x.org/", 5_000).unwrap();
        assert_eq!(out.title.as_deref(), Some("Big one"));
        assert!(out.truncated);
        assert!(
            out.text.starts_with("Some readable text & more.\n"),
            "{:.200}",
            out.text
        );
        for noise in ["Menu", "Site header", "hidden", "Sidebar", "Footer", "p{}"] {
            assert!(!out.text.contains(noise), "{noise}");
        }
        assert!(out.text.chars().count() <= 5_000);
    }

    #[test]
    fn charsets_and_caps() {
        // "café" in ISO-8859-1.
        let out = extract(
            b"caf\xe9",
            Some("text/plain; charset=iso-8859-1"),
            "http://x/",
            100,
        )
        .unwrap();
        assert_eq!(out.text, "café");
        let out = extract(
            "é".repeat(50).as_bytes(),
            Some("text/plain"),
            "http://x/",
            10,
        )
        .unwrap();
        assert!(out.truncated);
        assert!(out.text.starts_with("éééé"));
        assert!(
            extract(
                &[0u8, 1, 2, 3, 0xff, 0xfe, 7, 8],
                Some("text/plain"),
                "http://x/",
                100
            )
            .is_err()
        );
        assert!(
            extract(b"", None, "http://x/", 100)
                .unwrap()
                .text
                .is_empty()
        );
    }
}
