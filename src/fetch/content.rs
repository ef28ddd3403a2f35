//! What a fetched body may be, and what we keep of it: text-like content types only
//! (decided from the headers, before the body is read), decoded by its declared charset,
//! HTML reduced to its readable text (a Readability port: no scripts, styles or
//! navigation), everything capped in characters.

use encoding_rs::{Encoding, UTF_8};

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
        readable(&decoded, url)
    } else {
        (None, decoded.into_owned())
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
        text_mode: dom_smoothie::TextMode::Formatted,
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
