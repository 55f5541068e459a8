package io.redlock;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * A connection to one Redis server for taking locks: one command connection, one pub/sub
 * connection for waiters and one watchdog, shared by every lock of the client. Thread-safe.
 *
 * <pre>{@code
 * try (RedlockClient client = RedlockClient.connect("redis://127.0.0.1:6379")) {
 *   Lock lock = client.getLock("orders:42");
 *   lock.lock();
 *   try { ... } finally { lock.unlock(); }
 * }
 * }</pre>
 *
 * <p>{@link #close()} stops the watchdog and ends waiting acquires with {@link
 * ClientClosedException}; holds stay in Redis until their lease ends, so unlock first.
 */
public final class RedlockClient implements AutoCloseable {
  private final long handle;
  private final String description;
  private final AtomicBoolean closed = new AtomicBoolean();
  private final Cleaner.Cleanable cleanable;
  /** One owner per thread (and client), like ReentrantLock's owner thread. */
  private final ThreadLocal<String> threadOwner = ThreadLocal.withInitial(Native::newOwnerToken);

  private RedlockClient(Builder builder) {
    NativeCallbacks callbacks = new NativeCallbacks(builder.lockLost, builder.contention);
    this.handle =
        Native.clientConnect(
            builder.url,
            builder.prefix,
            builder.lease == null ? 0 : builder.lease.toMillis(),
            builder.contentionAlertAfter == null ? -1 : builder.contentionAlertAfter.toMillis(),
            builder.contentionAlertAttempts,
            callbacks,
            callbacks.hasLockLost(),
            callbacks.hasContention());
    long nativeHandle = handle;
    this.cleanable = Native.CLEANER.register(this, () -> Native.clientFree(nativeHandle));
    this.description = "RedlockClient[prefix=" + (builder.prefix == null ? "redlock" : builder.prefix) + "]";
  }

  /** Connects with the default settings ({@code redis://[user:password@]host[:port][/db]}). */
  public static RedlockClient connect(String url) {
    return builder(url).build();
  }

  /** A builder starting from the defaults. */
  public static Builder builder(String url) {
    return new Builder(Objects.requireNonNull(url, "url"));
  }

  /** The exclusive reentrant lock {@code name}, owned by the calling thread. */
  public DistributedLock getLock(String name) {
    return openLock(name, LockMode.WRITE, threadOwner::get, null);
  }

  /**
   * The exclusive reentrant lock {@code name}, owned by {@code ownerToken} whatever the thread:
   * one instance (or process, or language) can lock and another unlock (seed 000).
   */
  public DistributedLock getLock(String name, String ownerToken) {
    String token = checkToken(ownerToken);
    return openLock(name, LockMode.WRITE, () -> token, null);
  }

  /** The read/write lock {@code name}, owned by the calling thread. */
  public DistributedReadWriteLock getReadWriteLock(String name) {
    return openReadWriteLock(name, threadOwner::get);
  }

  /** The read/write lock {@code name}, owned by {@code ownerToken} whatever the thread. */
  public DistributedReadWriteLock getReadWriteLock(String name, String ownerToken) {
    String token = checkToken(ownerToken);
    return openReadWriteLock(name, () -> token);
  }

