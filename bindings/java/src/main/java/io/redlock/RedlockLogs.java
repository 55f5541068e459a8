package io.redlock;

import java.lang.System.Logger.Level;
import java.util.Objects;

/**
 * The log lines of libredlock itself — a hold found lost, a watchdog renewal that failed, a
 * contention alert naming the holders — passed to {@link System.Logger} {@code "io.redlock"},
 * where java.util.logging (the JDK's default) or a bridge such as SLF4J's picks them up.
 *
 * <p>Forwarding is on from the moment the native library loads, at {@link Level#WARNING} (the
 * library's warn and error lines). Each line is logged at the matching level (error: {@code
 * ERROR}, warn: {@code WARNING}, info: {@code INFO}, debug: {@code DEBUG}, trace: {@code TRACE}),
 * its message prefixed with where it comes from, e.g. {@code [redlock_core::watchdog::lost] lock
 * lost: ... lock=orders:42 ...}. Lines are logged one at a time, in order, on a thread the
 * library keeps for them (attached to the JVM as a daemon): a slow handler delays none of the
 * library's work, but past 1 024 lines waiting, lines are dropped and a warning counts them.
 *
 * <p>The setting applies to every client of the library loaded by this class loader (one per
 * JVM, unless the binding is loaded by several class loaders, each with its own copy).
 */
public final class RedlockLogs {
  private static final System.Logger LOG = System.getLogger("io.redlock");

  /** What Native's initializer turns on (see {@link #forwardByDefault}). */
  private static volatile Level level = Level.WARNING;

  private RedlockLogs() {}

  /**
   * Forwards the library's lines at {@code level} or more severe; {@link Level#OFF} stops them,
   * {@link Level#ALL} is {@link Level#TRACE}. Lines below the level are not even formatted by
   * the library, so a level lower than needed costs time on every lock call; the logger's own
   * level still filters what is forwarded.
   *
   * @throws NullPointerException if {@code level} is null
   * @throws IllegalArgumentException if this copy of the library logs to a Rust {@code tracing}
   *     subscriber of its own (never the case of the library in the jar)
   */
  public static void setLevel(Level level) {
    Objects.requireNonNull(level, "level");
    // Loaded outside the monitor: Native's initializer turns the default on (without it).
    Native.ensureLoaded();
    synchronized (RedlockLogs.class) {
      Native.logsForward(nativeLevel(level));
      RedlockLogs.level = level == Level.ALL ? Level.TRACE : level;
    }
  }

  /** The level set (by default {@link Level#WARNING}); {@link Level#OFF} when forwarding is off. */
  public static Level getLevel() {
    return level;
  }

  /**
   * Called once, by Native's initializer (which every other use of the library waits for):
   * forwarding on at the default level. A failure is logged, never thrown: the library stays
   * usable without its lines.
   */
  static void forwardByDefault() {
    try {
      Native.logsForward(nativeLevel(Level.WARNING));
    } catch (RuntimeException | UnsatisfiedLinkError e) {
      // (UnsatisfiedLinkError: a -Dredlock.library older than this jar, without the entry point.)
      level = Level.OFF;
      LOG.log(Level.WARNING, "libredlock's own log lines cannot be forwarded: " + e);
    }
  }

  /**
   * Called by libredlock for each line (signature fixed in {@code ffi/src/jni_api/logs.rs}), on
   * its log thread; {@code level} is 1 (error) to 5 (trace).
   */
  static void log(int level, String target, String message) {
    Level mapped =
        switch (level) {
          case 1 -> Level.ERROR;
          case 2 -> Level.WARNING;
          case 3 -> Level.INFO;
          case 4 -> Level.DEBUG;
          default -> Level.TRACE;
        };
    if (LOG.isLoggable(mapped)) {
      LOG.log(mapped, "[" + target + "] " + message);
    }
  }

  /** The level as {@code Native.logsForward} takes it: 0 (off), 1 (error) to 5 (trace). */
  private static int nativeLevel(Level level) {
    return switch (level) {
      case OFF -> 0;
      case ERROR -> 1;
      case WARNING -> 2;
      case INFO -> 3;
      case DEBUG -> 4;
      case TRACE, ALL -> 5;
    };
  }
}
