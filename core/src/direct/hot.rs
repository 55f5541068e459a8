//! The async hot calls (acquire attempts and releases) on sockets of their own.
//!
//! On the multiplexed connection a call hands its command to the connection's driver task and
//! gets the reply back from it: two task wake-ups on top of the socket I/O. From outside the
//! runtime's workers (`block_on`, the body of `#[tokio::main]`) each one crosses threads: a
//! `PING` took 46–50 µs there against 29–32 µs on a socket the caller reads itself, and 29
//! against 25 µs from a spawned task (this machine, 2 cores). A lock cycle is two round trips.
//!
//! Guarantees:
//! - Only ever faster, never a new way to fail: when no direct connection is idle, a call goes
//!   to the multiplexed connection (which pipelines many callers) while one more is opened in
//!   the background, up to the client's `direct_connections` (default
//!   [`DEFAULT_DIRECT_CONNECTIONS`]; 0 turns them off). Connecting never delays a call, and a failure to
//!   connect is never a call's error (the next try waits [`RECONNECT_AFTER`]).
//! - A connection is reused only in step: one whose call was dropped mid-way or failed on I/O
//!   is closed (a late reply must never be read as the next call's), and the idle ones with it
//!   (a broken connection usually means a restart: they are all dead). One the server closed
//!   while idle is found so before it is used, not by a failed call; the multiplexed connection
//!   the call then goes to is pinged first, since it has likely been closed too. So is it after
//!   any connect or call failed on I/O, until a `PING` there works: redis-rs keeps the error of
//!   a reconnect that failed while Redis was down for the next call, however long Redis has been
//!   back, and the first call after an outage must not fail with it.
//! - The caller keeps the command timeout and the cancellation handling as on the multiplexed
//!   connection: a call here is a future like any other.
//! - TLS addresses always use the multiplexed connection.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::resp::ReplyBuffer;
use super::wire::{Stream, Wire};
use crate::background::CommandConnection;

/// Direct connections per client by default, idle or in use: enough for the callers that gain
/// from them (beyond a few at once, pipelining on the multiplexed connection serves them as well).
pub(crate) const DEFAULT_DIRECT_CONNECTIONS: usize = 4;
/// The most a client may be configured with.
pub(crate) const MAX_DIRECT_CONNECTIONS: usize = 64;
/// How long after a failed connect the next one may be tried.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// A connection for one hot call: a direct one if idle, else the multiplexed one.
pub(crate) enum HotConnection {
    Direct(PooledWire),
    Shared(CommandConnection),
    /// The multiplexed one when a direct one was just found closed: a server that closes idle
    /// clients, or restarted, has likely closed it too, which its manager learns only from a
    /// failed call. A `PING` goes first (its failure makes the manager reconnect), so that the
    /// call itself, which must not be sent twice, does not fail on the dead connection.
    /// A `PING` that works there clears the pool's suspicion of it.
    Suspect(CommandConnection, Arc<HotConnections>),
}

/// The `PING` ahead of a call on a suspect connection. Its reply, or failure, is not the call's.
async fn probe(shared: &mut CommandConnection, pool: &HotConnections) {
    if shared.req_packed_command(&redis::cmd("PING")).await.is_ok() {
        pool.shared_suspect.store(false, Ordering::Release);
    }
}

