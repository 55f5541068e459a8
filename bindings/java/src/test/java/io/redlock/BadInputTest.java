package io.redlock;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.temporal.ChronoUnit;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class BadInputTest extends RedisTestBase {

  @Test
  void namesMustBePresentAndNotTooLong() {
    RedlockClient client = client();
    assertThrows(NullPointerException.class, () -> client.getLock(null));
    assertThrows(NullPointerException.class, () -> client.getReadWriteLock(null));
    assertThrows(IllegalArgumentException.class, () -> client.getLock(""));
    assertThrows(IllegalArgumentException.class, () -> client.getLock("x".repeat(1025)));
    assertTrue(client.getLock("x".repeat(1024)).tryLock(), "1024 bytes is the limit");
    DistributedLock odd = client.getLock("{braces}: spaces and 🔒 " + uniqueName());
    assertTrue(odd.tryLock());
    odd.unlock();
  }

  @Test
  void unpairedSurrogatesAreRefusedNotReplaced() {
    RedlockClient client = client();
    String name = uniqueName();
    // Decoded lossily, all three would be name + "\uFFFD\uFFFD\uFFFD": one lock for three names.
    assertThrows(IllegalArgumentException.class, () -> client.getLock(name + "\uD800"));
    assertThrows(IllegalArgumentException.class, () -> client.getReadWriteLock(name + "\uDC00"));
    DistributedLock replaced = client.getLock(name + "\uFFFD\uFFFD\uFFFD");
    assertTrue(replaced.tryLock());
    replaced.unlock();
    DistributedLock badToken = client.getLock(uniqueName(), "token\uD800");
    assertThrows(IllegalArgumentException.class, badToken::tryLock);
  }

  @Test
  void aThreadWithAnEmptyNameCanLock() throws Exception {
    DistributedLock lock = client().getLock(uniqueName());
    CompletableFuture<Boolean> result = new CompletableFuture<>();
    Thread unnamed =
        new Thread(
            () -> {
              try {
                boolean locked = lock.tryLock();
                if (locked) {
                  lock.unlock();
                }
                result.complete(locked);
              } catch (Throwable t) {
                result.completeExceptionally(t);
              }
            },
            "");
    unnamed.start();
    assertTrue(result.get(10, TimeUnit.SECONDS));
  }

  @Test
  void tokensMustBePresent() {
    RedlockClient client = client();
    assertThrows(NullPointerException.class, () -> client.getLock(uniqueName(), null));
    assertThrows(IllegalArgumentException.class, () -> client.getLock(uniqueName(), ""));
    DistributedLock tooLong = client.getLock(uniqueName(), "t".repeat(513));
    assertThrows(IllegalArgumentException.class, tooLong::tryLock);
  }

  @Test
  void negativeTimes() throws Exception {
    DistributedLock lock = client().getLock(uniqueName());
    assertThrows(IllegalArgumentException.class, () -> lock.lock(-5, TimeUnit.MILLISECONDS));
    assertThrows(IllegalArgumentException.class, () -> lock.tryLock(1, -5, TimeUnit.SECONDS));
    assertThrows(NullPointerException.class, () -> lock.tryLock(1, null));
    assertThrows(
        IllegalArgumentException.class,
        () -> RedlockClient.builder(redis.url()).lease(Duration.ofSeconds(-1)));
    assertThrows(
        IllegalArgumentException.class,
        () -> RedlockClient.builder(redis.url()).contentionAlertAfter(Duration.ofSeconds(-1)));
    assertThrows(
        IllegalArgumentException.class,
        () -> RedlockClient.builder(redis.url()).contentionAlertAttempts(-1));
    // The Lock idiom: a negative wait is one attempt, not an error.
    assertTrue(lock.tryLock(-1, TimeUnit.SECONDS));
    assertFalse(CompletableFuture.supplyAsync(() -> ExclusiveLockTest.tryLock(lock, -1)).get());
    lock.unlock();
  }

  @Test
  void extendNeedsAPositiveLeaseAndAHold() throws Exception {
    DistributedLock lock = client().getLock(uniqueName());
    assertThrows(NotHeldException.class, () -> lock.extend(1, TimeUnit.SECONDS));
    assertTrue(lock.tryLock(0, 300, TimeUnit.MILLISECONDS));
    assertThrows(IllegalArgumentException.class, () -> lock.extend(0, TimeUnit.SECONDS));
    assertThrows(IllegalArgumentException.class, () -> lock.extend(-1, TimeUnit.SECONDS));
    // As an acquire's lease (and Python's, and the core's): under 1 ms is refused, not rounded.
    assertThrows(IllegalArgumentException.class, () -> lock.extend(500, TimeUnit.MICROSECONDS));
    assertThrows(NullPointerException.class, () -> lock.extend(1, null));
    lock.extend(10, TimeUnit.SECONDS);
    Thread.sleep(600); // past the first lease: the extended hold is still there
    assertTrue(lock.isHeldByCurrentThread());
    lock.unlock();
    assertThrows(NotHeldException.class, () -> lock.extend(1, TimeUnit.SECONDS));
  }

  @Test
  void badUrlsAndUnreachableServers() throws Exception {
    assertThrows(IllegalArgumentException.class, () -> RedlockClient.connect("not a url"));
    int unused;
    try (java.net.ServerSocket socket = new java.net.ServerSocket(0)) {
      unused = socket.getLocalPort();
    }
    assertThrows(
        RedlockConnectionException.class,
        () -> RedlockClient.connect("redis://127.0.0.1:" + unused));
    assertThrows(
        IllegalArgumentException.class,
        () -> RedlockClient.builder(redis.url()).prefix("{bad}").build());
  }

  @Test
  void aClosedClientRefusesWorkAndWakesItsWaiters() throws Exception {
    String name = uniqueName();
    DistributedLock holder = client().getLock(name);
    RedlockClient closing = RedlockClient.connect(redis.url());
    DistributedLock waiter = closing.getLock(name);
    holder.lock();
    CompletableFuture<Throwable> waiting =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                waiter.lock();
                return null;
              } catch (Throwable t) {
                return t;
              }
            });
    Thread.sleep(200);
    closing.close();
    closing.close(); // idempotent
    Throwable thrown = waiting.get(5, TimeUnit.SECONDS);
    assertTrue(thrown instanceof ClientClosedException, "got " + thrown);
    assertThrows(ClientClosedException.class, waiter::tryLock);
    assertThrows(ClientClosedException.class, () -> closing.getLock(name));
    assertTrue(closing.isClosed());
    holder.unlock();
  }

  /**
   * README "Exceptions": a bad lease or alert threshold is an IllegalArgumentException. A Duration
   * beyond Long.MAX_VALUE milliseconds (ChronoUnit.FOREVER.getDuration(), the JDK's "forever")
   * escapes as an ArithmeticException from Duration.toMillis() instead.
   */
  @Test
  void hugeBuilderDurationsAreIllegalArgumentsOrAccepted() {
    Duration forever = ChronoUnit.FOREVER.getDuration();
    assertThrows(
        IllegalArgumentException.class, () -> RedlockClient.builder(redis.url()).lease(forever));
    // "Never alert by time" asked for as a forever threshold: refused cleanly or taken as such.
    try {
      track(RedlockClient.builder(redis.url()).contentionAlertAfter(forever).build());
    } catch (IllegalArgumentException expected) {
      // fine too
    }
  }
}
