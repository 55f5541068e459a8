//! Blocking acquires that wait by watching their client's pub/sub socket themselves (Linux).
//!
//! Why: a grant reaches a waiter as a message on its client's pub/sub connection, which a
//! runtime thread reads and hands out. A caller parked until that thread wakes it returned 57 µs
//! (p50) after one that reads the message itself on a 2-core VM (docs/benchmarks-history.md). Here the
//! caller sleeps in `poll()` on the connection's socket and on its own eventfd. A message wakes
//! it together with the runtime thread, and it looks at the unread bytes without taking them
//! out: a grant there is handed out at once ([`WatchedSocket::grant_early`]). Anything else it
//! leaves to the runtime thread, yielding its CPU until that thread has handed it out.
//!
//! Guarantees:
//! - a way of waiting, nothing more: the call is the same future, polled on this thread inside
//!   the runtime's context, and every wake-up through its waker (a grant, a timer, a re-check,
//!   a cancellation, a local hand-over) ends a wait as before; a grant is handed out once,
//!   whichever thread reads it first;
//! - one caller per client watches the socket; the others wait for their waker alone, so a
//!   message wakes at most one thread beside the runtime's;
//! - after a socket wake-up the caller yields for at most [`YIELD_LIMIT`]. A socket that wakes
//!   it without the runtime handing anything out in that time (a runtime thread that does not get
//!   to run, a connection closing) is left unwatched for a pause, doubling up to [`MAX_PAUSE`];
//! - fork-safe: a child makes its own wake-up descriptor, never writing or draining its parent's.

use std::cell::RefCell;
use std::future::Future;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;

use crate::pubsub::WatchedSocket;

/// How long a caller woken by the socket yields for the runtime to hand the message out.
const YIELD_LIMIT: Duration = Duration::from_micros(200);
/// The first pause from watching a socket that woke the caller for nothing.
const FIRST_PAUSE: Duration = Duration::from_millis(1);
const MAX_PAUSE: Duration = Duration::from_millis(100);

/// Wakes one waiting thread: a flag, and an eventfd written only while the thread sleeps.
pub(super) struct Signal {
    woken: AtomicBool,
    sleeping: AtomicBool,
    event: OwnedFd,
    pid: u32,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.woken.swap(true, Ordering::SeqCst) {
            return;
        }
        // With `wait`'s store of `sleeping` and load of `woken`, both SeqCst: either it sees
        // `woken` or this sees `sleeping`.
        if self.sleeping.load(Ordering::SeqCst) {
            let one = 1u64;
            // SAFETY: writes the 8 bytes of a live u64 to an eventfd this signal owns.
            unsafe { libc::write(self.event.as_raw_fd(), (&raw const one).cast(), 8) };
        }
    }
}

thread_local! {
    static SIGNAL: RefCell<Option<Arc<Signal>>> = const { RefCell::new(None) };
}

/// This thread's signal (made once per thread and process), or `None` if no eventfd can be made.
pub(super) fn thread_signal() -> Option<Arc<Signal>> {
    let pid = crate::inspect::process_id();
    SIGNAL.with(|slot| {
        let mut slot = slot.borrow_mut();
        if let Some(signal) = slot.as_ref().filter(|s| s.pid == pid) {
            return Some(signal.clone());
        }
        // SAFETY: plain system call; a descriptor it returns is ours alone.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        let signal = Arc::new(Signal {
            woken: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
            // SAFETY: `fd` was just opened and is owned by nothing else.
            event: unsafe { OwnedFd::from_raw_fd(fd) },
            pid,
        });
        // A parent's signal copied by fork() is dropped here: closing our copy of its eventfd
        // leaves the parent's open.
        *slot = Some(signal.clone());
        Some(signal)
    })
}

/// Runs `future` to its end on this thread inside `runtime`, waiting as the module docs say
/// (watching `socket` when given one).
pub(super) fn run<F: Future>(
    runtime: &Runtime,
    signal: &Arc<Signal>,
    socket: Option<WatchedSocket>,
    future: F,
) -> F::Output {
    let _context = runtime.enter();
    let waker = Waker::from(signal.clone());
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    let mut watch = Watch::new(socket);
    loop {
        // Cleared before the poll: a wake-up during it must end the next wait at once.
        signal.woken.store(false, Ordering::SeqCst);
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        signal.wait(&mut watch);
    }
}

struct Watch {
    socket: Option<WatchedSocket>,
    pause: Duration,
    paused_until: Option<Instant>,
    /// Socket wake-ups that neither the waker nor a message handed out followed in time.
    for_nothing: u32,
}

impl Watch {
    fn new(socket: Option<WatchedSocket>) -> Self {
        Watch {
            socket,
            pause: FIRST_PAUSE,
            paused_until: None,
            for_nothing: 0,
        }
    }

    /// The descriptor to watch now, unless paused; and how long the pause still lasts.
    fn now(&mut self) -> (Option<i32>, Option<Duration>) {
        if let Some(until) = self.paused_until {
            match until.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => return (None, Some(left)),
                _ => self.paused_until = None,
            }
        }
        (self.socket.as_ref().and_then(WatchedSocket::fd), None)
    }

    fn handed_out(&mut self) {
        self.pause = FIRST_PAUSE;
    }

    fn woken_for_nothing(&mut self) {
        self.for_nothing += 1;
        self.paused_until = Some(Instant::now() + self.pause);
        self.pause = (self.pause * 2).min(MAX_PAUSE);
    }
}

