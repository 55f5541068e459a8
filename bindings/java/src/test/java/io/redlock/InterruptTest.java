package io.redlock;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class InterruptTest extends RedisTestBase {

  @Test
  void interruptEndsLockInterruptibly() throws Exception {
    assertInterruptEndsWait(lock -> lock.lockInterruptibly());
  }

  @Test
  void interruptEndsTimedTryLock() throws Exception {
    assertInterruptEndsWait(lock -> lock.tryLock(60, TimeUnit.SECONDS));
  }

  @Test
  void anInterruptedThreadDoesNotWaitAtAll() {
    DistributedLock lock = client().getLock(uniqueName());
    Thread.currentThread().interrupt();
    assertThrows(InterruptedException.class, lock::lockInterruptibly);
    assertFalse(Thread.interrupted(), "the exception replaces the interrupt status");
    assertFalse(lock.isLocked());
  }

  interface Wait {
    void run(DistributedLock lock) throws InterruptedException;
  }

  private void assertInterruptEndsWait(Wait wait) throws Exception {
    String name = uniqueName();
    DistributedLock holder = client().getLock(name);
    DistributedLock waiter = client().getLock(name);
    holder.lock();
    AtomicReference<Throwable> outcome = new AtomicReference<>();
    CountDownLatch started = new CountDownLatch(1);
    Thread thread =
        new Thread(
            () -> {
              started.countDown();
              try {
                wait.run(waiter);
                outcome.set(new AssertionError("acquired while the holder held it"));
              } catch (Throwable t) {
                outcome.set(t);
              }
            });
    thread.start();
    started.await();
    Thread.sleep(200); // inside the native wait by now
    long interruptedAt = System.nanoTime();
    thread.interrupt();
    thread.join(5000);
    assertFalse(thread.isAlive(), "the interrupt ended the wait");
    long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - interruptedAt);
    assertTrue(outcome.get() instanceof InterruptedException, "got " + outcome.get());
    assertTrue(tookMillis < 1000, "interrupt took " + tookMillis + " ms");

    // The cancelled wait left nothing behind: a release hands the lock to a new taker. (Its
    // withdrawal runs as the wait returns; a release just before it may still hand the lock to
    // it, and the lock comes back within a round trip: a leftover would keep it for a lease.)
    assertTrue(holder.isHeldByCurrentThread());
    holder.unlock();
    assertTrue(
        CompletableFuture.supplyAsync(
                () -> {
                  try {
                    return waiter.tryLock(500, TimeUnit.MILLISECONDS);
                  } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                  }
                })
            .get(),
        "nothing left in Redis");
  }
}
