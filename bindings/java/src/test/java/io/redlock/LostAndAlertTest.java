package io.redlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.ref.WeakReference;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class LostAndAlertTest extends RedisTestBase {

  @Test
  void forceUnlockByAnotherClientIsNoticedAsLost() throws Exception {
    String name = uniqueName();
    LinkedBlockingQueue<LockLostEvent> events = new LinkedBlockingQueue<>();
    RedlockClient watched =
        track(
            RedlockClient.builder(redis.url())
                .lease(Duration.ofMillis(300))
                .lockLostListener(events::add)
                .build());
    DistributedLock lock = watched.getLock(name);
    lock.lock();
    assertFalse(lock.isLost());

    client().getLock(name).forceUnlock();

    LockLostEvent event = events.poll(5, TimeUnit.SECONDS);
    assertTrue(event != null, "the listener heard of the loss");
    assertEquals(name, event.name());
    assertEquals(LockMode.WRITE, event.mode());
    assertEquals(watched.currentThreadOwnerToken(), event.ownerToken());
    assertTrue(lock.isLost());
    assertThrows(LockLostException.class, lock::unlock);
    assertFalse(lock.isLost(), "forgotten once unlocked");
  }

  @Test
  void aClosedClientIsCollectedEvenIfItsListenerCapturedIt() throws Exception {
    // The native side holds the listeners through a JNI global reference, a GC root: unless a
    // close lets go of it, a listener that captured its client keeps the client (and the native
    // client its cleaner would free) alive for good.
    WeakReference<RedlockClient> closed = closedClientCapturedByItsListener();
    for (int i = 0; i < 100 && closed.get() != null; i++) {
      System.gc();
      Thread.sleep(20);
    }
    assertNull(closed.get(), "the closed client was collected");
  }

  private WeakReference<RedlockClient> closedClientCapturedByItsListener() {
    AtomicReference<RedlockClient> self = new AtomicReference<>();
    RedlockClient client =
        RedlockClient.builder(redis.url())
            .lockLostListener(event -> self.get().getLock(event.name()))
            .build();
    self.set(client);
    DistributedLock lock = client.getLock(uniqueName());
    lock.lock();
    lock.unlock();
    client.close();
    return new WeakReference<>(client);
  }

  @Test
  void aThrowingListenerHarmsNothing() throws Exception {
    LinkedBlockingQueue<LockLostEvent> events = new LinkedBlockingQueue<>();
    RedlockClient watched =
        track(
            RedlockClient.builder(redis.url())
                .lockLostListener(
                    event -> {
                      events.add(event);
                      throw new IllegalStateException("a listener bug (expected in this test)");
                    })
                .build());
    for (int i = 0; i < 2; i++) {
      DistributedLock lock = watched.getLock(uniqueName());
      lock.lock();
      lock.forceUnlock();
      assertTrue(events.poll(5, TimeUnit.SECONDS) != null, "event " + i + " delivered");
      assertThrows(LockLostException.class, lock::unlock);
    }
    DistributedLock still = watched.getLock(uniqueName());
    assertTrue(still.tryLock(), "the client works on");
    still.unlock();
  }

  @Test
  void forceUnlockWakesWaiters() throws Exception {
    String name = uniqueName();
    DistributedLock holder = client().getLock(name);
    DistributedLock waiter = client().getLock(name);
    holder.lock();
    CompletableFuture<Boolean> waiting =
        CompletableFuture.supplyAsync(() -> ExclusiveLockTest.tryLock(waiter, 10_000));
    Thread.sleep(200);
    holder.forceUnlock();
    assertTrue(waiting.get(3, TimeUnit.SECONDS));
    assertTrue(holder.isLost(), "the same client marks its own hold lost at once");
  }

  @Test
  void contentionAlertNamesTheHolder() throws Exception {
    String name = uniqueName();
    LinkedBlockingQueue<ContentionAlert> alerts = new LinkedBlockingQueue<>();
    RedlockClient alerting =
        track(
            RedlockClient.builder(redis.url())
                .contentionAlertAfter(Duration.ofMillis(200))
                .contentionListener(alerts::add)
                .build());
    DistributedLock holder = client().getLock(name);
    holder.lock();
    String holderToken = holder.ownerToken();
    assertFalse(
        CompletableFuture.supplyAsync(
                () -> ExclusiveLockTest.tryLock(alerting.getLock(name), 1000))
            .get());
    ContentionAlert alert = alerts.poll(5, TimeUnit.SECONDS);
    assertTrue(alert != null, "an alert was raised");
    assertEquals(name, alert.name());
    assertTrue(alert.waited().toMillis() >= 150, "waited " + alert.waited());
    assertEquals(1, alert.holders().size());
    assertTrue(alert.holders().get(0).startsWith(holderToken), alert.holders().get(0));
    holder.unlock();
  }

  @Test
  void contentionAlertAfterFailedAttempts() throws Exception {
    String name = uniqueName();
    LinkedBlockingQueue<ContentionAlert> alerts = new LinkedBlockingQueue<>();
    RedlockClient alerting =
        track(
            RedlockClient.builder(redis.url())
                .contentionAlertAfter(Duration.ZERO) // by attempts only
                .contentionAlertAttempts(2)
                .contentionListener(alerts::add)
                .build());
    DistributedLock holder = client().getLock(name).withLabel("batch-import");
    holder.lock();
    DistributedLock waiter = alerting.getLock(name, RedlockClient.newOwnerToken());
    for (int i = 0; i < 3; i++) {
      assertFalse(waiter.tryLock(), "a try that does not wait");
    }
    assertEquals(null, alerts.poll(300, TimeUnit.MILLISECONDS), "tries that do not wait raise none");
    assertFalse(waiter.tryLock(1000, TimeUnit.MILLISECONDS));
    ContentionAlert alert = alerts.poll(5, TimeUnit.SECONDS);
    assertTrue(alert != null, "an alert was raised");
    assertEquals(name, alert.name());
    assertEquals(waiter.ownerToken(), alert.ownerToken());
    assertTrue(alert.failedAttempts() >= 2, "failed " + alert.failedAttempts());
    assertTrue(alert.waited().toMillis() < 1000, "by attempts, not by time: " + alert.waited());
    assertEquals(1, alert.holders().size());
    assertTrue(alert.holders().get(0).contains("thread batch-import"), alert.holders().get(0));
    assertEquals(null, alerts.poll(300, TimeUnit.MILLISECONDS), "one alert per waiting acquire");
    holder.unlock();
  }
}
