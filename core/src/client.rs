//! The client: one multiplexed command connection (auto-reconnecting), one pub/sub connection,
//! one watchdog task, and the per-process queues of waiters.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio_util::sync::CancellationToken;

use crate::background::CommandConnection;
use crate::callbacks::Callbacks;
use crate::config::{ContentionAlert, ContentionCallback, LockLostCallback, LockLostEvent, redact};
use crate::direct::{DirectConnections, HotConnection, HotConnections, MAX_DIRECT_CONNECTIONS};
use crate::error::{Error, Result};
use crate::inspect::LockInfo;
use crate::keys::{LockKeys, validate_prefix};
use crate::lock::scripts::LuaScript;
use crate::lock::{ClientTidyUps, LocalLock, Lock, Mode, ReadWriteLock};
use crate::pubsub::PubSubHub;
use crate::watchdog::{self, Watchdog};

pub use crate::config::Config;

/// Longest accepted lease: ten years, far below what Redis' millisecond clock can add.
pub const MAX_LEASE: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// A connection to one Redis server for taking locks. Cheap to clone; all clones share the
/// connections, the watchdog and the waiter queues. Its calls are made inside a tokio runtime
/// (or use [`crate::blocking::Client`]), but it is bound to none: it may outlive the runtime
/// it was made in and be used from any other. Its own work (the watchdog, tidy-ups) runs on
/// the library's runtime (two threads, started on first use), so a caller's runtime that ends
/// or is kept busy stops no renewal.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

