package io.redlock;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * A waiting acquire of a virtual thread. A native call pins its carrier thread, and a virtual
 * thread parked in one would keep the carrier from every other virtual thread, among them the
 * holder that is to unlock: with as many waiters as carriers, nobody would ever run again. So the
 * native wait runs on a platform thread, and the virtual thread parks (unmounted) until it ends.
 */
final class VirtualThreadWait {
  private static final MethodHandle IS_VIRTUAL = isVirtualHandle();
  private static final ExecutorService WAITERS =
      Executors.newCachedThreadPool(
          r -> {
            Thread t = new Thread(r, "redlock-virtual-wait");
            t.setDaemon(true);
            return t;
          });

  private VirtualThreadWait() {}

  private static MethodHandle isVirtualHandle() {
    try {
      return MethodHandles.publicLookup()
          .findVirtual(Thread.class, "isVirtual", MethodType.methodType(boolean.class));
    } catch (ReflectiveOperationException e) {
      return null; // before Java 21: no virtual threads
    }
  }

  static boolean onVirtualThread() {
    if (IS_VIRTUAL == null) {
      return false;
    }
    try {
      return (boolean) IS_VIRTUAL.invokeExact(Thread.currentThread());
    } catch (Throwable e) {
      return false;
    }
  }

  /**
   * Runs {@code call} on a platform thread while this virtual thread parks. Interruptible: an
   * interrupt fires the cancel handle (the call ends with InterruptedException unless it got the
   * lock first, which is then kept with the interrupt status set, as Lock allows); not
   * interruptible: the interrupt status is kept for after the call.
   */
  static long run(InterruptibleWait.Call call, boolean interruptible) throws InterruptedException {
    if (interruptible && Thread.interrupted()) {
      throw new InterruptedException();
    }
    long cancel = interruptible ? Native.cancelNew() : 0;
    CompletableFuture<Long> done = new CompletableFuture<>();
    boolean interrupted = false;
    try {
      WAITERS.execute(
          () -> {
            try {
              done.complete(call.run(cancel));
            } catch (Throwable t) {
              done.completeExceptionally(t);
            }
          });
      while (true) {
        try {
          return done.get(); // unmounts this virtual thread
        } catch (InterruptedException e) {
          interrupted = true;
          if (interruptible) {
            Native.cancelFire(cancel);
          }
        } catch (ExecutionException e) {
          Throwable cause = e.getCause();
          if (cause instanceof InterruptedException ie) {
            interrupted = false; // the exception replaces the interrupt status
            throw ie;
          }
          if (cause instanceof RuntimeException re) {
            throw re;
          }
          if (cause instanceof Error err) {
            throw err;
          }
          throw new RedlockException("acquire failed: " + cause);
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
      if (cancel != 0) {
        Native.cancelFree(cancel); // the call has ended: `done` is complete here
      }
    }
  }
}
