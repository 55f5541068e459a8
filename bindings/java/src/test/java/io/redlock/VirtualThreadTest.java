package io.redlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Virtual threads (Java 21+; skipped on an older JDK, and run under one by scripts/test-java.sh
 * when the machine has one): a native wait pins its carrier thread, so the library waits on a
 * platform thread instead (see VirtualThreadWait).
 */
class VirtualThreadTest extends RedisTestBase {

  /** Thread.startVirtualThread (Java 21+), or null on an older JDK. */
  private static Thread startVirtual(Runnable body) throws Exception {
    Method start;
    try {
      start = Thread.class.getMethod("startVirtualThread", Runnable.class);
    } catch (NoSuchMethodException e) {
      return null;
    }
    return (Thread) start.invoke(null, body);
  }

  /**
   * Virtual threads each are one owner (the README's "one owner per thread"). A virtual thread
   * holds the lock and parks (unmounts) for a moment; as many other virtual threads as there are
   * carrier threads call lock(). With java.util.concurrent.locks.ReentrantLock this completes at
   * once; here every waiter blocks its carrier inside the native acquire, so the holder can never
   * be mounted again to unlock: every thread hangs for ever.
   */
  @Test
  @Timeout(60)
  void virtualThreadsWaitingForALockDoNotStarveItsHolder() throws Exception {
    assumeTrue(startVirtual(() -> {}) != null, "needs Java 21+");
    String name = uniqueName();
    RedlockClient c = client();
    int carriers = Runtime.getRuntime().availableProcessors();
    CountDownLatch held = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    AtomicReference<Throwable> error = new AtomicReference<>();
    List<Thread> threads = new ArrayList<>();
    threads.add(
        startVirtual(
            () -> {
              DistributedLock lock = c.getLock(name);
              lock.lock();
              held.countDown();
              try {
                release.await(); // unmounts, like any blocking wait of a virtual thread
              } catch (InterruptedException e) {
                error.compareAndSet(null, e);
              } finally {
                lock.unlock();
              }
            }));
    assertTrue(held.await(10, TimeUnit.SECONDS));
    for (int i = 0; i < carriers; i++) {
      threads.add(
          startVirtual(
              () -> {
                try {
                  DistributedLock lock = c.getLock(name);
                  lock.lock();
                  lock.unlock();
                } catch (Throwable t) {
                  error.compareAndSet(null, t);
                }
              }));
    }
    Thread.sleep(500); // the waiters are in their native waits
    release.countDown();
    for (Thread t : threads) {
      t.join(10_000);
    }
    long alive = threads.stream().filter(Thread::isAlive).count();
    assertEquals(
        0,
        alive,
        alive
            + " of "
            + threads.size()
            + " virtual threads still stuck after 10 s (carriers: "
            + carriers
            + "); lock: "
            + c.inspect(name));
    assertNull(error.get());
  }

  /** An interrupt ends a virtual thread's wait (through the platform thread it waits on). */
  @Test
  void anInterruptEndsAVirtualThreadsWaitAndLeavesNothing() throws Exception {
    assumeTrue(startVirtual(() -> {}) != null, "needs Java 21+");
    String name = uniqueName();
    RedlockClient c = client();
    DistributedLock holder = c.getLock(name);
    holder.lock();
    AtomicReference<Throwable> outcome = new AtomicReference<>();
    AtomicBoolean statusAfter = new AtomicBoolean(true);
    Thread waiter =
        startVirtual(
            () -> {
              try {
                c.getLock(name).lockInterruptibly();
                outcome.set(new AssertionError("acquired while held"));
              } catch (Throwable t) {
                outcome.set(t);
              }
              statusAfter.set(Thread.currentThread().isInterrupted());
            });
    Thread.sleep(300);
    waiter.interrupt();
    waiter.join(5000);
    assertFalse(waiter.isAlive());
    assertTrue(outcome.get() instanceof InterruptedException, "got " + outcome.get());
    assertFalse(statusAfter.get(), "the exception replaces the interrupt status");
    holder.unlock();
    assertTrue(c.getLock(name).tryLock(2, TimeUnit.SECONDS), "nothing left behind");
    c.getLock(name).unlock();
  }
}
