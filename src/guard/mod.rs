//! Controls every front end passes through. So far: spotlighting of retrieved web
//! content. (Rate limiting, audit, redaction, injection scanning, output budget and
//! metrics join here; see SECURITY.md.)
//!
//! Touches: the OS CSPRNG (spotlight nonces). No network, no files.

pub mod spotlight;
