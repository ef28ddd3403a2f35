//! Files only this user may read, at the ground floor (it imports nothing of ours): the
//! one way this program makes private directories (0700) and private files (0600, never
//! through a symbolic link), and the one test of what is executable or readable by
//! others, or may be changed by another user. The store, the clients file, the audit
//! log, the gateway's working directories, `install` and `doctor` all ask here, so a
//! permission rule is written once.

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

/// Whether a file this program takes on trust — what lets callers in, what holds sealed
/// secrets — could have been changed by another user: OpenSSH's rule for
/// `authorized_keys`. The file (`meta`, taken from the open file, so it is the one being
/// read) must be owned by this process's effective user or root and not writable by group
/// or others; so must the directory that really holds it and the one that holds the name
/// as given, since whoever may write a directory may put another file in its place — a
/// sticky directory excepted (`/tmp`, a tmpfs of mounted secrets: there only the owner
/// may rename or remove an entry). Only the parent is checked, not every ancestor:
/// systems ship group-writable ancestors (`/var/local`, `/var/log`) that would refuse
/// ordinary placements. `what` names the file in the message (`the clients file
/// /etc/x/clients.toml`), which says who owns what and the command that mends it.
/// Always `Ok` where there are no owners or mode bits.
pub fn trusted(path: &Path, meta: &std::fs::Metadata, what: &str) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if let Some(fault) = fault(meta.uid(), meta.mode(), me, false) {
            return Err(match fault {
                Fault::Owner(owner) => format!(
                    "{what} is owned by {}, not by {}, so that user could change it: run `chown {} {}`",
                    who(owner),
                    us(me),
                    user_arg(me),
                    path.display()
                ),
                // 600 when the file is ours; a file of root's this user reads through
                // its other-read bit only loses the write bits.
                Fault::Writable(mode) => format!(
                    "{what} may be written by other users (mode {mode:o}), who could change it: run `chmod {} {}`",
                    if meta.uid() == me { "600" } else { "go-w" },
                    path.display()
                ),
            });
        }
        for dir in holders(path)? {
            let dir_meta = std::fs::metadata(&dir).map_err(|e| {
                format!(
                    "{what} is in {}, which cannot be checked: {}",
                    dir.display(),
                    e.kind()
                )
            })?;
            let shown = dir.display();
            match fault(dir_meta.uid(), dir_meta.mode(), me, true) {
                None => {}
                Some(Fault::Owner(owner)) => {
                    return Err(format!(
                        "{what} is in {shown}, which is owned by {}, not by {}, so that user could put another file in its place: run `chown {} {shown}`, or keep the file in a directory of your own",
                        who(owner),
                        us(me),
                        user_arg(me)
                    ));
                }
                Some(Fault::Writable(mode)) => {
                    return Err(format!(
                        "{what} is in {shown}, which other users may write (mode {mode:o}), so they could put another file in its place: run `chmod go-w {shown}`, or keep the file in a directory of your own"
                    ));
                }
            }
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        let _ = (path, meta, what);
        Ok(())
    }
}

/// What makes an owner and mode untrustworthy to the user `me`.
#[cfg(unix)]
#[derive(Debug, PartialEq, Eq)]
enum Fault {
    /// Owned by this uid, neither `me` nor root.
    Owner(u32),
    /// Group or others may write (mode bits `0o777`).
    Writable(u32),
}

#[cfg(unix)]
fn fault(owner: u32, mode: u32, me: u32, dir: bool) -> Option<Fault> {
    let sticky = dir && mode & 0o1000 != 0;
    if owner != me && owner != 0 {
        Some(Fault::Owner(owner))
    } else if mode & 0o022 != 0 && !sticky {
        Some(Fault::Writable(mode & 0o777))
    } else {
        None
    }
}

/// The directory that really holds `path` (links resolved) and, when it differs, the one
/// that holds the name as given (whoever may write it may repoint a link there).
#[cfg(unix)]
fn holders(path: &Path) -> Result<Vec<std::path::PathBuf>, String> {
    let parent = |p: &Path| match p.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let real = std::fs::canonicalize(path)
        .map_err(|e| format!("cannot find where {} is: {}", path.display(), e.kind()))?;
    let mut dirs = vec![parent(&real)];
    let given = parent(path);
    if std::fs::canonicalize(&given).ok().as_ref() != dirs.first() {
        dirs.push(given);
    }
    Ok(dirs)
}

/// `nobody (uid 65534)`, or `uid 65534` for a uid with no name here.
#[cfg(unix)]
fn who(uid: u32) -> String {
    match user_name(uid) {
        Some(name) => format!("{name} (uid {uid})"),
        None => format!("uid {uid}"),
    }
}

/// This user as the message names it: `root (the user this runs as)`, or `alice (…) or
/// root`.
#[cfg(unix)]
fn us(me: u32) -> String {
    if me == 0 {
        "root (the user this runs as)".to_owned()
    } else {
        format!("{} (the user this runs as) or root", who(me))
    }
}

/// This user as `chown` takes it: the name, or the number where there is none.
#[cfg(unix)]
fn user_arg(uid: u32) -> String {
    user_name(uid).unwrap_or_else(|| uid.to_string())
}

