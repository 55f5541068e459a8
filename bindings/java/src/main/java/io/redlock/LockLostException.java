package io.redlock;

/**
 * The hold was kept alive by this client's watchdog and Redis no longer has it (force-unlocked, or expired during an outage). Whatever it protected may have been changed by another owner since.
 */
public class LockLostException extends IllegalMonitorStateException {
  private static final long serialVersionUID = 1L;

  public LockLostException(String message) {
    super(message);
  }
}
