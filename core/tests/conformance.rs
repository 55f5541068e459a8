//! The shared conformance scenarios (`tests/conformance/scenarios.txt`), run against a real
//! redis-server through the Rust API. Every language runs the same file.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use redlock_core::{Client, Error, Hold, Lock, Owner};
use tokio::task::JoinHandle;

const SCENARIOS: &str = include_str!("../../tests/conformance/scenarios.txt");

struct Step {
    line: usize,
    owner: String,
    verb: String,
    target: Option<String>,
    args: HashMap<String, String>,
    expect: Vec<String>,
}

struct Scenario {
    title: String,
    steps: Vec<Step>,
}

fn parse(text: &str) -> Vec<Scenario> {
    let mut scenarios: Vec<Scenario> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(title) = line.strip_prefix("scenario ") {
            scenarios.push(Scenario {
                title: title.to_owned(),
                steps: Vec::new(),
            });
            continue;
        }
        let (call, expect) = line.split_once("->").unwrap_or((line, ""));
        let mut words = call.split_whitespace();
        let owner = words.next().expect("owner").to_owned();
        let verb = words.next().expect("verb").to_owned();
        let mut target = None;
        let mut args = HashMap::new();
        for word in words {
            match word.split_once('=') {
                Some((k, v)) => {
                    args.insert(k.to_owned(), v.to_owned());
                }
                None => target = Some(word.to_owned()),
            }
        }
        let step = Step {
            line: n + 1,
            owner,
            verb,
            target,
            args,
            expect: expect.split_whitespace().map(str::to_owned).collect(),
        };
        scenarios
            .last_mut()
            .expect("a step before any scenario")
            .steps
            .push(step);
    }
    scenarios
}

/// The contract's name for a result: `ok` or an error kind in snake case.
fn verdict<T>(result: &Result<T, Error>) -> String {
    match result {
        Ok(_) => "ok".into(),
        Err(Error::Timeout) => "timeout".into(),
        Err(Error::NotHeld) => "not_held".into(),
        Err(Error::LockLost) => "lock_lost".into(),
        Err(Error::UpgradeNotAllowed) => "upgrade_not_allowed".into(),
        Err(other) => format!("unexpected error {other:?}"),
    }
}

struct Run {
    clients: [Client; 2],
    name: String,
    owners: HashMap<String, Owner>,
    fences: HashMap<String, u64>,
    background: HashMap<String, JoinHandle<Result<Hold, Error>>>,
}

impl Run {
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

    fn view(&self, client: usize, target: &str) -> Lock {
        let client = &self.clients[client];
        match target {
            "lock" => client.lock(&self.name).unwrap(),
            "read" => client.read_write_lock(&self.name).unwrap().read(),
            "write" => client.read_write_lock(&self.name).unwrap().write(),
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
            }
        }
        Ok(())
    }

    async fn step(&mut self, step: &Step) -> Result<(), String> {
        let expect = &step.expect;
        let arg_ms = |key: &str| -> Option<Duration> {
            match step.args.get(key).map(String::as_str) {
                None | Some("watchdog") => None,
                Some(ms) => Some(ms_arg(ms)),
            }
        };
        let check = |got: String| {
            if got == expect.join(" ") {
                Ok(())
            } else {
                Err(format!("expected {}, got {got}", expect.join(" ")))
            }
        };
        match step.verb.as_str() {
            "sleep" => {
                tokio::time::sleep(arg_ms("ms").unwrap()).await;
                Ok(())
            }
            "locked" => {
                let read = self.view(1, "read").is_locked().await;
                let write = self.view(1, "write").is_locked().await;
                check((read.unwrap() || write.unwrap()).to_string())
            }
            "force_unlock" => check(
                self.clients[1]
                    .force_unlock(&self.name)
                    .await
                    .unwrap()
                    .to_string(),
            ),
            verb => {
                let (client, owner) = self.owner(&step.owner);
                let lock = self.view(client, step.target.as_deref().expect("a target"));
                match verb {
                    "acquire" => {
                        let (wait, lease) = (arg_ms("wait"), arg_ms("lease"));
                        let result = lock.acquire(&owner, wait, lease).await;
                        self.check_acquired(result, expect)
                    }
                    "acquire&" => {
                        let (wait, lease) = (arg_ms("wait"), arg_ms("lease"));
                        let task =
                            tokio::spawn(async move { lock.acquire(&owner, wait, lease).await });
                        self.background.insert(step.owner.clone(), task);
                        Ok(())
                    }
                    "await" => {
                        let task = self.background.remove(&step.owner).expect("acquire& first");
                        let result = task.await.unwrap();
                        self.check_acquired(result, expect)
                    }
                    "release" => {
                        let result = lock.release(&owner).await;
                        match result {
                            Ok(left) if expect.len() > 1 => check(format!("ok remaining={left}")),
                            _ => check(verdict(&result)),
                        }
                    }
                    "extend" => check(verdict(
                        &lock.extend(&owner, arg_ms("lease").unwrap()).await,
                    )),
                    "held_by" => check(lock.is_held_by(&owner).await.unwrap().to_string()),
                    "hold_count" => check(lock.hold_count(&owner).await.unwrap().to_string()),
                    other => Err(format!("unknown verb {other}")),
                }
            }
        }
    }
}

fn ms_arg(ms: &str) -> Duration {
    Duration::from_millis(ms.parse().expect("milliseconds"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_conformance_scenario_reaches_its_verdicts() {
    let server = RedisServer::start();
    let scenarios = parse(SCENARIOS);
    assert!(scenarios.len() >= 10, "the scenario file was not read");
    let mut failures = Vec::new();
    for (n, scenario) in scenarios.iter().enumerate() {
        let mut run = Run {
            clients: [
                builder(&server)
                    .prefix("conformance")
                    .connect()
                    .await
                    .unwrap(),
                builder(&server)
                    .prefix("conformance")
                    .connect()
                    .await
                    .unwrap(),
            ],
            name: format!("conformance:{n}:{}", Owner::random().token()),
            owners: HashMap::new(),
            fences: HashMap::new(),
            background: HashMap::new(),
        };
        let mut outcome = Ok(());
        for step in &scenario.steps {
            if let Err(why) = run.step(step).await {
                outcome = Err(format!("line {}: {why}", step.line));
                break;
            }
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
