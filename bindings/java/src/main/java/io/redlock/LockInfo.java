package io.redlock;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * A snapshot of one lock name, from {@link RedlockClient#inspect(String)} or {@link
 * DistributedLock#inspect()}: who holds it, how, and for how long. Immutable; it does not change
 * when the lock does.
 *
 * @param name the lock name
 * @param mode {@link LockMode#WRITE} while a writer holds the name (also when the writer also
 *     reads, after a downgrade), {@link LockMode#READ} while only readers do, empty when free
 * @param holders the holders, the writer first; at most 100 are listed ({@link #holderCount()}
 *     counts them all)
 * @param holderCount every live hold, one per owner and mode (a writer that also reads counts
 *     twice), also those past the listing limit
 * @param waitingWriters writers announced as waiting for the name (in any client)
 * @param waitingReaders readers announced as waiting for the name (in any client)
 * @param leaseLeft the time until the last lease of the name ends ({@link Duration#ZERO} when
 *     free)
 * @param lastFencingToken the newest fencing token issued in the name's Redis Cluster hash slot:
 *     an upper bound of the name's own last token (the counter is shared by the names of a slot)
 */
public record LockInfo(
    String name,
    Optional<LockMode> mode,
    List<HolderInfo> holders,
    long holderCount,
    long waitingWriters,
    long waitingReaders,
    Duration leaseLeft,
    long lastFencingToken) {

  public LockInfo {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(mode, "mode");
    holders = List.copyOf(holders);
    Objects.requireNonNull(leaseLeft, "leaseLeft");
  }

  /** Whether anyone holds the name, in any mode. */
  public boolean isLocked() {
    return mode.isPresent();
  }

  /**
   * Made by libredlock ({@code ffi/src/jni_api/inspect.rs}, which fixes this signature): {@code
   * mode} 0 free, 1 read, 2 write; {@code leaseLeftMillis} 0 when free.
   */
  static LockInfo fromNative(
      String name,
      int mode,
      HolderInfo[] holders,
      long holderCount,
      long waitingWriters,
      long waitingReaders,
      long leaseLeftMillis,
      long lastFencingToken) {
    Optional<LockMode> lockMode =
        switch (mode) {
          case 0 -> Optional.empty();
          case 1 -> Optional.of(LockMode.READ);
          case 2 -> Optional.of(LockMode.WRITE);
          default -> throw new RedlockException("internal error in libredlock: lock mode " + mode);
        };
    return new LockInfo(
        name,
        lockMode,
        Arrays.asList(holders),
        holderCount,
        waitingWriters,
        waitingReaders,
        Duration.ofMillis(leaseLeftMillis),
        lastFencingToken);
  }
}