pub(crate) struct ClientInner {
    pub(crate) config: Config,
    /// The multiplexed command connection; taken out once the client is closed and its
    /// tidy-ups are done (see `keepalive`), so that its socket closes with the client.
    connection: Mutex<Option<CommandConnection>>,
    /// What a new command connection is made of, when the manager's own reconnect was refused
    /// (redis-rs retries a failed reconnect only after an I/O error: see `after_error`).
    remake: (redis::Client, ConnectionManagerConfig),
    /// Blocking callers' own connections (see `direct`).
    pub(crate) direct: DirectConnections,
    /// Async acquire attempts' and releases' own connections (see `direct::hot`).
    pub(crate) hot: Arc<HotConnections>,
    pub(crate) pubsub: PubSubHub,
    pub(crate) watchdog: Watchdog,
    /// The user's callbacks, run in order off the caller's thread (see `callbacks`).
    pub(crate) callbacks: Arc<Callbacks>,
    locals: Mutex<HashMap<Arc<str>, Weak<LocalLock>>>,
    /// Tidy-ups under way for all names (see `keepalive`).
    pub(crate) tidy_ups: Arc<ClientTidyUps>,
    closed: AtomicBool,
    pub(crate) shutdown: CancellationToken,
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Builds a [`Client`]; every setting has a default.
#[derive(Clone)]
pub struct ClientBuilder {
    config: Config,
}

impl ClientBuilder {
    /// Prefix of every key and channel (default `redlock`): 1..=128 bytes, without `{` or `}`,
    /// not ending in `:fence` (prefix `P`'s fencing counters are `P:fence:{S}`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.config.prefix = prefix.into();
        self
    }
    /// Default lease, also the watchdog's renewal lease (default 30 s; renewed every lease/3).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config.lease = lease;
        self
    }
    /// Limit on each Redis call (default 3 s). A Redis that does not answer is a `Connection` error.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.config.command_timeout = timeout;
        self
    }
    /// Limit on establishing a connection (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }
    /// At most this many connections of the client's own for async acquire attempts and
    /// releases (default 4, at most 64), opened as calls need them; a call that finds none idle
    /// uses the multiplexed connection. 0: those calls share the multiplexed connection too
    /// (then the client keeps two connections, that one and the pub/sub one, plus blocking
    /// callers' own: see [`crate::blocking`]).
    pub fn direct_connections(mut self, max: usize) -> Self {
        self.config.direct_connections = max;
        self
    }
    /// Whether holds taken without a lease are renewed until released (default on). Off: such
    /// holds simply get the default lease.
    pub fn watchdog(mut self, on: bool) -> Self {
        self.config.watchdog = on;
        self
    }
    /// Longest sleep of a waiter between attempts when no notification arrives (default 250 ms,
    /// from 1 ms to ten years): what a lost pub/sub message can cost at most.
    pub fn recheck_interval(mut self, interval: Duration) -> Self {
        self.config.recheck_interval = interval;
        self
    }
    /// How long an unused subscription stays open for the next waiter (default 30 s).
    pub fn subscription_linger(mut self, linger: Duration) -> Self {
        self.config.subscription_linger = linger;
        self
    }
    /// How often the command connection is pinged (default 30 s; `None`: never), so that a
    /// server's idle `timeout` does not close it and one a restart closed is replaced before a
    /// call meets it (see `keepalive`).
    pub fn ping_interval(mut self, interval: Option<Duration>) -> Self {
        self.config.ping_interval = interval;
        self
    }
    /// Alert when one acquire has waited this long (default 30 s; `None` disables).
    pub fn contention_alert_after(mut self, wait: Option<Duration>) -> Self {
        self.config.contention_alert_after = wait;
        self
    }
    /// Alert when one acquire has failed this many attempts (default: no limit).
    pub fn contention_alert_attempts(mut self, attempts: Option<u64>) -> Self {
        self.config.contention_alert_attempts = attempts;
        self
    }
    /// Called with each contention alert; alerts are also logged. A client's callbacks run one at
    /// a time, in the order raised, on a thread of the library's blocking pool: a slow one
    /// delays that client's later callbacks, never a call, a renewal or another client.
    pub fn on_contention(
        mut self,
        callback: impl Fn(&ContentionAlert) + Send + Sync + 'static,
    ) -> Self {
        self.config.on_contention = Some(Arc::new(callback) as ContentionCallback);
        self
    }
    /// Called when a hold kept alive by the watchdog is found gone; run as `on_contention` says.
    pub fn on_lock_lost(
        mut self,
        callback: impl Fn(&LockLostEvent) + Send + Sync + 'static,
    ) -> Self {
        self.config.on_lock_lost = Some(Arc::new(callback) as LockLostCallback);
        self
    }

    /// The settings so far.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Validates the settings and connects. Must run inside a tokio runtime.
    pub async fn connect(self) -> Result<Client> {
        let config = self.config;
        validate_config(&config)?;
        let redis = redis::Client::open(config.url.as_str())
            .map_err(|e| Error::invalid(format!("bad Redis URL {}: {e}", redact(&config.url))))?;
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.connect_timeout))
            // Calls are bounded by `bounded` (which also covers waiting for a reconnect): a
            // second timer per call would only cost a wake-up of the timer driver.
            .set_response_timeout(None)
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        // Made on the process's runtime, where its connection's driver task outlives the
        // caller's runtime (see `background`).
        let made = crate::blocking::try_runtime()?
            .spawn(tokio::time::timeout(
                config.connect_timeout,
                ConnectionManager::new_with_config(redis.clone(), manager_config.clone()),
            ))
            .await
            .map_err(|e| {
                Error::Connection(format!("connecting to {}: {e}", redact(&config.url)))
            })?;
        let connection = made
            .map_err(|_| {
                Error::Connection(format!("connecting to {} timed out", redact(&config.url)))
            })?
            .map_err(|e| Error::Connection(format!("{}: {e}", redact(&config.url))))?;
        // Connected is not yet accepted: a server that wants a password none was given for
        // answers every command with NOAUTH. Found here, it is a connect error.
        let mut probe = connection.clone();
        let ping = redis::cmd("PING");
        match tokio::time::timeout(config.command_timeout, ping.query_async::<()>(&mut probe)).await
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let message = format!("{}: {e}", redact(&config.url));
                return Err(match Error::from(e) {
                    Error::Connection(_) => Error::Connection(message),
                    _ => Error::Redis(message),
                });
            }
            Err(_) => return Err(Error::no_answer(config.command_timeout)),
        }
        let shutdown = CancellationToken::new();
        let redis_for_remake = redis.clone();
        let inner = Arc::new(ClientInner {
            direct: DirectConnections::new(
                redis.clone(),
                config.command_timeout,
                config.connect_timeout,
            ),
            hot: HotConnections::new(
                redis.clone(),
                config.direct_connections,
                config.connect_timeout,
            ),
            pubsub: PubSubHub::new(
                redis,
                shutdown.clone(),
                (config.connect_timeout, config.command_timeout),
                config.subscription_linger,
            ),
            watchdog: Watchdog::default(),
            callbacks: Arc::default(),
            locals: Mutex::default(),
            tidy_ups: Arc::default(),
            closed: AtomicBool::new(false),
            shutdown,
            connection: Mutex::new(Some(CommandConnection(connection))),
            remake: (redis_for_remake, manager_config),
            config,
        });
        if inner.config.watchdog {
            let period = (inner.config.lease / 3).max(Duration::from_millis(10));
            crate::background::spawn(watchdog::run(Arc::downgrade(&inner), period));
        }
        crate::background::spawn(crate::keepalive::run(
            Arc::downgrade(&inner),
            inner.config.ping_interval,
        ));
        Ok(Client { inner })
    }
}

