package io.redlock;

/**
 * A read holder asked for the write lock while still reading. This would deadlock, so it fails at once; release the read lock first.
 */
public class UpgradeNotAllowedException extends IllegalStateException {
  private static final long serialVersionUID = 1L;

  public UpgradeNotAllowedException(String message) {
    super(message);
  }
}