impl Signal {
    /// Returns once woken through the waker (or, rarely, for nothing: the caller polls again).
    fn wait(&self, watch: &mut Watch) {
        while !self.woken.load(Ordering::SeqCst) {
            let (fd, pause) = watch.now();
            // Read before sleeping: a message handed out after the wake-up must count.
            let seen = watch.socket.as_ref().map_or(0, WatchedSocket::dispatched);
            let mut fds = [pollfd(self.event.as_raw_fd()), pollfd(fd.unwrap_or(-1))];
            let timeout = pause.map_or(-1, |p| p.as_millis().clamp(1, i32::MAX as u128) as i32);
            self.sleeping.store(true, Ordering::SeqCst);
            if self.woken.load(Ordering::SeqCst) {
                self.sleeping.store(false, Ordering::SeqCst);
                return;
            }
            // SAFETY: two initialised pollfd entries (an fd of -1 is ignored).
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout) };
            self.sleeping.store(false, Ordering::SeqCst);
            if ready <= 0 {
                continue; // a signal or the end of a pause
            }
            if fds[0].revents != 0 {
                self.drain();
                continue;
            }
            let Some(socket) = watch.socket.as_ref().filter(|_| fd.is_some()) else {
                continue;
            };
            if fds[1].revents & libc::POLLIN != 0 {
                // A grant to this waiter found in the socket wakes it through its own waker.
                socket.grant_early();
                if self.yield_for(socket, seen) {
                    watch.handed_out();
                    continue;
                }
            }
            if !self.woken.load(Ordering::SeqCst) {
                watch.woken_for_nothing();
            }
        }
    }

    /// Yields until woken or until the runtime hands out a message after `seen`, at most
    /// [`YIELD_LIMIT`]. Whether anything was handed out (or the waker came).
    fn yield_for(&self, socket: &WatchedSocket, seen: u64) -> bool {
        let start = Instant::now();
        loop {
            if self.woken.load(Ordering::SeqCst) || socket.dispatched() != seen {
                return true;
            }
            if start.elapsed() >= YIELD_LIMIT {
                return false;
            }
            std::thread::yield_now();
        }
    }

    fn drain(&self) {
        let mut count = 0u64;
        // SAFETY: reads at most 8 bytes into a live u64 from our non-blocking eventfd.
        unsafe { libc::read(self.event.as_raw_fd(), (&raw mut count).cast(), 8) };
    }
}

fn pollfd(fd: i32) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe() writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both were just opened and are owned by nothing else.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    /// A pipe with a byte in it: a socket that stays readable, as one whose data nobody reads.
    fn readable() -> (OwnedFd, OwnedFd) {
        let (read, write) = pipe();
        // SAFETY: writes one byte from a live buffer.
        assert_eq!(
            unsafe { libc::write(write.as_raw_fd(), b"x".as_ptr().cast(), 1) },
            1
        );
        (read, write)
    }

    fn fresh_signal() -> Arc<Signal> {
        let signal = thread_signal().expect("an eventfd");
        signal.woken.store(false, Ordering::SeqCst);
        signal
    }

    fn wake_after(signal: &Arc<Signal>, delay: Duration) -> thread::JoinHandle<()> {
        let waker = Waker::from(signal.clone());
        thread::spawn(move || {
            thread::sleep(delay);
            waker.wake();
        })
    }

    #[test]
    fn a_wake_up_from_another_thread_ends_a_wait_with_or_without_a_socket() {
        let (read, _write) = pipe();
        for socket in [None, Some(WatchedSocket::of(read.as_raw_fd()))] {
            let signal = fresh_signal();
            let waking = wake_after(&signal, Duration::from_millis(30));
            let mut watch = Watch::new(socket);
            signal.wait(&mut watch);
            assert!(signal.woken.load(Ordering::SeqCst));
            assert_eq!(watch.for_nothing, 0);
            waking.join().unwrap();
        }
    }

    #[test]
    fn a_socket_that_wakes_the_waiter_for_nothing_is_left_alone_for_longer_each_time() {
        let (read, _write) = readable();
        let signal = fresh_signal();
        let waking = wake_after(&signal, Duration::from_millis(300));
        let mut watch = Watch::new(Some(WatchedSocket::of(read.as_raw_fd())));
        signal.wait(&mut watch);
        waking.join().unwrap();
        // Pauses of 1, 2, 4 ... 64, then 100 ms: at most ten wake-ups fit in 300 ms (thousands,
        // were the readable socket polled again at once).
        assert!(
            (1..=10).contains(&watch.for_nothing),
            "{}",
            watch.for_nothing
        );
        assert!(
            watch.pause >= Duration::from_millis(64),
            "{:?}",
            watch.pause
        );
    }

    #[test]
    fn after_a_socket_wake_up_the_waiter_yields_until_a_message_is_handed_out_or_it_is_woken() {
        let (read, _write) = readable();
        let socket = WatchedSocket::of(read.as_raw_fd());
        let signal = fresh_signal();
        let seen = socket.dispatched();
        // Nothing happens: it gives up after the yield limit.
        let start = Instant::now();
        assert!(!signal.yield_for(&socket, seen));
        assert!(start.elapsed() >= YIELD_LIMIT);
        // A message handed out, or the waker: it stops at once.
        socket.hand_out();
        assert!(signal.yield_for(&socket, seen));
        Waker::from(signal.clone()).wake_by_ref();
        assert!(signal.yield_for(&socket, socket.dispatched()));
    }
}
