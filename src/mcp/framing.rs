//! Newline-delimited framing of stdin, bounded: a line longer than the cap is reported
//! and drained in chunks (never buffered whole), and the next line is read normally.
//! rmcp's own reader silently drops unparsable lines and allows 16 MiB, so we frame
//! ourselves.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A line without its `\n` (may be blank).
    Complete(Vec<u8>),
    /// The line passed the cap; it has been drained.
    TooLong,
    Eof,
}

pub struct LineReader<R> {
    inner: R,
    max_chars: usize,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    pub fn new(inner: R, max_chars: usize) -> Self {
        LineReader { inner, max_chars }
    }

    /// Reads the next line. Characters are counted as bytes that are not UTF-8
    /// continuation bytes (an exact character count for valid UTF-8), with a hard byte
    /// ceiling of 4 × the cap for input that is not.
    pub async fn next_line(&mut self) -> std::io::Result<Line> {
        let mut line = Vec::new();
        let mut chars = 0usize;
        let mut too_long = false;
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                return Ok(if too_long {
                    Line::TooLong
                } else if line.is_empty() {
                    Line::Eof
                } else {
                    Line::Complete(line)
                });
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let chunk = &available[..newline.unwrap_or(available.len())];
            if !too_long {
                chars += chunk.iter().filter(|&&b| b & 0xC0 != 0x80).count();
                if chars > self.max_chars || line.len() + chunk.len() > 4 * self.max_chars {
                    too_long = true;
                    line = Vec::new();
                } else {
                    line.extend_from_slice(chunk);
                }
            }
            let consumed = chunk.len() + usize::from(newline.is_some());
            self.inner.consume(consumed);
            if newline.is_some() {
                return Ok(if too_long {
                    Line::TooLong
                } else {
                    Line::Complete(line)
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], cap: usize) -> Vec<Line> {
        let mut reader = LineReader::new(tokio::io::BufReader::with_capacity(3, input), cap);
        let mut out = Vec::new();
        loop {
            let line = reader.next_line().await.unwrap();
            let eof = line == Line::Eof;
            out.push(line);
            if eof {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn caps_and_drains() {
        assert_eq!(
            lines(b"abc\nabcdef\nab\n\nxyz", 4).await,
            vec![
                Line::Complete(b"abc".to_vec()),
                Line::TooLong,
                Line::Complete(b"ab".to_vec()),
                Line::Complete(Vec::new()),
                Line::Complete(b"xyz".to_vec()),
                Line::Eof
            ]
        );
        // Exactly the cap is fine, with or without a final newline; counted in chars.
        assert_eq!(
            lines("éééé".as_bytes(), 4).await[0],
            Line::Complete("éééé".as_bytes().to_vec())
        );
        assert_eq!(lines(b"abcde", 4).await, vec![Line::TooLong, Line::Eof]);
        // Continuation bytes alone are bounded by the byte ceiling.
        assert_eq!(lines(&[0x80; 17], 4).await[0], Line::TooLong);
    }
}
