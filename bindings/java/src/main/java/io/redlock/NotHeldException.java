package io.redlock;

/**
 * An unlock (or another owner-only call) by an owner that does not hold the lock: never held, already released, or expired. Nothing was changed.
 */
public class NotHeldException extends IllegalMonitorStateException {
  private static final long serialVersionUID = 1L;

  public NotHeldException(String message) {
    super(message);
  }
}
