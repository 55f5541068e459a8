package io.redlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.api.Test;

class ConcurrencyTest extends RedisTestBase {
  /** Deliberately not atomic: only the lock keeps read-modify-write cycles apart. */
  private long counter;

  @Test
  void sixteenThreadsLoseNoUpdate() throws Exception {
    String name = uniqueName();
    RedlockClient[] clients = {client(), client()};
    int threads = 16;
    int rounds = 40;
    counter = 0;
    runAll(
        threads,
        t -> {
          Lock lock = clients[t % clients.length].getLock(name);
          for (int i = 0; i < rounds; i++) {
            lock.lock();
            try {
              long seen = counter;
              Thread.yield();
              counter = seen + 1;
            } finally {
              lock.unlock();
            }
          }
        });
    assertEquals(threads * rounds, counter);
  }

  /** Seed 002: 5 clients x 5 threads take keys from one counter: no duplicate, no gap. */
  @Test
  void seedTwoKeysHaveNoDuplicateAndNoGap() throws Exception {
    String name = uniqueName();
    List<RedlockClient> clients = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      clients.add(client());
    }
    int perThread = 20;
    ConcurrentLinkedQueue<Long> keys = new ConcurrentLinkedQueue<>();
    counter = 0;
    runAll(
        25,
        t -> {
          Lock lock = clients.get(t % 5).getLock(name);
          for (int i = 0; i < perThread; i++) {
            lock.lock();
            try {
              long key = counter + 1;
              Thread.yield();
              counter = key;
              keys.add(key);
            } finally {
              lock.unlock();
            }
          }
        });
    List<Long> sorted = new ArrayList<>(keys);
    sorted.sort(null);
    assertEquals(25 * perThread, sorted.size());
    for (int i = 0; i < sorted.size(); i++) {
      assertEquals(i + 1, sorted.get(i), "keys must be 1..N with no duplicate and no gap");
    }
  }

  interface Body {
    void run(int thread) throws Exception;
  }

  private static void runAll(int threads, Body body) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    CountDownLatch start = new CountDownLatch(1);
    try {
      List<Future<?>> futures = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        int thread = t;
        futures.add(
            pool.submit(
                () -> {
                  start.await();
                  body.run(thread);
                  return null;
                }));
      }
      start.countDown();
      for (Future<?> f : futures) {
        f.get();
      }
    } finally {
      pool.shutdownNow();
      assertTrue(pool.awaitTermination(10, java.util.concurrent.TimeUnit.SECONDS));
    }
  }
}
