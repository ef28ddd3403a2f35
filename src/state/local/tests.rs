use std::sync::Arc;

use serde_json::json;

use super::*;

/// A fresh store path under the system temp dir (removed by the caller's guard).
pub(super) struct TempDir(PathBuf);

impl TempDir {
    pub(super) fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "pa-store-{name}-{}-{}",
            std::process::id(),
            secure_hex::<4>()
        ));
        TempDir(dir)
    }

    pub(super) fn config(&self, retention: usize) -> StoreConfig {
        StoreConfig {
            path: self.0.join("data").join("store.sqlite"),
            snapshot_retention: retention,
            max_tabs_per_space: 3,
            max_history_per_space: Some(5),
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn created_private_and_migrated() {
    let dir = TempDir::new("perm");
    let config = dir.config(10);
    let store = Store::open(config.clone()).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&config.path), 0o600);
        assert_eq!(mode(config.path.parent().unwrap()), 0o700);
    }
    let version: i64 = store
        .with(|c| c.query_row("PRAGMA user_version", [], |r| r.get(0)))
        .unwrap();
    assert_eq!(version as usize, schema::VERSION);
    drop(store);
    // Reopening runs nothing twice.
    assert!(Store::open(config).is_ok());
}

#[test]
fn snapshots_are_unguessable_and_retention_keeps_the_newest() {
    let dir = TempDir::new("retention");
    let store = Store::open(dir.config(100)).unwrap();
    let mut ids = Vec::new();
    for i in 0..150 {
        ids.push(
            store
                .put_snapshot(&format!("resp_{i}"), &json!({"n": i}))
                .unwrap(),
        );
    }
    assert_eq!(store.snapshot_count().unwrap(), 100);
    assert!(
        store.snapshot(&ids[49]).unwrap().is_none(),
        "the oldest went"
    );
    let newest = store.snapshot(&ids[149]).unwrap().unwrap();
    assert_eq!(
        (newest.response_id.as_str(), newest.body["n"].as_i64()),
        ("resp_149", Some(149))
    );
    assert!(ids[0].starts_with("snap_") && ids[0].len() == 5 + 32);
    assert!(
        store
            .snapshot("snap_00000000000000000000000000000000")
            .unwrap()
            .is_none()
    );
}

#[test]
fn tabs_are_deduplicated_and_bounded_history_too() {
    let dir = TempDir::new("tabs");
    let store = Store::open(dir.config(10)).unwrap();
    let space = store.space("work").unwrap();
    assert_eq!(store.space("work").unwrap(), space, "one space per name");
    let other = store.space("home").unwrap();
    assert_eq!(store.spaces().unwrap(), ["work", "home"]);
    for url in [
        "https://a",
        "https://b",
        "https://a",
        "https://c",
        "https://d",
    ] {
        store.open_tab(space, url, &format!("title {url}")).unwrap();
    }
    let urls: Vec<String> = store
        .tabs(space)
        .unwrap()
        .into_iter()
        .map(|t| t.url)
        .collect();
    assert_eq!(
        urls,
        ["https://d", "https://c", "https://a"],
        "deduplicated, 3 kept, newest first"
    );
    store.open_tab(other, "https://a", "x").unwrap();
    assert_eq!(store.tabs(other).unwrap().len(), 1, "per space");
    assert!(store.close_tab(space, "https://c").unwrap());
    assert!(!store.close_tab(space, "https://c").unwrap());
    for i in 0..8 {
        store.record(space, "question", &format!("q{i}")).unwrap();
    }
    let history = store.history(space, 100).unwrap();
    assert_eq!(history.len(), 5);
    assert_eq!(history[0].1, "q7");
}

#[test]
fn a_damaged_file_is_a_clear_error_not_a_crash() {
    let dir = TempDir::new("corrupt");
    let config = dir.config(10);
    std::fs::create_dir_all(config.path.parent().unwrap()).unwrap();
    std::fs::write(
        &config.path,
        b"this is not a database, just text that is long enough to matter........",
    )
    .unwrap();
    let err = Store::open(config).err().expect("refused");
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("move it aside"), "{err}");
}

#[cfg(unix)]
#[test]
fn a_symlink_in_place_of_the_file_is_refused() {
    let dir = TempDir::new("symlink");
    let config = dir.config(10);
    std::fs::create_dir_all(config.path.parent().unwrap()).unwrap();
    let target = dir.0.join("elsewhere.sqlite");
    std::os::unix::fs::symlink(&target, &config.path).unwrap();
    let err = Store::open(config).err().expect("refused");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert!(!target.exists(), "nothing was created through the link");
}

#[test]
fn concurrent_writers_on_one_file_all_succeed() {
    let dir = TempDir::new("writers");
    let config = dir.config(1_000);
    let stores: Vec<Arc<Store>> = (0..4)
        .map(|_| Arc::new(Store::open(config.clone()).unwrap()))
        .collect();
    let threads: Vec<_> = stores
        .iter()
        .cloned()
        .enumerate()
        .map(|(t, store)| {
            std::thread::spawn(move || {
                for i in 0..50 {
                    store
                        .put_snapshot(&format!("resp_{t}_{i}"), &json!({"t": t}))
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(stores[0].snapshot_count().unwrap(), 200);
}

#[test]
fn processes_opening_one_new_store_at_once_all_succeed() {
    for round in 0..100 {
        let dir = TempDir::new(&format!("first-open{round}"));
        let config = dir.config(10);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let c = config.clone();
                std::thread::spawn(move || {
                    Store::open(c).and_then(|s| s.put_snapshot("r", &json!({})))
                })
            })
            .collect();
        for h in handles {
            if let Err(e) = h.join().unwrap() {
                panic!("round {round}: {e:?}");
            }
        }
    }
}

#[test]
fn cached_answers_expire_and_the_oldest_go_beyond_either_bound() {
    let dir = TempDir::new("cache");
    let store = Store::open(dir.config(10)).unwrap();
    let now = now_ms();
    store.keep_cached("k1", "one", now, now + 60_000).unwrap();
    assert_eq!(store.cached("k1").unwrap(), Some(("one".to_owned(), now)));
    store
        .keep_cached("k1", "again", now + 1, now + 60_000)
        .unwrap();
    assert_eq!(
        store.cached("k1").unwrap(),
        Some(("again".to_owned(), now + 1))
    );
    store.keep_cached("gone", "old", now - 10, now - 1).unwrap();
    assert_eq!(store.cached("gone").unwrap(), None, "expired");
    assert_eq!(store.cached("never").unwrap(), None);

    // Entries: the newest MAX_ENTRIES stay.
    for i in 0..cache::MAX_ENTRIES + 5 {
        store
            .keep_cached(&format!("e{i}"), "x", now, now + 60_000)
            .unwrap();
    }
    assert_eq!(store.cached("e0").unwrap(), None);
    assert_eq!(store.cached("e4").unwrap(), None);
    assert!(store.cached("e5").unwrap().is_some());
    // Bytes: two answers of just over a third of the bound each, then a third.
    let big = "b".repeat((cache::MAX_BYTES / 3 + 1) as usize);
    for key in ["b1", "b2", "b3"] {
        store.keep_cached(key, &big, now, now + 60_000).unwrap();
    }
    assert_eq!(store.cached("b1").unwrap(), None, "over the byte bound");
    assert!(store.cached("b2").unwrap().is_some());
    assert!(store.cached("b3").unwrap().is_some());
}
