package io.redlock;

import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.List;
import java.util.function.Consumer;

/**
 * Receives one client's callbacks from libredlock, on native threads attached to the JVM. A
 * listener that throws is logged; it never reaches the native side.
 */
final class NativeCallbacks {
  private static final System.Logger LOG = System.getLogger("io.redlock");

  private final Consumer<LockLostEvent> lockLost;
  private final Consumer<ContentionAlert> contention;

  NativeCallbacks(Consumer<LockLostEvent> lockLost, Consumer<ContentionAlert> contention) {
    this.lockLost = lockLost;
    this.contention = contention;
  }

  boolean hasLockLost() {
    return lockLost != null;
  }

  boolean hasContention() {
    return contention != null;
  }

  /** Called by libredlock (signature fixed in {@code ffi/src/jni_api/callbacks.rs}). */
  void onLockLost(String name, boolean read, String ownerToken) {
    deliver(lockLost, new LockLostEvent(name, mode(read), ownerToken));
  }

  /** Called by libredlock (signature fixed in {@code ffi/src/jni_api/callbacks.rs}). */
  void onContention(
      String name,
      boolean read,
      String ownerToken,
      long waitedMillis,
      long failedAttempts,
      String[] holders) {
    deliver(
        contention,
        new ContentionAlert(
            name,
            mode(read),
            ownerToken,
            Duration.ofMillis(waitedMillis),
            failedAttempts,
            List.of(holders)));
  }

  private static LockMode mode(boolean read) {
    return read ? LockMode.READ : LockMode.WRITE;
  }

  private static <T> void deliver(Consumer<T> listener, T event) {
    if (listener == null) {
      return;
    }
    try {
      listener.accept(event);
    } catch (Throwable t) {
      LOG.log(Level.ERROR, "a redlock listener threw while handling " + event, t);
    }
  }
}
