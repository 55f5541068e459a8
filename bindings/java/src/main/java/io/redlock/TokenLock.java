package io.redlock;

import java.lang.ref.Reference;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.function.Supplier;

/** {@link DistributedLock} over one native lock view; the owner comes from a supplier. */
final class TokenLock implements DistributedLock {
  private static final long WAIT_FOREVER = -1;
  private static final long WATCHDOG_LEASE = 0;

  /** What the cleaner frees once this lock is unreachable (it must not refer to the lock). */
  private static final class NativeState implements Runnable {
    final long handle;
    /** The hold each owner took through this object, for fencingToken()'s check and isLost(). */
    final Map<String, NativeHold> holds = new ConcurrentHashMap<>();

    NativeState(long handle) {
      this.handle = handle;
    }

    @Override
    public void run() {
      holds.values().forEach(NativeHold::free);
      Native.lockFree(handle);
    }
  }

  private final RedlockClient client;
  private final String name;
  private final LockMode mode;
  private final Supplier<String> owner;
  /** Stored with each hold; null: the acquiring thread's name. */
  private final String label;
  private final NativeState state;

  TokenLock(
      RedlockClient client,
      String name,
      LockMode mode,
      long handle,
      Supplier<String> owner,
      String label) {
    this.client = client;
    this.name = name;
    this.mode = mode;
    this.owner = owner;
    this.label = label;
    this.state = new NativeState(handle);
    Native.CLEANER.register(this, state);
  }

  @Override
  public void lock() {
    try {
      acquire(WAIT_FOREVER, WATCHDOG_LEASE, false);
    } catch (InterruptedException e) {
      throw new AssertionError("an uncancellable wait was interrupted", e);
    }
  }

  @Override
  public void lock(long leaseTime, TimeUnit unit) {
    try {
      acquire(WAIT_FOREVER, leaseMillis(leaseTime, unit), false);
    } catch (InterruptedException e) {
      throw new AssertionError("an uncancellable wait was interrupted", e);
    }
  }

  @Override
  public void lockInterruptibly() throws InterruptedException {
    acquire(WAIT_FOREVER, WATCHDOG_LEASE, true);
  }

  @Override
  public boolean tryLock() {
    try {
      return acquire(0, WATCHDOG_LEASE, false);
    } catch (InterruptedException e) {
      throw new AssertionError("a single attempt was interrupted", e);
    }
  }

