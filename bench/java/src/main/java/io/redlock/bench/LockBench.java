package io.redlock.bench;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * redlock-sdk's DistributedLock ("redlock-java") versus Redisson's RLock on one redis-server, as
 * the suite's fragments (bench/FRAGMENTS.md) plus a table for a human. A plain harness (no JMH:
 * the unit is a Redis round trip, far above JIT noise). Both libraries through lock()/unlock()
 * with their defaults: waiting by pub/sub, holds kept by the watchdog (or a fixed lease with
 * {@code --lease-ms}).
 *
 * <ul>
 *   <li>P3-java.json: uncontended acquire+release of one thread, R repetitions of N cycles per
 *       library after a warm-up, interleaved with the order rotated every repetition.
 *   <li>P4-java.json: 4 worker processes (JVMs on the same classpath) x S sections of one lock,
 *       R interleaved repetitions; wait, handoff in PING round trips, hand changes, sections/s,
 *       and Redis commands per section from one more untimed run under MONITOR.
 * </ul>
 *
 * <pre>
 * LockBench --url redis://127.0.0.1:PORT [--out DIR] [--quick] [--cycles N] [--sections S]
 *           [--reps R] [--p4-reps R] [--lease-ms MS]
 * LockBench worker ...    (a P4 worker, started by the bench itself)
 * </pre>
 */
public final class LockBench {
  private static final int PROCESSES = 4;
  private static final int SAMPLES = 2000;
  private static final int PINGS_PER_RUN = 200;
  /**
   * P3: stretches each library's cycles of one repetition are cut into, the libraries taking
   * turns (order swapped every slice). On a virtual machine whose idle vCPUs are slow to wake, a
   * round trip's cost drifts over seconds, and one stretch per library and repetition measured
   * the drift as much as the library (docs/benchmarks.md).
   */
  private static final int SLICES = 10;

