//! Link settings Cargo.toml cannot express per target. Only the `perplexity-agent` binary
//! is affected; nothing here changes what the code does.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=link/startup.order");
    if links_with_rust_lld() {
        // Start-up's functions side by side at the front of `.text`: the kernel maps code
        // in 64 KiB windows around each touched page, so a first request's functions,
        // scattered over the whole of `.text`, kept much of it resident. A name
        // the order lists but the build no longer has is skipped; regenerate the file
        // with scripts/startup-order.py.
        // The linker reads a copy in OUT_DIR: Cargo reuses this script's output for a
        // clone of the workspace elsewhere sharing the target directory, and a path into
        // a clone since deleted failed the link.
        let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
        let out = std::env::var("OUT_DIR").unwrap_or_default();
        let order = format!("{out}/startup.order");
        if std::fs::copy(format!("{dir}/link/startup.order"), &order).is_ok() {
            println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={order}");
            println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
        }
    }
    if packs_relative_relocations() {
        // DT_RELR: a PIE's relative relocations, which the loader reads (and keeps
        // resident) at every start, pack into a small fraction of their RELA entries'
        // size (bench/NOTEBOOK.md, the lean start-up).
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// The target whose default linker is rust-lld (Rust 1.90 and later), unless a linker was
/// configured: only LLD takes a symbol ordering file.
fn links_with_rust_lld() -> bool {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    var("TARGET") == "x86_64-unknown-linux-gnu"
        && std::env::var_os("RUSTC_LINKER").is_none()
        && !var("CARGO_ENCODED_RUSTFLAGS").contains("link")
}

/// Linux with glibc 2.36 or later (the first loader that applies DT_RELR: an older one
/// would refuse the binary), built for the machine it runs on. A cross build, musl or
/// another system links as before.
fn packs_relative_relocations() -> bool {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
        || var("HOST") != var("TARGET")
    {
        return false;
    }
    // The build machine's own tool, at build time: not a process the product starts.
    #[allow(clippy::disallowed_methods)]
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    // "glibc 2.36"
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.trim().strip_prefix("glibc ").unwrap_or("");
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (2, 36)
}
