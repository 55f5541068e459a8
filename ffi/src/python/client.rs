//! `NativeClient`: one fork-safe [`blocking::Client`] per Python `Client`.

use std::sync::Arc;

use redlock_core::blocking;

use super::error::{NativeError, seconds};
use super::events::{EventListener, InPython};
use super::lock::NativeLock;
use super::on_runtime;
use super::records::LockInfoRecord;

/// Client settings; `None` keeps the core's default.
#[derive(Debug, Clone, Default, uniffi::Record)]
pub struct ClientOptions {
    pub prefix: Option<String>,
    /// Default lease and watchdog renewal lease, in seconds.
    pub lease: Option<f64>,
    pub command_timeout: Option<f64>,
    pub connect_timeout: Option<f64>,
    pub recheck_interval: Option<f64>,
    pub watchdog: Option<bool>,
    /// Alert after one acquire has waited this long (seconds); `None` keeps the default.
    pub contention_alert_after: Option<f64>,
    /// Turns the wait-time alert off (the attempts alert stays as configured).
    pub disable_contention_alert_after: bool,
    pub contention_alert_attempts: Option<u64>,
}

/// Which view of a name a [`NativeLock`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum LockMode {
    Read,
    Write,
}

/// A connection to one Redis server. Safe under `fork()`: a child reconnects on first use.
#[derive(uniffi::Object)]
pub struct NativeClient {
    inner: blocking::Client,
}

#[uniffi::export]
impl NativeClient {
    /// Connects (blocking, bounded by the connect timeout).
    #[uniffi::constructor]
    pub fn new(
        url: String,
        options: ClientOptions,
        listener: Option<Arc<dyn EventListener>>,
    ) -> Result<Arc<Self>, NativeError> {
        let builder = configure(redlock_core::Client::builder(url), options, listener)?;
        let inner = blocking::Client::from_builder(builder)?;
        Ok(Arc::new(NativeClient { inner }))
    }

    /// One view (read or write) of lock `name`; the exclusive lock is the write view.
    /// One view of lock `name`; `label`, if given, is stored with every hold taken through it
    /// (instead of the owner's thread or task name).
    pub fn lock(
        &self,
        name: String,
        mode: LockMode,
        label: Option<String>,
    ) -> Result<Arc<NativeLock>, NativeError> {
        if let Some(label) = &label {
            redlock_core::validate_label(label)?;
        }
        let (read, write) = self.inner.read_write_lock(&name)?.into_views();
        let view = match mode {
            LockMode::Read => read,
            LockMode::Write => write,
        };
        Ok(NativeLock::register(self.inner.clone(), view, label))
    }

    pub fn inspect(&self, name: String) -> Result<LockInfoRecord, NativeError> {
        Ok(self.inner.inspect(&name)?.into())
    }

    pub async fn inspect_async(&self, name: String) -> Result<LockInfoRecord, NativeError> {
        let client = self.inner.as_async()?;
        on_runtime(async move { Ok(client.inspect(&name).await?.into()) }).await
    }

    /// Clears `name` whoever holds it and wakes its waiters; true when it was held.
    pub fn force_unlock(&self, name: String) -> Result<bool, NativeError> {
        Ok(self.inner.force_unlock(&name)?)
    }

    pub async fn force_unlock_async(&self, name: String) -> Result<bool, NativeError> {
        let client = self.inner.as_async()?;
        on_runtime(async move { Ok(client.force_unlock(&name).await?) }).await
    }

    /// Stops the watchdog and ends waits with `Closed`; later calls fail with `Closed`.
    pub fn close(&self) {
        self.inner.close();
    }

    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}

fn configure(
    mut builder: redlock_core::ClientBuilder,
    options: ClientOptions,
    listener: Option<Arc<dyn EventListener>>,
) -> Result<redlock_core::ClientBuilder, NativeError> {
    if let Some(prefix) = options.prefix {
        builder = builder.prefix(prefix);
    }
    if let Some(lease) = options.lease {
        builder = builder.lease(seconds("lease", lease)?);
    }
    if let Some(timeout) = options.command_timeout {
        builder = builder.command_timeout(seconds("command_timeout", timeout)?);
    }
    if let Some(timeout) = options.connect_timeout {
        builder = builder.connect_timeout(seconds("connect_timeout", timeout)?);
    }
    if let Some(interval) = options.recheck_interval {
        builder = builder.recheck_interval(seconds("recheck_interval", interval)?);
    }
    if let Some(on) = options.watchdog {
        builder = builder.watchdog(on);
    }
    if options.disable_contention_alert_after {
        builder = builder.contention_alert_after(None);
    } else if let Some(after) = options.contention_alert_after {
        let after = seconds("contention_alert_after", after)?;
        builder = builder.contention_alert_after(Some(after));
    }
    if let Some(attempts) = options.contention_alert_attempts {
        builder = builder.contention_alert_attempts(Some(attempts));
    }
    if let Some(listener) = listener {
        let on_contention = listener.clone();
        builder = builder
            .on_contention(move |alert| {
                if let Some(_in_python) = InPython::enter() {
                    on_contention.on_contention(alert.into());
                }
            })
            .on_lock_lost(move |event| {
                if let Some(_in_python) = InPython::enter() {
                    listener.on_lock_lost(event.into());
                }
            });
    }
    Ok(builder)
}
