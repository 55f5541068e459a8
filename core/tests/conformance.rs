//! The shared conformance scenarios (`tests/conformance/scenarios.txt`), run against a real
//! redis-server through the Rust API. Every language runs the same file; the format is parsed by
//! `conformance_format` and described in `tests/conformance/README.md`.

mod common;
mod conformance_format;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use conformance_format::*;
use redlock_core::{AcquireOptions, Client, Error, Hold, Lock, LockInfo, Mode, Owner};
use tokio::task::JoinHandle;
use tokio::time::Instant;

const SCENARIOS: &str = include_str!("../../tests/conformance/scenarios.txt");
const SPEND_FENCES: &str = include_str!("../../tests/conformance/spend_fences.lua");

/// The contract's name for a result: `ok` or an error kind in snake case.
fn verdict<T>(result: &Result<T, Error>) -> String {
    match result {
        Ok(_) => "ok".into(),
        Err(Error::InvalidArgument(_)) => "invalid_argument".into(),
        Err(Error::Timeout) => "timeout".into(),
        Err(Error::NotHeld) => "not_held".into(),
        Err(Error::LockLost) => "lock_lost".into(),
        Err(Error::UpgradeNotAllowed) => "upgrade_not_allowed".into(),
        Err(Error::Closed) => "closed".into(),
        Err(Error::Redis(_)) => "redis".into(),
        Err(other) => format!("unexpected error {other:?}"),
    }
}

/// A value's text, or the error's verdict.
fn shown<T: ToString>(result: Result<T, Error>) -> String {
    match result {
        Ok(value) => value.to_string(),
        Err(e) => verdict(&Err::<(), _>(e)),
    }
}

/// The owner tokens named as the waiter by each contention alert a client received.
type Alerts = Arc<Mutex<Vec<String>>>;

async fn connect_client(server: &RedisServer, settings: &ClientSettings, alerts: Alerts) -> Client {
    let mut builder = builder(server)
        .prefix(settings.prefix.as_deref().unwrap_or("conformance"))
        .on_contention(move |alert| alerts.lock().unwrap().push(alert.owner_token.clone()));
    if let Some(lease) = settings.lease {
        builder = builder.lease(lease);
    }
    if settings.alerts_set() {
        builder = builder
            .contention_alert_attempts(settings.alert_attempts)
            .contention_alert_after(settings.alert_after);
    }
    builder.connect().await.unwrap()
}

struct Run<'s> {
    server: &'s RedisServer,
    /// The clients' key prefix.
    prefix: String,
    clients: [Client; 2],
    alerts: [Alerts; 2],
    name: String,
    owners: HashMap<String, Owner>,
    fences: HashMap<String, u64>,
    background: HashMap<String, JoinHandle<Result<Hold, Error>>>,
}

