package io.redlock.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;

/**
 * One contending process of P4, started by {@link Contended}: connects and warms up, prints
 * {@code READY}, waits for {@code GO} on stdin, runs its sections on the shared lock, prints
 * {@code DONE}; when stdin says {@code WRITE} (once every worker is done), writes one line per
 * section ({@code asked acquired releaseStarted released}, wall-clock epoch ns, the same clock
 * in every process) to its output file and prints {@code WRITTEN}; then closes its client when
 * stdin says {@code EXIT} (or ends). Writing waits for the others: its first string
 * concatenations and file classes cost a JVM milliseconds of CPU (measured: 5-9 ms hand-off gaps
 * in the last sections of every run while the first workers to finish wrote their files), which
 * on two cores would delay the processes still contending.
 *
 * <p>Args: {@code worker LIBRARY URL LOCK_NAME SECTIONS OUT_FILE LEASE_MS INDEX}.
 */
final class Worker {
  private Worker() {}

  /** Past HotSpot's C2 thresholds (about 10 000 invocations with loop counts). */
  static final int WARM_UP_CYCLES = 10_000;

  /** Wall-clock epoch ns: System.currentTimeMillis is too coarse for one section. */
  static long epochNanos() {
    Instant now = Instant.now();
    return now.getEpochSecond() * 1_000_000_000L + now.getNano();
  }

  static void run(String[] args) {
    try {
      String id = args[1];
      int index = Integer.parseInt(args[7]);
      String url = args[2];
      String name = args[3];
      int sections = Integer.parseInt(args[4]);
      Path outFile = Path.of(args[5]);
      long leaseMs = Long.parseLong(args[6]);
      BufferedReader control =
          new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      try (Library library = Library.open(id, url, leaseMs)) {
        Library.Locker lock = library.locker(name);
        // Warm-up (connections, scripts, pub/sub, and the JIT: enough cycles that the compilers
        // are done before GO, not busy on the 2 cores during the timed run) on a name of our
        // own, then once on the shared name.
        Library.Locker own = library.locker(name + ":warm:" + index);
        for (int i = 0; i < WARM_UP_CYCLES; i++) {
          own.lock();
          own.unlock();
        }
        lock.lock();
        lock.unlock();
        System.out.println("READY");
        System.out.flush();
        expectLine(control, "GO");
        long[] asked = new long[sections];
        long[] acquired = new long[sections];
        long[] releasing = new long[sections];
        long[] released = new long[sections];
        for (int i = 0; i < sections; i++) {
          asked[i] = epochNanos();
          lock.lock();
          acquired[i] = epochNanos();
          releasing[i] = epochNanos();
          lock.unlock();
          released[i] = epochNanos();
        }
        System.out.println("DONE");
        System.out.flush();
        expectLine(control, "WRITE");
        try (PrintWriter out =
            new PrintWriter(Files.newBufferedWriter(outFile, StandardCharsets.US_ASCII))) {
          for (int i = 0; i < sections; i++) {
            out.println(asked[i] + " " + acquired[i] + " " + releasing[i] + " " + released[i]);
          }
        }
        System.out.println("WRITTEN");
        System.out.flush();
        control.readLine(); // EXIT, or the end of stdin
      }
    } catch (Throwable e) {
      System.err.println("bench worker " + ProcessHandle.current().pid() + " failed:");
      e.printStackTrace();
      System.exit(1);
    }
    System.exit(0); // the libraries' non-daemon threads must not keep the process alive
  }

  private static void expectLine(BufferedReader control, String word) throws IOException {
    String line = control.readLine();
    if (!word.equals(line)) {
      throw new IllegalStateException("expected " + word + ", got " + line);
    }
  }
}
