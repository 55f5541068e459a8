//! Where a client's own work runs: the watchdog, the keepalive, the command connection's first
//! driver, and the tidy-ups that cancelled or abandoned calls leave.
//!
//! Guarantee: none of it runs on a caller's runtime. A client outlives the runtime it was made
//! or used in (a `static` client made by the first `#[tokio::test]`, a request's runtime that
//! ends), and a caller's runtime may be busy in user code for longer than a lease: on either,
//! a watchdog would stop renewing without a word (and a second owner take the lock), and a
//! waiter's withdrawal would never be sent (and a release grant the lock to nobody for a
//! lease). All of it runs on the process's own runtime instead (the one the blocking API uses;
//! see `blocking::runtime`), started on first use.
//!
//! Not here: the hot calls (acquire attempts, releases), which stay on the caller's runtime,
//! on sockets of that runtime (see `direct::hot`), and the pub/sub connection, which runs on
//! the runtime of the first caller that waits so that a grant wakes its waiter without a thread
//! hop; it is started again should that runtime end (see `pubsub`). Neither is needed for
//! safety: a grant not heard is found by the waiter's re-check, or given back by its
//! withdrawal.

use std::future::Future;

/// Runs `task` on the process's own runtime. `None` only if that runtime cannot be started
/// (no thread can be made), which `Client::connect` reports; once a client exists, it runs.
pub(crate) fn spawn<F>(task: F) -> Option<tokio::task::JoinHandle<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match crate::blocking::try_runtime() {
        Ok(runtime) => Some(runtime.spawn(task)),
        Err(error) => {
            tracing::error!(%error, "a redlock background task could not start");
            None
        }
    }
}

/// The command connection (redis-rs' `ConnectionManager`), each of whose calls is polled in the
/// library runtime's context. The manager's reconnect, and the first use of a lazy one, spawn
/// the new connection's driver task with `tokio::spawn` on the runtime of the call that polls
/// it: a caller's runtime that ends or is kept busy would take the command connection (and so
/// the watchdog's renewals) with it.
#[derive(Clone)]
pub(crate) struct CommandConnection(pub(crate) redis::aio::ConnectionManager);

impl redis::aio::ConnectionLike for CommandConnection {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        Box::pin(OnLibraryRuntime(self.0.req_packed_command(cmd)))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        Box::pin(OnLibraryRuntime(
            self.0.req_packed_commands(pipeline, offset, count),
        ))
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}

/// Polls its future with the library's runtime entered: what it spawns runs there.
struct OnLibraryRuntime<F>(F);

impl<F: Future + Unpin> Future for OnLibraryRuntime<F> {
    type Output = F::Output;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let _library = crate::blocking::try_runtime().ok().map(|rt| rt.enter());
        // redis-rs' (re)connect writes its set-up with writev where it is polled, maybe on a
        // C host's thread (a blocking call): a closed connection must not raise SIGPIPE there.
        #[cfg(unix)]
        let _no_sigpipe = crate::nosigpipe::block_for_now();
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}
