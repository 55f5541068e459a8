package io.redlock.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * P4's parent side: one run of {@code processes} JVM workers ({@link Worker}) on one lock name,
 * started and warmed up before a common GO, and what their recorded times say.
 */
final class Contended {
  /** Longest a run (start, sections, exit) may take before its workers are killed. */
  private static final long RUN_TIMEOUT_S = 600;

  private final String url;
  private final int processes;
  private final int sections;
  private final long leaseMs;
  private final Path scratch;

  Contended(String url, int processes, int sections, long leaseMs, Path scratch) {
    this.url = url;
    this.processes = processes;
    this.sections = sections;
    this.leaseMs = leaseMs;
    this.scratch = scratch;
  }

  /** One section as a worker recorded it (epoch ns). */
  record Section(int process, long asked, long acquired, long releasing, long released) {}

  /** What one run measured. */
  record Result(
      List<Section> timeline, // by acquisition time
      double sectionsPerSecond,
      double[] waitsNs,
      double[] handoffsNs,
      int handChanges,
      double[] pingsNs,
      RedisProbe.Monitor monitor,
      Steal.Span steal) {}

  /**
   * Runs {@code library}'s workers once on {@code lockName}: timed (with {@code pings} PING round
   * trips measured while the workers wait for GO) or, when {@code monitored}, under MONITOR.
   */
  Result run(String library, String lockName, int pings, boolean monitored) throws Exception {
    Path java = Path.of(System.getProperty("java.home"), "bin", "java");
    List<Process> workers = new ArrayList<>();
    List<Path> outputs = new ArrayList<>();
    ScheduledExecutorService killer = Executors.newSingleThreadScheduledExecutor();
    ScheduledFuture<?> deadline =
        killer.schedule(
            () -> workers.forEach(Process::destroyForcibly), RUN_TIMEOUT_S, TimeUnit.SECONDS);
    try {
      for (int p = 0; p < processes; p++) {
        Path output = Files.createTempFile(scratch, "p4-" + library + "-", ".txt");
        outputs.add(output);
        List<String> command = new ArrayList<>();
        command.add(java.toString());
        // No hsperfdata file: with PIDs reused quickly, the JVM may find a stale one locked
        // and print a warning on stdout, where the worker's READY is expected.
        command.add("-XX:-UsePerfData");
        // The bindings' own settings (-Dredlock.library=... and the like) carry over.
        for (Map.Entry<Object, Object> e : System.getProperties().entrySet()) {
          if (String.valueOf(e.getKey()).startsWith("redlock.")) {
            command.add("-D" + e.getKey() + "=" + e.getValue());
          }
        }
        command.addAll(
            List.of(
                "-cp",
                System.getProperty("java.class.path"),
                LockBench.class.getName(),
                "worker",
                library,
                url,
                lockName,
                Integer.toString(sections),
                output.toString(),
                Long.toString(leaseMs),
                Integer.toString(p)));
        workers.add(
            new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start());
      }
      List<BufferedReader> replies = new ArrayList<>();
      for (Process worker : workers) {
        replies.add(
            new BufferedReader(
                new InputStreamReader(worker.getInputStream(), StandardCharsets.UTF_8)));
      }
      for (int p = 0; p < processes; p++) {
        expect(replies.get(p), "READY", workers.get(p));
      }
      double[] pingsNs = new double[0];
      if (pings > 0) {
        try (RedisProbe probe = new RedisProbe(url)) {
          pingsNs = probe.pings(pings);
        }
      }
      RedisProbe.Monitor monitor = monitored ? new RedisProbe.Monitor(url) : null;
      long stealTicks = Steal.ticks();
      long stealStart = System.nanoTime();
      for (Process worker : workers) {
        tell(worker, "GO");
      }
      for (int p = 0; p < processes; p++) {
        expect(replies.get(p), "DONE", workers.get(p));
      }
      Steal.Span steal = Steal.Span.since(stealTicks, stealStart);
      if (monitor != null) {
        monitor.stop(); // before the workers close their clients
      }
      // Only now, with every timed loop over, do the workers write their files (see Worker).
      for (Process worker : workers) {
        tell(worker, "WRITE");
      }
      for (int p = 0; p < processes; p++) {
        expect(replies.get(p), "WRITTEN", workers.get(p));
      }
      for (Process worker : workers) {
        tell(worker, "EXIT");
        worker.getOutputStream().close();
      }
      for (Process worker : workers) {
        if (!worker.waitFor(60, TimeUnit.SECONDS)) {
          throw new IllegalStateException("a bench worker did not exit");
        }
        if (worker.exitValue() != 0) {
          throw new IllegalStateException("a bench worker exited with " + worker.exitValue());
        }
      }
      List<Section> all = new ArrayList<>();
      for (int p = 0; p < processes; p++) {
        for (String line : Files.readAllLines(outputs.get(p), StandardCharsets.US_ASCII)) {
          String[] f = line.trim().split(" ");
          all.add(
              new Section(
                  p,
                  Long.parseLong(f[0]),
                  Long.parseLong(f[1]),
                  Long.parseLong(f[2]),
                  Long.parseLong(f[3])));
        }
      }
      if (all.size() != processes * sections) {
        throw new IllegalStateException(
            "expected " + processes * sections + " sections, the workers recorded " + all.size());
      }
      return analyse(all, pingsNs, monitor, steal);
    } finally {
      deadline.cancel(false);
      killer.shutdownNow();
      for (Process worker : workers) {
        if (worker.isAlive()) {
          worker.destroyForcibly();
        }
      }
      for (Path output : outputs) {
        Files.deleteIfExists(output);
      }
    }
  }