impl ConnectionLike for HotConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            HotConnection::Direct(pooled) => pooled.wire().req_packed_command(cmd),
            HotConnection::Shared(shared) => shared.req_packed_command(cmd),
            HotConnection::Suspect(shared, pool) => Box::pin(async move {
                probe(shared, pool).await;
                shared.req_packed_command(cmd).await
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            HotConnection::Direct(pooled) => {
                pooled.wire().req_packed_commands(pipeline, offset, count)
            }
            HotConnection::Shared(shared) => shared.req_packed_commands(pipeline, offset, count),
            HotConnection::Suspect(shared, pool) => Box::pin(async move {
                probe(shared, pool).await;
                shared.req_packed_commands(pipeline, offset, count).await
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            HotConnection::Direct(pooled) => pooled.wire.as_ref().map_or(0, |w| w.db),
            HotConnection::Shared(shared) | HotConnection::Suspect(shared, _) => shared.get_db(),
        }
    }
}

/// One client's direct async connections.
pub(crate) struct HotConnections {
    redis: redis::Client,
    connect_timeout: Duration,
    max_live: usize,
    idle: Mutex<Vec<AsyncWire>>,
    /// Open or being opened.
    live: AtomicUsize,
    /// Bumped when a connection is found broken: connections of an older one are not reused.
    generation: AtomicU64,
    /// No connect before this (set after a failed one).
    next_connect: Mutex<Option<Instant>>,
    /// A TLS address, none wanted, or the client closed: no direct connections.
    off: AtomicBool,
    /// The multiplexed connection may be dead, or its manager may keep the error of a
    /// reconnect that failed while Redis was down (redis-rs hands that error to the next call
    /// without trying, however long Redis has been back): set when a connection or a connect
    /// failed, here or on the multiplexed connection; cleared by a `PING` that works there.
    /// While set, hot calls there go behind a `PING` (`Suspect`).
    shared_suspect: AtomicBool,
}

impl HotConnections {
    pub(crate) fn new(
        redis: redis::Client,
        max_live: usize,
        connect_timeout: Duration,
    ) -> Arc<Self> {
        let tls = !matches!(
            redis.get_connection_info().addr(),
            redis::ConnectionAddr::Tcp(..) | redis::ConnectionAddr::Unix(_)
        );
        Arc::new(HotConnections {
            redis,
            connect_timeout,
            max_live,
            idle: Mutex::default(),
            live: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            next_connect: Mutex::default(),
            off: AtomicBool::new(tls || max_live == 0),
            shared_suspect: AtomicBool::new(false),
        })
    }

    /// An idle direct connection, or the `shared` one (and one more direct connection on its
    /// way).
    pub(crate) fn connection<E>(
        self: &Arc<Self>,
        shared: impl FnOnce() -> Result<CommandConnection, E>,
    ) -> Result<HotConnection, E> {
        let idle = self.idle_of_this_runtime();
        match idle {
            Some(wire) if wire.is_alive() => Ok(HotConnection::Direct(PooledWire {
                generation: self.generation.load(Ordering::Acquire),
                wire: Some(wire),
                pool: self.clone(),
            })),
            None => {
                self.open_one_more();
                if self.shared_suspect.load(Ordering::Acquire) {
                    shared().map(|shared| HotConnection::Suspect(shared, self.clone()))
                } else {
                    shared().map(HotConnection::Shared)
                }
            }
            Some(_dead) => {
                self.broken();
                self.open_one_more();
                shared().map(|shared| HotConnection::Suspect(shared, self.clone()))
            }
        }
    }

    /// An idle connection of the caller's runtime. A socket is served by the reactor of the
    /// runtime it was opened in, and fails every call once that runtime has ended: a client
    /// used from several runtimes (one per worker thread, or a short-lived one) keeps sockets
    /// of each, and one of another runtime is closed only to make room, when the pool is full.
    fn idle_of_this_runtime(&self) -> Option<AsyncWire> {
        let here = current_runtime()?;
        let mut idle = self.idle.lock().unwrap();
        if let Some(at) = idle.iter().rposition(|wire| wire.runtime == here) {
            return Some(idle.swap_remove(at));
        }
        if !idle.is_empty() && self.live.load(Ordering::Acquire) >= self.max_live {
            drop(idle.remove(0));
            self.live.fetch_sub(1, Ordering::AcqRel);
        }
        None
    }

    /// A call on the multiplexed connection failed on I/O (see `shared_suspect`).
    pub(crate) fn suspect_shared(&self) {
        self.shared_suspect.store(true, Ordering::Release);
    }

    /// Closes the idle connections and opens no more (on close).
    pub(crate) fn close(&self) {
        self.off.store(true, Ordering::Release);
        self.drop_idle();
    }

    /// Idle connections now (for tests).
    #[cfg(feature = "test-support")]
    pub(crate) fn idle(&self) -> usize {
        self.idle.lock().unwrap().len()
    }

    fn open_one_more(self: &Arc<Self>) {
        if self.off.load(Ordering::Acquire) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        {
            let mut next = self.next_connect.lock().unwrap();
            if next.is_some_and(|at| Instant::now() < at) {
                return;
            }
            let reserved = self
                .live
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |live| {
                    (live < self.max_live).then_some(live + 1)
                });
            if reserved.is_err() {
                return;
            }
            // Taken by this open: others wait for its outcome rather than connect at once too.
            // (A timeout too long to count is cut to a century.)
            let century = Duration::from_secs(100 * 365 * 24 * 3600);
            *next = Some(Instant::now() + self.connect_timeout.min(century));
        }
        let pool = self.clone();
        runtime.spawn(async move {
            let generation = pool.generation.load(Ordering::Acquire);
            let (redis, timeout) = (pool.redis.clone(), pool.connect_timeout);
            let opened = tokio::task::spawn_blocking(move || {
                Wire::open(redis.get_connection_info(), timeout, timeout)
            })
            .await;
            let wire = match opened {
                Ok(Some(Ok(wire))) => AsyncWire::from_wire(wire).map_err(|e| e.to_string()),
                Ok(Some(Err(e))) => Err(e.to_string()),
                Ok(None) => Err("not a plain address".to_owned()),
                Err(e) => Err(e.to_string()),
            };
            match wire {
                Ok(wire) => {
                    // Idle before the next connect is allowed: a call in between would find
                    // neither and open one more (two for one sequential caller).
                    pool.give_back(wire, generation);
                    *pool.next_connect.lock().unwrap() = None;
                }
                Err(error) => {
                    tracing::debug!(%error, "no direct connection for hot calls, for now");
                    pool.suspect_shared();
                    *pool.next_connect.lock().unwrap() = Some(Instant::now() + RECONNECT_AFTER);
                    pool.live.fetch_sub(1, Ordering::AcqRel);
                }
            }
        });
    }

    /// Keeps `wire` for the next call, unless the pool moved on since `generation` or is off.
    fn give_back(&self, wire: AsyncWire, generation: u64) {
        let mut idle = self.idle.lock().unwrap();
        // Checked under the idle lock, which `drop_idle` also takes after moving on.
        let current = generation == self.generation.load(Ordering::Acquire);
        if current && !self.off.load(Ordering::Acquire) {
            idle.push(wire);
        } else {
            drop(idle);
            self.live.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// A connection was found broken: the idle ones go too.
    fn broken(&self) {
        self.suspect_shared();
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.live.fetch_sub(1, Ordering::AcqRel);
        self.drop_idle();
    }

    fn drop_idle(&self) {
        let dropped = std::mem::take(&mut *self.idle.lock().unwrap());
        self.live.fetch_sub(dropped.len(), Ordering::AcqRel);
    }
}

/// A direct connection out of the pool for one call; back in when dropped in step.
pub(crate) struct PooledWire {
    wire: Option<AsyncWire>,
    generation: u64,
    pool: Arc<HotConnections>,
}

impl PooledWire {
    fn wire(&mut self) -> &mut AsyncWire {
        self.wire
            .as_mut()
            .expect("a pooled wire is taken only on drop")
    }
}

impl Drop for PooledWire {
    fn drop(&mut self) {
        let Some(wire) = self.wire.take() else { return };
        if wire.in_step {
            self.pool.give_back(wire, self.generation);
        } else {
            self.pool.broken();
        }
    }
}

enum AsyncStream {
    Tcp(tokio::net::TcpStream),
    #[cfg(unix)]
    Unix(tokio::net::UnixStream),
}

/// A plain RESP2 connection read and written by the calling task.
pub(crate) struct AsyncWire {
    stream: AsyncStream,
    db: i64,
    out: Vec<u8>,
    replies: ReplyBuffer,
    /// No reply is outstanding and nothing unparsed is left: the next call's reply is its own.
    in_step: bool,
    /// The runtime whose reactor serves the socket.
    runtime: tokio::runtime::Id,
}

impl AsyncWire {
    /// Takes over a connected, authenticated blocking connection. Must run inside the runtime.
    fn from_wire(wire: Wire) -> io::Result<Self> {
        let (stream, db) = wire.into_socket();
        let stream = match stream {
            Stream::Tcp(tcp) => {
                tcp.set_nonblocking(true)?;
                AsyncStream::Tcp(tokio::net::TcpStream::from_std(tcp)?)
            }
            #[cfg(unix)]
            Stream::Unix(unix) => {
                unix.set_nonblocking(true)?;
                AsyncStream::Unix(tokio::net::UnixStream::from_std(unix)?)
            }
        };
        Ok(AsyncWire {
            stream,
            db,
            out: Vec::with_capacity(512),
            replies: ReplyBuffer::new(),
            in_step: true,
            runtime: current_runtime().expect("made inside the runtime"),
        })
    }

    /// Whether the server has neither closed the connection nor sent anything unasked (a
    /// server restarted or timing out idle clients closes it): one non-blocking peek.
    #[cfg(unix)]
    fn is_alive(&self) -> bool {
        match &self.stream {
            AsyncStream::Tcp(s) => super::probe::is_alive(s),
            AsyncStream::Unix(s) => super::probe::is_alive(s),
        }
    }

    /// As above, by a read that tokio answers from its readiness (which it learns only when
    /// its driver runs).
    #[cfg(not(unix))]
    fn is_alive(&self) -> bool {
        let mut probe = [0; 1];
        let AsyncStream::Tcp(s) = &self.stream;
        matches!(s.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// Writes `self.out` and reads `count` replies. Dropped mid-way, it leaves the wire out of
    /// step.
    async fn request(&mut self, count: usize) -> RedisResult<Vec<Value>> {
        self.in_step = false;
        match &mut self.stream {
            AsyncStream::Tcp(s) => s.write_all(&self.out).await?,
            #[cfg(unix)]
            AsyncStream::Unix(s) => crate::nosigpipe::send_all_unix(s, &self.out).await?,
        }
        // Polled outside the runtime that serves the socket: an abandoned call handed to the
        // library's runtime because its caller's runtime is ending (see `in_flight`), whose
        // reactor may be gone by now. Its reply is read from the descriptor itself.
        #[cfg(unix)]
        let mut foreign = current_runtime() != Some(self.runtime);
        let mut replies = Vec::with_capacity(count);
        while replies.len() < count {
            if let Some(reply) = self.replies.next_reply()? {
                replies.push(reply);
                continue;
            }
            let room = self.replies.room();
            #[cfg(unix)]
            if foreign {
                let read = read_off_runtime(&self.stream, room.len()).await?;
                room[..read.len()].copy_from_slice(&read);
                if read.is_empty() {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    )
                    .into());
                }
                self.replies.filled(read.len());
                continue;
            }
            let read = match &mut self.stream {
                AsyncStream::Tcp(s) => s.read(room).await,
                #[cfg(unix)]
                AsyncStream::Unix(s) => s.read(room).await,
            };
            let read = match read {
                Ok(read) => read,
                // Its runtime ended while the read waited there (now on another runtime: the
                // call was abandoned, see above): read on from the descriptor.
                #[cfg(unix)]
                Err(_) if current_runtime() != Some(self.runtime) => {
                    foreign = true;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            if read == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection",
                )
                .into());
            }
            self.replies.filled(read);
        }
        self.in_step = self.replies.is_empty();
        Ok(replies)
    }
}

/// The runtime this code runs in, if any.
fn current_runtime() -> Option<tokio::runtime::Id> {
    tokio::runtime::Handle::try_current().ok().map(|h| h.id())
}

/// Up to `max` bytes read from the socket's descriptor (a duplicate of it) on a blocking
/// thread, without its runtime's reactor: empty at the end of the stream.
#[cfg(unix)]
async fn read_off_runtime(stream: &AsyncStream, max: usize) -> io::Result<Vec<u8>> {
    use std::os::fd::{AsFd, AsRawFd};
    let fd = match stream {
        AsyncStream::Tcp(s) => s.as_fd().try_clone_to_owned()?,
        AsyncStream::Unix(s) => s.as_fd().try_clone_to_owned()?,
    };
    loop {
        // One bounded wait at a time: a dropped caller leaves no thread waiting for long.
        let fd = fd.try_clone()?;
        let got = tokio::task::spawn_blocking(move || -> io::Result<Option<Vec<u8>>> {
            let mut poll = libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let ready = unsafe { libc::poll(&mut poll, 1, 100) };
            if ready < 0 {
                return Err(io::Error::last_os_error());
            }
            if ready == 0 {
                return Ok(None);
            }
            let mut buf = vec![0u8; max];
            // SAFETY: reads at most `buf.len()` bytes into it, without blocking.
            let n = unsafe {
                libc::recv(
                    fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                return if e.kind() == io::ErrorKind::WouldBlock {
                    Ok(None)
                } else {
                    Err(e)
                };
            }
            buf.truncate(n as usize);
            Ok(Some(buf))
        })
        .await
        .map_err(io::Error::other)??;
        if let Some(read) = got {
            return Ok(read);
        }
    }
}

impl ConnectionLike for AsyncWire {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            self.out.clear();
            cmd.write_packed_command(&mut self.out);
            let mut replies = self.request(1).await?;
            Ok(replies.pop().unwrap_or(Value::Nil))
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            self.out = pipeline.get_packed_pipeline();
            let mut replies = self.request(offset + count).await?;
            Ok(replies.split_off(offset))
        })
    }

    fn get_db(&self) -> i64 {
        self.db
    }
}
