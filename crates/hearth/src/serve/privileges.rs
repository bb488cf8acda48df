//! `--user` and `--group`, as nbdkit's `-u`/`-g`: names (or numbers) are
//! looked up before anything is bound, so a wrong one refuses the start;
//! the switch itself comes after every listener, backend, cache device and
//! the pidfile are open.

use std::ffi::CString;

use anyhow::{bail, Context};

/// Whom the server becomes once it has opened what needs root.
#[derive(Debug)]
pub struct Target {
    /// `None`: only the group changes.
    uid: Option<libc::uid_t>,
    gid: libc::gid_t,
    what: String,
}

/// Looks `user` and `group` up; `None` when neither is given. Refused when
/// either does not exist or when we are not root (only root may switch).
pub fn resolve(user: Option<&str>, group: Option<&str>) -> anyhow::Result<Option<Target>> {
    if user.is_none() && group.is_none() {
        return Ok(None);
    }
    let flags = match (user, group) {
        (Some(u), Some(g)) => format!("--user {u} --group {g}"),
        (Some(u), None) => format!("--user {u}"),
        (None, Some(g)) => format!("--group {g}"),
        (None, None) => unreachable!(),
    };
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        bail!("{flags}: changing user or group needs root (running as uid {euid})");
    }
    let account = user.map(|u| lookup_user(u).with_context(|| format!("--user {u}"))).transpose()?;
    let gid = match group {
        Some(g) => lookup_group(g).with_context(|| format!("--group {g}"))?,
        None => account.as_ref().map(|a| a.1).expect("a user when no group"),
    };
    Ok(Some(Target { uid: account.map(|a| a.0), gid, what: flags }))
}

impl Target {
    /// Leaves root: supplementary groups become just the target group, then
    /// the group, then the user (in that order: after setuid, setgid would
    /// be refused). glibc applies each to every thread of the process.
    pub fn switch(&self) -> anyhow::Result<()> {
        let failed = |call: &str| anyhow::anyhow!("{}: {call}: {}", self.what, std::io::Error::last_os_error());
        // SAFETY: plain system calls on integers and a one-element array that outlives the call.
        unsafe {
            if libc::setgroups(1, &self.gid) != 0 {
                return Err(failed("setgroups"));
            }
            if libc::setgid(self.gid) != 0 {
                return Err(failed("setgid"));
            }
            if let Some(uid) = self.uid {
                if libc::setuid(uid) != 0 {
                    return Err(failed("setuid"));
                }
            }
        }
        tracing::info!(uid = ?self.uid, gid = self.gid, "privileges dropped ({})", self.what);
        Ok(())
    }
}

/// A user name or number: its uid and primary gid.
fn lookup_user(user: &str) -> anyhow::Result<(libc::uid_t, libc::gid_t)> {
    let mut buf = vec![0 as libc::c_char; 16384];
    // SAFETY: an all-zero passwd is valid (null pointers, zero ids); it is only read after getpw*_r fills it.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found = std::ptr::null_mut();
    let rc = match user.parse::<libc::uid_t>() {
        // SAFETY: every pointer is valid for the call, with buf's true length.
        Ok(uid) => unsafe { libc::getpwuid_r(uid, &mut entry, buf.as_mut_ptr(), buf.len(), &mut found) },
        Err(_) => {
            let name = CString::new(user).context("a NUL in the name")?;
            // SAFETY: as above; name is NUL-terminated.
            unsafe { libc::getpwnam_r(name.as_ptr(), &mut entry, buf.as_mut_ptr(), buf.len(), &mut found) }
        }
    };
    if rc != 0 {
        bail!("looking the user up: {}", std::io::Error::from_raw_os_error(rc));
    }
    if found.is_null() {
        bail!("no such user");
    }
    Ok((entry.pw_uid, entry.pw_gid))
}

/// A group name or number: its gid.
fn lookup_group(group: &str) -> anyhow::Result<libc::gid_t> {
    let mut buf = vec![0 as libc::c_char; 16384];
    // SAFETY: as for passwd in lookup_user.
    let mut entry: libc::group = unsafe { std::mem::zeroed() };
    let mut found = std::ptr::null_mut();
    let rc = match group.parse::<libc::gid_t>() {
        // SAFETY: every pointer is valid for the call, with buf's true length.
        Ok(gid) => unsafe { libc::getgrgid_r(gid, &mut entry, buf.as_mut_ptr(), buf.len(), &mut found) },
        Err(_) => {
            let name = CString::new(group).context("a NUL in the name")?;
            // SAFETY: as above; name is NUL-terminated.
            unsafe { libc::getgrnam_r(name.as_ptr(), &mut entry, buf.as_mut_ptr(), buf.len(), &mut found) }
        }
    };
    if rc != 0 {
        bail!("looking the group up: {}", std::io::Error::from_raw_os_error(rc));
    }
    if found.is_null() {
        bail!("no such group");
    }
    Ok(entry.gr_gid)
}
