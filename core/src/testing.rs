//! A throwaway `redis-server` for tests, demos and benchmarks (feature `test-support`).
//!
//! Each server listens on a free loopback port and on a Unix socket in the temporary directory
//! where it keeps its files, never persists, and is killed when dropped. Never a system service,
//! never a shared fixed port.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `redis-server` owned by the caller.
pub struct RedisServer {
    port: u16,
    password: Option<String>,
    dir: tempfile::TempDir,
    child: Option<Child>,
    started_once: bool,
    /// The TLS port, when started with [`RedisServer::start_tls`].
    tls_port: Option<u16>,
    /// More `redis-server` arguments ([`RedisServer::start_with_args`]).
    args: Vec<String>,
}

impl RedisServer {
    /// Starts a server on a free port. Panics with a clear message if `redis-server` is missing.
    pub fn start() -> RedisServer {
        Self::start_with_password(None)
    }

    /// Starts a server that requires `password` (for the default user).
    pub fn start_with_password(password: Option<&str>) -> RedisServer {
        Self::start_with(password, &[])
    }

    /// Starts a server with more `redis-server` arguments (e.g. `["--tcp-backlog", "2"]`).
    pub fn start_with_args(args: &[&str]) -> RedisServer {
        Self::start_with(None, args)
    }

    fn start_with(password: Option<&str>, args: &[&str]) -> RedisServer {
        let dir = tempfile::tempdir().expect("temp dir for redis-server");
        let mut server = RedisServer {
            port: free_port(),
            password: password.map(str::to_owned),
            dir,
            child: None,
            started_once: false,
            tls_port: None,
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
        };
        server.spawn();
        server
    }

