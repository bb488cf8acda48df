//! systemd socket activation (`sd_listen_fds(3)`): when `LISTEN_PID` is our
//! pid, the `LISTEN_FDS` descriptors from 3 on are listening sockets the
//! service manager bound for us.

use std::os::fd::{FromRawFd, OwnedFd};

use anyhow::{bail, Context};

/// The first descriptor passed (`SD_LISTEN_FDS_START`).
const FIRST_FD: i32 = 3;

/// The inherited sockets, or none when the variables are absent or meant
/// for another process. The variables are removed (as sd_listen_fds does
/// with unset_environment), so a `--run` command does not take them for
/// its own, and the descriptors are marked close-on-exec.
///
/// Call before any thread starts: it changes the environment.
pub fn take_listen_fds() -> anyhow::Result<Vec<OwnedFd>> {
    let (Ok(pid), Ok(count)) = (std::env::var("LISTEN_PID"), std::env::var("LISTEN_FDS")) else {
        return Ok(Vec::new());
    };
    if pid.trim().parse::<u32>().ok() != Some(std::process::id()) {
        return Ok(Vec::new());
    }
    for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        std::env::remove_var(name);
    }
    let count: i32 = count.trim().parse().with_context(|| format!("LISTEN_FDS={count:?} is not a number"))?;
    if count < 1 {
        bail!("LISTEN_FDS={count}: no socket passed");
    }
    (FIRST_FD..FIRST_FD + count)
        .map(|fd| {
            // SAFETY: fcntl on a descriptor number; an unused number fails with EBADF, checked below.
            if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
                bail!("LISTEN_FDS={count}: fd {fd}: {}", std::io::Error::last_os_error());
            }
            // SAFETY: the service manager passed fd to us alone, and it is open (fcntl succeeded).
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        })
        .collect()
}
