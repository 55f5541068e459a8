package io.redlock;

/** A fresh JVM's first call into the library: prints OK, or the error and its causes (exit 3). */
public final class FirstCallMain {
  private FirstCallMain() {}

  public static void main(String[] args) {
    try {
      RedlockClient.newOwnerToken();
      System.out.println("OK");
    } catch (Throwable e) {
      System.out.println("FAIL " + e);
      for (Throwable cause = e.getCause(); cause != null; cause = cause.getCause()) {
        System.out.println("  cause " + cause);
      }
      System.exit(3);
    }
  }
}
