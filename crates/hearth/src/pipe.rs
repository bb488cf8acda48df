//! `hearth ... | head`: when the reader of standard output (or error) goes
//! away, hearth stops quietly with status 0, as ripgrep does, instead of a
//! panic from `println!` or an error line. Rust ignores SIGPIPE, so the
//! write fails with EPIPE; restoring SIGPIPE would also turn a server's or
//! client's broken socket into a silent death, so only the standard streams
//! are let off, and only once their reader has gone.

use std::io::ErrorKind;

/// Exit quietly when a `print!` or `eprint!` panics on a widowed stream.
pub fn exit_quietly_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info.payload_as_str().unwrap_or("");
        let stream = [("failed printing to stdout", 1), ("failed printing to stderr", 2)]
            .into_iter()
            .find(|(prefix, _)| message.starts_with(prefix));
        if stream.is_some_and(|(_, fd)| reader_gone(fd)) {
            std::process::exit(0);
        }
        default(info);
    }));
}

/// Whether a command's error is standard output's reader having gone.
pub fn is_broken_stdout(e: &anyhow::Error) -> bool {
    let broken = e.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == ErrorKind::BrokenPipe)
            || cause.downcast_ref::<serde_json::Error>().and_then(serde_json::Error::io_error_kind)
                == Some(ErrorKind::BrokenPipe)
    });
    broken && reader_gone(1)
}

/// A pipe's write end polls as POLLERR once no reader is left; a socket's
/// broken pipe elsewhere is not mistaken for it.
fn reader_gone(fd: i32) -> bool {
    let mut poll = libc::pollfd { fd, events: 0, revents: 0 };
    // SAFETY: one valid pollfd, no timeout.
    unsafe { libc::poll(&mut poll, 1, 0) == 1 && poll.revents & libc::POLLERR != 0 }
}
