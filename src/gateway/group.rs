//! A downstream child's process group, signalled and probed: on Unix the child leads its
//! own group (`process_group(0)` at spawn), so ending the group ends whatever it started
//! too. Windows has no process groups to end this way: there [`of`] names none, and a
//! child is ended on its own (`kill_on_drop`, `Child::kill`), so what it started may
//! outlive it.
//!
//! Touches: signals to child process groups (Unix).

#[cfg(not(unix))]
pub use other::*;
#[cfg(unix)]
pub use unix::*;

#[cfg(unix)]
mod unix {
    /// A process group: the pid of the child that leads it.
    pub type Group = libc::pid_t;

    /// The group child `pid` leads.
    pub fn of(pid: u32) -> Option<Group> {
        libc::pid_t::try_from(pid).ok()
    }

    /// Asks every process of the group to end (SIGTERM).
    pub fn terminate(group: Group) {
        signal(group, libc::SIGTERM);
    }

    /// Ends every process of the group (SIGKILL).
    pub fn kill(group: Group) {
        signal(group, libc::SIGKILL);
    }

    fn signal(group: Group, signal: libc::c_int) {
        // SAFETY: killpg only sends a signal; the group is a child's own
        // (`process_group(0)` at spawn), so nothing of ours is signalled.
        unsafe {
            libc::killpg(group, signal);
        }
    }

    /// Whether no process of `group` is left. With `reap`, the group's exited processes
    /// that are ours to wait for (the child; orphans too when we are a subreaper or PID 1)
    /// are collected first, as a zombie still counts as a member; only pass it once the
    /// child itself is reaped or nothing else will wait for it.
    pub fn gone(group: Group, reap: bool) -> bool {
        if reap {
            // SAFETY: a non-blocking wait for our own children in that group; no status
            // is read.
            while unsafe { libc::waitpid(-group, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
        }
        // SAFETY: signal 0 is delivered to no one; it only asks whether the group has a
        // member.
        let probed = unsafe { libc::kill(-group, 0) };
        probed != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    }
}

#[cfg(not(unix))]
mod other {
    /// Never made: [`of`] names no group.
    pub type Group = u32;

    pub fn of(_pid: u32) -> Option<Group> {
        None
    }

    pub fn terminate(_group: Group) {}

    pub fn kill(_group: Group) {}

    pub fn gone(_group: Group, _reap: bool) -> bool {
        true
    }
}
