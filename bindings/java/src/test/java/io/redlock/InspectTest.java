package io.redlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** {@link RedlockClient#inspect}, {@link DistributedLock#inspect} and labels. */
class InspectTest extends RedisTestBase {

  @Test
  void aFreeLockHasNoModeAndNoHolders() {
    RedlockClient client = client();
    String name = uniqueName();
    LockInfo info = client.inspect(name);
    assertEquals(name, info.name());
    assertEquals(Optional.empty(), info.mode());
    assertFalse(info.isLocked());
    assertEquals(List.of(), info.holders());
    assertEquals(0, info.holderCount());
    assertEquals(0, info.waitingWriters());
    assertEquals(0, info.waitingReaders());
    assertEquals(Duration.ZERO, info.leaseLeft());
    assertEquals(info, client.getLock(name).inspect(), "the lock's view of the same name");
  }

  @Test
  void anExclusiveHoldShowsItsCountTokenLeaseAndDescription() {
    RedlockClient client = client();
    String name = uniqueName();
    DistributedLock lock = client.getLock(name);
    Instant before = Instant.now().minusSeconds(1);
    lock.lock();
    lock.lock();
    try {
      LockInfo info = client.inspect(name);
      assertEquals(Optional.of(LockMode.WRITE), info.mode());
      assertTrue(info.isLocked());
      assertEquals(1, info.holderCount());
      assertEquals(1, info.holders().size());
      HolderInfo holder = info.holders().get(0);
      assertEquals(LockMode.WRITE, holder.mode());
      assertEquals(lock.ownerToken(), holder.ownerToken());
      assertEquals(2, holder.holdCount());
      assertEquals(lock.fencingToken(), holder.fencingToken());
      assertTrue(info.lastFencingToken() >= holder.fencingToken(), info.toString());
      // The watchdog's default lease: 30 s, renewed every 10 s.
      assertTrue(holder.leaseLeft().compareTo(Duration.ofSeconds(30)) <= 0, info.toString());
      assertTrue(holder.leaseLeft().compareTo(Duration.ofSeconds(15)) > 0, info.toString());
      assertEquals(holder.leaseLeft(), info.leaseLeft());
      assertEquals(Thread.currentThread().getName(), holder.thread());
      assertEquals(ProcessHandle.current().pid(), holder.pid());
      assertFalse(holder.host().isEmpty());
      Instant acquired = holder.acquiredAt().orElseThrow();
      assertTrue(acquired.isAfter(before) && acquired.isBefore(Instant.now().plusSeconds(1)));
      assertTrue(holder.heldFor().isPresent(), info.toString());
      assertThrows(UnsupportedOperationException.class, () -> info.holders().add(holder));
    } finally {
      lock.unlock();
      lock.unlock();
    }
    assertEquals(Optional.empty(), lock.inspect().mode());
  }

  @Test
  void readersWritersAndALeaseGivenAtAcquisition() throws Exception {
    RedlockClient client = client();
    String name = uniqueName();
    DistributedReadWriteLock a = client.getReadWriteLock(name, RedlockClient.newOwnerToken());
    DistributedReadWriteLock b = client.getReadWriteLock(name, RedlockClient.newOwnerToken());
    assertTrue(a.writeLock().tryLock());
    assertTrue(a.readLock().tryLock()); // downgrade: the writer also reads
    LockInfo both = a.readLock().inspect();
    assertEquals(Optional.of(LockMode.WRITE), both.mode(), "write while a writer holds it");
    assertEquals(2, both.holderCount(), "a writer that also reads counts twice");
    assertEquals(LockMode.WRITE, both.holders().get(0).mode(), "the writer first");
    a.writeLock().unlock();
    assertTrue(b.readLock().tryLock(0, 5000, TimeUnit.MILLISECONDS));
    LockInfo readers = client.inspect(name);
    assertEquals(Optional.of(LockMode.READ), readers.mode());
    assertEquals(2, readers.holderCount());
    HolderInfo leased =
        readers.holders().stream()
            .filter(h -> h.ownerToken().equals(b.readLock().ownerToken()))
            .findFirst()
            .orElseThrow();
    assertEquals(LockMode.READ, leased.mode());
    assertTrue(leased.leaseLeft().compareTo(Duration.ofSeconds(5)) <= 0, readers.toString());
    assertTrue(leased.leaseLeft().compareTo(Duration.ofSeconds(3)) > 0, readers.toString());
    a.readLock().unlock();
    b.readLock().unlock();
    assertFalse(client.inspect(name).isLocked());
  }

  @Test
  void aWaitingWriterIsCounted() throws Exception {
    RedlockClient client = client();
    String name = uniqueName();
    DistributedLock holder = client.getLock(name);
    DistributedLock waiter = client.getLock(name, RedlockClient.newOwnerToken());
    holder.lock();
    CompletableFuture<Boolean> waiting =
        CompletableFuture.supplyAsync(() -> ExclusiveLockTest.tryLock(waiter, 10_000));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    LockInfo info = client.inspect(name);
    while (info.waitingWriters() < 1 && System.nanoTime() < deadline) {
      Thread.sleep(20);
      info = client.inspect(name);
    }
    assertEquals(1, info.waitingWriters(), info.toString());
    assertEquals(0, info.waitingReaders(), info.toString());
    holder.unlock();
    assertTrue(waiting.get(5, TimeUnit.SECONDS));
    assertEquals(0, client.inspect(name).waitingWriters());
    waiter.unlock();
  }

  @Test
  void manyHoldersAreListedUpToTheLimitAndAllCounted() {
    RedlockClient client = client();
    String name = uniqueName();
    List<DistributedLock> readers = new ArrayList<>();
    for (int i = 0; i < 150; i++) {
      DistributedLock reader =
          client.getReadWriteLock(name, RedlockClient.newOwnerToken()).readLock();
      assertTrue(reader.tryLock());
      readers.add(reader);
    }
    try {
      for (int round = 0; round < 20; round++) { // the native side frees its references per call
        LockInfo info = client.inspect(name);
        assertEquals(150, info.holderCount());
        assertEquals(100, info.holders().size(), "the listing limit");
        assertTrue(info.holders().stream().allMatch(h -> h.mode() == LockMode.READ));
      }
    } finally {
      readers.forEach(DistributedLock::unlock);
    }
  }

  @Test
  void aLabelIsStoredWithTheHold() {
    RedlockClient client = client();
    String name = uniqueName();
    DistributedLock plain = client.getLock(name);
    DistributedLock labelled = plain.withLabel("report-job-7");
    assertEquals(name, labelled.getName());
    assertEquals(LockMode.WRITE, labelled.mode());
    assertEquals(plain.ownerToken(), labelled.ownerToken(), "the same owner");
    assertTrue(labelled.tryLock());
    HolderInfo holder = client.inspect(name).holders().get(0);
    assertEquals("report-job-7", holder.thread());
    assertEquals(labelled.fencingToken(), holder.fencingToken());
    assertEquals(1, plain.getHoldCount(), "the same owner, seen through either object");
    labelled.unlock();

    DistributedReadWriteLock rw =
        client.getReadWriteLock(name, RedlockClient.newOwnerToken()).withLabel("reader-b");
    assertTrue(rw.readLock().tryLock());
    LockInfo info = rw.writeLock().inspect();
    assertEquals("reader-b", info.holders().get(0).thread());
    assertEquals(LockMode.READ, info.holders().get(0).mode());
    rw.readLock().unlock();

    // At most 256 bytes are kept, cut on a character boundary.
    DistributedLock longLabel = client.getLock(name).withLabel("🔒".repeat(100));
    assertTrue(longLabel.tryLock());
    String kept = client.inspect(name).holders().get(0).thread();
    assertEquals("🔒".repeat(64), kept);
    assertEquals(256, kept.getBytes(StandardCharsets.UTF_8).length);
    longLabel.unlock();
  }

  @Test
  void badLabels() {
    DistributedLock lock = client().getLock(uniqueName());
    assertThrows(NullPointerException.class, () -> lock.withLabel(null));
    assertThrows(IllegalArgumentException.class, () -> lock.withLabel(""));
    DistributedReadWriteLock rw = client().getReadWriteLock(uniqueName());
    assertThrows(NullPointerException.class, () -> rw.withLabel(null));
    assertThrows(IllegalArgumentException.class, () -> rw.withLabel(""));
  }

  @Test
  void badNames() {
    RedlockClient client = client();
    assertThrows(NullPointerException.class, () -> client.inspect(null));
    assertThrows(IllegalArgumentException.class, () -> client.inspect(""));
    assertThrows(IllegalArgumentException.class, () -> client.inspect("x".repeat(1025)));
    // The limit is in UTF-8 bytes: 257 four-byte characters are 1028 bytes.
    assertThrows(IllegalArgumentException.class, () -> client.inspect("🔒".repeat(257)));
    assertThrows(IllegalArgumentException.class, () -> client.inspect("x".repeat(10_000_000)));
    assertFalse(client.inspect("x".repeat(1024)).isLocked(), "1024 bytes is the limit");
    assertFalse(client.inspect("{braces}: spaces and 🔒 " + uniqueName()).isLocked());
  }

  @Test
  void aClosedClientRefusesToInspect() {
    RedlockClient client = RedlockClient.connect(redis.url());
    String name = uniqueName();
    DistributedLock lock = client.getLock(name);
    client.close();
    assertThrows(ClientClosedException.class, () -> client.inspect(name));
    assertThrows(ClientClosedException.class, lock::inspect);
    assertThrows(ClientClosedException.class, () -> lock.withLabel("job"));
    assertThrows(ClientClosedException.class, () -> client.inspect(""), "closed comes first");
  }

  @Test
  void recordsAreValueObjects() {
    HolderInfo holder =
        new HolderInfo(
            LockMode.READ,
            "token",
            1,
            7,
            Duration.ofSeconds(1),
            Optional.empty(),
            "host",
            42,
            "main",
            Optional.empty());
    List<HolderInfo> holders = new ArrayList<>(List.of(holder));
    LockInfo info =
        new LockInfo(
            "n", Optional.of(LockMode.READ), holders, 1, 0, 0, Duration.ofSeconds(1), 7);
    holders.clear();
    assertEquals(List.of(holder), info.holders(), "a defensive copy");
    assertThrows(
        NullPointerException.class,
        () -> new LockInfo("n", null, List.of(), 0, 0, 0, Duration.ZERO, 0));
  }
}
