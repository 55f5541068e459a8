//! The wake-ups of calls that an asyncio loop polls on its own thread (see `polled`).
//!
//! [`LoopWakeups`]: one per event loop, whatever the number of its calls. A socket pair whose
//! read end the loop watches (`loop.add_reader`), and the ids of the calls woken since the
//! loop last looked. Waking a call takes no GIL and no thread of ours: the runtime worker that
//! sees the reply (or the timer, or the notification) queues the call's id and, when the queue
//! was empty, writes one byte; the loop's own thread wakes, drains the bytes, then takes the
//! ids (in that order, so an id queued meanwhile comes with a byte of its own).
//!
//! [`CallWaker`]: one call's `Waker`. It queues the call on its loop's wake-ups (if any) and
//! also rings a condition variable, for loops that cannot watch a descriptor (they wait in an
//! executor thread instead). Once the call ended, it wakes nothing.
//!
//! Why one descriptor per loop, not per call: a process often runs under a limit of 1 024
//! descriptors, and an async server may have thousands of tasks waiting for locks.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Wake;
use std::time::Duration;

use super::error::NativeError;

pub(crate) struct LoopWakeups {
    read: UnixStream,
    write: UnixStream,
    /// Calls woken since the loop last took them, in order.
    woken: Mutex<Vec<u64>>,
}

impl LoopWakeups {
    pub(crate) fn new() -> Result<Self, NativeError> {
        let (read, write) = UnixStream::pair()
            .and_then(|(read, write)| {
                // Neither end may ever block: a byte into a full buffer is not needed (the read
                // end is readable already), and a drain stops when nothing is left.
                read.set_nonblocking(true)?;
                write.set_nonblocking(true)?;
                Ok((read, write))
            })
            .map_err(|e| {
                NativeError::internal(format!("cannot make an event loop's wake-up socket: {e}"))
            })?;
        Ok(LoopWakeups {
            read,
            write,
            woken: Mutex::default(),
        })
    }

    /// The descriptor the loop watches: readable while woken calls wait to be taken.
    pub(crate) fn fd(&self) -> i32 {
        self.read.as_raw_fd()
    }

    /// Queues `call` as woken (a call woken twice before the loop looks is queued twice; the
    /// loop takes that as one wake-up).
    fn wake(&self, call: u64) {
        let mut woken = self.woken();
        let first = woken.is_empty();
        woken.push(call);
        drop(woken);
        if first {
            let _ = (&self.write).write(&[1]);
        }
    }

    /// Takes up to `out.len()` woken calls into `out` (after draining the descriptor); returns
    /// how many. The loop asks again while it gets a full `out`.
    pub(crate) fn take(&self, out: &mut [u64]) -> usize {
        self.drain();
        let mut woken = self.woken();
        let n = woken.len().min(out.len());
        out[..n].copy_from_slice(&woken[..n]);
        woken.drain(..n);
        n
    }

