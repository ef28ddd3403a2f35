//! HTML to block-separated text, in one streaming pass over the tokenizer: what both
//! extraction paths hand the model, so a page reads the same whichever path it took.
//!
//! Blocks (paragraphs, headings, lists, tables…) are separated by a blank line, list
//! items become `- ` lines (indented two spaces per level of nesting, the one place a
//! line starts with a space besides `pre`), a table row becomes one line with ` | `
//! between its cells, and inline whitespace collapses to one space. Boilerplate
//! (scripts, styles, forms' controls, navigation, sidebars, and the page's own header
//! and footer) is skipped.
//!
//! Only tokens are seen, never a tree, so the state is a handful of counters and the
//! output: memory stays in proportion to the text kept, and the pass stops at the cap.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, CharacterTokens, EndTag, StartTag, Tag, TagToken, Token, TokenSink,
    TokenSinkResult, Tokenizer, TokenizerOpts,
};

/// Elements whose content is never readable text. `form` is not among them: some sites
/// wrap the whole page in one, so only its controls are skipped.
const SKIPPED: [&str; 16] = [
    "script", "style", "noscript", "template", "svg", "math", "head", "nav", "aside", "select",
    "button", "textarea", "datalist", "iframe", "object", "dialog",
];
/// Skipped only at page level: inside `article` or `main` they hold the content's own
/// heading, byline or notes (as in the HTML landmark rules).
const LANDMARKS: [&str; 2] = ["header", "footer"];
/// Elements that `header`/`footer` belong to, rather than to the page.
const CONTENT: [&str; 2] = ["article", "main"];
/// Elements set apart from their neighbours by a blank line.
const BLOCKS: [&str; 28] = [
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "form",
    "fieldset",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hgroup",
    "dl",
    "table",
    "caption",
    "blockquote",
    "pre",
    "figure",
    "figcaption",
    "address",
    "details",
    "summary",
    "center",
    "hr",
];
/// Elements that start a new line, without a blank one.
const LINES: [&str; 4] = ["br", "dt", "dd", "tr"];

/// What separates the next text from what came before.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
enum Break {
    #[default]
    None,
    Space,
    Line,
    Blank,
}

/// The renderer's state between tokens.
#[derive(Default)]
struct Render {
    out: String,
    pending: Break,
    /// A list item's `- ` waiting for its first text (so `<li><p>x` stays one line).
    item: bool,
    title: Option<String>,
    in_title: bool,
    /// Depth inside skipped elements.
    skip: usize,
    /// Depth inside `article`/`main`.
    content: usize,
    /// Inside a table cell: blocks there are inline, so a row stays one line. A flag,
    /// not a depth, since `</td>` is usually left implied.
    in_cell: bool,
    /// Cells seen in the current row.
    cells: usize,
    /// Depth inside `pre`, whose whitespace is kept.
    pre: usize,
    /// Depth inside lists: nested items are indented, and a list is one block.
    lists: usize,
}

impl Render {
    fn start(&mut self, tag: &Tag) {
        let name: &str = &tag.name;
        if name == "title" && self.title.is_none() {
            self.in_title = true;
            self.title = Some(String::new());
            return;
        }
        if !tag.self_closing && self.skips(name) {
            self.skip += 1;
            return;
        }
        if self.skip > 0 {
            return;
        }
        if CONTENT.contains(&name) {
            self.content += 1;
        }
        match name {
            "li" => self.list_item(),
            "tr" => {
                self.in_cell = false;
                self.cells = 0;
                self.request(Break::Line, true);
            }
            "td" | "th" => self.cell(),
            "pre" => {
                self.pre += 1;
                self.request(Break::Blank, true);
            }
            "ul" | "ol" | "menu" => {
                self.request(Break::Blank, true);
                self.lists += 1;
            }
            _ => self.block(name, true),
        }
    }

    fn end(&mut self, name: &str) {
        if name == "title" {
            self.in_title = false;
            return;
        }
        if SKIPPED.contains(&name) || LANDMARKS.contains(&name) {
            // A landmark that was kept opened no skip: with `skip` at zero this is its end.
            if self.skip > 0 {
                self.skip -= 1;
                return;
            }
        }
        if self.skip > 0 {
            return;
        }
        if CONTENT.contains(&name) {
            self.content = self.content.saturating_sub(1);
        }
        match name {
            "li" => {
                self.item = false;
                self.request(Break::Line, false);
            }
            "td" | "th" => self.in_cell = false,
            "tr" | "table" => {
                self.in_cell = false;
                self.block(name, false);
            }
            "pre" => {
                self.pre = self.pre.saturating_sub(1);
                self.request(Break::Blank, false);
            }
            "ul" | "ol" | "menu" => {
                self.lists = self.lists.saturating_sub(1);
                self.request(Break::Blank, false);
            }
            _ => self.block(name, false),
        }
    }

    fn skips(&self, name: &str) -> bool {
        SKIPPED.contains(&name)
            || (LANDMARKS.contains(&name) && (self.skip > 0 || self.content == 0))
    }

