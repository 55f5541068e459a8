//! The library's log lines handed to a host that does not use `tracing` (every language
//! binding): Python's `logging`, Java's `System.Logger`, Go's `slog`, a C callback.
//!
//! Guarantees:
//! - Once [`forward_logs`] is given a sink, every event of this process at `level` or more
//!   severe reaches it as one [`LogRecord`], its fields written after the message
//!   (`message key=value ...`), in the order they were logged, on one line: control characters
//!   are escaped (`\n`), so a lock name holding a newline forges no line of its own. Replacing or removing the sink
//!   (or changing the level) takes effect for the next event.
//! - The sink runs on a thread of its own (`redlock-logs`), never on the thread that logged:
//!   those include the runtime's workers and the watchdog, which a slow sink (a host's logging
//!   that takes a lock, Python's GIL) must not hold up. At most [`QUEUED`] lines wait for it;
//!   past that they are dropped, and a warn line says how many.
//! - It installs a process-wide `tracing` subscriber, once: if the process already has one (a
//!   Rust host that set up its own), nothing is installed and [`forward_logs`] fails with
//!   [`Error::InvalidArgument`]; that host's subscriber gets the lines instead.
//! - Fork-safe: a child gets a queue and a thread of its own, never waits for a lock a parent's
//!   thread held. The sink must not log through `tracing` itself.

use std::fmt::{self, Write};
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, OnceLock};

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

pub use tracing::Level;

use crate::blocking::PerProcess;
use crate::{Error, Result};

/// One log line of the library.
#[derive(Debug, Clone, Copy)]
pub struct LogRecord<'a> {
    pub level: Level,
    /// Where it comes from: a module path such as `redlock_core::watchdog::lost`.
    pub target: &'a str,
    /// The message, then its fields as `key=value`; no control characters (they are escaped).
    pub message: &'a str,
}

