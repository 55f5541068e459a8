//! The scenario file's format (`tests/conformance/README.md`): parsing, the `clients` directive
//! and the expectation words shared by several verbs. Used by `tests/conformance.rs`.

use std::collections::HashMap;
use std::time::Duration;

pub struct Step {
    pub line: usize,
    pub owner: String,
    pub verb: String,
    pub target: Option<String>,
    pub args: HashMap<String, String>,
    pub expect: Vec<String>,
}

pub struct Scenario {
    pub title: String,
    pub steps: Vec<Step>,
}

pub fn parse(text: &str) -> Vec<Scenario> {
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

/// A duration argument as written: absent or `watchdog` is `None`; a negative number cannot be
/// a `Duration`, so it is reported as such (`Err`) for the caller to decide.
pub fn ms_arg(step: &Step, key: &str) -> Result<Option<Duration>, String> {
    match step.args.get(key).map(String::as_str) {
        None | Some("watchdog") => Ok(None),
        Some(ms) => match ms.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(Some(Duration::from_millis(n as u64))),
            Ok(_) => Err(format!(
                "{key}={ms}: std::time::Duration cannot be negative"
            )),
            Err(_) => panic!("line {}: {key}={ms} is not milliseconds", step.line),
        },
    }
}

/// The settings of a scenario's `- clients ...` directive (its first step), or the defaults.
#[derive(Default)]
pub struct ClientSettings {
    /// The clients' key prefix, when not `conformance`.
    pub prefix: Option<String>,
    pub lease: Option<Duration>,
    pub alert_attempts: Option<u64>,
    pub alert_after: Option<Duration>,
}

impl ClientSettings {
    pub fn of(scenario: &Scenario) -> ClientSettings {
        let mut settings = ClientSettings::default();
        let Some(first) = scenario.steps.first().filter(|s| s.verb == "clients") else {
            return settings;
        };
        for (key, value) in &first.args {
            let ms = || Duration::from_millis(value.parse().expect("milliseconds"));
            match key.as_str() {
                "prefix" => settings.prefix = Some(value.clone()),
                "lease" => settings.lease = Some(ms()),
                "alert_after" => settings.alert_after = Some(ms()),
                "alert_attempts" => {
                    settings.alert_attempts = Some(value.parse().expect("a number"))
                }
                other => panic!("line {}: unknown client setting {other}", first.line),
            }
        }
        settings
    }

    /// Whether a contention-alert threshold was given (the one not given is then off).
    pub fn alerts_set(&self) -> bool {
        self.alert_attempts.is_some() || self.alert_after.is_some()
    }
}

/// An `alerts` expectation: `N` (exactly) or `>=N`.
pub struct AlertCount {
    pub at_least: bool,
    pub n: usize,
}

impl AlertCount {
    pub fn parse(expect: &[String]) -> Result<AlertCount, String> {
        let word = expect.first().ok_or("no expected alert count")?;
        let (at_least, n) = match word.strip_prefix(">=") {
            Some(n) => (true, n),
            None => (false, word.as_str()),
        };
        let n = n.parse().map_err(|_| format!("bad alert count {word}"))?;
        Ok(AlertCount { at_least, n })
    }

    pub fn matches(&self, got: usize) -> bool {
        if self.at_least {
            got >= self.n
        } else {
            got == self.n
        }
    }
}

/// How long `alerts` waits for the count to reach N, and how much longer for an exact count.
pub const ALERT_WAIT: Duration = Duration::from_secs(2);
pub const ALERT_SETTLE: Duration = Duration::from_millis(200);
