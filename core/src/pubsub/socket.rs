//! The pub/sub connection's socket as a blocking waiter watches it (see `blocking::watch`).
//!
//! Over plain TCP or a Unix socket the connection runs on a socket of our own, whose descriptor
//! a waiter may `poll()` and peek at (`MSG_PEEK`: nothing is taken out; the connection task
//! reads every byte as before). A grant it finds there is handed out at once, and the task's
//! own reading of it later is dropped (see `Signal::grant`). TLS connections are not watched.
//!
//! Guarantees: the descriptor a waiter peeks at is the live socket's: it is read under the
//! channels' lock, and the socket is unregistered under that lock before it closes; a grant is
//! handed out once, whichever reads it first.

use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::{Shared, dispatch};

/// What a blocking waiter needs to watch the connection's socket.
pub(super) struct SocketWatch {
    /// The socket's descriptor while connected over TCP or a Unix socket; -1 otherwise. Set
    /// and cleared under the channels' lock.
    fd: AtomicI32,
    /// Messages handed out by the connection task so far.
    pub(super) dispatched: AtomicU64,
    /// Whether a waiter watches the socket: one at most, so a message wakes at most one thread
    /// beside the runtime's.
    pub(super) taken: AtomicBool,
    /// When the bytes read last could have arrived at the earliest (see [`Self::arrived_after`]).
    reads: Mutex<Reads>,
}

/// The last time a read of the socket found nothing, and that time as it was before the last
/// read that found bytes: those bytes arrived after it.
#[derive(Default)]
struct Reads {
    idle_at: Option<Instant>,
    last_bytes_after: Option<Instant>,
}

impl Default for SocketWatch {
    fn default() -> Self {
        SocketWatch {
            fd: AtomicI32::new(-1),
            dispatched: AtomicU64::new(0),
            taken: AtomicBool::new(false),
            reads: Mutex::default(),
        }
    }
}

/// The right to watch a client's pub/sub socket, held by one blocking waiter at a time.
pub(crate) struct WatchedSocket {
    pub(super) shared: Arc<Shared>,
    /// `:CLIENT`: a lock's channel plus this is where grants to this client's waiters arrive.
    pub(super) grant_suffix: Arc<str>,
}

impl SocketWatch {
    /// The earliest the message being handed out could have arrived: after the last time the
    /// socket was found empty before the read that brought it (a runtime kept busy reads it
    /// late, and the grant in it may be older than it looks). Now when nothing is known (TLS
    /// is not watched).
    pub(super) fn arrived_after(&self) -> Instant {
        let last = self.reads.lock().unwrap().last_bytes_after;
        last.unwrap_or_else(Instant::now)
    }
}

impl WatchedSocket {
    /// The socket's descriptor now (it changes with a reconnect), if there is one to watch.
    pub(crate) fn fd(&self) -> Option<i32> {
        let fd = self.shared.socket.fd.load(Ordering::Acquire);
        (fd >= 0).then_some(fd)
    }

    /// Messages the connection task has handed out so far: a change means it read the socket.
    pub(crate) fn dispatched(&self) -> u64 {
        self.shared.socket.dispatched.load(Ordering::Acquire)
    }