fn validate_config(config: &Config) -> Result<()> {
    validate_prefix(&config.prefix)?;
    let positive = [
        ("lease", config.lease),
        ("command timeout", config.command_timeout),
        ("connect timeout", config.connect_timeout),
        ("recheck interval", config.recheck_interval),
        (
            "ping interval",
            config.ping_interval.unwrap_or(Duration::MAX),
        ),
    ];
    for (what, value) in positive {
        if value.is_zero() {
            return Err(Error::invalid(format!("{what} must be greater than zero")));
        }
    }
    // Waiters are announced for four recheck intervals, in whole ms (announcement_ms): under
    // 1 ms that is 0, "not waiting", and no waiter would ever be announced.
    if config.recheck_interval < Duration::from_millis(1) {
        return Err(Error::invalid("recheck interval must be at least 1 ms"));
    }
    // A waiter's announcement is a TTL of four intervals in Redis, held to ten years as a lease.
    if config.recheck_interval > MAX_LEASE {
        return Err(Error::invalid("recheck interval is longer than ten years"));
    }
    if config.direct_connections > MAX_DIRECT_CONNECTIONS {
        return Err(Error::invalid(format!(
            "at most {MAX_DIRECT_CONNECTIONS} direct connections"
        )));
    }
    if config.lease > MAX_LEASE {
        return Err(Error::invalid("lease is longer than ten years"));
    }
    if config.lease < Duration::from_millis(30) && config.watchdog {
        return Err(Error::invalid(
            "a watchdog lease under 30 ms cannot be renewed reliably",
        ));
    }
    Ok(())
}

impl Client {
    /// Connects with default settings. URL forms: `redis://[user:password@]host[:port][/db]`,
    /// `rediss://…` for TLS, `unix:///path/redis.sock[?db=N&user=U&pass=P]` for a Unix socket;
    /// `?protocol=resp3` is accepted. Errors and logs show a URL with its password hidden.
    pub async fn connect(url: &str) -> Result<Client> {
        Client::builder(url).connect().await
    }

    /// A builder starting from the defaults.
    pub fn builder(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            config: Config::new(url.into()),
        }
    }

    /// The exclusive reentrant lock `name` (the same resource as the write view of
    /// `read_write_lock(name)`).
    pub fn lock(&self, name: &str) -> Result<Lock> {
        Ok(self.read_write_lock(name)?.write())
    }

    /// The read/write lock `name`.
    pub fn read_write_lock(&self, name: &str) -> Result<ReadWriteLock> {
        self.inner.ensure_open()?;
        let keys = Arc::new(LockKeys::new(&self.inner.config.prefix, name)?);
        let local = self.inner.local_lock(&keys.name);
        Ok(ReadWriteLock::new(self.inner.clone(), keys, local))
    }

    /// A snapshot of lock `name`.
    pub async fn inspect(&self, name: &str) -> Result<LockInfo> {
        self.lock(name)?.inspect().await
    }

    /// Clears lock `name` whoever holds it and wakes its waiters; true when it was held.
    pub async fn force_unlock(&self, name: &str) -> Result<bool> {
        self.lock(name)?.force_unlock().await
    }

    /// The settings this client runs with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Stops the watchdog and the waiters (they fail with `Closed`; one whose last attempt took
    /// the lock gives it back). Holds stay in Redis until
    /// their lease ends, as with Redisson's shutdown; release them first for a clean exit.
    /// Holds the watchdog kept count as lost from then on ([`Hold::is_lost`](crate::Hold::is_lost),
    /// [`Hold::lost`](crate::Hold::lost)): nothing renews them (the lock-lost callback is not
    /// called).
    /// Every later call fails with `Closed`. The connections close with it (the command
    /// connection once the tidy-ups under way are done with it), whatever handles of the
    /// client live on. Closing twice is harmless.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.shutdown.cancel();
        self.inner.watchdog.stop();
        self.inner.direct.clear();
        self.inner.hot.close();
    }

    /// Whether [`Client::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// Holds the watchdog is currently keeping alive.
    pub fn watched_holds(&self) -> usize {
        self.inner.watchdog.len()
    }

    /// Renewal script calls made by the watchdog so far (each renews up to 500 holds).
    pub fn watchdog_calls(&self) -> u64 {
        self.inner.watchdog.renew_calls()
    }

    /// Direct connections idle for hot calls now (see `direct::hot`); for tests.
    #[cfg(feature = "test-support")]
    #[doc(hidden)]
    pub fn hot_connections_idle(&self) -> usize {
        self.inner.hot.idle()
    }
}

