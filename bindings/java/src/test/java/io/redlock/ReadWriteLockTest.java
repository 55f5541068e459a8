package io.redlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class ReadWriteLockTest extends RedisTestBase {

  @Test
  void readersShareAndExcludeWriters() throws Exception {
    String name = uniqueName();
    DistributedReadWriteLock rw = client().getReadWriteLock(name);
    rw.readLock().lock();
    boolean otherReads =
        CompletableFuture.supplyAsync(
                () -> {
                  boolean got = rw.readLock().tryLock();
                  if (got) {
                    rw.readLock().unlock();
                  }
                  return got;
                })
            .get();
    assertTrue(otherReads, "readers share");
    assertFalse(CompletableFuture.supplyAsync(() -> rw.writeLock().tryLock()).get());
    rw.readLock().unlock();
    assertTrue(CompletableFuture.supplyAsync(() -> rw.writeLock().tryLock()).get(), "free now");
    assertFalse(rw.readLock().tryLock(), "the writer excludes readers");
  }

  @Test
  void upgradeFailsAtOnce() {
    DistributedReadWriteLock rw = client().getReadWriteLock(uniqueName());
    rw.readLock().lock();
    long started = System.nanoTime();
    IllegalStateException thrown =
        assertThrows(IllegalStateException.class, () -> rw.writeLock().lock());
    assertTrue(thrown instanceof UpgradeNotAllowedException, "got " + thrown);
    assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started) < 2000, "never a hang");
    assertThrows(UpgradeNotAllowedException.class, () -> rw.writeLock().tryLock());
    assertTrue(rw.readLock().isHeldByCurrentThread(), "still reading");
    rw.readLock().unlock();
  }

  @Test
  void downgradeKeepsReading() throws Exception {
    DistributedReadWriteLock rw = client().getReadWriteLock(uniqueName());
    rw.writeLock().lock();
    rw.readLock().lock();
    rw.writeLock().unlock();
    assertTrue(rw.readLock().isHeldByCurrentThread(), "still reading after the downgrade");
    assertFalse(rw.writeLock().isLocked());
    assertFalse(CompletableFuture.supplyAsync(() -> rw.writeLock().tryLock()).get());
    rw.readLock().unlock();
    assertFalse(rw.readLock().isLocked());
  }

  @Test
  void aWaitingWriterKeepsNewReadersOut() throws Exception {
    String name = uniqueName();
    DistributedReadWriteLock reading = client().getReadWriteLock(name);
    DistributedReadWriteLock writing = client().getReadWriteLock(name);
    DistributedReadWriteLock lateReader = client().getReadWriteLock(name);
    reading.readLock().lock();
    CompletableFuture<Boolean> writer =
        CompletableFuture.supplyAsync(
            () -> {
              boolean got = ExclusiveLockTest.tryLock(writing.writeLock(), 30_000);
              if (got) {
                writing.writeLock().unlock();
              }
              return got;
            });
    // The writer is announced as waiting: polled for, since under load its first attempt may
    // come far later than usual.
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (client().inspect(name).waitingWriters() < 1 && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    assertEquals(1, client().inspect(name).waitingWriters(), "the writer announces itself");
    assertFalse(
        CompletableFuture.supplyAsync(() -> lateReader.readLock().tryLock()).get(),
        "a new reader queues behind the waiting writer");
    reading.readLock().lock();
    reading.readLock().unlock(); // a current reader may still re-enter
    reading.readLock().unlock();
    assertTrue(writer.get(5, TimeUnit.SECONDS), "the writer got its turn");
  }

  @Test
  void eachReaderShareHasItsOwnLease() throws Exception {
    String name = uniqueName();
    RedlockClient client = client();
    DistributedLock crashing = client.getReadWriteLock(name, RedlockClient.newOwnerToken()).readLock();
    DistributedLock alive = client.getReadWriteLock(name, RedlockClient.newOwnerToken()).readLock();
    assertTrue(crashing.tryLock(0, 200, TimeUnit.MILLISECONDS), "a reader that will never unlock");
    alive.lock(); // kept by the watchdog
    Thread.sleep(500);
    assertEquals(0, crashing.getHoldCount(), "the crashed reader's share ran out alone");
    assertEquals(1, alive.getHoldCount(), "the other reader keeps its share");
    assertTrue(alive.isLocked());
    alive.unlock();
    assertFalse(alive.isLocked());
  }

  /** Seed 000: the read lock is taken on one instance and released on another. */
  @Test
  void readLockReleasedByAnotherInstanceThroughTheToken() throws Exception {
    String name = uniqueName();
    String token = RedlockClient.newOwnerToken();
    DistributedReadWriteLock onA = client().getReadWriteLock(name, token);
    DistributedReadWriteLock onB = client().getReadWriteLock(name, token);
    onA.readLock().lock();
    assertTrue(onA.readLock().isLocked());
    CompletableFuture.runAsync(() -> onB.readLock().unlock()).get();
    assertFalse(onA.readLock().isLocked(), "released by instance B");
    assertThrows(IllegalMonitorStateException.class, () -> onB.readLock().unlock());
    assertEquals(0, onA.readLock().getHoldCount());
  }
}
