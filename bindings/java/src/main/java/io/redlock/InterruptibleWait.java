package io.redlock;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * Turns a Java interrupt into a cancel of a native wait.
 *
 * <p>A thread blocked in native code does not notice {@link Thread#interrupt()}, and the JDK has
 * no public interrupt hook. So each interruptible wait registers here with a native cancel handle,
 * and one daemon thread checks the registered threads every {@value #POLL_MILLIS} ms while any
 * are waiting (it sleeps otherwise). An interrupted waiter's handle is fired: the core ends the
 * wait, leaving nothing behind in Redis, and the waiter throws {@link InterruptedException}.
 */
final class InterruptibleWait {
  static final long POLL_MILLIS = 5;
  /** How long the watcher stays without waits to watch before it ends. */
  static final long IDLE_SECONDS = 1;

  /** A native call that may block and ends with InterruptedException when cancel is fired. */
  interface Call {
    long run(long cancel) throws InterruptedException;
  }

  private static final Set<InterruptibleWait> WAITING = ConcurrentHashMap.newKeySet();
  private static Thread watcher;

  private final Thread thread = Thread.currentThread();
  private final long cancel;
  private boolean finished;

  private InterruptibleWait(long cancel) {
    this.cancel = cancel;
  }

  /** Runs {@code call} on this thread, cancelled if the thread is interrupted meanwhile. */
  static long run(Call call) throws InterruptedException {
    if (Thread.interrupted()) {
      throw new InterruptedException();
    }
    InterruptibleWait wait = new InterruptibleWait(Native.cancelNew());
    WAITING.add(wait);
    LockSupport.unpark(watcher());
    try {
      return call.run(wait.cancel);
    } catch (InterruptedException e) {
      Thread.interrupted(); // like the JDK's locks: the exception replaces the interrupt status
      throw e;
    } finally {
      WAITING.remove(wait);
      wait.finish();
    }
  }

  private synchronized void fireIfInterrupted() {
    if (!finished && thread.isInterrupted()) {
      Native.cancelFire(cancel);
    }
  }

  private synchronized void finish() {
    finished = true;
    Native.cancelFree(cancel);
  }

  private static synchronized Thread watcher() {
    if (watcher == null) {
      watcher = new Thread(InterruptibleWait::watch, "redlock-interrupt-watcher");
      watcher.setDaemon(true);
      watcher.setContextClassLoader(null); // never pins the loader of whoever started it
      watcher.start();
    }
    return watcher;
  }

  /**
   * Ends the watcher when nothing waits (a live thread running this class would keep its class
   * loader, and with it the native library, from ever being collected); false when a wait
   * registered meanwhile. The next wait starts a new watcher.
   */
  private static synchronized boolean retire() {
    if (!WAITING.isEmpty()) {
      return false;
    }
    watcher = null;
    return true;
  }

  private static void watch() {
    while (true) {
      if (WAITING.isEmpty()) {
        LockSupport.parkNanos(TimeUnit.SECONDS.toNanos(IDLE_SECONDS)); // or the next registration
        if (WAITING.isEmpty() && retire()) {
          return;
        }
      } else {
        for (InterruptibleWait wait : WAITING) {
          wait.fireIfInterrupted();
        }
        LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(POLL_MILLIS));
      }
    }
  }
}