  private LockBench() {}

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("worker")) {
      Worker.run(args);
      return;
    }
    Options o = Options.parse(args);
    Files.createDirectories(o.out);
    System.err.printf(
        Locale.ROOT,
        "java bench%s: P3 %d reps x %d cycles, P4 %d reps x %d processes x %d sections, %s%n",
        o.quick ? " (quick)" : "",
        o.reps,
        o.cycles,
        o.p4Reps,
        PROCESSES,
        o.sections,
        o.leaseMs > 0 ? "lease " + o.leaseMs + " ms" : "watchdog");

    Map<String, Object> p3 = uncontended(o);
    write(o.out.resolve("P3-java.json"), p3);
    Map<String, Object> p4 = contended(o);
    write(o.out.resolve("P4-java.json"), p4);

    printP3(p3, o);
    printP4(p4, o);
    System.out.println();
    System.out.println("fragments: " + o.out.resolve("P3-java.json"));
    System.out.println("           " + o.out.resolve("P4-java.json"));
  }

  // -- P3: uncontended ---------------------------------------------------------------------------

  private static Map<String, Object> uncontended(Options o) throws Exception {
    List<Library> libraries = new ArrayList<>();
    try {
      for (String id : Library.IDS) {
        libraries.add(Library.open(id, o.url, o.leaseMs));
      }
      List<Library.Locker> locks = new ArrayList<>();
      for (Library library : libraries) {
        Library.Locker lock = library.locker("bench:p3:" + library.id());
        locks.add(lock);
        cycles(lock, o.cycles); // warm-up: JIT, connections, scripts loaded
      }
      int n = libraries.size();
      List<List<Double>> rates = new ArrayList<>();
      List<List<double[]>> latencies = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        rates.add(new ArrayList<>());
        latencies.add(new ArrayList<>());
      }
      int perSlice = (o.cycles + SLICES - 1) / SLICES;
      for (int rep = 0; rep < o.reps; rep++) {
        long[] elapsedNs = new long[n];
        for (int slice = 0; slice < SLICES; slice++) {
          for (int k = 0; k < n; k++) {
            int i = (rep * SLICES + slice + k) % n; // A B, B A, ...
            long started = System.nanoTime();
            double[] latencyNs = cycles(locks.get(i), perSlice);
            elapsedNs[i] += System.nanoTime() - started;
            latencies.get(i).add(latencyNs);
          }
        }
        for (int i = 0; i < n; i++) {
          rates.get(i).add(perSlice * SLICES / (elapsedNs[i] / 1e9));
        }
        System.err.printf(Locale.ROOT, "P3 rep %d/%d done%n", rep + 1, o.reps);
      }
      List<Object> series = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        double[] runs = Stats.toArray(rates.get(i));
        double[] us = Stats.concat(latencies.get(i));
        for (int j = 0; j < us.length; j++) {
          us[j] /= 1e3;
        }
        Map<String, Object> s = series(libraries.get(i).label(), "cycles/s", "higher", runs);
        s.put("latency_us", latency(us));
        series.add(s);
      }
      double ratio = median(series, 0) / median(series, 1);
      Map<String, Object> fragment = new LinkedHashMap<>();
      fragment.put("goal", "P3");
      fragment.put("title", "Java: uncontended acquire+release");
      fragment.put("target", ">= 1.5x Redisson");
      fragment.put("headline", headline("redlock-java / Redisson", ratio, ratio >= 1.5));
      fragment.put("series", series);
      fragment.put(
          "notes",
          String.format(
              Locale.ROOT,
              "one thread, one client per library, lock()+unlock() of one name (%s); %d reps x %d"
                  + " cycles, each rep interleaved in %d slices per library with the order"
                  + " rotated every slice, after %d warm-up cycles each; latency = one acquire+release cycle (all reps pooled);"
                  + " redis-server on 127.0.0.1; Redisson 3.37.0 defaults",
              holdText(o),
              o.reps,
              o.cycles,
              SLICES,
              o.cycles));
      return fragment;
    } finally {
      for (Library library : libraries) {
        library.close();
      }
    }
  }

  /** {@code count} acquire+release cycles; each one's duration in ns. */
  private static double[] cycles(Library.Locker lock, int count) {
    double[] ns = new double[count];
    for (int i = 0; i < count; i++) {
      long started = System.nanoTime();
      lock.lock();
      lock.unlock();
      ns[i] = System.nanoTime() - started;
    }
    return ns;
  }

  // -- P4: contended -----------------------------------------------------------------------------

  private static Map<String, Object> contended(Options o) throws Exception {
    Path scratch = Files.createTempDirectory("redlock-bench-p4-");
    try {
      Contended bench = new Contended(o.url, PROCESSES, o.sections, o.leaseMs, scratch);
      List<String> ids = Library.IDS;
      int n = ids.size();
      List<List<Contended.Result>> results = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        results.add(new ArrayList<>());
      }
      for (int rep = 0; rep < o.p4Reps; rep++) {
        for (int k = 0; k < n; k++) {
          int i = (rep + k) % n;
          String id = ids.get(i);
          Contended.Result r = bench.run(id, "bench:p4:" + id + ":" + rep, PINGS_PER_RUN, false);
          results.get(i).add(r);
          System.err.printf(
              Locale.ROOT,
              "P4 rep %d/%d %-12s %7.0f sections/s, wait max %.2f ms, handoff p50 %.0f us,"
                  + " PING p50 %.0f us%n",
              rep + 1,
              o.p4Reps,
              Library.label(id),
              r.sectionsPerSecond(),
              Stats.max(r.waitsNs()) / 1e6,
              Stats.percentile(r.handoffsNs(), 0.5) / 1e3,
              Stats.percentile(r.pingsNs(), 0.5) / 1e3);
        }
      }
      // Round trips per section: once more per library, untimed (MONITOR slows Redis down).
      List<RedisProbe.Monitor> monitored = new ArrayList<>();
      for (String id : ids) {
        RedisProbe.Monitor m = bench.run(id, "bench:p4:" + id + ":monitor", 0, true).monitor();
        monitored.add(m);
        System.err.printf(
            Locale.ROOT,
            "P4 under MONITOR %-12s sent by clients %s, run in scripts %d%n",
            Library.label(id),
            m.sentByCommand(),
            m.scripted());
      }

      int total = PROCESSES * o.sections;
      List<Object> series = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        List<Contended.Result> rs = results.get(i);
        double[] runs = rs.stream().mapToDouble(Contended.Result::sectionsPerSecond).toArray();
        double[] waitsNs = Stats.concat(rs.stream().map(Contended.Result::waitsNs).toList());
        double[] handoffsNs = Stats.concat(rs.stream().map(Contended.Result::handoffsNs).toList());
        double[] pingsNs = Stats.concat(rs.stream().map(Contended.Result::pingsNs).toList());
        double[] waitsUs = java.util.Arrays.stream(waitsNs).map(v -> v / 1e3).toArray();
        double handoffP50 = Stats.percentile(handoffsNs, 0.5);
        double pingP50 = Stats.percentile(pingsNs, 0.5);
        RedisProbe.Monitor m = monitored.get(i);

        Map<String, Object> s = series(Library.label(ids.get(i)), "sections/s", "higher", runs);
        s.put("latency_us", latency(waitsUs));
        Map<String, Object> extra = new LinkedHashMap<>();
        extra.put("handoff_p50_rtt", handoffP50 / pingP50);
        extra.put("wait_p50_ms", Stats.percentile(waitsNs, 0.5) / 1e6);
        extra.put("wait_p99_ms", Stats.percentile(waitsNs, 0.99) / 1e6);
        extra.put("wait_max_ms", Stats.max(waitsNs) / 1e6);
        // One bad rep or all of them alike: pooled, wait_max_ms cannot tell.
        extra.put(
            "wait_max_ms_rep_median",
            Stats.median(rs.stream().mapToDouble(r -> Stats.max(r.waitsNs())).toArray()) / 1e6);
        Steal.Span stolen =
            rs.stream().map(Contended.Result::steal).reduce(Steal.Span.EMPTY, Steal.Span::plus);
        double steal = stolen.percent();
        if (!Double.isNaN(steal)) {
          extra.put("steal_pct", Math.round(steal * 10) / 10.0);
        }
        extra.put("redis_cmds_per_section", (double) m.sent() / total);
        extra.put(
            "hand_changes",
            Stats.median(rs.stream().mapToDouble(Contended.Result::handChanges).toArray()));
        extra.put("handoff_p50_us", handoffP50 / 1e3);
        extra.put("ping_rtt_p50_us", pingP50 / 1e3);
        extra.put("handoffs_measured", handoffsNs.length);
        extra.put("script_cmds_per_section", (double) m.scripted() / total);
        s.put("extra", extra);
        series.add(s);
      }
      @SuppressWarnings("unchecked")
      Map<String, Object> oursExtra =
          (Map<String, Object>) ((Map<String, Object>) series.get(0)).get("extra");
      double rtts = (double) oursExtra.get("handoff_p50_rtt");
      boolean met =
          rtts <= 2
              && (double) oursExtra.get("wait_max_ms") <= 10
              && (double) oursExtra.get("redis_cmds_per_section") <= 4;
      Map<String, Object> fragment = new LinkedHashMap<>();
      fragment.put("goal", "P4");
      fragment.put("title", "Java: contended, 4 processes on one lock");
      fragment.put(
          "target", "handoff p50 <= 2 RTT, wait max <= 10 ms, <= 4 Redis commands per section");
      fragment.put(
          "headline", headline("redlock-java handoff p50 / PING RTT p50", rtts, met));
      fragment.put("series", series);
      fragment.put(
          "notes",
          String.format(
              Locale.ROOT,
              "%d JVM processes x %d empty sections of one lock per library and rep (fresh"
                  + " processes, warmed up by %d uncontended cycles each, common start), %d"
                  + " reps interleaved with the order"
                  + " rotated; lock()/unlock(), default pub/sub waiting, %s; runs = sections/s"
                  + " (first ask to last release); wait = ask to acquired, latency_us and wait"
                  + " figures pooled over reps (wait_max_ms_rep_median: the median of each rep's"
                  + " max); steal_pct = hypervisor steal, %% of all vCPUs' time from GO to the"
                  + " last DONE of the timed runs (/proc/stat); handoff = release start to the"
                  + " next acquisition"
                  + " when that holder was already waiting, divided by the PING p50 of a raw"
                  + " socket (%d pings per run); redis_cmds_per_section from one more untimed"
                  + " run under MONITOR (lines not marked lua]); mutual exclusion checked on"
                  + " the recorded times",
              PROCESSES,
              o.sections,
              Worker.WARM_UP_CYCLES,
              o.p4Reps,
              holdText(o),
              PINGS_PER_RUN));
      return fragment;
    } finally {
      Files.deleteIfExists(scratch);
    }
  }

  // -- fragments ---------------------------------------------------------------------------------

  private static Map<String, Object> series(
      String library, String metric, String better, double[] runs) {
    Map<String, Object> s = new LinkedHashMap<>();
    s.put("library", library);
    s.put("metric", metric);
    s.put("better", better);
    s.put("runs", Stats.list(runs));
    s.put("median", Stats.median(runs));
    s.put("min", Stats.min(runs));
    s.put("max", Stats.max(runs));
    return s;
  }

  private static Map<String, Object> latency(double[] us) {
    Map<String, Object> l = new LinkedHashMap<>();
    l.put("p50", Stats.percentile(us, 0.5));
    l.put("p99", Stats.percentile(us, 0.99));
    l.put("max", Stats.max(us));
    l.put("samples", Stats.subsample(us, SAMPLES));
    return l;
  }

  private static Map<String, Object> headline(String label, double value, boolean met) {
    Map<String, Object> h = new LinkedHashMap<>();
    h.put("label", label);
    h.put("value", value);
    h.put("met", met);
    return h;
  }

  @SuppressWarnings("unchecked")
  private static double median(List<Object> series, int index) {
    return (double) ((Map<String, Object>) series.get(index)).get("median");
  }

  private static String holdText(Options o) {
    return o.leaseMs > 0
        ? "fixed lease of " + o.leaseMs + " ms"
        : "no lease: watchdog defaults (redlock-java 30 s, Redisson 30 s)";
  }

  private static void write(Path file, Map<String, Object> fragment) throws Exception {
    Files.writeString(file, Json.write(fragment), StandardCharsets.UTF_8);
  }

  // -- the table ---------------------------------------------------------------------------------

  @SuppressWarnings("unchecked")
  private static void printP3(Map<String, Object> p3, Options o) {
    System.out.printf(
        Locale.ROOT,
        "%nP3 uncontended lock/unlock, 1 thread, %d reps x %d cycles (medians)%n"
            + "%-14s%11s%11s%11s%9s%9s%9s%n",
        o.reps,
        o.cycles,
        "library",
        "cycles/s",
        "min",
        "max",
        "p50 us",
        "p99 us",
        "max us");
    for (Object entry : (List<Object>) p3.get("series")) {
      Map<String, Object> s = (Map<String, Object>) entry;
      Map<String, Object> l = (Map<String, Object>) s.get("latency_us");
      System.out.printf(
          Locale.ROOT,
          "%-14s%11.0f%11.0f%11.0f%9.0f%9.0f%9.0f%n",
          s.get("library"),
          s.get("median"),
          s.get("min"),
          s.get("max"),
          l.get("p50"),
          l.get("p99"),
          l.get("max"));
    }
    Map<String, Object> h = (Map<String, Object>) p3.get("headline");
    System.out.printf(
        Locale.ROOT,
        "%s = %.2fx (target %s: %s)%n",
        h.get("label"),
        h.get("value"),
        p3.get("target"),
        (boolean) h.get("met") ? "met" : "NOT met");
  }

  @SuppressWarnings("unchecked")
  private static void printP4(Map<String, Object> p4, Options o) {
    System.out.printf(
        Locale.ROOT,
        "%nP4 contended, %d processes x %d sections, one lock, %d reps (medians; waits pooled)%n"
            + "%-14s%11s%9s%9s%9s%11s%9s%9s%10s%9s%n",
        PROCESSES,
        o.sections,
        o.p4Reps,
        "library",
        "sections/s",
        "wait p50",
        "p99 ms",
        "max ms",
        "handoff us",
        "/ RTT",
        "PING us",
        "changes",
        "cmds/sec");
    for (Object entry : (List<Object>) p4.get("series")) {
      Map<String, Object> s = (Map<String, Object>) entry;
      Map<String, Object> x = (Map<String, Object>) s.get("extra");
      System.out.printf(
          Locale.ROOT,
          "%-14s%11.0f%9.2f%9.2f%9.2f%11.0f%9.2f%9.0f%10.0f%9.2f%n",
          s.get("library"),
          s.get("median"),
          x.get("wait_p50_ms"),
          x.get("wait_p99_ms"),
          x.get("wait_max_ms"),
          x.get("handoff_p50_us"),
          x.get("handoff_p50_rtt"),
          x.get("ping_rtt_p50_us"),
          x.get("hand_changes"),
          x.get("redis_cmds_per_section"));
    }
    Map<String, Object> h = (Map<String, Object>) p4.get("headline");
    System.out.printf(
        Locale.ROOT,
        "%s = %.2f (target %s: %s)%n",
        h.get("label"),
        h.get("value"),
        p4.get("target"),
        (boolean) h.get("met") ? "met" : "NOT met");
  }

  // -- options -----------------------------------------------------------------------------------

  private static final class Options {
    String url;
    Path out = Path.of(".");
    boolean quick;
    Integer cycles;
    Integer sections;
    Integer reps;
    Integer p4Reps;
    long leaseMs;

    static Options parse(String[] args) {
      Options o = new Options();
      for (int i = 0; i < args.length; i++) {
        String a = args[i];
        switch (a) {
          case "--quick" -> o.quick = true;
          case "--url" -> o.url = value(args, ++i, a);
          case "--out" -> o.out = Path.of(value(args, ++i, a));
          case "--cycles" -> o.cycles = positive(value(args, ++i, a), a);
          case "--sections" -> o.sections = positive(value(args, ++i, a), a);
          case "--reps" -> o.reps = positive(value(args, ++i, a), a);
          case "--p4-reps" -> o.p4Reps = positive(value(args, ++i, a), a);
          case "--lease-ms" -> o.leaseMs = Long.parseLong(value(args, ++i, a));
          default -> throw new IllegalArgumentException("unknown argument " + a);
        }
      }
      if (o.url == null) {
        throw new IllegalArgumentException("--url redis://127.0.0.1:PORT is required");
      }
      o.cycles = o.cycles != null ? o.cycles : o.quick ? 300 : 3000;
      o.sections = o.sections != null ? o.sections : o.quick ? 200 : 1000;
      o.reps = o.reps != null ? o.reps : 5;
      o.p4Reps = o.p4Reps != null ? o.p4Reps : o.quick ? 3 : 5;
      if (o.reps < 3 || o.p4Reps < 3) {
        throw new IllegalArgumentException("at least 3 repetitions (FRAGMENTS.md)");
      }
      return o;
    }

    private static String value(String[] args, int i, String name) {
      if (i >= args.length) {
        throw new IllegalArgumentException(name + " needs a value");
      }
      return args[i];
    }

    private static int positive(String value, String name) {
      int v = Integer.parseInt(value);
      if (v < 1) {
        throw new IllegalArgumentException(name + " must be positive");
      }
      return v;
    }
  }
}
