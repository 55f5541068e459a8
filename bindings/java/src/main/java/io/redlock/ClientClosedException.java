package io.redlock;

/**
 * The {@link RedlockClient} was closed: waiting acquires end with this exception and later calls fail with it.
 */
public class ClientClosedException extends IllegalStateException {
  private static final long serialVersionUID = 1L;

  public ClientClosedException(String message) {
    super(message);
  }
}
