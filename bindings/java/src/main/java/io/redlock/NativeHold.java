package io.redlock;

/** One acquisition's native hold: whether the watchdog lost it. */
final class NativeHold {
  private long handle;

  NativeHold(long handle) {
    this.handle = handle;
  }

  /** Synchronized with {@link #free} so a handle is never read after it is freed. */
  synchronized boolean isLost() {
    return handle != 0 && Native.holdIsLost(handle);
  }

  synchronized void free() {
    if (handle != 0) {
      Native.holdFree(handle);
      handle = 0;
    }
  }
}
