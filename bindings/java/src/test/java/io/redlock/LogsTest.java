package io.redlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/** The library's own log lines reach java.util.logging through System.Logger "io.redlock". */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class LogsTest extends RedisTestBase {
  /** Held strongly: the LogManager keeps loggers weakly, and a new one would have no handler. */
  private static final Logger JUL = Logger.getLogger("io.redlock");

  private final Recorder recorder = new Recorder();
  private boolean parentHandlers;

  @BeforeEach
  void record() {
    parentHandlers = JUL.getUseParentHandlers();
    JUL.setUseParentHandlers(false); // the expected warnings stay off the console
    JUL.addHandler(recorder);
  }

  @AfterEach
  void stopRecording() {
    RedlockLogs.setLevel(System.Logger.Level.WARNING);
    JUL.removeHandler(recorder);
    JUL.setUseParentHandlers(parentHandlers);
  }

  @Test
  @Order(1)
  void aLostHoldIsOneWarningByDefault() throws Exception {
    assertEquals(System.Logger.Level.WARNING, RedlockLogs.getLevel(), "on by default");
    String name = loseAHold();

    assertNotNull(recorder.waitFor(name, Duration.ofSeconds(5)), "a line names it: " + recorder);
    Thread.sleep(300); // a second line, if any, would come now
    List<LogRecord> lines = recorder.containing(name);
    assertEquals(1, lines.size(), "one line for the lost hold: " + recorder);
    LogRecord line = lines.get(0);
    assertEquals(Level.WARNING, line.getLevel());
    assertEquals("io.redlock", line.getLoggerName());
    assertTrue(line.getMessage().contains("lock lost"), line.getMessage());
    assertTrue(line.getMessage().contains("lock=" + name), line.getMessage());
    assertTrue(line.getMessage().startsWith("[redlock_core::"), "the target: " + line.getMessage());
  }

  @Test
  @Order(2)
  void offStopsThem() throws Exception {
    RedlockLogs.setLevel(System.Logger.Level.OFF);
    assertEquals(System.Logger.Level.OFF, RedlockLogs.getLevel());
    loseAHold();
    Thread.sleep(300);
    assertEquals(List.of(), recorder.all(), "no line once off");

    RedlockLogs.setLevel(System.Logger.Level.WARNING);
    String name = loseAHold();
    assertNotNull(recorder.waitFor(name, Duration.ofSeconds(5)), "on again");
  }

  @Test
  @Order(3)
  void aNullLevelIsRejected() {
    assertThrows(NullPointerException.class, () -> RedlockLogs.setLevel(null));
    assertEquals(System.Logger.Level.WARNING, RedlockLogs.getLevel());
  }

  /**
   * A hold kept by a client's watchdog, force-unlocked by another client; returns its name once
   * the watchdog reported the loss (its warn line is queued before the listener runs).
   */
  private String loseAHold() throws Exception {
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
    client().getLock(name).forceUnlock();
    assertNotNull(events.poll(5, TimeUnit.SECONDS), "the watchdog found the hold lost");
    assertThrows(LockLostException.class, lock::unlock);
    return name;
  }

  /** Keeps every record published to it. */
  private static final class Recorder extends Handler {
    private final List<LogRecord> records = new CopyOnWriteArrayList<>();

    @Override
    public void publish(LogRecord record) {
      records.add(record);
    }

    @Override
    public void flush() {}

    @Override
    public void close() {}

    List<LogRecord> all() {
      return List.copyOf(records);
    }

    List<LogRecord> containing(String text) {
      return records.stream()
          .filter(r -> r.getMessage() != null && r.getMessage().contains(text))
          .collect(Collectors.toList());
    }

    /** The records containing {@code text}, once there is one; null after {@code timeout}. */
    List<LogRecord> waitFor(String text, Duration timeout) throws InterruptedException {
      long deadline = System.nanoTime() + timeout.toNanos();
      while (System.nanoTime() < deadline) {
        List<LogRecord> found = containing(text);
        if (!found.isEmpty()) {
          return found;
        }
        Thread.sleep(20);
      }
      return null;
    }

    @Override
    public String toString() {
      return records.stream()
          .map(r -> r.getLevel() + " " + r.getMessage())
          .collect(Collectors.joining("\n", "[", "]"));
    }
  }
}
