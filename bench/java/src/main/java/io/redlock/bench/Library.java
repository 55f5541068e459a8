package io.redlock.bench;

import io.redlock.DistributedLock;
import io.redlock.RedlockClient;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import java.util.function.LongConsumer;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/** One lock library with one client: ours (redlock-sdk's DistributedLock) or Redisson's RLock. */
abstract class Library implements AutoCloseable {
  /** The library ids of the command line, ours first. */
  static final List<String> IDS = List.of("redlock", "redisson");

  /** A lock of one name, taken with lock() (or lock(lease) when a lease is given). */
  interface Locker {
    void lock();

    void unlock();
  }

  /** The id on the command line. */
  abstract String id();

  /** The name in the fragments and the tables. */
  final String label() {
    return label(id());
  }

  abstract Locker locker(String name);

  @Override
  public abstract void close();

  static String label(String id) {
    return switch (id) {
      case "redlock" -> "redlock-java";
      case "redisson" -> "Redisson";
      default -> throw new IllegalArgumentException("unknown library " + id);
    };
  }

  /** A locker over {@code lock}: {@code lockForMs} with a lease, {@code lock()} without one. */
  static Locker locker(long leaseMs, Lock lock, LongConsumer lockForMs) {
    return new Locker() {
      @Override
      public void lock() {
        if (leaseMs > 0) {
          lockForMs.accept(leaseMs);
        } else {
          lock.lock();
        }
      }

      @Override
      public void unlock() {
        lock.unlock();
      }
    };
  }

  /** Connects one client of library {@code id}; {@code leaseMs <= 0}: the watchdog (default). */
  static Library open(String id, String url, long leaseMs) {
    return switch (id) {
      case "redlock" -> new Ours(url, leaseMs);
      case "redisson" -> new Theirs(url, leaseMs);
      default -> throw new IllegalArgumentException("unknown library " + id);
    };
  }

  private static final class Ours extends Library {
    private final RedlockClient client;
    private final long leaseMs;

    Ours(String url, long leaseMs) {
      this.client = RedlockClient.connect(url);
      this.leaseMs = leaseMs;
    }

    @Override
    String id() {
      return "redlock";
    }

    @Override
    Locker locker(String name) {
      DistributedLock lock = client.getLock(name);
      return locker(leaseMs, lock, ms -> lock.lock(ms, TimeUnit.MILLISECONDS));
    }

    @Override
    public void close() {
      client.close();
    }
  }

  private static final class Theirs extends Library {
    private final RedissonClient client;
    private final long leaseMs;

    Theirs(String url, long leaseMs) {
      Config config = new Config();
      config.useSingleServer().setAddress(url);
      this.client = Redisson.create(config);
      this.leaseMs = leaseMs;
    }

    @Override
    String id() {
      return "redisson";
    }

    @Override
    Locker locker(String name) {
      RLock lock = client.getLock(name);
      return locker(leaseMs, lock, ms -> lock.lock(ms, TimeUnit.MILLISECONDS));
    }

    @Override
    public void close() {
      // No quiet period: the default (2 s) would only slow every worker's exit down.
      client.shutdown(0, 5, TimeUnit.SECONDS);
    }
  }
}
