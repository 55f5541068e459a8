package io.redlock.cross;

import io.redlock.DistributedLock;
import io.redlock.RedlockClient;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.TimeUnit;

/** The Java worker of the cross-language tests: see tests/cross/PROTOCOL.md. */
public final class Worker {
  private static final String USAGE =
      "usage: Worker MODE REDIS_URL LOCK_NAME ARG...\n"
          + "  mutex COUNTER_FILE SECTIONS RECORD_FILE\n"
          + "  read|write EVENT_LOG SECTIONS RECORD_FILE\n"
          + "  hold TOKEN | release TOKEN | wait READY_FILE";
  private static final long HOLD_LEASE_MS = 60_000;
  private static final long PID = ProcessHandle.current().pid();

  /** Bad arguments: reported with the usage, exit code 2. */
  private static final class UsageException extends Exception {
    private static final long serialVersionUID = 1L;

    UsageException(String message) {
      super(message);
    }
  }

  private Worker() {}

  public static void main(String[] args) {
    int status;
    try {
      run(args);
      status = 0;
    } catch (UsageException e) {
      System.err.println("java worker: " + e.getMessage());
      System.err.println(USAGE);
      status = 2;
    } catch (Throwable e) {
      System.err.println("java worker: error: " + e);
      e.printStackTrace(System.err);
      status = 1;
    }
    System.out.flush();
    System.err.flush();
    // Explicit: no native or helper thread may keep the JVM alive after the work is done.
    System.exit(status);
  }

  private static void run(String[] args) throws Exception {
    if (args.length < 3) {
      throw new UsageException("missing MODE, REDIS_URL or LOCK_NAME");
    }
    String mode = args[0];
    String url = args[1];
    String name = args[2];
    int rest = args.length - 3;
    // Check the arguments before connecting.
    switch (mode) {
      case "mutex", "read", "write" -> {
        expectArgs(mode, rest, 3);
        parseSections(args[4]);
      }
      case "hold", "release", "wait" -> expectArgs(mode, rest, 1);
      default -> throw new UsageException("unknown mode '" + mode + "'");
    }
    // Java cannot set the re-check interval (wait mode): the defaults are used.
    try (RedlockClient client = RedlockClient.builder(url).prefix("cross").build()) {
      switch (mode) {
        case "mutex" -> mutex(client, name, Path.of(args[3]), parseSections(args[4]), Path.of(args[5]));
        case "read", "write" ->
            readWrite(client, mode, name, Path.of(args[3]), parseSections(args[4]), Path.of(args[5]));
        case "hold" -> hold(client, name, args[3]);
        case "release" -> release(client, name, args[3]);
        case "wait" -> waitMode(client, name, Path.of(args[3]));
        default -> throw new AssertionError(mode);
      }
    }
  }

  private static void expectArgs(String mode, int got, int want) throws UsageException {
    if (got != want) {
      throw new UsageException(
          "mode " + mode + " takes " + want + " argument(s) after LOCK_NAME, got " + got);
    }
  }

  private static int parseSections(String text) throws UsageException {
    try {
      int sections = Integer.parseInt(text);
      if (sections < 0) {
        throw new UsageException("SECTIONS must not be negative: " + text);
      }
      return sections;
    } catch (NumberFormatException e) {
      throw new UsageException("SECTIONS is not an integer: " + text);
    }
  }

  /** One write of one whole line to a file opened with O_APPEND: lines never interleave. */
  private static void appendLine(Path path, String line) throws IOException {
    Files.write(
        path,
        (line + "\n").getBytes(StandardCharsets.UTF_8),
        StandardOpenOption.CREATE,
        StandardOpenOption.APPEND);
  }

  private static void record(Path path, long value, long fencing, long waitMicros)
      throws IOException {
    appendLine(
        path, "java " + PID + " " + value + " " + Long.toUnsignedString(fencing) + " " + waitMicros);
  }

  /** Acquires (wait forever, watchdog lease); returns the microseconds the call took. */
  private static long timedLock(DistributedLock lock) {
    long started = System.nanoTime();
    lock.lock();
    return (System.nanoTime() - started) / 1_000;
  }

  private static long readCounter(Path counter) throws IOException {
    String text;
    try {
      text = Files.readString(counter, StandardCharsets.UTF_8).strip();
    } catch (NoSuchFileException e) {
      return 0;
    }
    return text.isEmpty() ? 0 : Long.parseLong(text);
  }

  private static void mutex(
      RedlockClient client, String name, Path counter, int sections, Path out) throws IOException {
    DistributedLock lock = client.getLock(name);
    for (int i = 0; i < sections; i++) {
      long waitMicros = timedLock(lock);
      try {
        long value = readCounter(counter) + 1;
        // Truncate and write, no rename: a non-atomic resource.
        Files.write(
            counter,
            Long.toString(value).getBytes(StandardCharsets.UTF_8),
            StandardOpenOption.CREATE,
            StandardOpenOption.TRUNCATE_EXISTING,
            StandardOpenOption.WRITE);
        record(out, value, lock.fencingToken(), waitMicros);
      } finally {
        lock.unlock();
      }
    }
  }

  private static void readWrite(
      RedlockClient client, String mode, String name, Path log, int sections, Path out)
      throws IOException, InterruptedException {
    boolean read = mode.equals("read");
    DistributedLock lock =
        read ? client.getReadWriteLock(name).readLock() : client.getReadWriteLock(name).writeLock();
    String tag = read ? "R" : "W";
    for (int index = 1; index <= sections; index++) {
      long waitMicros = timedLock(lock);
      try {
        appendLine(log, "enter " + tag + " " + PID);
        Thread.sleep(2);
        appendLine(log, "exit " + tag + " " + PID);
        record(out, index, lock.fencingToken(), waitMicros);
      } finally {
        lock.unlock();
      }
    }
  }

  /** Acquires with a fixed lease (no watchdog) and returns without releasing. */
  private static void hold(RedlockClient client, String name, String token) {
    DistributedLock lock = client.getLock(name, token);
    lock.lock(HOLD_LEASE_MS, TimeUnit.MILLISECONDS);
    System.out.println("held " + Long.toUnsignedString(lock.fencingToken()));
  }

  private static void release(RedlockClient client, String name, String token) {
    DistributedLock lock = client.getLock(name, token);
    lock.unlock(); // NotHeldException (not held by TOKEN) ends the worker with an error
    // unlock() does not return the remaining hold count: ask Redis (one more round trip).
    System.out.println("released " + lock.getHoldCount());
  }

  private static void waitMode(RedlockClient client, String name, Path ready) throws IOException {
    DistributedLock lock = client.getLock(name);
    Files.write(
        ready,
        new byte[0],
        StandardOpenOption.CREATE,
        StandardOpenOption.TRUNCATE_EXISTING,
        StandardOpenOption.WRITE);
    lock.lock();
    long acquiredMillis = System.currentTimeMillis();
    try {
      System.out.println(
          "acquired " + Long.toUnsignedString(lock.fencingToken()) + " " + acquiredMillis);
    } finally {
      lock.unlock();
    }
  }
}
