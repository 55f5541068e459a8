package io.redlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Lifecycle edges found by an audit of the binding (2026-11-26): close gives back the sockets
 * and ends waiters at once, interrupts and closes at random moments leave nothing behind, a
 * missing password is a connection error, listeners may call back into their client.
 */
class LifecycleTest extends RedisTestBase {

  // ---------------------------------------------------------------------------------------------
  // Helpers

  /** One command to the class's redis-server; a bulk string reply in full. */
  static String redisCommand(String... args) throws IOException {
    return redis.reply(args);
  }

  static int port() {
    String url = redis.url();
    return Integer.parseInt(url.substring(url.lastIndexOf(':') + 1));
  }

  static int connectedClients() throws IOException {
    for (String line : redisCommand("INFO", "clients").split("\r\n")) {
      if (line.startsWith("connected_clients:")) {
        return Integer.parseInt(line.substring("connected_clients:".length()).trim());
      }
    }
    throw new AssertionError("no connected_clients in INFO");
  }

  static long openFileDescriptors() throws IOException {
    try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
      return fds.count();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // F1: close() does not release the client's Redis connections / file descriptors.

  /**
   * An application that opens and closes clients (per job, per request, per test) and keeps the
   * closed objects around for a while (a field, a list, a pool of closed objects awaiting GC):
   * each closed client must give back its sockets. The JVM's GC does not see native sockets, so
   * waiting for a Cleaner is no bound at all.
   */
  @Test
  @Timeout(120)
  void closeGivesBackTheClientsConnections() throws Exception {
    String name = uniqueName();
    // Warm up: the shared runtime, the library, one client's worth of connections.
    try (RedlockClient warm = RedlockClient.connect(redis.url())) {
      DistributedLock lock = warm.getLock(name);
      lock.lock();
      lock.unlock();
    }
    Thread.sleep(300);
    int clientsBefore = connectedClients();
    long fdsBefore = openFileDescriptors();

    List<RedlockClient> closed = new ArrayList<>(); // the application still refers to them
    DistributedLock holder = client().getLock(name);
    holder.lock();
    int cycles = 60;
    for (int i = 0; i < cycles; i++) {
      RedlockClient c = RedlockClient.connect(redis.url());
      DistributedLock lock = c.getLock(name);
      // A wait subscribes to the lock's channel (the pub/sub connection).
      assertFalse(lock.tryLock(30, TimeUnit.MILLISECONDS));
      DistributedLock other = c.getLock(uniqueName());
      other.lock();
      other.unlock();
      c.close();
      closed.add(c);
    }
    holder.unlock();
    Thread.sleep(1000); // ample time for any asynchronous shutdown

    int clientsAfter = connectedClients();
    long fdsAfter = openFileDescriptors();
    String report =
        "after "
            + cycles
            + " connect/close cycles: Redis connected_clients "
            + clientsBefore
            + " -> "
            + clientsAfter
            + ", this JVM's open fds "
            + fdsBefore
            + " -> "
            + fdsAfter;
    System.out.println("[lifecycle] " + report);
    assertTrue(clientsAfter - clientsBefore <= 5, report);
    assertTrue(fdsAfter - fdsBefore <= 10, report);
    assertEquals(cycles, closed.size());
  }

  /** Checked (passes): closed AND collected clients give everything back (so F1 is close()'s). */
  @Test
  @Timeout(120)
  void closedAndCollectedClientsGiveBackEverything() throws Exception {
    String name = uniqueName();
    try (RedlockClient warm = RedlockClient.connect(redis.url())) {
      DistributedLock lock = warm.getLock(name);
      lock.lock();
      lock.unlock();
    }
    for (int i = 0; i < 5; i++) {
      System.gc();
      Thread.sleep(100);
    }
    int clientsBefore = connectedClients();
    long fdsBefore = openFileDescriptors();
    long tasksBefore;
    try (Stream<Path> tasks = Files.list(Path.of("/proc/self/task"))) {
      tasksBefore = tasks.count();
    }
    DistributedLock holder = client().getLock(name);
    holder.lock();
    for (int i = 0; i < 100; i++) {
      RedlockClient c =
          RedlockClient.builder(redis.url())
              .lockLostListener(e -> {})
              .contentionListener(a -> {})
              .build();
      assertFalse(c.getLock(name).tryLock(20, TimeUnit.MILLISECONDS));
      DistributedLock other = c.getLock(uniqueName());
      other.lock();
      other.unlock();
      c.close();
    }
    holder.unlock();
    for (int i = 0; i < 20; i++) {
      System.gc();
      Thread.sleep(100);
    }
    Thread.sleep(1000);
    long tasksAfter;
    try (Stream<Path> tasks = Files.list(Path.of("/proc/self/task"))) {
      tasksAfter = tasks.count();
    }
    String report =
        "100 cycles, closed and collected: connected_clients "
            + clientsBefore
            + " -> "
            + connectedClients()
            + ", fds "
            + fdsBefore
            + " -> "
            + openFileDescriptors()
            + ", OS threads "
            + tasksBefore
            + " -> "
            + tasksAfter;
    System.out.println("[lifecycle] " + report);
    assertTrue(connectedClients() - clientsBefore <= 5, report);
    assertTrue(openFileDescriptors() - fdsBefore <= 10, report);
  }

  // ---------------------------------------------------------------------------------------------
  // Checked (passes): close() racing with threads inside acquire / release / inspect.

  /**
   * Threads hammer one client while it is closed under them: no crash, every failure is the
   * contract's Closed kind (ClientClosedException), and no lock is left in Redis by a thread whose
   * acquire did not report success (the close gives back what a failed acquire took).
   */
  @Test
  @Timeout(60)
  void closeUnderBusyThreadsFailsCleanlyAndLeavesNothingBehind() throws Exception {
    for (int round = 0; round < 8; round++) {
      String name = uniqueName();
      RedlockClient closing =
          RedlockClient.builder(redis.url()).lease(Duration.ofSeconds(20)).build();
      int threads = 6;
      ConcurrentLinkedQueue<Throwable> unexpected = new ConcurrentLinkedQueue<>();
      // Tokens that believe they hold the lock when the client is closed.
      ConcurrentLinkedQueue<String> believedHeld = new ConcurrentLinkedQueue<>();
      CountDownLatch started = new CountDownLatch(threads);
      List<Thread> workers = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        int kind = t;
        Thread worker =
            new Thread(
                () -> {
                  DistributedLock lock = closing.getLock(name);
                  started.countDown();
                  String token = lock.ownerToken();
                  boolean held = false;
                  try {
                    while (true) {
                      switch (kind % 3) {
                        case 0 -> {
                          lock.lock();
                          held = true;
                          Thread.yield();
                          lock.unlock();
                          held = false;
                        }
                        case 1 -> {
                          if (lock.tryLock(50, TimeUnit.MILLISECONDS)) {
                            held = true;
                            lock.unlock();
                            held = false;
                          }
                        }
                        default -> {
                          closing.inspect(name);
                          lock.isLocked();
                          if (lock.tryLock()) {
                            held = true;
                            lock.unlock();
                            held = false;
                          }
                        }
                      }
                    }
                  } catch (ClientClosedException expected) {
                    // the contract's Closed kind
                  } catch (Throwable t2) {
                    unexpected.add(t2);
                  }
                  if (held) {
                    believedHeld.add(token);
                  }
                },
                "lifecycle-close-" + t);
        worker.setDaemon(true);
        workers.add(worker);
        worker.start();
      }
      started.await();
      Thread.sleep(50 + round * 17);
      closing.close();
      for (Thread w : workers) {
        w.join(10_000);
        assertFalse(w.isAlive(), w.getName() + " still running 10 s after close()");
      }
      if (!unexpected.isEmpty()) {
        Throwable first = unexpected.peek();
        AssertionError error =
            new AssertionError("round " + round + ": unexpected failure kinds: " + unexpected);
        error.initCause(first);
        throw error;
      }
      // Let background give-backs finish, then look from a fresh client.
      Thread.sleep(500);
      LockInfo info = client().inspect(name);
      for (HolderInfo h : info.holders()) {
        assertTrue(
            believedHeld.contains(h.ownerToken()),
            "round " + round + ": " + h.ownerToken() + " holds " + name
                + " although no thread's acquire reported success; believed held: "
                + believedHeld + ", " + info);
      }
      assertEquals(0, info.waitingWriters(), "round " + round + ": waiters left: " + info);
      client().getLock(name).forceUnlock();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Checked (passes): interrupts at every stage of a waiting acquire.

  /**
   * A waiter interrupted at random moments while the lock changes hands quickly: every interrupted
   * acquire must leave nothing in Redis (no hold of the waiter's owner, no announcement), and a
   * success must be a real hold.
   */
  @Test
  @Timeout(90)
  void interruptsAtRandomMomentsLeaveNothingBehind() throws Exception {
    String name = uniqueName();
    RedlockClient a = client();
    RedlockClient b = client();
    AtomicBoolean stop = new AtomicBoolean();
    ConcurrentLinkedQueue<Throwable> churnErrors = new ConcurrentLinkedQueue<>();
    Thread churn =
        new Thread(
            () -> {
              DistributedLock lock = a.getLock(name);
              while (!stop.get()) {
                try {
                  if (lock.tryLock(200, TimeUnit.MILLISECONDS)) {
                    Thread.sleep(3);
                    lock.unlock();
                  }
                } catch (Throwable t) {
                  churnErrors.add(t);
                  return;
                }
              }
            },
            "lifecycle-churn");
    churn.setDaemon(true);
    churn.start();

    Random random = new Random(42);
    DistributedLock waiterLock = b.getLock(name, RedlockClient.newOwnerToken());
    String waiterToken = waiterLock.ownerToken();
    int interrupted = 0;
    int acquired = 0;
    for (int i = 0; i < 150; i++) {
      CountDownLatch go = new CountDownLatch(1);
      Throwable[] outcome = new Throwable[1];
      boolean[] got = new boolean[1];
      Thread waiter =
          new Thread(
              () -> {
                go.countDown();
                try {
                  got[0] = waiterLock.tryLock(5, TimeUnit.SECONDS);
                } catch (Throwable t) {
                  outcome[0] = t;
                }
              },
              "lifecycle-waiter-" + i);
      waiter.start();
      go.await();
      long delayMicros = random.nextInt(3000);
      TimeUnit.MICROSECONDS.sleep(delayMicros);
      waiter.interrupt();
      waiter.join(10_000);
      assertFalse(waiter.isAlive(), "iteration " + i + ": the interrupted waiter did not return");
      if (outcome[0] != null) {
        assertTrue(
            outcome[0] instanceof InterruptedException,
            "iteration " + i + ": unexpected " + outcome[0]);
        interrupted++;
      } else if (got[0]) {
        acquired++;
        waiterLock.unlock();
      }
    }
    stop.set(true);
    churn.join(5000);
    assertTrue(churnErrors.isEmpty(), "churn failed: " + churnErrors);
    Thread.sleep(500); // background undo of cancelled attempts
    LockInfo info = a.inspect(name);
    for (HolderInfo h : info.holders()) {
      assertFalse(
          h.ownerToken().equals(waiterToken),
          "after "
              + interrupted
              + " interrupted and "
              + acquired
              + " acquired waits, the interrupted waiter's owner still holds: "
              + info);
    }
    assertEquals(0, info.waitingWriters(), "announcements left behind: " + info);
    System.out.println("[lifecycle] interrupted " + interrupted + ", acquired " + acquired);
  }

  /**
   * As above, harder: the lock is held most of the time (by two churning clients), waiters of both
   * views (read and write) of one owner per iteration, in one client with a second waiter queued
   * behind the first in the same client, interrupted at random moments.
   */
  @Test
  @Timeout(120)
  void interruptsOfQueuedWaitersOfBothViewsLeaveNothingBehind() throws Exception {
    String name = uniqueName();
    AtomicBoolean stop = new AtomicBoolean();
    ConcurrentLinkedQueue<Throwable> churnErrors = new ConcurrentLinkedQueue<>();
    List<Thread> churners = new ArrayList<>();
    for (int c = 0; c < 2; c++) {
      RedlockClient cc = client();
      int seed = c;
      Thread churn =
          new Thread(
              () -> {
                Random r = new Random(seed);
                DistributedLock lock = cc.getLock(name, RedlockClient.newOwnerToken());
                while (!stop.get()) {
                  try {
                    if (lock.tryLock(500, TimeUnit.MILLISECONDS)) {
                      TimeUnit.MICROSECONDS.sleep(r.nextInt(4000));
                      lock.unlock();
                    }
                  } catch (Throwable t) {
                    churnErrors.add(t);
                    return;
                  }
                }
              },
              "lifecycle-churn-" + c);
      churn.setDaemon(true);
      churn.start();
      churners.add(churn);
    }
    RedlockClient b = client();
    Random random = new Random(7);
    List<String> tokens = new ArrayList<>();
    int interrupted = 0;
    int acquired = 0;
    for (int i = 0; i < 200; i++) {
      String token = RedlockClient.newOwnerToken();
      tokens.add(token);
      DistributedReadWriteLock rw = b.getReadWriteLock(name, token);
      DistributedLock view = i % 3 == 0 ? rw.readLock() : rw.writeLock();
      // A second waiter of the same client queued behind (another owner), not interrupted.
      String behindToken = RedlockClient.newOwnerToken();
      tokens.add(behindToken);
      DistributedLock behind = b.getLock(name, behindToken);
      Throwable[] outcome = new Throwable[2];
      boolean[] got = new boolean[2];
      CountDownLatch go = new CountDownLatch(1);
      Thread waiter =
          new Thread(
              () -> {
                go.countDown();
                try {
                  if (random.nextBoolean()) {
                    view.lockInterruptibly();
                    got[0] = true;
                  } else {
                    got[0] = view.tryLock(5, TimeUnit.SECONDS);
                  }
                } catch (Throwable t) {
                  outcome[0] = t;
                }
                if (got[0]) {
                  view.unlock();
                }
              });
      Thread second =
          new Thread(
              () -> {
                try {
                  got[1] = behind.tryLock(5, TimeUnit.SECONDS);
                  if (got[1]) {
                    behind.unlock();
                  }
                } catch (Throwable t) {
                  outcome[1] = t;
                }
              });
      waiter.start();
      go.await();
      second.start();
      TimeUnit.MICROSECONDS.sleep(random.nextInt(6000));
      waiter.interrupt();
      waiter.join(10_000);
      second.join(10_000);
      assertFalse(waiter.isAlive() || second.isAlive(), "iteration " + i + ": a waiter hangs");
      if (outcome[0] != null) {
        assertTrue(outcome[0] instanceof InterruptedException, "iteration " + i + ": " + outcome[0]);
        interrupted++;
      } else if (got[0]) {
        acquired++;
      }
      assertTrue(outcome[1] == null, "iteration " + i + ": second waiter failed: " + outcome[1]);
      if (!got[1]) {
        fail(
            "iteration "
                + i
                + " (first waiter "
                + view.mode()
                + ", outcome "
                + outcome[0]
                + ", got "
                + got[0]
                + "): the second waiter did not get the lock within 5 s; now "
                + b.inspect(name));
      }
    }
    stop.set(true);
    for (Thread t : churners) {
      t.join(5000);
    }
    assertTrue(churnErrors.isEmpty(), "churn failed: " + churnErrors);
    Thread.sleep(700);
    LockInfo info = b.inspect(name);
    System.out.println("[lifecycle] interrupted " + interrupted + ", acquired " + acquired + ": " + info);
    for (HolderInfo h : info.holders()) {
      assertFalse(tokens.contains(h.ownerToken()), "a waiter's owner still holds: " + info);
    }
    assertEquals(0, info.waitingWriters(), "writer announcements left behind: " + info);
    assertEquals(0, info.waitingReaders(), "reader announcements left behind: " + info);
    assertFalse(info.isLocked(), "still locked after everyone stopped: " + info);
  }

  // ---------------------------------------------------------------------------------------------
  // F2: error kinds. The contract: "Connection (cannot reach / auth failed / TLS failed)".

  @Test
  @Timeout(30)
  void aMissingPasswordIsAConnectionError() throws Exception {
    try (RedisServer server = RedisServer.start("--requirepass", "s3cret")) {
      int port = server.port();
      // The right password works.
      try (RedlockClient ok = RedlockClient.connect("redis://:s3cret@127.0.0.1:" + port)) {
        DistributedLock lock = ok.getLock(uniqueName());
        assertTrue(lock.tryLock());
        lock.unlock();
      }
      // A wrong password: auth failed.
      Throwable wrong = catchThrowable(() -> RedlockClient.connect("redis://:nope@127.0.0.1:" + port));
      // No password at all: auth failed too (the server answers NOAUTH to everything).
      RedlockClient[] connected = new RedlockClient[1];
      Throwable missing =
          catchThrowable(() -> connected[0] = RedlockClient.connect("redis://127.0.0.1:" + port));
      if (missing == null) {
        // Connected without authenticating: the first real call must then report it.
        RedlockClient c = track(connected[0]);
        DistributedLock lock = c.getLock(uniqueName());
        missing = catchThrowable(lock::tryLock);
        Throwable waiting = catchThrowable(() -> lock.tryLock(200, TimeUnit.MILLISECONDS));
        Throwable inspecting = catchThrowable(() -> c.inspect("x"));
        System.out.println(
            "[lifecycle] no password: connect ok; tryLock() -> "
                + missing
                + "; tryLock(200ms) -> "
                + waiting
                + "; inspect -> "
                + inspecting);
        assertTrue(
            waiting instanceof RedlockConnectionException, "no password, tryLock(200ms): " + waiting);
        assertTrue(
            inspecting instanceof RedlockConnectionException, "no password, inspect: " + inspecting);
      }
      System.out.println("[lifecycle] wrong password -> " + wrong + "; no password -> " + missing);
      assertTrue(wrong instanceof RedlockConnectionException, "wrong password: got " + wrong);
      assertTrue(missing instanceof RedlockConnectionException, "no password: got " + missing);
    }
  }

  // Checked (passes).
  /**
   * "Every Redis call has a timeout; a Redis that does not answer is an error, never a hang": a
   * waiting lock() (head of its client's queue, and one queued behind it) when the server stops
   * answering (SIGSTOP) or dies.
   */
  @Test
  @Timeout(90)
  void waitersFailWhenRedisStopsAnsweringOrDies() throws Exception {
    for (String how : new String[] {"STOP", "KILL"}) {
      try (RedisServer server = RedisServer.start()) {
        String url = server.url();
        RedlockClient holderClient = track(RedlockClient.connect(url));
        RedlockClient waiterClient = track(RedlockClient.connect(url));
        String name = uniqueName();
        DistributedLock holder = holderClient.getLock(name);
        holder.lock();
        Throwable[] outcomes = new Throwable[2];
        long[] tookMillis = new long[2];
        List<Thread> waiters = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
          int index = i;
          DistributedLock lock = waiterClient.getLock(name, RedlockClient.newOwnerToken());
          Thread t =
              new Thread(
                  () -> {
                    long start = System.nanoTime();
                    try {
                      lock.lock();
                      outcomes[index] = new AssertionError("acquired");
                    } catch (Throwable e) {
                      outcomes[index] = e;
                    }
                    tookMillis[index] = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                  });
          t.setDaemon(true);
          waiters.add(t);
          t.start();
        }
        Thread.sleep(500); // both waiting: one at the head of the client's queue, one behind
        long stoppedAt = System.nanoTime();
        new ProcessBuilder("kill", "-" + how, String.valueOf(server.pid())).start().waitFor();
        for (Thread t : waiters) {
          t.join(20_000);
        }
        long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - stoppedAt);
        System.out.println(
            "[lifecycle] SIG" + how + ": waiters ended with " + outcomes[0] + " / " + outcomes[1]
                + " after " + waited + " ms");
        for (int i = 0; i < 2; i++) {
          assertFalse(
              waiters.get(i).isAlive(),
              "SIG" + how + ": waiter " + i + " still in lock() 20 s after Redis stopped answering");
          assertTrue(
              outcomes[i] instanceof RedlockConnectionException,
              "SIG" + how + ": waiter " + i + " ended with " + outcomes[i]);
        }
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // F3: close() does not end a waiting acquire whose re-check attempt is on the wire.

  /**
   * lockInterruptibly() interrupted, and close() called, while Redis does not answer: the waiter
   * should end promptly with InterruptedException / ClientClosedException (the contract: a waiting
   * acquire can be cancelled by an interrupt; close ends every waiting acquire).
   */
  @Test
  @Timeout(90)
  void closeEndsAWaiterPromptlyEvenWhileRedisDoesNotAnswer() throws Exception {
    StringBuilder report = new StringBuilder();
    try (RedisServer server = RedisServer.start()) {
      String url = server.url();
      RedlockClient holderClient = track(RedlockClient.connect(url));
      String name = uniqueName();
      DistributedLock holder = holderClient.getLock(name);
      holder.lock();
      for (String how : new String[] {"interrupt", "close"}) {
        RedlockClient waiterClient = track(RedlockClient.connect(url));
        DistributedLock lock = waiterClient.getLock(name, RedlockClient.newOwnerToken());
        // Warm: this client has subscribed and waited once already.
        assertFalse(lock.tryLock(100, TimeUnit.MILLISECONDS));
        Throwable[] outcome = new Throwable[1];
        Thread t =
            new Thread(
                () -> {
                  try {
                    lock.lockInterruptibly();
                    outcome[0] = new AssertionError("acquired");
                  } catch (Throwable e) {
                    outcome[0] = e;
                  }
                });
        t.setDaemon(true);
        t.start();
        Thread.sleep(300); // waiting
        new ProcessBuilder("kill", "-STOP", String.valueOf(server.pid())).start().waitFor();
        Thread.sleep(300); // its re-checks now go unanswered
        long at = System.nanoTime();
        if (how.equals("interrupt")) {
          t.interrupt();
        } else {
          waiterClient.close();
        }
        t.join(10_000);
        long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - at);
        new ProcessBuilder("kill", "-CONT", String.valueOf(server.pid())).start().waitFor();
        report.append(how).append(" -> ").append(outcome[0]).append(" after ").append(took)
            .append(" ms; ");
        Class<?> expected =
            how.equals("interrupt") ? InterruptedException.class : ClientClosedException.class;
        assertTrue(
            expected.isInstance(outcome[0]) && took < 1000,
            how + " while Redis does not answer: " + outcome[0] + " after " + took + " ms");
      }
    } finally {
      System.out.println("[lifecycle] " + report);
    }
  }

  interface Action {
    void run() throws Exception;
  }

  static Throwable catchThrowable(Action action) {
    try {
      action.run();
      return null;
    } catch (Throwable t) {
      return t;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Checked (passes): listeners calling back into the client (on the native callback thread).

  @Test
  @Timeout(30)
  void aLockLostListenerMayUseAndCloseItsClient() throws Exception {
    String name = uniqueName();
    java.util.concurrent.atomic.AtomicReference<RedlockClient> self =
        new java.util.concurrent.atomic.AtomicReference<>();
    java.util.concurrent.atomic.AtomicReference<DistributedLock> lockRef =
        new java.util.concurrent.atomic.AtomicReference<>();
    java.util.concurrent.LinkedBlockingQueue<Object> steps =
        new java.util.concurrent.LinkedBlockingQueue<>();
    RedlockClient watched =
        RedlockClient.builder(redis.url())
            .lease(Duration.ofMillis(300))
            .lockLostListener(
                event -> {
                  try {
                    try {
                      lockRef.get().unlock();
                      steps.add("unlock returned");
                    } catch (Throwable t) {
                      steps.add(t);
                    }
                    DistributedLock other = self.get().getLock(name + ":other");
                    steps.add(other.tryLock(1, TimeUnit.SECONDS));
                    other.unlock();
                    steps.add(self.get().inspect(name));
                    self.get().close();
                    steps.add("closed");
                  } catch (Throwable t) {
                    steps.add(t);
                  }
                })
            .build();
    track(watched);
    self.set(watched);
    DistributedLock lock = watched.getLock(name, RedlockClient.newOwnerToken());
    lockRef.set(lock);
    lock.lock();
    client().getLock(name).forceUnlock();
    List<Object> seen = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      Object step = steps.poll(10, TimeUnit.SECONDS);
      assertNotNull(step, "the listener is stuck after " + seen);
      seen.add(step);
    }
    assertTrue(seen.get(0) instanceof LockLostException, "first: " + seen);
    assertEquals(Boolean.TRUE, seen.get(1), "" + seen);
    assertTrue(seen.get(2) instanceof LockInfo, "" + seen);
    assertEquals("closed", seen.get(3), "" + seen);
  }

  // ---------------------------------------------------------------------------------------------
  // Checked (passes): Cleaner / GC while in use.

  /** Lock objects dropped at once while GC runs: the cleaner must never free a handle in use. */
  @Test
  @Timeout(60)
  void cleanerNeverFreesAHandleInUse() throws Exception {
    RedlockClient c = client();
    AtomicBoolean stop = new AtomicBoolean();
    Thread gc =
        new Thread(
            () -> {
              while (!stop.get()) {
                System.gc();
                try {
                  Thread.sleep(2);
                } catch (InterruptedException e) {
                  return;
                }
              }
            });
    gc.setDaemon(true);
    gc.start();
    ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
    List<Thread> workers = new ArrayList<>();
    for (int t = 0; t < 4; t++) {
      Thread w =
          new Thread(
              () -> {
                try {
                  for (int i = 0; i < 300; i++) {
                    String n = "gc:" + (i % 7);
                    if (c.getLock(n).tryLock(1, TimeUnit.SECONDS)) {
                      assertNotNull(c.getLock(n).inspect());
                      c.getLock(n).unlock();
                    }
                  }
                } catch (Throwable e) {
                  errors.add(e);
                }
              });
      workers.add(w);
      w.start();
    }
    for (Thread w : workers) {
      w.join();
    }
    stop.set(true);
    if (!errors.isEmpty()) {
      fail("errors: " + errors, errors.peek());
    }
  }
}