/// The login name of `uid` from the system's user database (only messages need it).
#[cfg(unix)]
fn user_name(uid: u32) -> Option<String> {
    let mut buffer = vec![0u8; 1024];
    loop {
        // SAFETY: all-zero is a valid `passwd` (null pointers and zero ids); it is only
        // read after getpwuid_r has filled it in.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is to live memory of the size given, and the strings
        // written into `entry` point into `buffer`, which outlives their use below.
        let rc = unsafe {
            libc::getpwuid_r(
                uid,
                &mut entry,
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                &mut found,
            )
        };
        if rc == libc::ERANGE && buffer.len() < 1 << 16 {
            buffer.resize(buffer.len() * 2, 0);
            continue;
        }
        if rc != 0 || found.is_null() || entry.pw_name.is_null() {
            return None;
        }
        // SAFETY: getpwuid_r succeeded, so pw_name is a NUL-terminated string in `buffer`.
        let name = unsafe { std::ffi::CStr::from_ptr(entry.pw_name) };
        let name = name.to_str().ok()?;
        return (!name.is_empty() && !name.chars().any(char::is_control)).then(|| name.to_owned());
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

    /// The rule itself, for owners a test cannot give a file.
    #[test]
    fn only_this_user_or_root_and_no_other_writer_is_trusted() {
        let me = 1000;
        assert_eq!(fault(me, 0o100600, me, false), None);
        assert_eq!(fault(0, 0o100644, me, false), None, "root's, readable");
        assert_eq!(fault(0, 0o100600, 0, false), None);
        assert_eq!(fault(65534, 0o100600, me, false), Some(Fault::Owner(65534)));
        assert_eq!(fault(65534, 0o100600, 0, false), Some(Fault::Owner(65534)));
        assert_eq!(fault(1001, 0o100644, me, false), Some(Fault::Owner(1001)));
        assert_eq!(fault(me, 0o100620, me, false), Some(Fault::Writable(0o620)));
        assert_eq!(fault(0, 0o100646, me, false), Some(Fault::Writable(0o646)));
        assert_eq!(
            fault(me, 0o101666, me, false),
            Some(Fault::Writable(0o666)),
            "a sticky file is still written"
        );
        assert_eq!(fault(0, 0o40755, me, true), None);
        assert_eq!(fault(0, 0o41777, me, true), None, "sticky, as /tmp");
        assert_eq!(fault(me, 0o40775, me, true), Some(Fault::Writable(0o775)));
        assert_eq!(fault(65534, 0o41777, me, true), Some(Fault::Owner(65534)));
    }

    #[test]
    fn a_file_or_directory_others_may_write_is_not_trusted() {
        use std::os::unix::fs::PermissionsExt;
        let root = std::env::temp_dir().join(format!("files-trust-{}", std::process::id()));
        let dir = root.join("d");
        private_dir(&dir).unwrap();
        let file = dir.join("f");
        open_private_append(&file).unwrap();
        let check = || trusted(&file, &std::fs::metadata(&file).unwrap(), "the file F");
        let set = |p: &Path, mode| std::fs::set_permissions(p, Permissions::from_mode(mode));
        assert_eq!(check(), Ok(()));
        set(&file, 0o644).unwrap();
        assert_eq!(
            check(),
            Ok(()),
            "readable by others is the caller's business"
        );

        set(&file, 0o664).unwrap();
        let error = check().unwrap_err();
        assert!(
            error.starts_with("the file F may be written by other users (mode 664)")
                && error.ends_with(&format!("run `chmod 600 {}`", file.display())),
            "{error}"
        );
        set(&file, 0o600).unwrap();

        set(&dir, 0o777).unwrap();
        let error = check().unwrap_err();
        assert!(
            error.contains(&format!(
                "is in {}, which other users may write (mode 777)",
                dir.display()
            )) && error.contains(&format!("chmod go-w {}", dir.display())),
            "{error}"
        );
        set(&dir, 0o1777).unwrap();
        assert_eq!(check(), Ok(()), "a sticky directory, as /tmp");

        // A link is judged by what it points at and by where it is: a link in a
        // directory others may write could be pointed elsewhere.
        set(&dir, 0o700).unwrap();
        let open = root.join("open");
        private_dir(&open).unwrap();
        let link = open.join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let through = || trusted(&link, &std::fs::metadata(&link).unwrap(), "L");
        assert_eq!(through(), Ok(()));
        set(&open, 0o757).unwrap();
        assert!(
            through()
                .unwrap_err()
                .contains(&format!("is in {}, which other", open.display())),
            "{:?}",
            through()
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    /// Only root can give a file away; elsewhere the rule's own test covers owners.
    #[test]
    fn a_file_or_directory_another_user_owns_is_not_trusted() {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIP: only root can change a file's owner");
            return;
        }
        let nobody = 65534;
        let root = std::env::temp_dir().join(format!("files-owner-{}", std::process::id()));
        let dir = root.join("d");
        private_dir(&dir).unwrap();
        let file = dir.join("f");
        open_private_append(&file).unwrap();
        let check = || trusted(&file, &std::fs::metadata(&file).unwrap(), "the file F");
        assert_eq!(check(), Ok(()));
        std::os::unix::fs::chown(&file, Some(nobody), None).unwrap();
        let error = check().unwrap_err();
        assert!(
            error.starts_with("the file F is owned by ")
                && error.contains("(uid 65534), not by root (the user this runs as)")
                && error.ends_with(&format!("run `chown root {}`", file.display())),
            "{error}"
        );
        std::os::unix::fs::chown(&file, Some(0), None).unwrap();
        std::os::unix::fs::chown(&dir, Some(nobody), None).unwrap();
        let error = check().unwrap_err();
        assert!(
            error.contains(&format!("is in {}, which is owned by", dir.display()))
                && error.contains("(uid 65534)")
                && error.contains(&format!("chown root {}", dir.display())),
            "{error}"
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