  /**
   * A snapshot of lock {@code name} (both views of a read/write lock, and the exclusive lock of
   * the same name): its mode, holders with their hold counts, fencing tokens, leases and the
   * description stored with each hold (host, pid, thread or label, time acquired), waiting
   * writers and readers, and the newest fencing token. One round trip; an administrator's call,
   * no owner needed.
   *
   * @throws NullPointerException if {@code name} is null
   * @throws IllegalArgumentException if {@code name} is empty or longer than 1024 bytes (UTF-8)
   * @throws ClientClosedException if this client was closed
   * @throws RedlockException if Redis cannot be reached or refuses the call
   */
  public LockInfo inspect(String name) {
    Objects.requireNonNull(name, "name");
    try {
      return Native.clientInspect(handle, name);
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /** A fresh random owner token (a UUID v4 plus this process's instance id). */
  public static String newOwnerToken() {
    return Native.newOwnerToken();
  }

  /** The token that owns this client's locks for the calling thread. */
  public String currentThreadOwnerToken() {
    return threadOwner.get();
  }

  /** Stops the watchdog and ends every waiting acquire; later calls fail. Idempotent. */
  @Override
  public void close() {
    if (closed.compareAndSet(false, true)) {
      try {
        Native.clientClose(handle);
      } finally {
        Reference.reachabilityFence(this);
      }
    }
  }

  public boolean isClosed() {
    return closed.get();
  }

  @Override
  public String toString() {
    return description;
  }

  private DistributedReadWriteLock openReadWriteLock(String name, Supplier<String> owner) {
    DistributedLock read = openLock(name, LockMode.READ, owner, null);
    DistributedLock write = openLock(name, LockMode.WRITE, owner, null);
    return new TokenReadWriteLock(name, read, write);
  }

  /** A new lock object; {@code label} null stores the acquiring thread's name with each hold. */
  DistributedLock openLock(String name, LockMode mode, Supplier<String> owner, String label) {
    Objects.requireNonNull(name, "name");
    try {
      long lock = Native.lockOpen(handle, name, mode == LockMode.READ);
      return new TokenLock(this, name, mode, lock, owner, label);
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  private static String checkToken(String ownerToken) {
    Objects.requireNonNull(ownerToken, "ownerToken");
    if (ownerToken.isEmpty()) {
      throw new IllegalArgumentException("owner token must not be empty");
    }
    return ownerToken;
  }

  /** Settings of a {@link RedlockClient}; every one has a default. */
  public static final class Builder {
    private final String url;
    private String prefix;
    private Duration lease;
    private Duration contentionAlertAfter;
    private long contentionAlertAttempts;
    private Consumer<LockLostEvent> lockLost;
    private Consumer<ContentionAlert> contention;

    private Builder(String url) {
      this.url = url;
    }

    /** Prefix of every key and channel (default {@code redlock}); no braces. */
    public Builder prefix(String prefix) {
      this.prefix = Objects.requireNonNull(prefix, "prefix");
      return this;
    }

    /** Default lease, renewed by the watchdog every lease/3 (default 30 s). */
    public Builder lease(Duration lease) {
      this.lease = positiveMillis(lease, "lease");
      return this;
    }

    /** Alert when one acquire has waited this long (default 30 s; zero disables). */
    public Builder contentionAlertAfter(Duration wait) {
      Objects.requireNonNull(wait, "wait");
      if (wait.isNegative()) {
        throw new IllegalArgumentException("contention alert threshold must not be negative");
      }
      this.contentionAlertAfter = wait.isZero() ? Duration.ZERO : positiveMillis(wait, "wait");
      return this;
    }

    /**
     * Alert when one acquire has found the lock taken this many times (default: no limit; zero
     * restores that). Either threshold raises the alert, once per waiting acquire; a try that
     * does not wait ({@code tryLock()}, or a time {@code <= 0}) never raises one. To alert by
     * attempts only, also set {@link #contentionAlertAfter(Duration)} to zero.
     *
     * @throws IllegalArgumentException if {@code attempts} is negative
     */
    public Builder contentionAlertAttempts(long attempts) {
      if (attempts < 0) {
        throw new IllegalArgumentException(
            "contention alert attempts must not be negative, got " + attempts);
      }
      this.contentionAlertAttempts = attempts;
      return this;
    }

    /** Called when a watchdog-kept hold is found gone (on a native thread; keep it short). */
    public Builder lockLostListener(Consumer<LockLostEvent> listener) {
      this.lockLost = Objects.requireNonNull(listener, "listener");
      return this;
    }

    /** Called when a waiter passes the contention threshold (on a native thread). */
    public Builder contentionListener(Consumer<ContentionAlert> listener) {
      this.contention = Objects.requireNonNull(listener, "listener");
      return this;
    }

    /** Connects; a Redis that cannot be reached is a {@link RedlockConnectionException}. */
    public RedlockClient build() {
      return new RedlockClient(this);
    }

    private static Duration positiveMillis(Duration value, String what) {
      Objects.requireNonNull(value, what);
      long millis;
      try {
        millis = value.toMillis();
      } catch (ArithmeticException e) { // beyond Long.MAX_VALUE ms, e.g. ChronoUnit.FOREVER
        throw new IllegalArgumentException(what + " is too long, got " + value);
      }
      if (value.isNegative() || millis < 1) {
        throw new IllegalArgumentException(what + " must be at least 1 ms, got " + value);
      }
      return value;
    }
  }
}
