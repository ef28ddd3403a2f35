//! What a fetched body may be, and what we keep of it: text-like content types only
//! (decided from the headers, before the body is read), decoded by its declared charset,
//! HTML reduced to its readable text, everything capped in characters.
//!
//! Pages up to [`READABILITY_MAX_BYTES`] go through a Readability port, which picks the
//! main content. Larger pages would cost it far more time for text we would mostly
//! cut, so they skip it. Either way the HTML (the article's, or the whole page's)
//! becomes text through one renderer (`render.rs`), which separates blocks, drops
//! navigation and other boilerplate, and stops at the character cap: the two paths
//! differ in what they keep, never in the shape of the text.

use encoding_rs::{Encoding, UTF_8};

use super::render::render;
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
            readable(&decoded, url, max_chars)
        } else {
            render(&decoded, max_chars)
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

/// The article Readability finds, rendered from its HTML: its `text_content` would run
/// every block together. A page it cannot read is rendered whole rather than dropped.
fn readable(html: &str, url: &str, max_chars: usize) -> (Option<String>, String) {
    let config = dom_smoothie::Config {
        text_mode: dom_smoothie::TextMode::Raw,
        // Bounds the work a hostile page can cause (the body is already capped).
        max_elements_to_parse: 100_000,
        ..Default::default()
    };
    let parsed =
        dom_smoothie::Readability::new(html, Some(url), Some(config)).and_then(|mut r| r.parse());
    match parsed {
        Ok(article) => (Some(article.title), render(&article.content, max_chars).1),
        Err(_) => render(html, max_chars),
    }
}

/// Above this many bytes of HTML, the page is rendered whole instead of through
/// Readability.
pub const READABILITY_MAX_BYTES: usize = 512 * 1024;

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
        assert!(
            out.text.contains("with several words.\n\nSecond paragraph"),
            "{}",
            out.text
        );
        assert!(
            !out.text.contains("Home") && !out.text.contains("Copyright"),
            "{}",
            out.text
        );
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

    /// The page, padded past [`READABILITY_MAX_BYTES`] with a comment neither path reads.
    fn padded(html: &str) -> String {
        let pad = format!("<!--{}-->", "x".repeat(READABILITY_MAX_BYTES));
        html.replacen("<html", &format!("{pad}<html"), 1)
    }

    fn text_of(html: &str) -> String {
        extract(
            html.as_bytes(),
            Some("text/html"),
            "https://x.org/a",
            100_000,
        )
        .map(|e| e.text)
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Readability may keep less than the whole page, but the shape of what either path
    /// keeps is the same: blocks apart, items marked, cells separated, no site chrome.
    #[test]
    fn both_paths_render_blocks_the_same_way() {
        use super::super::render::tests::{ARTICLE, LISTS, MINIFIED, TABLE};
        for page in [MINIFIED, LISTS, TABLE] {
            let small = text_of(page);
            assert!(page.len() < READABILITY_MAX_BYTES);
            assert_eq!(small, text_of(&padded(page)), "the paths differ");
        }
        let small = text_of(MINIFIED);
        assert!(
            small.starts_with("Heading\n\nFirst para.\n\nSecond para.\n\n- Item one\n- Item two"),
            "{small}"
        );
        let lists = text_of(LISTS);
        assert!(lists.contains("\n- Cargo\n  - from crates.io\n"), "{lists}");
        let table = text_of(TABLE);
        assert!(
            table.contains("\nPlan | Price | Notes\nFree | $0 |\nPro | $10 | per month"),
            "{table}"
        );
        for text in [text_of(ARTICLE), text_of(&padded(ARTICLE))] {
            assert!(
                text.contains(
                    "The first paragraph spans several source lines, with odd spacing.\n\n\
                     The second paragraph has a link and emphasis.\n\n\
                     What changed\n\nThe third paragraph"
                ),
                "{text}"
            );
            for chrome in [
                "Logo",
                "Menu1",
                "Search",
                "Related",
                "Sidebar",
                "2026",
                "Privacy",
                "JavaScript",
                "dataLayer",
                "Daily Byte",
                "Home",
                "Tech",
            ] {
                assert!(!text.contains(chrome), "{chrome} in {text}");
            }
        }
    }

    #[test]
    fn a_page_readability_refuses_is_rendered_whole() {
        // Past its element limit, Readability gives up; the text is still there.
        let html = format!(
            "<html><body><nav>Menu</nav><p>Kept text.</p><p>More.</p>{}</body></html>",
            "<br>".repeat(100_001)
        );
        assert!(html.len() < READABILITY_MAX_BYTES);
        assert_eq!(text_of(&html), "Kept text.\n\nMore.");
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