    fn block(&mut self, name: &str, opening: bool) {
        if BLOCKS.contains(&name) {
            self.request(Break::Blank, opening);
        } else if LINES.contains(&name) {
            self.request(Break::Line, opening);
        }
    }

    fn list_item(&mut self) {
        if self.in_cell {
            self.request(Break::Space, true);
            return;
        }
        self.request(Break::Line, true);
        self.item = true;
    }

    /// A cell's separator is written at once, so an empty cell still holds its column.
    fn cell(&mut self) {
        if self.cells > 0 {
            self.flush();
            self.out.truncate(self.out.trim_end_matches(' ').len());
            self.out.push_str(" | ");
        }
        self.cells += 1;
        self.in_cell = true;
    }

    /// Asks for at least `wanted` before the next text. An opening block inside a list
    /// item that has no text yet joins the item's line; a closing one ends an empty item.
    /// A list keeps its items together, a table cell its row.
    fn request(&mut self, wanted: Break, opening: bool) {
        if self.item {
            if opening {
                return;
            }
            self.item = false;
        }
        let most = if self.in_cell {
            Break::Space
        } else if self.lists > 0 {
            Break::Line
        } else {
            Break::Blank
        };
        self.pending = self.pending.max(wanted.min(most));
    }

    /// Writes what the pending break asks for, then any list marker.
    fn flush(&mut self) {
        let at_line_start = self.out.is_empty() || self.out.ends_with('\n');
        if self.pending >= Break::Line {
            self.out.truncate(self.out.trim_end_matches(' ').len());
        }
        match self.pending {
            _ if self.out.is_empty() => {}
            Break::Blank => self.out.push_str("\n\n"),
            Break::Line => self.out.push('\n'),
            Break::Space if !at_line_start && !self.out.ends_with(' ') => self.out.push(' '),
            _ => {}
        }
        self.pending = Break::None;
        if self.item {
            self.item = false;
            for _ in 1..self.lists {
                self.out.push_str("  ");
            }
            self.out.push_str("- ");
        }
    }

    fn characters(&mut self, chars: &str) {
        if self.in_title {
            if let Some(title) = self.title.as_mut() {
                title.push_str(chars);
            }
            return;
        }
        if self.skip > 0 {
            return;
        }
        if self.pre > 0 {
            self.flush();
            self.out.push_str(chars);
            return;
        }
        for c in chars.chars() {
            if c.is_whitespace() {
                self.request(Break::Space, true);
                continue;
            }
            if self.pending != Break::None || self.item {
                self.flush();
            }
            self.out.push(c);
        }
    }
}

/// Collects text from tokens; the tokenizer alone does not know which elements hold raw
/// text, so the sink tells it (as the tree builder would).
struct TextSink(RefCell<Render>);

impl TokenSink for TextSink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        match token {
            TagToken(tag) => match tag.kind {
                StartTag => {
                    self.0.borrow_mut().start(&tag);
                    return raw_kind(&tag.name);
                }
                EndTag => self.0.borrow_mut().end(&tag.name),
            },
            CharacterTokens(chars) => self.0.borrow_mut().characters(&chars),
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

/// How the tokenizer must read the content of an element that starts here.
fn raw_kind(name: &str) -> TokenSinkResult<()> {
    match name {
        "script" => TokenSinkResult::RawData(RawKind::ScriptData),
        "style" | "xmp" | "iframe" | "noembed" | "noframes" => {
            TokenSinkResult::RawData(RawKind::Rawtext)
        }
        "title" | "textarea" => TokenSinkResult::RawData(RawKind::Rcdata),
        "plaintext" => TokenSinkResult::Plaintext,
        _ => TokenSinkResult::Continue,
    }
}

/// The text of `html` and its first `<title>`, fed in slices and stopped once the text
/// passes the cap (plus room for the caller's tidying to shrink it).
pub(super) fn render(html: &str, max_chars: usize) -> (Option<String>, String) {
    const SLICE: usize = 64 * 1024;
    let tokenizer = Tokenizer::new(TextSink(RefCell::default()), TokenizerOpts::default());
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
        if tokenizer.sink.0.borrow().out.len() > max_chars.saturating_mul(2) + 1024 {
            break;
        }
    }
    tokenizer.end();
    let render = tokenizer.sink.0.take();
    let title = render
        .title
        .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "));
    (title, render.out)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A news-style article: site header with a menu, a sidebar, a site footer.
    pub(in crate::fetch) const ARTICLE: &str = r#"<!DOCTYPE html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <title>Rust 2.0 released | The Daily Byte</title>
    <link rel="stylesheet" href="/site.css">
    <script>window.dataLayer = [];</script>
  </head>
  <body>
    <header class="site-header">
      <a class="logo" href="/"><img src="/logo.svg" alt="">Logo</a>
      <nav>
        <ul>
          <li><a href="/news">Menu1</a></li>
          <li><a href="/tech">Menu2</a></li>
        </ul>
      </nav>
      <form action="/search"><input name="q"><button>Search</button></form>
    </header>
    <main>
      <nav class="breadcrumbs"><a href="/">Home</a> &rsaquo; <a href="/tech">Tech</a></nav>
      <article>
        <header>
          <h1>Rust 2.0 released</h1>
          <p class="byline">By Ada Lovelace</p>
        </header>
        <p>The first paragraph
           spans several source lines,   with odd   spacing.</p>
        <p>The second paragraph has <a href="/x">a link</a> and <em>emphasis</em>.</p>
        <h2>What changed</h2>
        <p>The third paragraph follows a heading.</p>
        <footer class="article-notes">Filed under: releases</footer>
      </article>
    </main>
    <aside><h3>Related</h3><p>Sidebar story</p></aside>
    <footer class="site-footer">
      <p>&copy; 2026 The Daily Byte</p>
      <nav><a href="/privacy">Privacy</a></nav>
    </footer>
    <noscript>Enable JavaScript</noscript>
  </body>
</html>"#;

