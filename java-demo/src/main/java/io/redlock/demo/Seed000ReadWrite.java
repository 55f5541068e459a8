package io.redlock.demo;

import static io.redlock.demo.Main.check;

import io.redlock.ContentionAlert;
import io.redlock.DistributedLock;
import io.redlock.DistributedReadWriteLock;
import io.redlock.RedlockClient;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;

/**
 * Seed 000 ("基于redis的分布式读写锁实现"): an article resource guarded by a ReadWriteLock, where
 * "lock and unlock may run on different instances" — which Redisson's thread-bound lock could
 * not do — and a dead-lock alert once a waiter has failed long enough.
 */
final class Seed000ReadWrite {
  private Seed000ReadWrite() {}

  static void run(String url) throws Exception {
    LinkedBlockingQueue<ContentionAlert> alerts = new LinkedBlockingQueue<>();
    try (RedlockClient instanceA = RedlockClient.connect(url);
        RedlockClient instanceB =
            RedlockClient.builder(url)
                .contentionAlertAfter(Duration.ofMillis(300))
                .contentionListener(alerts::add)
                .build()) {
      // The token travels with the request (e.g. in a message) from instance A to instance B.
      String token = RedlockClient.newOwnerToken();
      DistributedReadWriteLock onA = instanceA.getReadWriteLock("ARTICLE", token);
      DistributedReadWriteLock onB = instanceB.getReadWriteLock("ARTICLE", token);

      // A fixed lease for a hold another instance releases: A's watchdog would report a watched
      // one lost when B releases it (it cannot tell that release from a loss).
      DistributedLock readOnA = onA.readLock();
      readOnA.lock(30, TimeUnit.SECONDS);
      System.out.println("   instance A read-locked ARTICLE");

      // A writer elsewhere waits, and the alert names who holds the lock.
      ReadWriteLock editor = instanceB.getReadWriteLock("ARTICLE");
      CompletableFuture<Boolean> write =
          CompletableFuture.supplyAsync(() -> tryWrite(editor.writeLock()));
      ContentionAlert alert = alerts.poll(5, TimeUnit.SECONDS);
      check(alert != null, "the dead-lock alert fired: " + (alert == null ? "" : alert.holders()));

      onB.readLock().unlock();
      System.out.println("   instance B released the read lock through the token");
      check(write.get(5, TimeUnit.SECONDS), "the waiting writer got ARTICLE after B's unlock");
    }
  }

  private static boolean tryWrite(Lock lock) {
    try {
      if (lock.tryLock(10, TimeUnit.SECONDS)) {
        try {
          return true; // edit the article
        } finally {
          lock.unlock();
        }
      }
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }
}
