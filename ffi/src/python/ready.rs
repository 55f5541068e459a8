//! A one-shot readiness signal an asyncio event loop can watch (`loop.add_reader`): a socket
//! pair whose read end becomes readable when the outcome is ready.
//!
//! Why not a UniFFI async function: its result reaches Python through a blocking-pool thread
//! that takes the GIL to wake the loop (a runtime worker must never wait for the GIL), so every
//! call wakes two more threads than it needs to. Writing one byte takes no GIL and no thread:
//! the worker that finishes the call writes it, and the loop's own thread wakes.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use super::error::NativeError;

pub(crate) struct ReadySignal {
    read: UnixStream,
    write: UnixStream,
}

impl ReadySignal {
    pub(crate) fn new() -> Result<Arc<Self>, NativeError> {
        let made = UnixStream::pair().and_then(|(read, write)| {
            // Neither end may ever block: the loop only watches the read end, and a second
            // byte into a full buffer is not needed (the end is readable already).
            read.set_nonblocking(true)?;
            write.set_nonblocking(true)?;
            Ok(ReadySignal { read, write })
        });
        made.map(Arc::new)
            .map_err(|e| NativeError::internal(format!("cannot make a readiness signal: {e}")))
    }

    /// The descriptor to watch; valid while this signal lives.
    pub(crate) fn fd(&self) -> i32 {
        self.read.as_raw_fd()
    }

    /// Makes the read end readable (for good).
    pub(crate) fn set(&self) {
        let _ = (&self.write).write(&[1]);
    }
}
