//! Files only this user may read, at the ground floor (it imports nothing of ours): the
//! one way this program makes private directories (0700) and private files (0600, never
//! through a symbolic link), and the one test of what is executable or readable by
//! others. The store, the audit log, the gateway's working directories, `install` and
//! `doctor` all ask here, so a permission rule is written once.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io;
use std::path::Path;

/// Creates `dir` and its missing parents, each new one 0700: what is kept there (research,
/// sealed secrets, client configs) is this user's alone.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Opens `path` to append, creating it 0600. On Unix the mode and the refusal of a link
/// are atomic in the open (`O_NOFOLLOW`): a file planted as a link to somewhere else is
/// never written through. Elsewhere a link is refused before the open (a race a local
/// attacker could still win; there is no `O_NOFOLLOW` to close it).
pub fn open_private_append(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    #[cfg(not(unix))]
    if is_link(path) {
        return Err(io::Error::other("it is a symbolic link"));
    }
    options.open(path)
}

/// Whether `path` itself is a symbolic link (not followed).
pub fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// A regular file this user may run.
pub fn is_executable(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    meta.is_file()
}

/// The mode bits (`0o777`) of `permissions` when group or others may read or write;
/// `None` when only the owner may (and always where there are no such bits).
pub fn loose_mode(permissions: &Permissions) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = permissions.mode() & 0o777;
        (mode & 0o077 != 0).then_some(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = permissions;
        None
    }
}

/// The mode bits of the file at `path` (`None` where it is missing or there are none).
pub fn mode(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path)
            .ok()
            .map(|m| m.permissions().mode() & 0o777)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn private_means_0700_and_0600_and_never_through_a_link() {
        let root = std::env::temp_dir().join(format!("files-test-{}", std::process::id()));
        let dir = root.join("a/b");
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), Some(0o700));
        let file = dir.join("f");
        open_private_append(&file).unwrap();
        assert_eq!(mode(&file), Some(0o600));
        assert_eq!(
            loose_mode(&std::fs::metadata(&file).unwrap().permissions()),
            None
        );
        let link = dir.join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(is_link(&link));
        assert!(
            open_private_append(&link).is_err(),
            "never written through a link"
        );
        assert!(!is_executable(&file));
        assert!(is_executable(Path::new("/bin/sh")));
        let _ = std::fs::remove_dir_all(&root);
    }
}
