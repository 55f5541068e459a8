//! Writes that never raise SIGPIPE.
//!
//! A write to a connection Redis closed (its idle `timeout`, a restart, a proxy, `CLIENT
//! KILL`) raises SIGPIPE in the writing thread unless the write says otherwise. Rust programs,
//! Python and the JVM ignore the signal; a C host keeps its default action, which ends the
//! process. The library never lets it be raised: its runtime's threads block it (redis-rs'
//! connections write with `writev`, which cannot be told), and the writes made on a caller's
//! thread pass `MSG_NOSIGNAL` (std's TCP writes do; its Unix socket writes do not, hence these).
//! The write then fails with `EPIPE`, and the call with it.

use std::io;
use std::os::fd::AsRawFd;
use std::task::{Context, Poll};

/// Blocks SIGPIPE in the calling thread: for the library runtime's threads, when they start.
pub(crate) fn block_in_this_thread() {
    // SAFETY: a signal set on the stack, initialised by sigemptyset before use.
    unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
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
