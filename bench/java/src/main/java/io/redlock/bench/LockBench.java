package io.redlock.bench;

import io.redlock.RedlockClient;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.Lock;
import java.util.function.Function;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * A plain harness (no JMH: the unit is a Redis round trip, far above JIT noise): lock/unlock
 * cycles of redlock-sdk's DistributedLock and Redisson's RLock, both through
 * java.util.concurrent.locks.Lock with the watchdog on, on the same redis-server.
 *
 * <p>Uncontended: one thread, one name. Contended: 16 threads, one name, one client per library
 * (every thread a different owner); reports sections/s and the wait per acquisition (p50, p99,
 * max).
 */
public final class LockBench {
  private LockBench() {}

  public static void main(String[] args) throws Exception {
    String url = args[0];
    int uncontendedCycles = args.length > 1 ? Integer.parseInt(args[1]) : 5000;
    int contendedSeconds = args.length > 2 ? Integer.parseInt(args[2]) : 5;

    Config config = new Config();
    config.useSingleServer().setAddress(url);
    RedissonClient redisson = Redisson.create(config);
    try (RedlockClient redlock = RedlockClient.connect(url)) {
      Function<String, Lock> ours = redlock::getLock;
      Function<String, Lock> theirs = redisson::getLock;

      // Warm-up of both (JIT, connections, scripts loaded).
      uncontended(ours, "warm:redlock", uncontendedCycles / 5);
      uncontended(theirs, "warm:redisson", uncontendedCycles / 5);

      double oursRate = uncontended(ours, "bench:u:redlock", uncontendedCycles);
      double theirsRate = uncontended(theirs, "bench:u:redisson", uncontendedCycles);
      System.out.printf(
          Locale.ROOT,
          "uncontended lock/unlock, 1 thread, %d cycles:%n  redlock-sdk %9.0f cycles/s%n"
              + "  Redisson    %9.0f cycles/s%n  ratio       %9.2fx%n",
          uncontendedCycles,
          oursRate,
          theirsRate,
          oursRate / theirsRate);

      System.out.printf(Locale.ROOT, "contended, 16 threads, one name, %d s each:%n", contendedSeconds);
      contended("redlock-sdk", ours, "bench:c:redlock", 16, contendedSeconds);
      contended("Redisson   ", theirs, "bench:c:redisson", 16, contendedSeconds);
    } finally {
      redisson.shutdown();
    }
  }

  private static double uncontended(Function<String, Lock> locks, String name, int cycles) {
    Lock lock = locks.apply(name);
    long started = System.nanoTime();
    for (int i = 0; i < cycles; i++) {
      lock.lock();
      lock.unlock();
    }
    return cycles / ((System.nanoTime() - started) / 1e9);
  }

  private static void contended(
      String label, Function<String, Lock> locks, String name, int threads, int seconds)
      throws Exception {
    AtomicBoolean stop = new AtomicBoolean();
    CountDownLatch start = new CountDownLatch(1);
    List<long[]> waits = new ArrayList<>();
    int[] counts = new int[threads];
    List<Thread> workers = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      int index = t;
      long[] mine = new long[2_000_000];
      waits.add(mine);
      Thread worker =
          new Thread(
              () -> {
                Lock lock = locks.apply(name);
                try {
                  start.await();
                } catch (InterruptedException e) {
                  return;
                }
                int n = 0;
                while (!stop.get() && n < mine.length) {
                  long asked = System.nanoTime();
                  lock.lock();
                  mine[n++] = System.nanoTime() - asked;
                  lock.unlock();
                }
                counts[index] = n;
              });
      workers.add(worker);
      worker.start();
    }
    long began = System.nanoTime();
    start.countDown();
    Thread.sleep(TimeUnit.SECONDS.toMillis(seconds));
    stop.set(true);
    for (Thread worker : workers) {
      worker.join();
    }
    double elapsed = (System.nanoTime() - began) / 1e9;
    int total = Arrays.stream(counts).sum();
    long[] all = new long[total];
    int at = 0;
    for (int t = 0; t < threads; t++) {
      System.arraycopy(waits.get(t), 0, all, at, counts[t]);
      at += counts[t];
    }
    Arrays.sort(all);
    int min = Arrays.stream(counts).min().orElse(0);
    int max = Arrays.stream(counts).max().orElse(0);
    System.out.printf(
        Locale.ROOT,
        "  %s %8.0f sections/s  wait p50 %7.2f ms  p99 %7.2f ms  max %8.2f ms"
            + "  (per thread %d..%d)%n",
        label,
        total / elapsed,
        percentile(all, 0.50),
        percentile(all, 0.99),
        all.length == 0 ? 0 : all[all.length - 1] / 1e6,
        min,
        max);
  }

  private static double percentile(long[] sorted, double p) {
    if (sorted.length == 0) {
      return 0;
    }
    int index = (int) Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1);
    return sorted[Math.max(0, index)] / 1e6;
  }
}
