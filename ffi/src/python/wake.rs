//! The waker of a call that an asyncio loop polls on its own thread (see `polled`): a socket
//! pair whose read end the loop watches (`loop.add_reader`), and a condition variable for
//! loops that cannot watch a descriptor (they wait in an executor thread instead).
//!
//! Why a socket: waking the loop this way takes no GIL and no thread of ours. The runtime
//! worker that sees the reply (or the timer, or the notification) writes one byte, and the
//! loop's own thread wakes. Every wake-up writes a byte (skipping one when a byte is already
//! unread could lose the next wake-up to a drain racing it); the loop drains them all before
//! each poll, so a wake-up during the poll leaves one to be seen.
//!
//! Signals are reused ([`WakeSignal::take`], [`WakeSignal::give_back`]): making a socket pair
//! and closing it costs five system calls, ~20 µs on the bench machine, per call. A waker of an
//! ended call that is still registered somewhere may wake the next call that uses the signal;
//! that call then polls once for nothing, which is harmless.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex};
use std::task::Wake;
use std::time::Duration;

use super::error::NativeError;

pub(crate) struct WakeSignal {
    read: UnixStream,
    write: UnixStream,
    /// Set by a wake-up, cleared by a drain: for [`WakeSignal::sleep`].
    rung: Mutex<bool>,
    bell: Condvar,
}

/// Signals of ended calls, ready for the next ones.
static SPARE: Mutex<Vec<Arc<WakeSignal>>> = Mutex::new(Vec::new());

/// Spare signals kept at most (two descriptors each, held for good: a process often runs
/// under a limit of 1 024 descriptors). A loop making one call at a time needs one.
const MAX_SPARE: usize = 16;

impl WakeSignal {
    /// A spare signal, or a new one.
    pub(crate) fn take() -> Result<Arc<Self>, NativeError> {
        let spare = SPARE.lock().unwrap_or_else(|e| e.into_inner()).pop();
        spare.map_or_else(WakeSignal::new, Ok)
    }

    /// Keeps `signal` for a later call (drained), unless enough are kept already.
    pub(crate) fn give_back(signal: Arc<Self>) {
        signal.drain();
        let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() < MAX_SPARE {
            spare.push(signal);
        }
    }

    pub(crate) fn new() -> Result<Arc<Self>, NativeError> {
        let made = UnixStream::pair().and_then(|(read, write)| {
            // Neither end may ever block: a wake-up into a full buffer is not needed (the read
            // end is readable already), and a drain stops when nothing is left.
            read.set_nonblocking(true)?;
            write.set_nonblocking(true)?;
            Ok(WakeSignal {
                read,
                write,
                rung: Mutex::new(false),
                bell: Condvar::new(),
            })
        });
        made.map(Arc::new).map_err(|e| {
            // Most likely the process's descriptor limit: every running async call holds a
            // socket pair.
            NativeError::internal(format!(
                "cannot make the socket pair of an asyncio call's wake-ups: {e}"
            ))
        })
    }

    /// The descriptor to watch: readable while a wake-up is pending; valid while this lives.
    pub(crate) fn fd(&self) -> i32 {
        self.read.as_raw_fd()
    }

    /// Takes every pending wake-up (before a poll, so one arriving during it stays pending).
    pub(crate) fn drain(&self) {
        *self.rung() = false;
        let mut bytes = [0_u8; 64];
        loop {
            match (&self.read).read(&mut bytes) {
                // A read short of the buffer took all there was: one system call, as a rule.
                Ok(n) if n < bytes.len() => return,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // WouldBlock: drained. Nothing else can happen to a live socket pair.
                Err(_) => return,
            }
        }
    }

    /// Blocks up to `timeout` for a wake-up since the last drain; true when there was one.
    pub(crate) fn sleep(&self, timeout: Duration) -> bool {
        let rung = self.rung();
        let (rung, _) = self
            .bell
            .wait_timeout_while(rung, timeout, |rung| !*rung)
            .unwrap_or_else(|e| e.into_inner());
        *rung
    }

    fn rung(&self) -> std::sync::MutexGuard<'_, bool> {
        self.rung.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Wake for WakeSignal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        *self.rung() = true;
        self.bell.notify_all();
        let _ = (&self.write).write(&[1]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    /// How many wake-up bytes are unread (taking them, as a drain would).
    fn unread(signal: &WakeSignal) -> usize {
        let mut bytes = [0_u8; 64];
        match (&signal.read).read(&mut bytes) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => 0,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn every_wake_up_is_pending_until_drained() {
        let signal = WakeSignal::new().unwrap();
        let waker = Waker::from(signal.clone());
        assert!(!signal.sleep(Duration::ZERO));
        waker.wake_by_ref();
        waker.wake_by_ref();
        assert!(signal.sleep(Duration::ZERO));
        signal.drain();
        assert_eq!(unread(&signal), 0);
        assert!(!signal.sleep(Duration::from_millis(10)));
        // One wake-up after a drain is pending again, as a byte and for a sleeper.
        waker.wake_by_ref();
        assert!(signal.sleep(Duration::ZERO));
        assert_eq!(unread(&signal), 1);
        waker.wake_by_ref();
        waker.wake_by_ref();
        assert_eq!(unread(&signal), 2);
        // More than one read's worth is drained too.
        for _ in 0..200 {
            waker.wake_by_ref();
        }
        signal.drain();
        assert_eq!(unread(&signal), 0);
        waker.wake();
        assert_eq!(unread(&signal), 1);
    }

    #[test]
    fn a_signal_given_back_is_drained_and_reused() {
        let signal = WakeSignal::take().unwrap();
        Waker::from(signal.clone()).wake();
        let fd = signal.fd();
        WakeSignal::give_back(signal);
        // Other tests may take spares meanwhile: look for this one among a few.
        let taken: Vec<_> = (0..MAX_SPARE)
            .map(|_| WakeSignal::take().unwrap())
            .collect();
        let reused = taken.iter().find(|s| s.fd() == fd).expect("not reused");
        assert_eq!(unread(reused), 0);
        assert!(!reused.sleep(Duration::ZERO));
    }

    #[test]
    fn a_sleeper_is_woken_from_another_thread() {
        let signal = WakeSignal::new().unwrap();
        let waker = Waker::from(signal.clone());
        let ringer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            waker.wake();
        });
        assert!(signal.sleep(Duration::from_secs(10)));
        ringer.join().unwrap();
    }
}