    /// Starts a server that also listens with TLS, using a fresh self-signed certificate made
    /// with the `openssl` command. [`RedisServer::url`] is then a `rediss://` URL that skips
    /// certificate verification (`#insecure`); the plain port stays for [`RedisServer::command`].
    pub fn start_tls() -> RedisServer {
        let dir = tempfile::tempdir().expect("temp dir for redis-server");
        let made = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args([
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ])
            .arg("-keyout")
            .arg(dir.path().join("key.pem"))
            .arg("-out")
            .arg(dir.path().join("cert.pem"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("openssl (scripts/setup.sh installs it)");
        assert!(made.success(), "openssl could not make a certificate");
        let mut server = RedisServer {
            port: free_port(),
            password: None,
            dir,
            child: None,
            started_once: false,
            tls_port: Some(free_port()),
            args: Vec::new(),
        };
        server.spawn();
        server
    }

    /// `redis://127.0.0.1:PORT` (with the password when there is one), or the `rediss://` URL
    /// of a TLS server.
    pub fn url(&self) -> String {
        if let Some(tls) = self.tls_port {
            return format!("rediss://127.0.0.1:{tls}/#insecure");
        }
        match &self.password {
            Some(p) => format!("redis://:{p}@127.0.0.1:{}", self.port),
            None => format!("redis://127.0.0.1:{}", self.port),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The Unix socket the server also listens on (in its own directory, mode 700).
    pub fn unix_socket(&self) -> PathBuf {
        self.dir.path().join("redis.sock")
    }

    /// Kills the server (SIGKILL: like a crash; nothing is saved).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, empty.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Runs one command (plain RESP) and returns the raw reply text. Panics if the server is down.
    pub fn command(&self, args: &[&str]) -> String {
        self.try_command(args)
            .unwrap_or_else(|e| panic!("redis-server on port {} did not answer: {e}", self.port))
    }

    fn try_command(&self, args: &[&str]) -> std::io::Result<String> {
        command_on(self.port, self.password.as_deref(), args)
    }

    /// Adds an ACL user with `password` who may do everything (Redis 6+).
    pub fn add_user(&self, user: &str, password: &str) {
        let password = format!(">{password}");
        let args = ["ACL", "SETUSER", user, "on", &password, "~*", "&*", "+@all"];
        let reply = self.command(&args);
        assert!(reply.starts_with("+OK"), "{reply}");
    }

    /// Keeps the server busy for `duration` (a script that spins, sent from another thread), so
    /// every client's commands wait behind it as behind a slow command; returns once it has
    /// started (about 100 ms).
    /// Commands already sent are then read and run when it ends, whatever their senders did
    /// meanwhile (unlike `CLIENT PAUSE`, where a client that disconnects drops what it sent).
    pub fn stall(&self, duration: Duration) -> std::thread::JoinHandle<()> {
        const SPIN: &str = "local function us() local t = redis.call('TIME') \
            return t[1] * 1000000 + t[2] end \
            local stop = us() + tonumber(ARGV[1]) * 1000 while us() < stop do end return 1";
        let (port, password) = (self.port, self.password.clone());
        let millis = duration.as_millis().to_string();
        let stall = std::thread::spawn(move || {
            command_on(port, password.as_deref(), &["EVAL", SPIN, "0", &millis])
                .expect("the stalling script");
        });
        // Redis can be asked nothing while the script runs: give it a moment to start.
        std::thread::sleep(Duration::from_millis(100));
        stall
    }

    /// The number of keys in database 0.
    pub fn dbsize(&self) -> u64 {
        let reply = self.command(&["DBSIZE"]);
        reply
            .trim_start_matches(':')
            .trim()
            .parse()
            .unwrap_or(u64::MAX)
    }

    /// Starts redis-server; on a fresh start a port taken by someone else in the meantime
    /// (another test picked the same free port) is detected and another port is tried.
    fn spawn(&mut self) {
        let restarting = self.child.is_none() && self.started_once;
        for _ in 0..20 {
            if self.try_spawn() {
                self.started_once = true;
                return;
            }
            if restarting {
                break;
            }
            self.port = free_port();
        }
        panic!(
            "redis-server did not start (last port tried: {})",
            self.port
        );
    }

    fn try_spawn(&mut self) -> bool {
        let binary = std::env::var_os("REDIS_SERVER_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("redis-server"));
        let mut command = Command::new(&binary);
        command
            .arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--unixsocket")
            .arg(self.unix_socket())
            .args(["--unixsocketperm", "700"])
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(p) = &self.password {
            command.args(["--requirepass", p]);
        }
        if let Some(tls) = self.tls_port {
            let file = |name: &str| self.dir.path().join(name);
            command
                .arg("--tls-port")
                .arg(tls.to_string())
                .arg("--tls-cert-file")
                .arg(file("cert.pem"))
                .arg("--tls-key-file")
                .arg(file("key.pem"))
                .arg("--tls-ca-cert-file")
                .arg(file("cert.pem"))
                .args(["--tls-auth-clients", "no"]);
        }
        let mut child = command.spawn().unwrap_or_else(|e| {
            panic!(
                "cannot start {}: {e}. Install it with scripts/setup.sh (apt-get install redis-server)",
                binary.display()
            )
        });
        let ours = self.dir.path().to_string_lossy().into_owned();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return false; // exited: most likely the port was taken
            }
            // Whoever answers on the port must be the server that keeps its files in our dir.
            if let Ok(reply) = self.try_command(&["CONFIG", "GET", "dir"]) {
                if reply.contains(&ours) {
                    self.child = Some(child);
                    return true;
                }
                if !reply.is_empty() && !reply.starts_with("-LOADING") {
                    let _ = child.kill();
                    let _ = child.wait();
                    return false;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs one command (plain RESP) on a fresh connection; the raw reply text.
fn command_on(port: u16, password: Option<&str>, args: &[&str]) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut request = Vec::new();
    if let Some(p) = password {
        request.extend(resp(&["AUTH", p]));
    }
    request.extend(resp(args));
    stream.write_all(&request)?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 65536];
    let expected = if password.is_some() { 2 } else { 1 };
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        reply.extend_from_slice(&buf[..n]);
        if complete_replies(&reply) >= expected {
            break;
        }
    }
    let text = String::from_utf8_lossy(&reply).into_owned();
    Ok(if password.is_some() {
        text.split_once("\r\n")
            .map(|(_, rest)| rest.to_owned())
            .unwrap_or(text)
    } else {
        text
    })
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n", a.len()).into_bytes());
        out.extend(a.as_bytes());
        out.extend(b"\r\n");
    }
    out
}

/// How many complete top-level RESP2 replies `buf` holds.
fn complete_replies(buf: &[u8]) -> usize {
    let (mut count, mut at) = (0, 0);
    while let Ok(Some((_, used))) = crate::direct::parse_reply(&buf[at..]) {
        count += 1;
        at += used;
    }
    count
}

/// The Redis key that holds `lock`'s state (its holders), for tests that look at or tamper with
/// it; the name's other keys are this plus `:exp`, `:ww`, `:wi`, `:wr` (see [`crate::keys`]).
pub fn state_key(lock: &crate::Lock) -> String {
    lock.keys().state().to_owned()
}

/// The Redis key of the fencing counter `lock` draws from (shared by its hash slot).
pub fn fence_key(lock: &crate::Lock) -> String {
    lock.keys().fence().to_owned()
}
