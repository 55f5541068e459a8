package io.redlock.demo;

import static io.redlock.demo.Main.check;

import io.redlock.RedlockClient;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;

/**
 * Seed 002 ("Redis结合AQS实现Java版的可重入分布式锁"): 5 processes x 5 threads read a key from a
 * shared counter, record it and write counter + 1 — deliberately not atomic (here a plain file,
 * the seed used a database table). Only the lock makes it correct: no duplicate, no gap.
 */
final class Seed002KeyGenerator {
  static final int PROCESSES = 5;
  static final int THREADS = 5;
  static final int MAX_KEY = 500;

  private Seed002KeyGenerator() {}

  static void run(String url) throws Exception {
    Path dir = Files.createTempDirectory("redlock-seed002");
    Path counter = dir.resolve("counter");
    Path records = dir.resolve("records");
    Files.writeString(counter, "1");
    Files.writeString(records, "");
    List<Process> processes = new ArrayList<>();
    for (int p = 0; p < PROCESSES; p++) {
      processes.add(
          new ProcessBuilder(
                  Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                  "-cp",
                  System.getProperty("java.class.path"),
                  Seed002KeyGenerator.class.getName(),
                  url,
                  counter.toString(),
                  records.toString(),
                  "server-" + p)
              .inheritIO()
              .start());
    }
    for (Process process : processes) {
      check(process.waitFor(120, TimeUnit.SECONDS), "a key generator process finished");
      check(process.exitValue() == 0, "it exited cleanly");
    }
    List<String> lines = Files.readAllLines(records);
    TreeSet<Long> keys = new TreeSet<>();
    for (String line : lines) {
      keys.add(Long.parseLong(line.split(" ")[0]));
    }
    check(lines.size() == MAX_KEY - 1, lines.size() + " keys recorded");
    check(keys.size() == lines.size(), "no duplicate key");
    check(keys.first() == 1 && keys.last() == MAX_KEY - 1, "no gap: keys 1.." + (MAX_KEY - 1));
    for (Path file : List.of(counter, records, dir)) {
      Files.deleteIfExists(file);
    }
  }

  /** One "server" process of the seed: 5 threads sharing one lock name. */
  public static void main(String[] args) throws Exception {
    String url = args[0];
    Path counter = Path.of(args[1]);
    Path records = Path.of(args[2]);
    String server = args[3];
    try (RedlockClient client = RedlockClient.connect(url)) {
      Lock lock = client.getLock("key-generator");
      List<Thread> threads = new ArrayList<>();
      for (int t = 0; t < THREADS; t++) {
        Thread thread = new Thread(() -> takeKeys(lock, counter, records, server));
        threads.add(thread);
        thread.start();
      }
      for (Thread thread : threads) {
        thread.join();
      }
    }
  }

  private static void takeKeys(Lock lock, Path counter, Path records, String server) {
    while (true) {
      lock.lock();
      try {
        long key = Long.parseLong(Files.readString(counter).trim());
        if (key >= MAX_KEY) {
          return;
        }
        Files.writeString(
            records,
            key + " " + server + " " + Thread.currentThread().getName() + "\n",
            StandardCharsets.UTF_8,
            StandardOpenOption.APPEND);
        Files.writeString(counter, Long.toString(key + 1));
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException(e);
      } finally {
        lock.unlock();
      }
    }
  }
}