impl ClientInner {
    pub(crate) fn ensure_open(&self) -> Result<()> {
        if self.closed.load(Ordering::SeqCst) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Runs `call`, an `EVALSHA` of `script`, under the command timeout (see
    /// `calls::eval_async`).
    pub(crate) async fn invoke<T: redis::FromRedisValue>(
        &self,
        script: &LuaScript,
        call: &redis::Cmd,
    ) -> Result<T> {
        let mut connection = self.command_connection()?;
        let eval = crate::lock::calls::eval_async(&mut connection, script, call, false);
        self.bounded(eval).await
    }

    /// Runs a ready-made `EVALSHA` of `script` under the command timeout (behind a `PING` with
    /// `ping_first`) the way `calls::eval_rerunnable` does: only for calls that may run twice.
    /// Without the second try, a server `timeout` shorter than the watchdog's period failed
    /// every renewal, on a connection idle since the last one, until the holds expired
    /// unreported.
    pub(crate) async fn eval_rerunnable<T: redis::FromRedisValue>(
        &self,
        script: &LuaScript,
        call: &redis::Cmd,
        ping_first: bool,
    ) -> Result<T> {
        let mut connection = self.command_connection()?;
        let eval = crate::lock::calls::eval_rerunnable(&mut connection, script, call, ping_first);
        self.bounded(eval).await
    }

    /// The command connection itself, with no timeout or closed check: for a call that keeps
    /// its own timeout, and for tidying up after close (`Closed` once it was closed itself).
    pub(crate) fn command_connection(&self) -> Result<CommandConnection> {
        self.connection.lock().unwrap().clone().ok_or(Error::Closed)
    }

    /// Closes the command connection (once the client is closed): in-flight calls keep theirs
    /// until they end, and the socket closes with the last of them.
    pub(crate) fn drop_command_connection(&self) {
        drop(self.connection.lock().unwrap().take());
    }

    /// A connection for a hot call (an acquire attempt, a release), with no timeout or closed
    /// check: a direct one if idle, else the command connection (see `direct::hot`).
    pub(crate) fn hot_connection(&self) -> Result<HotConnection> {
        self.hot.connection(|| self.command_connection())
    }

    /// `reply` of a call on the command connection, passed on. When it failed because the
    /// manager's reconnect was refused (a changed password, an ACL user turned off), the manager
    /// would keep that failure for every later call (redis-rs reconnects again only after an
    /// I/O error): a new (lazy) manager takes its place, so the client works again once the
    /// server takes its credentials again.
    pub(crate) fn noted<T>(&self, reply: redis::RedisResult<T>) -> redis::RedisResult<T> {
        if let Err(err) = &reply {
            self.after_error(err);
        }
        reply
    }

    fn after_error(&self, err: &redis::RedisError) {
        if err.is_io_error() || err.is_connection_dropped() {
            // The manager reconnects, and keeps that reconnect's error if Redis is still down.
            self.hot.suspect_shared();
        }
        // Refusals of the connection set-up (AUTH, or the SELECT of a URL's database number:
        // redis-rs reports that one as a plain ResponseError, known by its text).
        let refused_setup = err.kind() == redis::ErrorKind::AuthenticationFailed
            || err.to_string().contains("refused to switch database");
        if !refused_setup {
            return;
        }
        let mut connection = self.connection.lock().unwrap();
        if connection.is_some() {
            let (redis, config) = &self.remake;
            *connection = Some(CommandConnection(
                ConnectionManager::new_lazy_with_config(redis.clone(), config.clone())
                    .expect("a lazy connection manager"),
            ));
        }
    }

    /// Runs one Redis call under the command timeout, failing fast once closed.
    pub(crate) async fn bounded<T>(
        &self,
        call: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T> {
        self.ensure_open()?;
        match tokio::time::timeout(self.config.command_timeout, call).await {
            Ok(result) => self.noted(result).map_err(Error::from),
            Err(_) => Err(Error::no_answer(self.config.command_timeout)),
        }
    }

    /// The process-local state of a name, shared by all handles of this client.
    fn local_lock(&self, name: &Arc<str>) -> Arc<LocalLock> {
        let mut locals = self.locals.lock().unwrap();
        if let Some(local) = locals.get(name).and_then(Weak::upgrade) {
            return local;
        }
        // Forget names nobody holds a handle to any more, so the map does not grow forever.
        if locals.len() >= 1024 && locals.len().is_power_of_two() {
            locals.retain(|_, weak| weak.strong_count() > 0);
        }
        let local = Arc::new(LocalLock::new(self.tidy_ups.clone()));
        locals.insert(name.clone(), Arc::downgrade(&local));
        local
    }
}

impl Mode {
    pub(crate) fn as_arg(self) -> &'static str {
        match self {
            Mode::Read => "r",
            Mode::Write => "w",
        }
    }
}