impl<'s> Run<'s> {
    async fn start(server: &'s RedisServer, n: usize, scenario: &Scenario) -> Run<'s> {
        let settings = ClientSettings::of(scenario);
        let alerts: [Alerts; 2] = Default::default();
        Run {
            server,
            prefix: settings
                .prefix
                .clone()
                .unwrap_or_else(|| "conformance".into()),
            clients: [
                connect_client(server, &settings, alerts[0].clone()).await,
                connect_client(server, &settings, alerts[1].clone()).await,
            ],
            alerts,
            name: format!("conformance:{n}:{}", Owner::random().token()),
            owners: HashMap::new(),
            fences: HashMap::new(),
            background: HashMap::new(),
        }
    }

    fn owner(&mut self, spec: &str) -> (usize, Owner) {
        let (letter, client) = match spec.split_once('@') {
            Some((letter, "2")) => (letter, 1),
            _ => (spec, 0),
        };
        let owner = self
            .owners
            .entry(letter.to_owned())
            .or_insert_with(Owner::random)
            .clone();
        (client, owner)
    }

    /// TARGET's view on a client; a closed client refuses it (`Closed`).
    fn view(&self, client: usize, target: Option<&str>) -> Result<Lock, Error> {
        let client = &self.clients[client];
        match target.expect("a target") {
            "lock" => client.lock(&self.name),
            "read" => Ok(client.read_write_lock(&self.name)?.read()),
            "write" => Ok(client.read_write_lock(&self.name)?.write()),
            other => panic!("unknown target {other}"),
        }
    }

    /// Checks `ok count=N fence=T fence>T` against an acquisition's result.
    fn check_acquired(
        &mut self,
        result: Result<Hold, Error>,
        expect: &[String],
    ) -> Result<(), String> {
        let got = verdict(&result);
        if got != expect[0] {
            return Err(format!("expected {}, got {got}", expect[0]));
        }
        let Ok(hold) = result else { return Ok(()) };
        for check in &expect[1..] {
            if let Some(n) = check.strip_prefix("count=") {
                if hold.hold_count().to_string() != n {
                    return Err(format!("hold count {}, expected {n}", hold.hold_count()));
                }
            } else if let Some(name) = check.strip_prefix("fence>") {
                let bound = self.fences[name];
                if hold.fencing_token() <= bound {
                    return Err(format!(
                        "fencing token {} not above {name}={bound}",
                        hold.fencing_token()
                    ));
                }
            } else if let Some(name) = check.strip_prefix("fence=") {
                let bound = *self
                    .fences
                    .entry(name.to_owned())
                    .or_insert(hold.fencing_token());
                if hold.fencing_token() != bound {
                    return Err(format!(
                        "fencing token {}, expected {name}={bound}",
                        hold.fencing_token()
                    ));
                }
            } else {
                return Err(format!("unknown check {check}"));
            }
        }
        Ok(())
    }

    /// Checks `ok [mode=M] [holders=N] [count=N] [label=T]`; `holder` is OWNER's token and the
    /// TARGET's mode when the step has an owner.
    fn check_inspect(
        info: Result<LockInfo, Error>,
        holder: Option<(&str, Mode)>,
        expect: &[String],
    ) -> Result<(), String> {
        let info = match info {
            Ok(info) if expect[0] == "ok" => info,
            other => {
                let got = verdict(&other);
                return (got == expect.join(" "))
                    .then_some(())
                    .ok_or(format!("expected {}, got {got}", expect.join(" ")));
            }
        };
        let hold = holder.and_then(|(token, mode)| {
            info.holders
                .iter()
                .find(|h| h.owner_token == token && h.mode == mode)
        });
        for check in &expect[1..] {
            let (key, want) = check.split_once('=').ok_or(format!("bad check {check}"))?;
            let got = match key {
                "mode" => match info.mode {
                    None => "none".to_owned(),
                    Some(Mode::Read) => "read".to_owned(),
                    Some(Mode::Write) => "write".to_owned(),
                },
                "holders" => info.holder_count.to_string(),
                "count" | "label" if holder.is_none() => {
                    return Err(format!("{check} needs an owner and a target"));
                }
                "count" => hold.map_or(0, |h| h.hold_count).to_string(),
                "label" => match hold {
                    Some(h) => h.metadata.thread.clone(),
                    None => return Err(format!("expected {check}, got no such hold")),
                },
                other => return Err(format!("unknown inspect check {other}")),
            };
            if got != want {
                return Err(format!("expected {check}, got {key}={got} in {info:?}"));
            }
        }
        Ok(())
    }

    /// Waits for OWNER's client to have received the expected number of alerts naming OWNER.
    async fn check_alerts(
        &self,
        client: usize,
        token: &str,
        expect: &[String],
    ) -> Result<(), String> {
        let want = AlertCount::parse(expect)?;
        let count = || {
            let alerts = self.alerts[client].lock().unwrap();
            alerts.iter().filter(|t| *t == token).count()
        };
        let deadline = Instant::now() + ALERT_WAIT;
        while count() < want.n && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if !want.at_least {
            tokio::time::sleep(ALERT_SETTLE).await;
        }
        let got = count();
        if want.matches(got) {
            Ok(())
        } else {
            Err(format!("expected {} alerts, got {got}", expect[0]))
        }
    }

    async fn step(&mut self, step: &Step) -> Result<(), String> {
        let expect = &step.expect;
        let check = |got: String| {
            if got == expect.join(" ") {
                Ok(())
            } else {
                Err(format!("expected {}, got {got}", expect.join(" ")))
            }
        };
        // Durations this language can express; a negative one only where invalid is expected.
        let mut durations = HashMap::new();
        for key in ["wait", "lease", "ms"] {
            match ms_arg(step, key) {
                Ok(d) => {
                    durations.insert(key, d);
                }
                Err(why) if expect.join(" ") == "invalid_argument" => {
                    println!("     n/a  line {}: {why}", step.line);
                    return Ok(());
                }
                Err(why) => return Err(why),
            }
        }
        let arg_ms = |key: &str| durations[key];
        match (step.owner.as_str(), step.verb.as_str()) {
            ("-", "clients") => return Err("clients must be a scenario's first step".into()),
            ("-", "close") => {
                self.clients[0].close();
                return Ok(());
            }
            ("-", "sleep") => {
                tokio::time::sleep(arg_ms("ms").unwrap()).await;
                return Ok(());
            }
            ("-", "locked") => {
                let read = self.view(1, Some("read")).unwrap().is_locked().await;
                let write = self.view(1, Some("write")).unwrap().is_locked().await;
                return check((read.unwrap() || write.unwrap()).to_string());
            }
            ("-", "spend_fences") => {
                let args = ["EVAL", SPEND_FENCES, "0", &self.prefix];
                // A RESP integer: how many counters were set.
                let set = self.server.command(&args);
                return check(if set.starts_with(":0") || !set.starts_with(':') {
                    format!("no fencing counter was set: {}", set.trim())
                } else {
                    "ok".into()
                });
            }
            ("-", "force_unlock") => {
                return check(shown(self.clients[1].force_unlock(&self.name).await));
            }
            ("-", "inspect") => {
                let info = self.clients[1].inspect(&self.name).await;
                return Self::check_inspect(info, None, expect);
            }
            _ => {}
        }
        let (client, owner) = self.owner(&step.owner);
        match step.verb.as_str() {
            "alerts" => return self.check_alerts(client, owner.token(), expect).await,
            "await" => {
                let task = self.background.remove(&step.owner).expect("acquire& first");
                let result = task.await.unwrap();
                return self.check_acquired(result, expect);
            }
            "cancel" => {
                // Aborting the task drops the acquire's future: Rust's way to cancel.
                let task = self.background.remove(&step.owner).expect("acquire& first");
                task.abort();
                return check(match task.await {
                    Err(e) if e.is_cancelled() => "ok".into(),
                    Err(e) => format!("the background acquire panicked: {e}"),
                    Ok(result) => format!("an acquire that had ended: {}", verdict(&result)),
                });
            }
            _ => {}
        }
        let lock = match self.view(client, step.target.as_deref()) {
            Ok(lock) => lock,
            Err(e) => return check(verdict(&Err::<(), _>(e))),
        };
        let options = AcquireOptions {
            wait: arg_ms("wait"),
            lease: arg_ms("lease"),
            label: step.args.get("label").cloned(),
        };
        match step.verb.as_str() {
            "acquire" => {
                let result = lock.acquire_with(&owner, options).await;
                self.check_acquired(result, expect)
            }
            "acquire&" => {
                let task = tokio::spawn(async move { lock.acquire_with(&owner, options).await });
                self.background.insert(step.owner.clone(), task);
                Ok(())
            }
            "release" => {
                let result = lock.release(&owner).await;
                match result {
                    Ok(left) if expect.len() > 1 => check(format!("ok remaining={left}")),
                    _ => check(verdict(&result)),
                }
            }
            "extend" => check(verdict(
                &lock
                    .extend(&owner, arg_ms("lease").expect("lease=MS"))
                    .await,
            )),
            "held_by" => check(shown(lock.is_held_by(&owner).await)),
            "hold_count" => check(shown(lock.hold_count(&owner).await)),
            "inspect" => {
                let info = lock.inspect().await;
                Self::check_inspect(info, Some((owner.token(), lock.mode())), expect)
            }
            other => Err(format!("unknown verb {other}")),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_conformance_scenario_reaches_its_verdicts() {
    let server = RedisServer::start();
    let scenarios = parse(SCENARIOS);
    assert!(scenarios.len() >= 10, "the scenario file was not read");
    let mut failures = Vec::new();
    for (n, scenario) in scenarios.iter().enumerate() {
        let mut run = Run::start(&server, n, scenario).await;
        let mut outcome = Ok(());
        // The `clients` directive was applied when the clients were made.
        let skip = usize::from(scenario.steps.first().is_some_and(|s| s.verb == "clients"));
        for step in &scenario.steps[skip..] {
            if let Err(why) = run.step(step).await {
                outcome = Err(format!("line {}: {why}", step.line));
                break;
            }
        }
        for client in &run.clients {
            client.close(); // also ends background acquires still waiting
        }
        match outcome {
            Ok(()) => println!("ok   {}", scenario.title),
            Err(why) => {
                println!("FAIL {}: {why}", scenario.title);
                failures.push(format!("{}: {why}", scenario.title));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "scenarios failed:\n{}",
        failures.join("\n")
    );
}
