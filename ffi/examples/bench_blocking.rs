//! Uncontended acquire+release cycles through the Rust blocking API: the baseline that the C
//! ABI (bindings/c/bench) and Go (BenchmarkAcquireRelease) are compared with by
//! `scripts/bench-c-go.sh`, on the same redis-server and with the same settings (lease 30 s,
//! try once).
//!
//! With the `c-api` feature it also runs the same cycles through the C ABI functions in this
//! process, alternating with the Rust rounds: the paired difference is the ABI's own cost per
//! call, without the noise of comparing two processes.
//!
//! Usage: `cargo run --release -p redlock-ffi --example bench_blocking -- URL [cycles] [rounds]`
//! Prints each round, then `RESULT rust median_us=<µs per cycle> cycles_per_s=<…>` (and, with
//! `c-api`, `RESULT abi-in-process median_us=… added_us_per_call=…`).

use std::time::{Duration, Instant};

use redlock_core::{Owner, blocking};

type Outcome<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Outcome<()> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .ok_or("usage: bench_blocking URL [cycles] [rounds]")?;
    let cycles: u32 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(2000);
    let rounds: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(5);
    if cycles == 0 || rounds == 0 {
        return Err("cycles and rounds must be positive".into());
    }

    let client = blocking::Client::connect(&url)?;
    let lock = client.lock("bench:rust")?;
    let owner = Owner::random();
    let lease = Some(Duration::from_secs(30));
    let once = Some(Duration::ZERO);
    let rust_cycle = || -> Outcome<()> {
        lock.acquire(&owner, once, lease)?;
        lock.release(&owner)?;
        Ok(())
    };
    #[cfg(feature = "c-api")]
    let abi = through_abi::Bench::new(&url)?;

    for _ in 0..200 {
        rust_cycle()?;
        #[cfg(feature = "c-api")]
        abi.cycle()?;
    }
    let mut rust_us = Vec::with_capacity(rounds);
    #[cfg(feature = "c-api")]
    let (mut abi_us, mut added_us) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let us = time_round(cycles, &rust_cycle)?;
        println!("rust: round {round}: {us:.2} us/cycle");
        rust_us.push(us);
        #[cfg(feature = "c-api")]
        {
            let through = time_round(cycles, &|| abi.cycle())?;
            println!("abi-in-process: round {round}: {through:.2} us/cycle");
            abi_us.push(through);
            added_us.push((through - us) / 2.0); // two calls per cycle
        }
    }
    let rust = median(&mut rust_us);
    println!(
        "RESULT rust median_us={rust:.2} cycles_per_s={:.0}",
        1e6 / rust
    );
    #[cfg(feature = "c-api")]
    println!(
        "RESULT abi-in-process median_us={:.2} added_us_per_call={:.2}",
        median(&mut abi_us),
        median(&mut added_us)
    );
    client.close();
    Ok(())
}

/// Microseconds per cycle over `cycles` cycles.
fn time_round(cycles: u32, cycle: &dyn Fn() -> Outcome<()>) -> Outcome<f64> {
    let started = Instant::now();
    for _ in 0..cycles {
        cycle()?;
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / f64::from(cycles))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The same cycles through the exported C functions, exactly as a C program calls them.
#[cfg(feature = "c-api")]
mod through_abi {
    use std::ffi::CString;
    use std::ptr;

    use redlock::c_api::*;

    pub struct Bench {
        client: rl_client,
        lock: rl_lock,
        owner: rl_owner,
    }

    fn check(status: rl_status, what: &str) -> super::Outcome<()> {
        if status == rl_status::RL_OK {
            Ok(())
        } else {
            Err(format!("{what}: {status:?}").into())
        }
    }

    impl Bench {
        pub fn new(url: &str) -> super::Outcome<Bench> {
            let url = CString::new(url)?;
            let name = CString::new("bench:abi-in-process")?;
            let mut bench = Bench {
                client: rl_client::default(),
                lock: rl_lock::default(),
                owner: rl_owner::default(),
            };
            // SAFETY: valid NUL-terminated strings and out-pointers; no rl_error wanted.
            unsafe {
                let none = rl_options::default();
                check(
                    rl_client_connect(url.as_ptr(), none, &mut bench.client, ptr::null_mut()),
                    "connect",
                )?;
                check(
                    rl_client_lock(
                        bench.client,
                        name.as_ptr(),
                        &mut bench.lock,
                        ptr::null_mut(),
                    ),
                    "lock",
                )?;
                check(rl_owner_random(&mut bench.owner, ptr::null_mut()), "owner")?;
            }
            Ok(bench)
        }

        pub fn cycle(&self) -> super::Outcome<()> {
            // SAFETY: NULL out-pointers and error are allowed.
            unsafe {
                let (out, err) = (ptr::null_mut(), ptr::null_mut());
                check(
                    rl_lock_acquire(self.lock, self.owner, 0, 30_000, out, err),
                    "acquire",
                )?;
                check(
                    rl_lock_release(self.lock, self.owner, ptr::null_mut(), err),
                    "release",
                )?;
            }
            Ok(())
        }
    }

    impl Drop for Bench {
        fn drop(&mut self) {
            // SAFETY: pointers to our own handles.
            unsafe {
                rl_owner_free(&mut self.owner, ptr::null_mut());
                rl_lock_free(&mut self.lock, ptr::null_mut());
                rl_client_free(&mut self.client, ptr::null_mut());
            }
        }
    }
}