    /// The same kind of page as a minifier leaves it: not one newline.
    pub(in crate::fetch) const MINIFIED: &str = "<!doctype html><html><head><title>Min</title>\
        <style>p{margin:0}</style></head><body><header><a href=/>Logo</a><nav><a href=/1>Menu1\
        </a><a href=/2>Menu2</a></nav></header><div id=app><div class=content><h1>Heading</h1>\
        <p>First para.</p><p>Second para.</p><ul><li>Item one</li><li>Item two</li></ul><div>A \
        div of text.</div><div>Another div.<br>After a break.</div></div></div><footer>Footer \
        text</footer><script>track()</script></body></html>";

    /// Lists as documentation pages have them: nested, ordered, items holding paragraphs.
    pub(in crate::fetch) const LISTS: &str = "<html><body><main><h1>Install</h1>\
        <p>Pick one:</p>\n<ul>\n  <li>Cargo\n    <ul><li>from crates.io</li><li>from git</li></ul>\n  </li>\n  \
        <li><p>Homebrew</p></li>\n  <li></li>\n  <li><a href=/n>Nix</a> (flake)</li>\n</ul>\
        <ol><li>Download</li><li>Unpack<li>Run</ol><dl><dt>Term</dt><dd>Its meaning</dd></dl>\
        <p>After the lists.</p></main></body></html>";

    /// A data table with a caption, a header row, implied end tags and an empty cell.
    pub(in crate::fetch) const TABLE: &str = "<html><body><main><h2>Prices</h2><table>\
        <caption>Plans</caption><thead><tr><th>Plan</th><th>Price</th><th>Notes</th></tr>\
        </thead><tbody>\n<tr>\n <td>Free</td>\n <td>$0</td>\n <td></td>\n</tr>\
        <tr><td><p>Pro</p><td>$10<td>per <b>month</b>, billed yearly</tr></tbody></table>\
        <p>Prices include tax.</p></main></body></html>";

    fn text(html: &str) -> String {
        render(html, 100_000).1
    }

    #[test]
    fn an_article_keeps_its_blocks_and_drops_the_site_around_it() {
        let (title, text) = render(ARTICLE, 100_000);
        assert_eq!(title.as_deref(), Some("Rust 2.0 released | The Daily Byte"));
        assert_eq!(
            text,
            "Rust 2.0 released\n\nBy Ada Lovelace\n\n\
             The first paragraph spans several source lines, with odd spacing.\n\n\
             The second paragraph has a link and emphasis.\n\n\
             What changed\n\nThe third paragraph follows a heading.\n\n\
             Filed under: releases"
        );
    }

    #[test]
    fn a_minified_page_is_split_into_blocks() {
        assert_eq!(
            text(MINIFIED),
            "Heading\n\nFirst para.\n\nSecond para.\n\n- Item one\n- Item two\n\n\
             A div of text.\n\nAnother div.\nAfter a break."
        );
    }

    #[test]
    fn list_items_get_their_own_marked_lines() {
        assert_eq!(
            text(LISTS),
            "Install\n\nPick one:\n\n- Cargo\n  - from crates.io\n  - from git\n\
             - Homebrew\n- Nix (flake)\n\n- Download\n- Unpack\n- Run\n\n\
             Term\nIts meaning\n\nAfter the lists."
        );
    }

    #[test]
    fn a_table_row_is_one_line_of_separated_cells() {
        assert_eq!(
            text(TABLE),
            "Prices\n\nPlans\n\nPlan | Price | Notes\nFree | $0 |\n\
             Pro | $10 | per month, billed yearly\n\nPrices include tax."
        );
    }

    #[test]
    fn whitespace_and_preformatted_text() {
        assert_eq!(
            text("<p>  a \t\n b  </p>\n\n\n<p>c</p><pre>fn main() {\n    go();\n}</pre>x"),
            "a b\n\nc\n\nfn main() {\n    go();\n}\n\nx"
        );
    }

    #[test]
    fn the_cap_stops_the_pass() {
        let html = "<p>word word word</p>".repeat(100_000);
        let (_, text) = render(&html, 1_000);
        assert!(text.len() < 200_000, "{}", text.len());
        assert!(text.starts_with("word word word\n\nword"), "{:.40}", text);
    }
}
