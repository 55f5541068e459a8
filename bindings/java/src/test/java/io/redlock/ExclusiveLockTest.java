package io.redlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

class ExclusiveLockTest extends RedisTestBase {

  @Test
  void reentrantLikeReentrantLock() {
    DistributedLock lock = client().getLock(uniqueName());
    lock.lock();
    long token = lock.fencingToken();
    lock.lock();
    assertEquals(token, lock.fencingToken(), "a re-entry keeps the fencing token");
    assertEquals(2, lock.getHoldCount());
    assertTrue(lock.isHeldByCurrentThread());
    lock.unlock();
    assertTrue(lock.isLocked(), "one hold left");
    lock.unlock();
    assertFalse(lock.isLocked());
    assertEquals(0, lock.getHoldCount());
    assertThrows(IllegalMonitorStateException.class, lock::unlock);
  }

  @Test
  void anotherThreadIsAnotherOwner() throws Exception {
    DistributedLock lock = client().getLock(uniqueName());
    lock.lock();
    CompletableFuture<Boolean> other = CompletableFuture.supplyAsync(lock::tryLock);
    assertFalse(other.get(), "another thread cannot take it");
    CompletableFuture<Throwable> unlockByOther =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                lock.unlock();
                return null;
              } catch (Throwable t) {
                return t;
              }
            });
    Throwable thrown = unlockByOther.get();
    assertTrue(thrown instanceof NotHeldException, "got " + thrown);
    assertTrue(thrown instanceof IllegalMonitorStateException);
    assertTrue(lock.isHeldByCurrentThread(), "a failed unlock changes nothing");
    lock.unlock();
  }

  @Test
  void fencingTokensStrictlyIncrease() {
    DistributedLock lock = client().getLock(uniqueName());
    long previous = 0;
    for (int i = 0; i < 5; i++) {
      lock.lock();
      long token = lock.fencingToken();
      assertTrue(token > previous, token + " after " + previous);
      previous = token;
      lock.unlock();
    }
    assertThrows(IllegalMonitorStateException.class, lock::fencingToken);
  }

  @Test
  void tryLockTimesOutThenGetsAHandOff() throws Exception {
    String name = uniqueName();
    DistributedLock mine = client().getLock(name);
    DistributedLock theirs = client().getLock(name);
    mine.lock();
    long started = System.nanoTime();
    CompletableFuture<Boolean> timedOut =
        CompletableFuture.supplyAsync(() -> tryLock(theirs, 300));
    assertFalse(timedOut.get());
    long waitedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
    assertTrue(waitedMillis >= 250, "waited only " + waitedMillis + " ms");

    CountDownLatch waiting = new CountDownLatch(1);
    CompletableFuture<Boolean> handedOff =
        CompletableFuture.supplyAsync(
            () -> {
              waiting.countDown();
              boolean got = tryLock(theirs, 5000);
              if (got) {
                theirs.unlock();
              }
              return got;
            });
    waiting.await();
    Thread.sleep(100);
    long released = System.nanoTime();
    mine.unlock();
    assertTrue(handedOff.get());
    long handOffMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - released);
    assertTrue(handOffMillis < 1000, "hand-off took " + handOffMillis + " ms");
  }

  @Test
  void anExpiredLeaseCannotBeUnlocked() throws Exception {
    String name = uniqueName();
    DistributedLock lock = client().getLock(name);
    lock.lock(100, TimeUnit.MILLISECONDS);
    assertTrue(lock.isLocked());
    Thread.sleep(400);
    assertFalse(lock.isLocked(), "Redis let the lease run out");
    assertThrows(IllegalMonitorStateException.class, lock::unlock);
    assertTrue(lock.tryLock(), "free again");
    lock.unlock();
  }

  @Test
  void explicitTokensHandOverBetweenClients() {
    String name = uniqueName();
    String token = RedlockClient.newOwnerToken();
    DistributedLock first = client().getLock(name, token);
    DistributedLock second = client().getLock(name, token);
    assertEquals(token, first.ownerToken());
    first.lock();
    assertTrue(second.isHeldByCurrentThread(), "the token is the owner");
    second.unlock();
    assertFalse(first.isLocked());
  }

  @Test
  void conditionsAreNotSupported() {
    DistributedLock lock = client().getLock(uniqueName());
    assertThrows(UnsupportedOperationException.class, lock::newCondition);
  }

  static boolean tryLock(DistributedLock lock, long millis) {
    try {
      return lock.tryLock(millis, TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  /**
   * A fixed-lease hold handed over by token and released through another client (as another
   * process or language would): the owner holds nothing any more, and fencingToken() says so
   * (as Python's fencing_token reads None). It used to report the ended hold's token.
   */
  @Test
  void fencingTokenOfAHoldReleasedElsewhereIsNotReported() throws Exception {
    String name = uniqueName();
    String token = RedlockClient.newOwnerToken();
    DistributedLock mine = client().getLock(name, token);
    assertTrue(mine.tryLock(0, 10_000, TimeUnit.MILLISECONDS));
    assertTrue(mine.fencingToken() > 0);
    client().getLock(name, token).unlock();
    assertEquals(0, mine.getHoldCount());
    assertThrows(IllegalMonitorStateException.class, mine::fencingToken);
  }

  /** The same after a fixed lease ran out. */
  @Test
  void fencingTokenOfAnExpiredHoldIsNotReported() throws Exception {
    DistributedLock lock = client().getLock(uniqueName());
    assertTrue(lock.tryLock(0, 300, TimeUnit.MILLISECONDS));
    assertTrue(lock.fencingToken() > 0);
    Thread.sleep(700);
    assertFalse(lock.isHeldByCurrentThread());
    assertThrows(IllegalMonitorStateException.class, lock::fencingToken);
  }

  /**
   * One explicit-token lock object used from two threads (the token is the owner, whatever the
   * thread). While thread B is between its lock() and unlock(), the owner holds the lock in Redis
   * without a break (hold count >= 1), so fencingToken() through this object must answer. Thread
   * A's unlock that brought the count to 0 just before B's lock() removes B's fresh hold from the
   * object's book afterwards, and B's fencingToken() throws IllegalMonitorStateException ("no hold
   * ... taken by this owner through this object"); isLost() of that hold then can never turn true.
   */
  @Test
  @Timeout(60)
  void anExplicitTokenLockSharedByThreadsKeepsTrackOfItsHold() throws Exception {
    DistributedLock lock = client().getLock(uniqueName(), RedlockClient.newOwnerToken());
    AtomicBoolean stop = new AtomicBoolean();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    Thread a =
        new Thread(
            () -> {
              try {
                while (!stop.get()) {
                  lock.lock();
                  lock.unlock();
                }
              } catch (Throwable t) {
                failure.compareAndSet(null, t);
              }
            });
    Thread b =
        new Thread(
            () -> {
              try {
                while (!stop.get()) {
                  lock.lock();
                  try {
                    assertTrue(lock.getHoldCount() >= 1);
                    lock.fencingToken();
                  } finally {
                    lock.unlock();
                  }
                }
              } catch (Throwable t) {
                failure.compareAndSet(null, t);
              }
            });
    a.start();
    b.start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
    while (System.nanoTime() < deadline && failure.get() == null) {
      Thread.sleep(50);
    }
    stop.set(true);
    a.join(10_000);
    b.join(10_000);
    if (failure.get() != null) {
      throw new AssertionError("while the owner held the lock: " + failure.get(), failure.get());
    }
    assertFalse(lock.isLocked());
  }
}
