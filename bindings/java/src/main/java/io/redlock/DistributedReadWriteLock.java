package io.redlock;

import java.util.concurrent.locks.ReadWriteLock;

/**
 * A Redis read/write lock: any number of readers, or one writer. Both views are reentrant per
 * owner; writers are not starved by new readers. The writer may take the read lock and then
 * release the write lock (downgrade). A reader asking for the write lock gets an {@link
 * UpgradeNotAllowedException} at once instead of a deadlock.
 */
public interface DistributedReadWriteLock extends ReadWriteLock {
  @Override
  DistributedLock readLock();

  @Override
  DistributedLock writeLock();

  /** The lock name. */
  String getName();

  /**
   * A new read/write lock object for the same name and owner whose views store {@code label}
   * with each hold (see {@link DistributedLock#withLabel(String)}).
   *
   * @throws NullPointerException if {@code label} is null
   * @throws IllegalArgumentException if {@code label} is empty
   * @throws ClientClosedException if the client was closed
   */
  DistributedReadWriteLock withLabel(String label);
}
