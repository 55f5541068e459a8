package io.redlock;

/**
 * Redis could not be reached, did not answer within the command timeout, or refused the credentials or TLS.
 */
public class RedlockConnectionException extends RedlockException {
  private static final long serialVersionUID = 1L;

  public RedlockConnectionException(String message) {
    super(message);
  }
}
