package io.redlock.demo;

import static io.redlock.demo.Main.check;

import io.redlock.DistributedLock;
import io.redlock.RedlockClient;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Seed 001 (the SETNX pitfalls): the lease is set atomically with the lock; a holder cannot
 * release someone else's lock; work longer than the lease keeps the lock (watchdog); and a
 * fencing token lets the guarded resource reject a stale writer.
 */
final class Seed001Pitfalls {
  private Seed001Pitfalls() {}

  static void run(String url) throws Exception {
    try (RedlockClient client =
        RedlockClient.builder(url).lease(Duration.ofMillis(600)).build()) {
      DistributedLock lock = client.getLock("order:42");

      lock.lock(); // no lease given: the watchdog renews it every lease/3
      long firstToken = lock.fencingToken();
      try {
        Thread.sleep(1500); // "business logic" longer than the 600 ms lease
        check(lock.isHeldByCurrentThread(), "held after 1.5 s with a 600 ms lease (watchdog)");
        Throwable wrongOwner =
            CompletableFuture.supplyAsync(
                    () -> {
                      try {
                        lock.unlock();
                        return null;
                      } catch (IllegalMonitorStateException e) {
                        return e;
                      }
                    })
                .get();
        check(wrongOwner != null, "another thread cannot delete the lock: " + wrongOwner);
      } finally {
        lock.unlock();
      }

      // An explicit lease: Redis frees it on its own if the holder dies.
      check(lock.tryLock(0, 200, TimeUnit.MILLISECONDS), "tryLock with a 200 ms lease");
      long secondToken = lock.fencingToken();
      Thread.sleep(400);
      check(!lock.isLocked(), "the lease ran out without an unlock");
      check(secondToken > firstToken, "fencing tokens increase: " + firstToken + " < " + secondToken);
      try {
        lock.unlock();
        check(false, "unlock of an expired lease must fail");
      } catch (IllegalMonitorStateException expected) {
        check(true, "unlock of an expired lease fails: " + expected.getMessage());
      }
    }
  }
}
