package io.redlock;

import io.redlock.ConformanceScenarios.Step;
import java.io.IOException;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * One conformance scenario's state: two clients, a lock name of its own, its owners, fences,
 * background acquires and the contention alerts each client received; {@link #step} runs one step
 * (verbs: {@code tests/conformance/README.md}).
 */
final class ConformanceRun implements AutoCloseable {
  /** The clients' key prefix unless the {@code clients} directive gives one. */
  static final String PREFIX = "conformance";
  /** How long {@code await} and {@code cancel} wait for a background acquire to end. */
  static final Duration BACKGROUND_TIMEOUT = Duration.ofSeconds(45);

  /** The redis-server: {@code spend_fences} talks to it on a plain connection. */
  private final RedisServer server;
  /** The clients' key prefix. */
  private final String prefix;
  private final RedlockClient[] clients = new RedlockClient[2];
  /** The waiting owner's token of every contention alert, per client. */
  private final List<List<String>> alerts =
      List.of(
          Collections.synchronizedList(new ArrayList<>()),
          Collections.synchronizedList(new ArrayList<>()));
  private final String name;
  /** Owner letter -> random token. */
  private final Map<String, String> owners = new HashMap<>();
  private final Map<String, Long> fences = new HashMap<>();
  /**
   * The lock objects, one per client, owner and label ({@code withLabel}), kept for the scenario
   * as an application keeps its lock: fencingToken() and the lost-hold report of unlock() are per
   * object.
   */
  private final Map<String, DistributedLock> locks = new HashMap<>();
  private final Map<String, DistributedReadWriteLock> readWriteLocks = new HashMap<>();
  /**
   * Per client, owner and target: the object of the owner's last acquire there, through which
   * its later steps act (an application unlocks through the object it locked with).
   */
  private final Map<String, DistributedLock> current = new HashMap<>();
  /** Background acquire per owner spec. */
  private final Map<String, Background> background = new HashMap<>();

  /** An {@code acquire&}: a thread of its own (the owner is the token, not the thread). */
  private static final class Background {
    final DistributedLock lock;
    final Thread thread;
    volatile String result;

    Background(DistributedLock lock, Long wait, Long lease) {
      this.lock = lock;
      this.thread = new Thread(() -> result = acquire(lock, wait, lease), "conformance-acquire");
      thread.setDaemon(true);
      thread.start();
    }
  }

  /** Connects both clients, with the {@code clients} directive's settings ({@code null}: none). */
  ConformanceRun(RedisServer server, int index, Step settings) {
    this.server = server;
    String given = settings == null ? null : settings.args().get("prefix");
    this.prefix = given == null ? PREFIX : given;
    try {
      for (int i = 0; i < 2; i++) {
        List<String> log = alerts.get(i);
        RedlockClient.Builder builder =
            RedlockClient.builder(server.url())
                .prefix(prefix)
                .contentionListener(alert -> log.add(alert.ownerToken()));
        if (settings != null) {
          Long lease = settings.ms("lease");
          Long after = settings.ms("alert_after");
          String attempts = settings.args().get("alert_attempts");
          if (lease != null) {
            builder.lease(Duration.ofMillis(lease));
          }
          // README: when either threshold is given, the one not given is off (the attempts
          // threshold is off by default).
          if (after != null) {
            builder.contentionAlertAfter(Duration.ofMillis(after));
          } else if (attempts != null) {
            builder.contentionAlertAfter(Duration.ZERO);
          }
          if (attempts != null) {
            builder.contentionAlertAttempts(Long.parseLong(attempts));
          }
        }
        clients[i] = builder.build();
      }
    } catch (RuntimeException e) {
      close();
      throw e;
    }
    name = PREFIX + ":" + index + ":" + UUID.randomUUID();
  }

  @Override
  public void close() {
    for (RedlockClient client : clients) {
      if (client != null) {
        client.close(); // also ends background acquires still waiting
      }
    }
  }

  /** The contract's name for an error: an error kind in snake case, or a failure. */
  static String verdict(Exception e) {
    if (e instanceof InterruptedException) {
      Thread.currentThread().interrupt();
      return "cancelled";
    }
    if (e instanceof IllegalArgumentException) {
      return "invalid_argument";
    }
    if (e instanceof UpgradeNotAllowedException) {
      return "upgrade_not_allowed";
    }
    if (e instanceof LockLostException) { // before NotHeldException: both are IllegalMonitorState
      return "lock_lost";
    }
    if (e instanceof NotHeldException) {
      return "not_held";
    }
    if (e instanceof ClientClosedException) {
      return "closed";
    }
    if (e instanceof RedisServerException) {
      return "redis";
    }
    return "unexpected error " + e;
  }

  /** One acquire through the Java API: {@code wait}/{@code lease} in ms, null = forever/watchdog. */
  static String acquire(DistributedLock lock, Long wait, Long lease) {
    try {
      boolean got;
      if (wait == null) {
        if (lease == null) {
          lock.lock();
        } else {
          lock.lock(lease, TimeUnit.MILLISECONDS);
        }
        got = true;
      } else if (lease == null) {
        got = wait == 0 ? lock.tryLock() : lock.tryLock(wait, TimeUnit.MILLISECONDS);
      } else {
        got = lock.tryLock(wait, lease, TimeUnit.MILLISECONDS);
      }
      return got ? "ok" : "timeout";
    } catch (Exception e) {
      return verdict(e);
    }
  }

  /** Client 2 as an administrator (no owner of its own). */
  private DistributedReadWriteLock admin() {
    return clients[1].getReadWriteLock(name);
  }

  /** The client index of {@code spec} ({@code A}: client 1, {@code A@2}: client 2). */
  private static int client(String spec) {
    int at = spec.indexOf('@');
    if (at >= 0 && !spec.substring(at + 1).equals("2")) {
      throw new AssertionError("unknown client in owner " + spec);
    }
    return at < 0 ? 0 : 1;
  }

  private String token(String spec) {
    int at = spec.indexOf('@');
    String letter = at < 0 ? spec : spec.substring(0, at);
    return owners.computeIfAbsent(letter, l -> UUID.randomUUID().toString());
  }

  /**
   * The lock of {@code spec} for a target, made with {@code label} ({@code withLabel}) unless it
   * is null; a closed client refuses a new one.
   */
  private DistributedLock view(String spec, String target, String label) {
    if (target == null) {
      throw new AssertionError("a target is needed");
    }
    String token = token(spec);
    int client = client(spec);
    String key = client + ":" + token + (label == null ? "" : "#" + label);
    RedlockClient c = clients[client];
    switch (target) {
      case "lock":
        return locks.computeIfAbsent(
            key,
            k -> label == null ? c.getLock(name, token) : c.getLock(name, token).withLabel(label));
      case "read":
        return readWriteLock(c, key, token, label).readLock();
      case "write":
        return readWriteLock(c, key, token, label).writeLock();
      default:
        throw new AssertionError("unknown target " + target);
    }
  }

  private DistributedReadWriteLock readWriteLock(
      RedlockClient c, String key, String token, String label) {
    return readWriteLocks.computeIfAbsent(
        key,
        k -> {
          DistributedReadWriteLock rw = c.getReadWriteLock(name, token);
          return label == null ? rw : rw.withLabel(label);
        });
  }

  /**
   * The lock object a step acts through: an acquire's is chosen by its {@code label} and becomes
   * the owner's current object for the target; the other verbs use the current one.
   */
  private DistributedLock lockFor(Step step) {
    String slot = client(step.owner()) + ":" + token(step.owner()) + ":" + step.target();
    if (step.verb().equals("acquire") || step.verb().equals("acquire&")) {
      DistributedLock lock = view(step.owner(), step.target(), step.args().get("label"));
      current.put(slot, lock);
      return lock;
    }
    DistributedLock lock = current.get(slot);
    return lock != null ? lock : view(step.owner(), step.target(), null);
  }

  /** Held by anyone, in any mode. */
  private boolean locked() {
    DistributedReadWriteLock admin = admin();
    return admin.readLock().isLocked() || admin.writeLock().isLocked();
  }

  /**
   * {@code spend_fences}: runs the script ({@code EVAL} with no keys and the clients' prefix) on a
   * plain connection, not through the binding, which has no raw commands. Its reply is a RESP
   * integer, how many fencing counters it set; {@code ok} when at least one.
   */
  private String spendFences() throws IOException {
    String script = Files.readString(ConformanceScenarios.spendFencesScript());
    String reply = server.command("EVAL", script, "0", prefix);
    return reply.startsWith(":") && Long.parseLong(reply.substring(1)) >= 1
        ? "ok"
        : "no fencing counter was set: " + reply;
  }

  private static String check(List<String> expect, String got) {
    String wanted = String.join(" ", expect);
    return got.equals(wanted) ? null : "expected " + wanted + ", got " + got;
  }

  /** Checks {@code ok count=N fence=T fence>T} against an acquisition; null when it passes. */
  private String checkAcquired(DistributedLock lock, String got, List<String> expect) {
    if (expect.isEmpty()) {
      return "no expected verdict";
    }
    if (!got.equals(expect.get(0))) {
      return "expected " + expect.get(0) + ", got " + got;
    }
    if (!got.equals("ok")) {
      return null;
    }
    for (String check : expect.subList(1, expect.size())) {
      if (check.startsWith("count=")) {
        String n = check.substring("count=".length());
        int count = lock.getHoldCount();
        if (!String.valueOf(count).equals(n)) {
          return "hold count " + count + ", expected " + n;
        }
      } else if (check.startsWith("fence>")) {
        String bound = check.substring("fence>".length());
        Long value = fences.get(bound);
        if (value == null) {
          return "fence " + bound + " was never bound";
        }
        long token = lock.fencingToken();
        if (token <= value) {
          return "fencing token " + token + " not above " + bound + "=" + value;
        }
      } else if (check.startsWith("fence=")) {
        String bound = check.substring("fence=".length());
        long token = lock.fencingToken();
        long value = fences.computeIfAbsent(bound, b -> token);
        if (token != value) {
          return "fencing token " + token + ", expected " + bound + "=" + value;
        }
      } else {
        return "unknown check " + check;
      }
    }
    return null;
  }

  /**
   * Checks {@code ok [mode=M] [holders=N] [count=N] [label=T]} against a snapshot; {@code token}
   * and {@code mode} name OWNER's hold (null for {@code -}). Null when it passes.
   */
  private static String checkInspect(
      Supplier<LockInfo> snapshot, String token, LockMode mode, List<String> expect) {
    LockInfo info;
    try {
      info = snapshot.get();
    } catch (RuntimeException e) {
      return check(expect, verdict(e));
    }
    if (expect.isEmpty() || !expect.get(0).equals("ok")) {
      return check(expect, "ok");
    }
    Optional<HolderInfo> hold =
        info.holders().stream()
            .filter(h -> h.ownerToken().equals(token) && h.mode() == mode)
            .findFirst();
    for (String check : expect.subList(1, expect.size())) {
      int eq = check.indexOf('=');
      if (eq < 0) {
        return "bad inspect check " + check;
      }
      String key = check.substring(0, eq);
      String want = check.substring(eq + 1);
      if ((key.equals("count") || key.equals("label")) && token == null) {
        return check + " needs an owner and a target";
      }
      String got;
      switch (key) {
        case "mode":
          got = info.mode().map(m -> m.name().toLowerCase(Locale.ROOT)).orElse("none");
          break;
        case "holders":
          got = String.valueOf(info.holderCount());
          break;
        case "count":
          got = hold.map(h -> String.valueOf(h.holdCount())).orElse("0");
          break;
        case "label":
          if (hold.isEmpty()) {
            return "expected " + check + ", got no such hold in " + info;
          }
          got = hold.get().thread();
          break;
        default:
          return "unknown inspect check " + check;
      }
      if (!got.equals(want)) {
        return "expected " + check + ", got " + key + "=" + got + " in " + info;
      }
    }
    return null;
  }

  /** Waits for the alerts naming {@code token} to reach {@code N} (then stay N) or {@code >=N}. */
  private String checkAlerts(int client, String token, List<String> expect)
      throws InterruptedException {
    String word = expect.isEmpty() ? "" : expect.get(0);
    boolean atLeast = word.startsWith(">=");
    int want = Integer.parseInt(atLeast ? word.substring(2) : word);
    List<String> log = alerts.get(client);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
    while (count(log, token) < want && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    if (!atLeast) {
      Thread.sleep(200);
    }
    int got = count(log, token);
    return (atLeast ? got >= want : got == want)
        ? null
        : "expected " + word + " alerts, got " + got;
  }

  private static int count(List<String> log, String token) {
    synchronized (log) {
      return (int) log.stream().filter(token::equals).count();
    }
  }

  /** Runs one step; null when it reached its verdict, else why not. */
  String step(Step step) throws Exception {
    List<String> expect = step.expect();
    switch (step.owner().equals("-") ? step.verb() : "") {
      case "clients":
        return "clients must be a scenario's first step";
      case "close":
        clients[0].close();
        return null;
      case "sleep":
        Thread.sleep(step.ms("ms"));
        return null;
      case "locked":
        return check(expect, String.valueOf(locked()));
      case "inspect":
        return checkInspect(() -> clients[1].inspect(name), null, null, expect);
      case "spend_fences":
        return check(expect, spendFences());
      case "force_unlock":
        {
          // DistributedLock.forceUnlock() returns nothing (the native call's "was it held"
          // is dropped): ask first whether anything is held. Steps run one at a time, so
          // nothing changes in between except a lease running out.
          boolean wasLocked = locked();
          admin().writeLock().forceUnlock();
          return check(expect, String.valueOf(wasLocked));
        }
      default:
        break;
    }
    switch (step.verb()) {
      case "alerts":
        return checkAlerts(client(step.owner()), token(step.owner()), expect);
      case "await":
      case "cancel":
        {
          Background task = background.remove(step.owner());
          if (task == null) {
            return "no background acquire of " + step.owner() + " (acquire& first)";
          }
          if (step.verb().equals("cancel")) {
            task.thread.interrupt(); // Java's way to cancel a wait
          }
          task.thread.join(BACKGROUND_TIMEOUT.toMillis());
          if (task.thread.isAlive()) {
            return "expected " + String.join(" ", expect) + ", got a background acquire still waiting";
          }
          if (step.verb().equals("await")) {
            return checkAcquired(task.lock, task.result, expect);
          }
          return check(
              expect,
              task.result.equals("cancelled") ? "ok" : "an acquire that had ended: " + task.result);
        }
      default:
        break;
    }
    DistributedLock lock;
    try {
      lock = lockFor(step);
    } catch (ClientClosedException e) {
      return check(expect, verdict(e)); // a closed client refuses the lock object
    }
    switch (step.verb()) {
      case "inspect":
        // The snapshot is taken on OWNER's client, through the lock object's inspect().
        return checkInspect(
            lock::inspect,
            token(step.owner()),
            step.target().equals("read") ? LockMode.READ : LockMode.WRITE,
            expect);
      case "acquire":
        return checkAcquired(lock, acquire(lock, step.ms("wait"), step.ms("lease")), expect);
      case "acquire&":
        if (background.containsKey(step.owner())) {
          return "a background acquire of " + step.owner() + " is already running";
        }
        background.put(step.owner(), new Background(lock, step.ms("wait"), step.ms("lease")));
        return null;
      default:
        break;
    }
    String got;
    try {
      switch (step.verb()) {
        case "release":
          lock.unlock();
          // unlock() returns nothing: the remaining count is asked of Redis afterwards.
          got = expect.size() > 1 ? "ok remaining=" + lock.getHoldCount() : "ok";
          break;
        case "extend":
          lock.extend(step.ms("lease"), TimeUnit.MILLISECONDS);
          got = "ok";
          break;
        case "held_by":
          got = String.valueOf(lock.isHeldByCurrentThread());
          break;
        case "hold_count":
          got = String.valueOf(lock.getHoldCount());
          break;
        default:
          return "unknown verb " + step.verb();
      }
    } catch (RuntimeException e) {
      got = verdict(e);
    }
    return check(expect, got);
  }
}