    fn drain(&self) {
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

    fn woken(&self) -> MutexGuard<'_, Vec<u64>> {
        self.woken.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One call's `Waker` (see the module docs).
pub(crate) struct CallWaker {
    call: u64,
    wakeups: Option<Arc<LoopWakeups>>,
    /// Set by a wake-up, cleared before each poll: for [`CallWaker::sleep`].
    rung: Mutex<bool>,
    bell: Condvar,
    ended: AtomicBool,
}

impl CallWaker {
    pub(crate) fn new(call: u64, wakeups: Option<Arc<LoopWakeups>>) -> Self {
        CallWaker {
            call,
            wakeups,
            rung: Mutex::new(false),
            bell: Condvar::new(),
            ended: AtomicBool::new(false),
        }
    }

    /// Forgets the wake-ups so far (before a poll, so one arriving during it is kept).
    pub(crate) fn clear(&self) {
        *self.rung() = false;
    }

    /// Blocks up to `timeout` for a wake-up since the last poll; true when there was one.
    pub(crate) fn sleep(&self, timeout: Duration) -> bool {
        let rung = self.rung();
        let (rung, _) = self
            .bell
            .wait_timeout_while(rung, timeout, |rung| !*rung)
            .unwrap_or_else(|e| e.into_inner());
        *rung
    }

    /// The call ended: later wake-ups are dropped, and a sleeper returns now.
    pub(crate) fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
        *self.rung() = true;
        self.bell.notify_all();
    }

    fn rung(&self) -> MutexGuard<'_, bool> {
        self.rung.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Wake for CallWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.ended.load(Ordering::SeqCst) {
            return;
        }
        *self.rung() = true;
        self.bell.notify_all();
        if let Some(wakeups) = &self.wakeups {
            wakeups.wake(self.call);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    /// How many wake-up bytes are unread (taking them).
    fn unread(wakeups: &LoopWakeups) -> usize {
        let mut bytes = [0_u8; 64];
        match (&wakeups.read).read(&mut bytes) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => 0,
            Err(e) => panic!("{e}"),
        }
    }

    fn waker(call: u64, wakeups: &Arc<LoopWakeups>) -> (Arc<CallWaker>, Waker) {
        let state = Arc::new(CallWaker::new(call, Some(wakeups.clone())));
        (state.clone(), Waker::from(state))
    }

    #[test]
    fn woken_calls_are_taken_in_order_with_one_byte_per_batch() {
        let wakeups = Arc::new(LoopWakeups::new().unwrap());
        let (_, seven) = waker(7, &wakeups);
        let (_, nine) = waker(9, &wakeups);
        let mut out = [0_u64; 4];
        assert_eq!(wakeups.take(&mut out), 0);
        seven.wake_by_ref();
        nine.wake_by_ref();
        seven.wake_by_ref();
        assert_eq!(unread(&wakeups), 1);
        assert_eq!(wakeups.take(&mut out), 3);
        assert_eq!(out[..3], [7, 9, 7]);
        assert_eq!(wakeups.take(&mut out), 0);
        // Queued again after being taken, with a byte of its own.
        nine.wake_by_ref();
        assert_eq!(unread(&wakeups), 1);
        assert_eq!(wakeups.take(&mut out), 1);
        assert_eq!(out[0], 9);
    }

    #[test]
    fn more_woken_calls_than_one_take_holds_are_taken_by_the_next() {
        let wakeups = Arc::new(LoopWakeups::new().unwrap());
        let wakers: Vec<_> = (1..=5).map(|call| waker(call, &wakeups).1).collect();
        wakers.iter().for_each(Waker::wake_by_ref);
        let mut out = [0_u64; 2];
        assert_eq!(wakeups.take(&mut out), 2);
        assert_eq!(wakeups.take(&mut out), 2);
        assert_eq!(wakeups.take(&mut out), 1);
        assert_eq!(out[0], 5);
        assert_eq!(wakeups.take(&mut out), 0);
    }

    #[test]
    fn an_ended_call_wakes_nothing_and_its_sleeper_returns() {
        let wakeups = Arc::new(LoopWakeups::new().unwrap());
        let (state, waker) = waker(3, &wakeups);
        assert!(!state.sleep(Duration::ZERO));
        waker.wake_by_ref();
        assert!(state.sleep(Duration::ZERO));
        state.clear();
        assert!(!state.sleep(Duration::from_millis(10)));
        let mut out = [0_u64; 4];
        assert_eq!(wakeups.take(&mut out), 1);
        let sleeper = {
            let state = state.clone();
            std::thread::spawn(move || state.sleep(Duration::from_secs(10)))
        };
        std::thread::sleep(Duration::from_millis(50));
        state.end();
        assert!(sleeper.join().unwrap());
        waker.wake();
        assert_eq!(wakeups.take(&mut out), 0);
        assert_eq!(unread(&wakeups), 0);
    }

    #[test]
    fn a_call_without_a_loop_still_rings_its_sleeper() {
        let state = Arc::new(CallWaker::new(1, None));
        let waker = Waker::from(state.clone());
        let ringer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            waker.wake();
        });
        assert!(state.sleep(Duration::from_secs(10)));
        ringer.join().unwrap();
    }
}
