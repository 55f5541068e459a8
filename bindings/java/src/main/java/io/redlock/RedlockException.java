package io.redlock;

/**
 * A failure of the lock service itself: Redis unreachable or refusing a command, or an internal
 * error of the native library. Misuse of a lock is reported with the {@code java.util.concurrent}
 * idioms instead ({@link IllegalMonitorStateException}, {@link IllegalArgumentException},
 * {@link IllegalStateException}, {@link InterruptedException}).
 */
public class RedlockException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public RedlockException(String message) {
    super(message);
  }
}
