package io.redlock;

import java.time.Duration;
import java.time.Instant;
import java.util.Objects;
import java.util.Optional;

/**
 * One holder of a lock name, as {@link LockInfo#holders()} lists it: the hold and the
 * description stored with it when it was acquired (by any client, in any language).
 *
 * @param mode the view the hold is in
 * @param ownerToken the owner's token (whoever presents it is the owner)
 * @param holdCount how many times the owner holds the name in this mode (reentrant holds)
 * @param fencingToken the fencing token of the hold
 * @param leaseLeft the time until Redis frees the hold unless it is renewed or extended
 * @param heldFor how long the hold has existed (from {@code acquiredAt} to Redis' clock now);
 *     empty when unknown
 * @param host the host name of the process that acquired the hold
 * @param pid the process id of the process that acquired the hold (0 when not recorded)
 * @param thread the label given at acquisition ({@link DistributedLock#withLabel(String)}), or by
 *     default the name of the thread that acquired (for other languages: their thread or task)
 * @param acquiredAt when the hold was acquired, by the holder's clock (by Redis' clock when a
 *     release handed the lock to this waiting writer); empty when not recorded
 */
public record HolderInfo(
    LockMode mode,
    String ownerToken,
    int holdCount,
    long fencingToken,
    Duration leaseLeft,
    Optional<Duration> heldFor,
    String host,
    long pid,
    String thread,
    Optional<Instant> acquiredAt) {

  public HolderInfo {
    Objects.requireNonNull(mode, "mode");
    Objects.requireNonNull(ownerToken, "ownerToken");
    Objects.requireNonNull(leaseLeft, "leaseLeft");
    Objects.requireNonNull(heldFor, "heldFor");
    Objects.requireNonNull(host, "host");
    Objects.requireNonNull(thread, "thread");
    Objects.requireNonNull(acquiredAt, "acquiredAt");
  }

  /**
   * Made by libredlock ({@code ffi/src/jni_api/inspect.rs}, which fixes this signature): {@code
   * heldForMillis} -1 when unknown, {@code acquiredAtMillis} (Unix time) 0 when not recorded.
   */
  static HolderInfo fromNative(
      boolean read,
      String ownerToken,
      int holdCount,
      long fencingToken,
      long leaseLeftMillis,
      long heldForMillis,
      String host,
      long pid,
      String thread,
      long acquiredAtMillis) {
    return new HolderInfo(
        read ? LockMode.READ : LockMode.WRITE,
        ownerToken,
        holdCount,
        fencingToken,
        Duration.ofMillis(leaseLeftMillis),
        heldForMillis < 0 ? Optional.empty() : Optional.of(Duration.ofMillis(heldForMillis)),
        host,
        pid,
        thread,
        acquiredAtMillis <= 0 ? Optional.empty() : Optional.of(Instant.ofEpochMilli(acquiredAtMillis)));
  }
}