/// Where the log lines go.
pub type LogSink = Arc<dyn Fn(&LogRecord<'_>) + Send + Sync>;

/// 0: nothing forwarded; else 1 (error) to 5 (trace), the least severe level forwarded.
static LEVEL: AtomicU8 = AtomicU8::new(0);
/// The sink, read without a lock by the sink's thread (see the guarantees); a box swapped out
/// is freed by a later change once no reader may hold it (`READERS`).
static SINK: std::sync::atomic::AtomicPtr<LogSink> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
/// Serializes `forward_logs`; holds the sinks swapped out while a reader may still use them.
static CHANGING: OnceLock<PerProcess<Vec<usize>>> = OnceLock::new();
/// Threads inside `hand_over` (between reading SINK and done with the sink).
static READERS: AtomicUsize = AtomicUsize::new(0);

/// Whether our subscriber is the process' global one.
static INSTALLED: OnceLock<bool> = OnceLock::new();
/// Lines waiting for the sink's thread, at most.
pub const QUEUED: usize = 1024;
/// The way to this process' sink thread (started with the first line).
static QUEUE: OnceLock<PerProcess<SyncSender<Owned>>> = OnceLock::new();
/// Lines dropped because the queue was full, not yet reported.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// A line on its way to the sink.
struct Owned {
    level: Level,
    target: &'static str,
    message: String,
}

/// Sends the log lines at `level` or more severe to `sink`; `None` for either stops them.
pub fn forward_logs(level: Option<Level>, sink: Option<LogSink>) -> Result<()> {
    let installed =
        *INSTALLED.get_or_init(|| tracing::subscriber::set_global_default(Forwarder).is_ok());
    if !installed {
        return Err(Error::invalid(
            "this process already has a tracing subscriber: the library's log lines go to it",
        ));
    }
    let (level, sink) = match (level, sink) {
        (Some(level), Some(sink)) => (level_number(level), Some(sink)),
        _ => (0, None),
    };
    // One change at a time (a per-process lock: a child never waits for a parent's thread).
    let changing = CHANGING.get_or_init(|| PerProcess::new(Vec::new()));
    let mut retired = changing.slot().lock().unwrap_or_else(|e| e.into_inner());
    let retired = retired.get_or_insert_with(Vec::new);
    let fresh = sink.map_or(std::ptr::null_mut(), |sink| Box::into_raw(Box::new(sink)));
    let old = SINK.swap(fresh, Ordering::SeqCst);
    if !old.is_null() {
        retired.push(old as usize);
    }
    // Freed once no thread is inside `hand_over` (one that enters later reads `fresh`); else
    // kept for the next change.
    if READERS.load(Ordering::SeqCst) == 0 {
        for old in retired.drain(..) {
            // SAFETY: from Box::into_raw above, swapped out of SINK, no reader holds it.
            drop(unsafe { Box::from_raw(old as *mut LogSink) });
        }
    }
    LEVEL.store(level, Ordering::Release);
    tracing::callsite::rebuild_interest_cache();
    Ok(())
}

/// A level as the bindings pass it across their boundary: 0 none, 1 error, 2 warn, 3 info,
/// 4 debug, 5 trace; anything else is an [`Error::InvalidArgument`].
pub fn level_from_number(number: i64) -> Result<Option<Level>> {
    Ok(Some(match number {
        0 => return Ok(None),
        1 => Level::ERROR,
        2 => Level::WARN,
        3 => Level::INFO,
        4 => Level::DEBUG,
        5 => Level::TRACE,
        other => {
            return Err(Error::invalid(format!(
                "log level {other} is not 0 (none) to 5 (trace)"
            )));
        }
    }))
}

/// `level` as the bindings pass it (see [`level_from_number`]).
pub fn level_number(level: Level) -> u8 {
    match level {
        Level::ERROR => 1,
        Level::WARN => 2,
        Level::INFO => 3,
        Level::DEBUG => 4,
        Level::TRACE => 5,
    }
}

fn wanted(level: &Level) -> bool {
    level_number(*level) <= LEVEL.load(Ordering::Acquire)
}

struct Forwarder;

impl Subscriber for Forwarder {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        // Asked again whenever the level changes (see `forward_logs`).
        Interest::sometimes()
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(match LEVEL.load(Ordering::Acquire) {
            0 => LevelFilter::OFF,
            1 => LevelFilter::ERROR,
            2 => LevelFilter::WARN,
            3 => LevelFilter::INFO,
            4 => LevelFilter::DEBUG,
            _ => LevelFilter::TRACE,
        })
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.is_event() && wanted(metadata.level())
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let metadata = event.metadata();
        if !wanted(metadata.level()) {
            return;
        }
        let mut line = Line::default();
        event.record(&mut line);
        let mut message = line.message;
        message.push_str(&line.fields);
        queue(Owned {
            level: *metadata.level(),
            target: metadata.target(),
            message,
        });
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

#[derive(Default)]
struct Line {
    message: String,
    fields: String,
}

// Written with control characters escaped: a field may hold a lock name or an error's text,
// any of which may hold a newline, which must not start a forged line in the host's log.
impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            let _ = write!(Escaping(&mut self.message), "{value}");
        } else {
            let _ = write!(Escaping(&mut self.fields), " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(Escaping(&mut self.message), "{value:?}");
        } else {
            let _ = write!(Escaping(&mut self.fields), " {}={value:?}", field.name());
        }
    }
}

/// Control characters, and the Unicode line and paragraph separators some log viewers break at.
fn breaks_lines(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')
}

/// Appends to a line with control characters and line separators escaped (a newline as `\n`).
struct Escaping<'a>(&'a mut String);

impl fmt::Write for Escaping<'_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        for c in text.chars() {
            if breaks_lines(c) {
                self.0.extend(c.escape_default());
            } else {
                self.0.push(c);
            }
        }
        Ok(())
    }
}

/// A lock name or owner token as a log line shows it: any text is a valid name, but a name must
/// neither start a forged line nor forge a field (`lock=a holder=b`) in a host's log. As logfmt
/// does: as is when that is unambiguous (`lock=orders:42`), else in double quotes, with `"` and
/// `\` escaped by a backslash and line breaks and control characters as Rust escapes them
/// (`lock="a holder=b"`; a newline as `\n`).
pub(crate) struct OneLine<'a>(pub(crate) &'a str);

