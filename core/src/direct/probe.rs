//! Whether an idle connection may be used: one non-blocking peek at its socket.

#[cfg(unix)]
use std::io;
#[cfg(unix)]
use std::os::fd::AsRawFd;

/// Whether the server has neither closed the socket nor sent anything unasked (a server that
/// restarted, or that closes clients idle past its `timeout`, closes them). The kernel is asked
/// itself: tokio's `try_read` answers "would block" without asking until its I/O driver has
/// seen the socket readable, which on a current-thread runtime happens only when the thread
/// parks; a blocking socket would wait.
#[cfg(unix)]
pub(super) fn is_alive(socket: &impl AsRawFd) -> bool {
    let mut probe = 0u8;
    loop {
        // SAFETY: a read of at most one byte into `probe`, owned here, from a descriptor that
        // `socket` keeps open for the whole call; MSG_PEEK leaves the byte in the socket.
        let read = unsafe {
            libc::recv(
                socket.as_raw_fd(),
                (&mut probe as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if read >= 0 {
            return false; // 0: closed; 1: something nobody asked for
        }
        match io::Error::last_os_error().kind() {
            io::ErrorKind::WouldBlock => return true,
            io::ErrorKind::Interrupted => continue,
            _ => return false,
        }
    }
}
