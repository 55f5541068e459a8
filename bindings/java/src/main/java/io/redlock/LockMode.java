package io.redlock;

/** Which view of a lock name a hold belongs to. */
public enum LockMode {
  /** Shared: any number of owners at once. */
  READ,
  /** Exclusive: one owner; the mode of {@link RedlockClient#getLock(String)}. */
  WRITE
}
