package io.redlock;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * A Redis lock with the {@link Lock} contract, reentrant like {@link
 * java.util.concurrent.locks.ReentrantLock}.
 *
 * <p>The owner is the current thread (one random owner token per thread and client) unless the lock
 * was obtained with an explicit token ({@link RedlockClient#getLock(String, String)}): then
 * whoever uses that token, in any thread, process or language, is the owner.
 *
 * <p>Holds taken without a lease are kept alive by the client's watchdog until unlocked. Every
 * call is bounded by the client's command timeout; Redis failures are {@link RedlockException}s.
 */
public interface DistributedLock extends Lock {
  /** Acquires, waiting as long as it takes; an interrupt does not end the wait. */
  @Override
  void lock();

  /** Acquires with a lease instead of the watchdog: Redis frees it after {@code leaseTime}. */
  void lock(long leaseTime, TimeUnit unit);

  /** Acquires unless interrupted; the interrupt cancels the wait in Redis too. */
  @Override
  void lockInterruptibly() throws InterruptedException;

  /** One attempt, no waiting. */
  @Override
  boolean tryLock();

  /**
   * Waits up to {@code time} ({@code <= 0}: one attempt, as in {@link Lock#tryLock(long,
   * TimeUnit)}); false when the time ran out.
   */
  @Override
  boolean tryLock(long time, TimeUnit unit) throws InterruptedException;

  /** As {@link #tryLock(long, TimeUnit)}, with a lease instead of the watchdog. */
  boolean tryLock(long waitTime, long leaseTime, TimeUnit unit) throws InterruptedException;

  /**
   * Releases one hold of the owner.
   *
   * @throws NotHeldException (an {@link IllegalMonitorStateException}) if the owner does not hold
   *     the lock: never held, already released or expired
   * @throws LockLostException (an {@link IllegalMonitorStateException}) if the watchdog-kept hold
   *     is gone from Redis
   */
  @Override
  void unlock();

  /**
   * The fencing token of the owner's current hold, taken through this object: for one name,
   * tokens of exclusive and write acquisitions strictly increase (a re-entry returns the token of
   * the hold it re-enters). Asked of Redis (one round trip), as Python's {@code fencing_token}:
   * a hold that expired, was force-unlocked or was released through another client or language
   * is not reported.
   *
   * @throws IllegalMonitorStateException if the owner has no hold taken through this object, or
   *     no longer holds the lock
   */
  long fencingToken();

  /** Whether the owner (by default the current thread) holds this lock, per Redis. */
  boolean isHeldByCurrentThread();

  /** How many times the owner holds this lock, per Redis (0 when not at all). */
  int getHoldCount();

  /** Whether anyone holds this view (the write view: a writer; the read view: any reader). */
  boolean isLocked();

  /** The owner token this lock uses for the current thread; hand it over to unlock elsewhere. */
  String ownerToken();

  /**
   * Sets the owner's hold to end {@code lease} from now (a watchdog-kept hold stays kept).
   *
   * @throws NotHeldException if the owner does not hold the lock in this mode
   * @throws LockLostException if the watchdog kept the hold and Redis no longer has it
   * @throws IllegalArgumentException if {@code lease} is under 1 ms (as an acquire's lease)
   */
  void extend(long lease, TimeUnit unit);

  /** Clears the name (both views of a read/write lock) whoever holds it, and wakes the waiters. */
  void forceUnlock();

  /**
   * A snapshot of this lock's name: mode, holders with hold counts, leases and descriptions, the
   * newest fencing token (as {@link RedlockClient#inspect(String)}; both views of a read/write
   * lock see the same snapshot).
   *
   * @throws ClientClosedException if the client was closed
   */
  LockInfo inspect();

  /**
   * A new lock object for the same name, view and owner whose acquisitions store {@code label}
   * with the hold (shown by {@link #inspect()} as {@link HolderInfo#thread()}, and in contention
   * alerts) instead of the acquiring thread's name: what the hold is for, e.g. {@code
   * "report-job-7"}. At most 256 bytes (UTF-8) are kept. Like any lock object, it reports the
   * fencing token and loss of the holds taken through it; unlocking works through either object.
   *
   * @throws NullPointerException if {@code label} is null
   * @throws IllegalArgumentException if {@code label} is empty
   * @throws ClientClosedException if the client was closed
   */
  DistributedLock withLabel(String label);

  /**
   * Whether the owner's watchdog-kept hold taken through this object was found gone from Redis
   * (force-unlocked or expired). False when nothing is held.
   */
  boolean isLost();

  /** The lock name. */
  String getName();

  /** Which view this is ({@link LockMode#WRITE} for {@link RedlockClient#getLock}). */
  LockMode mode();

  /** Not supported: a condition would need a distributed wait queue. */
  @Override
  Condition newCondition();
}