  @Override
  public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
    return acquire(waitNanos(time, unit), WATCHDOG_LEASE, true);
  }

  @Override
  public boolean tryLock(long waitTime, long leaseTime, TimeUnit unit) throws InterruptedException {
    return acquire(waitNanos(waitTime, unit), leaseMillis(leaseTime, unit), true);
  }

  private boolean acquire(long waitNanos, long leaseMillis, boolean interruptible)
      throws InterruptedException {
    String token = owner.get();
    // An unnamed platform thread leaves it to the core: it stores the OS thread's name or id. An
    // unnamed virtual thread (the default) is named by its id here, since it may wait on a
    // platform thread of ours (see VirtualThreadWait). An empty label would be refused.
    String threadName = Thread.currentThread().getName();
    String label = this.label != null ? this.label : threadName.isEmpty() ? unnamed() : threadName;
    long hold;
    try {
      if (waitNanos != 0 && VirtualThreadWait.onVirtualThread()) {
        hold =
            VirtualThreadWait.run(
                cancel -> Native.acquire(state.handle, token, waitNanos, leaseMillis, label, cancel),
                interruptible);
      } else if (interruptible) {
        hold =
            InterruptibleWait.run(
                cancel -> Native.acquire(state.handle, token, waitNanos, leaseMillis, label, cancel));
      } else {
        hold = Native.acquire(state.handle, token, waitNanos, leaseMillis, label, 0);
      }
    } finally {
      Reference.reachabilityFence(this);
    }
    if (hold == 0) {
      return false;
    }
    // A re-entry replaces the hold it re-enters (same fencing token); the old handle goes.
    NativeHold previous = state.holds.put(token, new NativeHold(hold));
    if (previous != null) {
      previous.free();
    }
    return true;
  }

  private static String unnamed() {
    return VirtualThreadWait.onVirtualThread()
        ? "virtual-thread-" + Thread.currentThread().getId()
        : null;
  }

  @Override
  public void unlock() {
    String token = owner.get();
    // Only the hold known before the release may be forgotten: with an explicit token, another
    // thread may take a new hold through this object as soon as the release ends, and its hold
    // must stay in the book.
    NativeHold known = state.holds.get(token);
    try {
      if (Native.release(state.handle, token) == 0) {
        forget(token, known);
      }
    } catch (IllegalMonitorStateException e) {
      // NotHeldException or LockLostException (the core reports a lost hold's next release as
      // lost, also after its watchdog noticed).
      forget(token, known); // whatever this object remembered is not held any more
      throw e;
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  private void forget(String token, NativeHold known) {
    if (known != null && state.holds.remove(token, known)) {
      known.free();
    }
  }

  @Override
  public long fencingToken() {
    String token = owner.get();
    if (!state.holds.containsKey(token)) {
      throw new IllegalMonitorStateException(
          "no hold of lock '" + name + "' was taken by this owner through this object");
    }
    long fence;
    try {
      fence = Native.fencingToken(state.handle, token);
    } finally {
      Reference.reachabilityFence(this);
    }
    if (fence == 0) {
      throw new IllegalMonitorStateException(
          "the owner no longer holds lock '"
              + name
              + "' (released elsewhere, expired or force-unlocked)");
    }
    return fence;
  }

  @Override
  public boolean isHeldByCurrentThread() {
    return getHoldCount() > 0;
  }

  @Override
  public int getHoldCount() {
    try {
      return Native.holdCount(state.handle, owner.get());
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  @Override
  public boolean isLocked() {
    try {
      return Native.isLocked(state.handle);
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  @Override
  public String ownerToken() {
    return owner.get();
  }

  @Override
  public void extend(long lease, TimeUnit unit) {
    // The same rule as an acquire's lease (and the core's): at least 1 ms.
    long millis = leaseMillis(lease, unit);
    try {
      Native.extend(state.handle, owner.get(), millis);
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  @Override
  public void forceUnlock() {
    try {
      Native.forceUnlock(state.handle);
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  @Override
  public LockInfo inspect() {
    try {
      return Native.lockInspect(state.handle);
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  @Override
  public DistributedLock withLabel(String label) {
    return client.openLock(name, mode, owner, checkLabel(label));
  }

  @Override
  public boolean isLost() {
    NativeHold hold = state.holds.get(owner.get());
    return hold != null && hold.isLost();
  }

  @Override
  public String getName() {
    return name;
  }

  @Override
  public LockMode mode() {
    return mode;
  }

  @Override
  public Condition newCondition() {
    throw new UnsupportedOperationException(
        "conditions are not supported by distributed locks");
  }

  @Override
  public String toString() {
    return "DistributedLock["
        + name
        + ", "
        + mode
        + (label == null ? "" : ", label=" + label)
        + ", "
        + client
        + "]";
  }

  static String checkLabel(String label) {
    Objects.requireNonNull(label, "label");
    if (label.isEmpty()) {
      throw new IllegalArgumentException("label must not be empty");
    }
    return label;
  }

  /** The Lock idiom: a time {@code <= 0} means one attempt, no waiting. */
  private static long waitNanos(long time, TimeUnit unit) {
    Objects.requireNonNull(unit, "unit");
    return Math.max(0, unit.toNanos(time));
  }

  private static long leaseMillis(long leaseTime, TimeUnit unit) {
    Objects.requireNonNull(unit, "unit");
    long millis = unit.toMillis(leaseTime);
    if (millis < 1) {
      throw new IllegalArgumentException("lease must be at least 1 ms, got " + leaseTime + " " + unit);
    }
    return millis;
  }
}