  private static void expect(BufferedReader reply, String word, Process worker)
      throws IOException, InterruptedException {
    String line = reply.readLine();
    if (!word.equals(line)) {
      String status = worker.isAlive() ? "running" : "exit " + worker.waitFor();
      throw new IllegalStateException(
          "bench worker " + worker.pid() + " said " + line + " (" + status + "), expected " + word);
    }
  }

  private static void tell(Process worker, String word) throws IOException {
    OutputStream in = worker.getOutputStream();
    in.write((word + "\n").getBytes(StandardCharsets.UTF_8));
    in.flush();
  }

  /**
   * Mutual exclusion (fails loudly when two sections overlap), waits, handoffs (release start to
   * the next acquisition, when the next holder was already waiting before that release started),
   * hand changes and sections/s.
   */
  private static Result analyse(
      List<Section> all, double[] pingsNs, RedisProbe.Monitor monitor, Steal.Span steal) {
    List<Section> timeline = new ArrayList<>(all);
    timeline.sort(Comparator.comparingLong(Section::acquired));
    List<Double> handoffs = new ArrayList<>();
    int handChanges = 0;
    for (int i = 1; i < timeline.size(); i++) {
      Section before = timeline.get(i - 1);
      Section next = timeline.get(i);
      // The release's effect in Redis comes after it started: no acquisition may precede it.
      if (next.acquired() < before.releasing()) {
        throw new IllegalStateException(
            String.format(
                Locale.ROOT,
                "MUTUAL EXCLUSION VIOLATED: process %d acquired at %d, %.1f us before process %d"
                    + " (holding since %d) started its release at %d",
                next.process(),
                next.acquired(),
                (before.releasing() - next.acquired()) / 1e3,
                before.process(),
                before.acquired(),
                before.releasing()));
      }
      if (next.process() != before.process()) {
        handChanges++;
        if (next.asked() < before.releasing()) {
          handoffs.add((double) (next.acquired() - before.releasing()));
        }
      }
    }
    long first = all.stream().mapToLong(Section::asked).min().orElseThrow();
    long last = all.stream().mapToLong(Section::released).max().orElseThrow();
    double[] waits = all.stream().mapToDouble(s -> s.acquired() - s.asked()).toArray();
    return new Result(
        timeline,
        all.size() / ((last - first) / 1e9),
        waits,
        Stats.toArray(handoffs),
        handChanges,
        pingsNs,
        monitor,
        steal);
  }
}
