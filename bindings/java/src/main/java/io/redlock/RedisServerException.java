package io.redlock;

/**
 * Redis answered a command with an error.
 */
public class RedisServerException extends RedlockException {
  private static final long serialVersionUID = 1L;

  public RedisServerException(String message) {
    super(message);
  }
}
