//! Unguessable values from the OS CSPRNG, for every module that needs one (session ids,
//! spotlight nonces, retrieve keys, call and snapshot ids). Imports nothing of ours.

/// `N` bytes from the OS CSPRNG, as lowercase hex. Spotlight nonces, retrieve keys and
/// call ids all depend on being unguessable: without the CSPRNG a process has bigger
/// problems, and a predictable value would silently weaken those controls, so this
/// fails loudly instead (a panic in a tool becomes an `isError` result).
pub fn secure_hex<const N: usize>() -> String {
    secure_bytes::<N>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `N` bytes from the OS CSPRNG (keys that live only in this process).
pub fn secure_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    if let Err(e) = getrandom::fill(&mut bytes) {
        panic!("the OS random number generator failed: {e}");
    }
    bytes
}
