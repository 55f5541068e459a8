//! Writes that never raise SIGPIPE.
//!
//! A write to a connection Redis closed (its idle `timeout`, a restart, a proxy, `CLIENT
//! KILL`) raises SIGPIPE in the writing thread unless the write says otherwise. Rust programs,
//! Python and the JVM ignore the signal; a C host keeps its default action, which ends the
//! process. The library never lets it be raised: its runtime's threads block it (redis-rs'
//! connections write with `writev`, which cannot be told), a command-connection future polled
//! on a caller's thread (redis-rs' reconnect writes its set-up where it is polled) blocks it for
//! the poll, and the library's own writes on a caller's thread pass `MSG_NOSIGNAL` (std's TCP
//! writes do; its Unix socket writes do not, hence these).
//! The write then fails with `EPIPE`, and the call with it.

use std::io;
use std::os::fd::AsRawFd;
use std::task::{Context, Poll};

thread_local! {
    /// SIGPIPE is blocked in this thread for good (a thread of the library's runtime).
    static BLOCKED_FOR_GOOD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn sigpipe_set() -> libc::sigset_t {
    // SAFETY: a signal set on the stack, initialised by sigemptyset before use.
    unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        set
    }
}

/// Blocks SIGPIPE in the calling thread: for the library runtime's threads, when they start.
pub(crate) fn block_in_this_thread() {
    let set = sigpipe_set();
    // SAFETY: a valid signal set; the old mask is not asked for.
    if unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) } == 0 {
        BLOCKED_FOR_GOOD.set(true);
    }
}

/// SIGPIPE blocked in this thread until the guard drops; one raised meanwhile is taken off the
/// pending set first, so that unblocking does not deliver it. Costs nothing on the runtime's
/// threads, three system calls elsewhere.
pub(crate) struct BlockedForNow {
    /// The mask to restore; None when SIGPIPE was blocked already.
    old: Option<libc::sigset_t>,
}

pub(crate) fn block_for_now() -> BlockedForNow {
    if BLOCKED_FOR_GOOD.get() {
        return BlockedForNow { old: None };
    }
    let set = sigpipe_set();
    // SAFETY: valid signal sets; `old` is written by pthread_sigmask before it is read.
    unsafe {
        let mut old = std::mem::zeroed::<libc::sigset_t>();
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) != 0
            || libc::sigismember(&old, libc::SIGPIPE) == 1
        {
            return BlockedForNow { old: None }; // the host blocks it itself: left as it is
        }
        BlockedForNow { old: Some(old) }
    }
}

impl Drop for BlockedForNow {
    fn drop(&mut self) {
        let Some(old) = self.old.take() else { return };
        let set = sigpipe_set();
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid signal sets and timeout; no signal information is asked for.
        unsafe {
            while libc::sigtimedwait(&set, std::ptr::null_mut(), &zero) == libc::SIGPIPE {}
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        }
    }
}

/// `send(2)` with `MSG_NOSIGNAL`: one write of at most `bytes.len()` bytes.
pub(crate) fn send(socket: &impl AsRawFd, bytes: &[u8]) -> io::Result<usize> {
    // SAFETY: reads at most `bytes.len()` bytes of a live slice; the descriptor is kept open
    // by `socket` for the call.
    let sent = unsafe {
        libc::send(
            socket.as_raw_fd(),
            bytes.as_ptr().cast(),
            bytes.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent as usize)
}

/// A std Unix socket written with [`send`] (`write_all` retries interrupted writes).
pub(crate) struct UnixWriter<'a>(pub(crate) &'a std::os::unix::net::UnixStream);

impl io::Write for UnixWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        send(self.0, bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `poll_write` of a tokio Unix socket, with [`send`].
pub(crate) fn poll_send_unix(
    stream: &tokio::net::UnixStream,
    cx: &mut Context<'_>,
    bytes: &[u8],
) -> Poll<io::Result<usize>> {
    loop {
        std::task::ready!(stream.poll_write_ready(cx))?;
        match stream.try_io(tokio::io::Interest::WRITABLE, || send(stream, bytes)) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            sent => return Poll::Ready(sent),
        }
    }
}

/// Writes all of `bytes` to a tokio Unix socket, with [`send`].
pub(crate) async fn send_all_unix(
    stream: &tokio::net::UnixStream,
    mut bytes: &[u8],
) -> io::Result<()> {
    while !bytes.is_empty() {
        match std::future::poll_fn(|cx| poll_send_unix(stream, cx, bytes)).await {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(sent) => bytes = &bytes[sent..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