    /// Hands out the grants waiting in the socket, unread yet, without reading them. Only whole
    /// messages from the start of the unread bytes count; anything else is left to the task.
    pub(crate) fn grant_early(&self) {
        // Under the channels' lock, which the task's hand-out takes too: a message still in
        // the socket now is handed out by the task only after this (and then dropped), and one
        // the task has read already is not seen here.
        let channels = self.shared.channels.lock().unwrap();
        let fd = self.shared.socket.fd.load(Ordering::Acquire);
        if fd < 0 {
            return;
        }
        let mut peeked = [0u8; 2048];
        // SAFETY: receives at most `peeked.len()` bytes into it, without taking them out of the
        // socket and without blocking; `fd` is open (it is cleared under this lock before it
        // closes).
        let got = unsafe {
            libc::recv(
                fd,
                peeked.as_mut_ptr().cast(),
                peeked.len(),
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        let Ok(got) = usize::try_from(got) else {
            return;
        };
        let mut unread = &peeked[..got];
        // Unread bytes came after the socket was last found empty, not "now": this thread may
        // start watching long after they arrived (another waiter's grant, its runtime blocked).
        let arrived = self.shared.socket.reads.lock().unwrap().idle_at;
        let arrived = arrived.unwrap_or_else(Instant::now);
        while let Ok(Some((frame, used))) = crate::direct::parse_reply(unread) {
            unread = &unread[used..];
            if let Some((channel, payload)) = message_of(&frame) {
                dispatch(
                    &channels,
                    &self.grant_suffix,
                    channel,
                    payload,
                    true,
                    arrived,
                );
            }
        }
    }
}

impl Drop for WatchedSocket {
    fn drop(&mut self) {
        self.shared.socket.taken.store(false, Ordering::Release);
    }
}

/// The channel and payload of a pub/sub message frame.
fn message_of(frame: &redis::Value) -> Option<(&str, &[u8])> {
    let redis::Value::Array(parts) = frame else {
        return None;
    };
    match parts.as_slice() {
        [
            redis::Value::BulkString(kind),
            redis::Value::BulkString(channel),
            redis::Value::BulkString(payload),
        ] if kind == b"message" => Some((std::str::from_utf8(channel).ok()?, payload)),
        _ => None,
    }
}

/// Opens the pub/sub connection: over a socket of our own, watchable, when the address is plain
/// TCP or a Unix socket; over redis-rs' TLS otherwise.
pub(super) async fn connect(
    redis: &redis::Client,
    shared: &Arc<Shared>,
) -> redis::RedisResult<redis::aio::PubSub> {
    let info = redis.get_connection_info();
    let settings = info.redis_settings();
    match info.addr() {
        redis::ConnectionAddr::Tcp(host, port) => {
            let stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
            stream.set_nodelay(true)?;
            let stream = Watched::new(stream, shared);
            Ok(redis::aio::PubSub::new(settings, stream).await?)
        }
        #[cfg(unix)]
        redis::ConnectionAddr::Unix(path) => {
            let stream = Watched::new(tokio::net::UnixStream::connect(path).await?, shared);
            Ok(redis::aio::PubSub::new(settings, stream).await?)
        }
        _ => redis.get_async_pubsub().await,
    }
}

/// A socket whose descriptor waiters may watch from when it is made until it is dropped.
struct Watched<S: AsRawFd> {
    stream: S,
    shared: Arc<Shared>,
}

impl<S: AsRawFd> Watched<S> {
    fn new(stream: S, shared: &Arc<Shared>) -> Self {
        let _channels = shared.channels.lock().unwrap();
        shared
            .socket
            .fd
            .store(stream.as_raw_fd(), Ordering::Release);
        Watched {
            stream,
            shared: shared.clone(),
        }
    }
}

impl<S: AsRawFd> Drop for Watched<S> {
    fn drop(&mut self) {
        // Before the socket closes (its fields drop after this), and only if a newer
        // connection has not taken its place.
        let _channels = self.shared.channels.lock().unwrap();
        let fd = self.stream.as_raw_fd();
        let _ =
            (self.shared.socket.fd).compare_exchange(fd, -1, Ordering::AcqRel, Ordering::Acquire);
    }
}

impl<S: AsRawFd + AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let filled = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        let got_bytes = matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > filled;
        if polled.is_pending() || got_bytes {
            let mut reads = self.shared.socket.reads.lock().unwrap();
            if got_bytes {
                reads.last_bytes_after = reads.idle_at;
            } else {
                reads.idle_at = Some(Instant::now());
            }
        }
        polled
    }
}

/// How a watched socket is written: a Unix socket never raises SIGPIPE (see `nosigpipe`; a
/// TCP socket's writes pass `MSG_NOSIGNAL` already).
trait PollSend: AsyncWrite + Unpin {
    fn poll_send(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(self).poll_write(cx, buf)
    }
}

impl PollSend for tokio::net::TcpStream {}

#[cfg(unix)]
impl PollSend for tokio::net::UnixStream {
    fn poll_send(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        crate::nosigpipe::poll_send_unix(self, cx, buf)
    }
}

impl<S: AsRawFd + PollSend> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.stream.poll_send(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
impl WatchedSocket {
    /// A watch of `fd` outside any client; [`Self::hand_out`] plays the connection task.
    pub(crate) fn of(fd: i32) -> Self {
        Self::over(&Arc::new(Shared::default()), fd)
    }

    pub(crate) fn hand_out(&self) {
        self.shared.socket.dispatched.fetch_add(1, Ordering::AcqRel);
    }

    /// A watch of `fd` with the channels of `shared`.
    pub(super) fn over(shared: &Arc<Shared>, fd: i32) -> Self {
        shared.socket.fd.store(fd, Ordering::Release);
        WatchedSocket {
            shared: shared.clone(),
            grant_suffix: ":test".into(),
        }
    }
}
