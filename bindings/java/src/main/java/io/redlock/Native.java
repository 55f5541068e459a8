package io.redlock;

import java.lang.ref.Cleaner;

/**
 * The JNI entry points of libredlock ({@code ffi/src/jni_api/} in the Rust workspace).
 *
 * <p>Handles are {@code long}s owned by the classes of this package: each is freed exactly once,
 * and its owner is kept reachable while a call on it runs. Errors arrive as the exceptions mapped
 * in {@code ffi/src/jni_api/error.rs}.
 */
final class Native {
  /** Frees native handles of objects that became unreachable. */
  static final Cleaner CLEANER = Cleaner.create();

  static {
    NativeLibrary.load();
    // The library's own log lines go to System.Logger "io.redlock" from the start.
    RedlockLogs.forwardByDefault();
  }

  private Native() {}

  /** Loads the library (this class's initializer), if it is not loaded yet. */
  static void ensureLoaded() {}

  /**
   * Forwards the library's log lines at {@code level} (1 error, 2 warn, 3 info, 4 debug, 5 trace)
   * or more severe to {@code RedlockLogs.log}; 0 stops them. For this copy of the library.
   */
  static native void logsForward(int level);

  static native String newOwnerToken();

  static native long clientConnect(
      String url,
      String prefix,
      long leaseMillis,
      long contentionAfterMillis,
      long contentionAttempts,
      NativeCallbacks callbacks,
      boolean lockLost,
      boolean contention);

  static native void clientClose(long client);

  static native void clientFree(long client);

  static native long lockOpen(long client, String name, boolean read);

  static native void lockFree(long lock);

  /** Returns a hold handle, or 0 when the wait ended without the lock. */
  static native long acquire(
      long lock, String ownerToken, long waitNanos, long leaseMillis, String label, long cancel)
      throws InterruptedException;

  static native int release(long lock, String ownerToken);

  static native void extend(long lock, String ownerToken, long leaseMillis);

  static native int holdCount(long lock, String ownerToken);

  /** The fencing token of the owner's hold, from Redis; 0 when it holds none. */
  static native long fencingToken(long lock, String ownerToken);

  static native boolean isLocked(long lock);

  static native boolean forceUnlock(long lock);

  /** A snapshot of {@code name}, made by {@link LockInfo#fromNative}. */
  static native LockInfo clientInspect(long client, String name);

  /** A snapshot of the lock's name, made by {@link LockInfo#fromNative}. */
  static native LockInfo lockInspect(long lock);

  static native boolean holdIsLost(long hold);

  static native void holdFree(long hold);

  static native long cancelNew();

  static native void cancelFire(long cancel);

  static native void cancelFree(long cancel);
}
