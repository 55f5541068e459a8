package io.redlock.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The machine's stolen CPU time, from /proc/stat: on a virtual machine the hypervisor stalls the
 * vCPUs now and then, and P4's waits of 10 ms and more coincide with it, so a run's figures say
 * how much of it there was.
 */
final class Steal {
  /** USER_HZ, the unit of /proc/stat's times on Linux. */
  static final double TICKS_PER_SECOND = 100;

  private Steal() {}

  /** Ticks stolen over a stretch of wall time; {@code known} is false once a reading failed. */
  record Span(long ticks, long nanos, boolean known) {
    /** Nothing measured yet: adding a span gives that span. */
    static final Span EMPTY = new Span(0, 0, true);

    /** From a reading taken at {@code startNanos} (System.nanoTime) to now. */
    static Span since(long startTicks, long startNanos) {
      long now = Steal.ticks();
      long nanos = System.nanoTime() - startNanos;
      boolean known = startTicks >= 0 && now >= startTicks;
      return new Span(known ? now - startTicks : 0, nanos, known);
    }

    Span plus(Span other) {
      return new Span(ticks + other.ticks, nanos + other.nanos, known && other.known);
    }

    /** Percent of all vCPUs' time stolen, or NaN when unknown. */
    double percent() {
      if (!known || nanos <= 0) {
        return Double.NaN;
      }
      double cpuSeconds = nanos / 1e9 * Runtime.getRuntime().availableProcessors();
      return 100 * (ticks / TICKS_PER_SECOND) / cpuSeconds;
    }
  }

  /**
   * Ticks stolen from all vCPUs since boot (the 8th number of the "cpu" line); -1 when /proc/stat
   * cannot be read or parsed (not Linux, say): the bench goes on without the figure.
   */
  static long ticks() {
    try (BufferedReader in =
        Files.newBufferedReader(Path.of("/proc/stat"), StandardCharsets.US_ASCII)) {
      String line = in.readLine();
      String[] f = line == null ? new String[0] : line.trim().split("\\s+");
      if (f.length < 9 || !f[0].equals("cpu")) {
        return -1;
      }
      long steal = Long.parseLong(f[8]);
      return steal >= 0 ? steal : -1;
    } catch (IOException | RuntimeException e) {
      return -1;
    }
  }
}
