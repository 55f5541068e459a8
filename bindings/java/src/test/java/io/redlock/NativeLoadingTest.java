package io.redlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.ref.WeakReference;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Loading libredlock: from the jar's copy in fresh JVMs, and in class loaders that come and go. */
class NativeLoadingTest extends RedisTestBase {
  private static final Path CLASSES = Path.of("target/classes").toAbsolutePath();
  private static final Path TEST_CLASSES = Path.of("target/test-classes").toAbsolutePath();

  private static boolean canMountInOwnNamespace() throws Exception {
    try {
      Process probe = new ProcessBuilder("unshare", "-Urm", "true").redirectErrorStream(true).start();
      probe.getInputStream().readAllBytes();
      return probe.waitFor(10, TimeUnit.SECONDS) && probe.exitValue() == 0;
    } catch (IOException noUnshare) {
      return false;
    }
  }

  /**
   * A java.io.tmpdir mounted noexec (hardened hosts, containers) cannot hold the extracted copy:
   * the first call fails with the way out in its message, and leaves no copy behind (a service
   * restarted in a loop would otherwise fill the directory, one library per start). The mount is
   * made in a namespace of the child JVM's own, gone with it.
   */
  @Test
  @Timeout(60)
  void aNoexecTmpdirFailsWithTheWayOutAndLeavesNoCopy() throws Exception {
    Assumptions.assumeTrue(canMountInOwnNamespace(), "needs unshare -Urm (user namespaces)");
    Path tmp = Files.createTempDirectory("redlock-noexec");
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    String script =
        "mount -t tmpfs -o noexec none \"$0\" || exit 9; \"$1\" -Djava.io.tmpdir=\"$0\" -cp \"$2\""
            + " io.redlock.FirstCallMain; rc=$?; echo \"left: [$(ls -A \"$0\")]\"; exit $rc";
    Process child =
        new ProcessBuilder(
                "unshare", "-Urm", "sh", "-c", script, tmp.toString(), java,
                CLASSES + ":" + TEST_CLASSES)
            .redirectErrorStream(true)
            .start();
    String out = new String(child.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(child.waitFor(30, TimeUnit.SECONDS), out);
    Files.delete(tmp);
    assertEquals(3, child.exitValue(), out);
    assertTrue(out.contains("noexec") && out.contains("-Dredlock.library="), out);
    assertTrue(out.contains("left: []"), "the failed load left its copy behind: " + out);
  }

  private static int runtimeThreads() throws IOException {
    int count = 0;
    try (Stream<Path> tasks = Files.list(Path.of("/proc/self/task"))) {
      for (Path task : (Iterable<Path>) tasks::iterator) {
        try {
          String thread = Files.readString(task.resolve("comm"));
          if (thread.startsWith("redlock-runtime")
              || thread.startsWith("redlock-logs")
              || thread.startsWith("redlock-callback")) {
            count++;
          }
        } catch (IOException ended) {
          // the thread ended meanwhile
        }
      }
    }
    return count;
  }

  /** Uses the binding from a class loader of its own (which loads its own copy of libredlock). */
  private static WeakReference<ClassLoader> useInOwnLoader(String name) throws Exception {
    URLClassLoader loader =
        new URLClassLoader(new URL[] {CLASSES.toUri().toURL()}, ClassLoader.getPlatformClassLoader());
    Class<?> clientClass = Class.forName("io.redlock.RedlockClient", true, loader);
    // With a listener: the lost hold below runs it on the copy's callback threads.
    Object builder = clientClass.getMethod("builder", String.class).invoke(null, redis.url());
    java.util.function.Consumer<Object> listener = event -> {};
    builder
        .getClass()
        .getMethod("lockLostListener", java.util.function.Consumer.class)
        .invoke(builder, listener);
    Object client = builder.getClass().getMethod("build").invoke(builder);
    Object lock = clientClass.getMethod("getLock", String.class).invoke(client, name);
    Class<?> lockClass = Class.forName("io.redlock.DistributedLock", true, loader);
    lockClass.getMethod("lock").invoke(lock);
    lockClass.getMethod("unlock").invoke(lock);
    // A timed tryLock is an interruptible wait: it starts the interrupt watcher thread.
    lockClass.getMethod("tryLock", long.class, TimeUnit.class).invoke(lock, 100L, TimeUnit.MILLISECONDS);
    lockClass.getMethod("unlock").invoke(lock);
    // A hold lost (force-unlocked) is a warn line and a listener call: it starts the copy's log
    // thread and callback threads.
    lockClass.getMethod("lock").invoke(lock);
    lockClass.getMethod("forceUnlock").invoke(lock);
    try {
      lockClass.getMethod("unlock").invoke(lock);
    } catch (java.lang.reflect.InvocationTargetException lost) {
      // LockLostException, as expected
    }
    clientClass.getMethod("close").invoke(client);
    loader.close();
    return new WeakReference<>(loader);
  }

  /**
   * An application redeployed in one JVM (an application server, a test runner's isolated
   * loader): once its class loader is collected, nothing of it stays running — no thread of ours
   * keeps the loader alive, and the runtime, log and callback threads of its copy of the library
   * end.
   */
  @Test
  @Timeout(120)
  void aCollectedClassLoaderLeavesNoRuntimeThreads() throws Exception {
    int before = runtimeThreads();
    for (int round = 0; round < 4; round++) {
      WeakReference<ClassLoader> loader = useInOwnLoader(uniqueName());
      for (int i = 0; i < 100 && loader.get() != null; i++) {
        System.gc();
        Thread.sleep(100);
      }
      assertNull(loader.get(), "the class loader of round " + round + " was not collected");
    }
    int after = runtimeThreads();
    for (int i = 0; i < 50 && after > before; i++) {
      Thread.sleep(100);
      after = runtimeThreads();
    }
    assertTrue(after <= before, "redlock-runtime, -logs and -callback threads " + before + " -> " + after);
  }
}