impl OneLine<'_> {
    fn needs_quotes(&self) -> bool {
        self.0.is_empty()
            || self
                .0
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '=' | '"' | '\\'))
    }
}

impl fmt::Display for OneLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.needs_quotes() {
            return f.write_str(self.0);
        }
        f.write_char('"')?;
        for c in self.0.chars() {
            match c {
                '"' | '\\' => write!(f, "\\{c}")?,
                c if breaks_lines(c) => write!(f, "{}", c.escape_default())?,
                c => f.write_char(c)?,
            }
        }
        f.write_char('"')
    }
}

/// Ends this process' sink thread once it has handed over the line in hand (a new line would
/// start another): for a library about to be unloaded (JNI's `JNI_OnUnload`), whose threads must
/// not outlive it. Forwarding should be stopped first.
#[doc(hidden)]
pub fn end_delivery_thread() {
    if let Some(queue) = QUEUE.get() {
        let sender = queue
            .slot()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        drop(sender);
    }
}

/// Hands `line` to the sink's thread (started if this process has none), or counts it dropped.
fn queue(line: Owned) {
    let slot = QUEUE.get_or_init(PerProcess::empty).slot();
    let mut sender = slot.lock().unwrap_or_else(|e| e.into_inner());
    if sender.is_none() {
        let (tx, rx) = sync_channel(QUEUED);
        let started = std::thread::Builder::new()
            .name("redlock-logs".into())
            .spawn(move || deliver(rx));
        if started.is_err() {
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return;
        }
        *sender = Some(tx);
    }
    let sent = sender.as_ref().map(|tx| tx.try_send(line));
    if let Some(Err(TrySendError::Full(_) | TrySendError::Disconnected(_))) = sent {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

/// The sink's thread: hands each line to the sink of the moment, in order.
fn deliver(lines: Receiver<Owned>) {
    while let Ok(line) = lines.recv() {
        hand_over(&line.level, line.target, &line.message);
        let dropped = DROPPED.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            let message = format!(
                "{dropped} log lines of the library were dropped: the host's logging did not keep up"
            );
            hand_over(&Level::WARN, module_path!(), &message);
        }
    }
}

fn hand_over(level: &Level, target: &str, message: &str) {
    if !wanted(level) {
        return;
    }
    struct Reading;
    impl Drop for Reading {
        fn drop(&mut self) {
            READERS.fetch_sub(1, Ordering::SeqCst);
        }
    }
    READERS.fetch_add(1, Ordering::SeqCst);
    let _reading = Reading;
    // SAFETY: a box swapped out of SINK is freed only when READERS is 0 after the swap.
    let Some(sink) = (unsafe { SINK.load(Ordering::SeqCst).as_ref() }) else {
        return;
    };
    // A sink that panics loses its line, not the thread.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        sink(&LogRecord {
            level: *level,
            target,
            message,
        })
    }));
}

#[cfg(test)]
mod tests {
    use super::OneLine;

    /// What a host's own `tracing` subscriber prints for a name: as is when that is unambiguous,
    /// else quoted with control characters, quotes and backslashes escaped.
    #[test]
    fn a_name_shows_on_one_line_as_one_field() {
        let shown = |name: &str| OneLine(name).to_string();
        assert_eq!(shown("orders:42"), "orders:42");
        assert_eq!(shown("{x}:é"), "{x}:é");
        assert_eq!(
            shown("orders:42\nERROR forged\r\t\u{1b}[2K é {x}"),
            r#""orders:42\nERROR forged\r\t\u{1b}[2K é {x}""#
        );
        assert_eq!(shown("a holder=b"), r#""a holder=b""#);
        assert_eq!(shown("a=b"), r#""a=b""#);
        assert_eq!(shown(""), r#""""#);
        // A literal backslash-n is not a newline, and a quote does not end the value.
        assert_eq!(shown(r"x\ny"), r#""x\\ny""#);
        assert_eq!(shown("x\ny"), r#""x\ny""#);
        assert_eq!(shown(r#"a" owner="b"#), r#""a\" owner=\"b""#);
        assert_eq!(shown("a\u{2028}b"), r#""a\u{2028}b""#);
    }
}
