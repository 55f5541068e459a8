//! Client settings and the callbacks a client can call.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::inspect::HolderInfo;
use crate::lock::Mode;

/// Called when the watchdog (or a release) finds that a hold it kept alive is gone from Redis.
pub type LockLostCallback = Arc<dyn Fn(&LockLostEvent) + Send + Sync>;
/// Called once per waiting acquire that passes the contention threshold (seed 000's dead-lock alert).
pub type ContentionCallback = Arc<dyn Fn(&ContentionAlert) + Send + Sync>;

/// A hold that this client kept alive is gone (expired during an outage, or force-unlocked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockLostEvent {
    pub name: String,
    pub mode: Mode,
    pub owner_token: String,
}

/// A waiter has waited, or failed, longer than the client's contention threshold.
#[derive(Debug, Clone)]
pub struct ContentionAlert {
    pub name: String,
    pub mode: Mode,
    /// The waiting owner.
    pub owner_token: String,
    pub waited: Duration,
    pub failed_attempts: u64,
    /// The holders at the time of the alert, with how long each has held the lock.
    pub holders: Vec<HolderInfo>,
}

/// Everything a [`crate::Client`] is configured with. Build it with [`crate::ClientBuilder`].
#[derive(Clone)]
pub struct Config {
    pub(crate) url: String,
    pub(crate) prefix: String,
    pub(crate) lease: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) direct_connections: usize,
    pub(crate) watchdog: bool,
    pub(crate) recheck_interval: Duration,
    pub(crate) subscription_linger: Duration,
    pub(crate) ping_interval: Option<Duration>,
    pub(crate) contention_alert_after: Option<Duration>,
    pub(crate) contention_alert_attempts: Option<u64>,
    pub(crate) on_contention: Option<ContentionCallback>,
    pub(crate) on_lock_lost: Option<LockLostCallback>,
}

impl Config {
    pub(crate) fn new(url: String) -> Self {
        Config {
            url,
            prefix: "redlock".to_owned(),
            lease: Duration::from_secs(30),
            command_timeout: Duration::from_secs(3),
            connect_timeout: Duration::from_secs(5),
            direct_connections: crate::direct::DEFAULT_DIRECT_CONNECTIONS,
            watchdog: true,
            recheck_interval: Duration::from_millis(250),
            subscription_linger: Duration::from_secs(30),
            ping_interval: Some(Duration::from_secs(30)),
            contention_alert_after: Some(Duration::from_secs(30)),
            contention_alert_attempts: None,
            on_contention: None,
            on_lock_lost: None,
        }
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
    /// The default lease, also the watchdog's renewal lease.
    pub fn lease(&self) -> Duration {
        self.lease
    }
    /// The limit on every Redis call.
    pub fn command_timeout(&self) -> Duration {
        self.command_timeout
    }
    /// Whether holds taken without a lease are renewed until released.
    pub fn watchdog(&self) -> bool {
        self.watchdog
    }
    /// The longest a waiter sleeps between attempts when no notification arrives.
    pub fn recheck_interval(&self) -> Duration {
        self.recheck_interval
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("url", &redact(&self.url))
            .field("prefix", &self.prefix)
            .field("lease", &self.lease)
            .field("command_timeout", &self.command_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("direct_connections", &self.direct_connections)
            .field("watchdog", &self.watchdog)
            .field("recheck_interval", &self.recheck_interval)
            .field("ping_interval", &self.ping_interval)
            .field("contention_alert_after", &self.contention_alert_after)
            .field("contention_alert_attempts", &self.contention_alert_attempts)
            .finish_non_exhaustive()
    }
}

/// The URL without its password, for logs and errors: the one in the user info
/// (`redis://user:password@host`) and, as redis-rs reads a Unix socket URL's password from its
/// query (`unix:///path?pass=password`), every query value but the few that are no secret.
pub(crate) fn redact(url: &str) -> String {
    // A TCP URL's password may hold a raw `?` (its query holds only `protocol`, no `@`): the
    // query starts after the user info. A Unix URL has no user info, and its query's password
    // may hold an `@`.
    let unix = url
        .split("://")
        .next()
        .is_some_and(|scheme| scheme.ends_with("unix"));
    let query_from = if unix {
        0
    } else {
        url.rfind('@').map_or(0, |at| at + 1)
    };
    let (base, query) = match url[query_from..].find('?') {
        Some(i) => (&url[..query_from + i], Some(&url[query_from + i + 1..])),
        None => (url, None),
    };
    let mut redacted = match (base.find("://"), base.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &base[scheme_end + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &base[..scheme_end + 3], &base[at..])
        }
        _ => base.to_owned(),
    };
    if let Some(query) = query {
        let (query, fragment) = match query.split_once('#') {
            Some((query, fragment)) => (query, Some(fragment)),
            None => (query, None),
        };
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if !matches!(key, "db" | "protocol" | "user") => {
                    format!("{key}=***")
                }
                _ => pair.to_owned(),
            })
            .collect();
        redacted.push('?');
        redacted.push_str(&pairs.join("&"));
        if let Some(fragment) = fragment {
            // `insecure` is the only fragment redis-rs takes; any other is the rest of a
            // value that held a raw `#`.
            redacted.push('#');
            redacted.push_str(if fragment == "insecure" {
                fragment
            } else {
                "***"
            });
        }
    }
    redacted
}

#[cfg(test)]
mod tests {
    #[test]
    fn redact_hides_passwords() {
        assert_eq!(
            super::redact("redis://u:secret@h:1/0"),
            "redis://u:***@h:1/0"
        );
        assert_eq!(super::redact("redis://:secret@h"), "redis://:***@h");
        assert_eq!(super::redact("redis://h:1"), "redis://h:1");
        assert_eq!(
            super::redact("unix:///r.sock?db=2&user=u&pass=se@cr?et"),
            "unix:///r.sock?db=2&user=u&pass=***"
        );
        assert_eq!(
            super::redact("redis+unix:///r.sock?p%61ss=secret"),
            "redis+unix:///r.sock?p%61ss=***"
        );
        assert_eq!(
            super::redact("rediss://u:secret@h:1/?protocol=resp3#insecure"),
            "rediss://u:***@h:1/?protocol=resp3#insecure"
        );
        // A raw `?` in a user-info password, a raw `#` in a query's.
        assert_eq!(
            super::redact("redis://u:pa?ss@h:1/?protocol=resp3"),
            "redis://u:***@h:1/?protocol=resp3"
        );
        assert_eq!(super::redact("redis://:pa?ss@h"), "redis://:***@h");
        assert_eq!(
            super::redact("unix:///r.sock?pass=pw#secret"),
            "unix:///r.sock?pass=***#***"
        );
    }
}
