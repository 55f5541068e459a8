package io.redlock;

import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The shared conformance scenarios ({@code tests/conformance/scenarios.txt}, format in its
 * README.md), run against a real redis-server through the Java API. Every language runs the same
 * file; the Rust runner ({@code core/tests/conformance.rs}) is the reference for the semantics.
 */
class ConformanceTest extends RedisTestBase {
  private static final String PREFIX = "conformance";
  /** Bounds one scenario, so that a stuck wait fails the scenario instead of hanging the build. */
  private static final Duration SCENARIO_TIMEOUT = Duration.ofSeconds(60);

  /** One step: {@code OWNER VERB [TARGET] [ARG=V]... -> EXPECT [CHECK]...}. */
  private record Step(
      int line,
      String text,
      String owner,
      String verb,
      String target,
      Map<String, String> args,
      List<String> expect) {}

  private record Scenario(String title, List<Step> steps) {}

  /** The scenario file; Maven runs the tests with user.dir = bindings/java. */
  private static Path scenarioFile() {
    return Path.of(System.getProperty("user.dir"))
        .resolve("../../tests/conformance/scenarios.txt")
        .normalize();
  }

  private static List<Scenario> parse(List<String> lines) {
    List<Scenario> scenarios = new ArrayList<>();
    for (int n = 0; n < lines.size(); n++) {
      String line = lines.get(n).trim();
      if (line.isEmpty() || line.startsWith("#")) {
        continue;
      }
      if (line.startsWith("scenario ")) {
        scenarios.add(new Scenario(line.substring("scenario ".length()), new ArrayList<>()));
        continue;
      }
      int arrow = line.indexOf("->");
      String call = arrow < 0 ? line : line.substring(0, arrow);
      String expect = arrow < 0 ? "" : line.substring(arrow + 2);
      String[] words = call.trim().split("\\s+");
      if (words.length < 2) {
        throw new IllegalArgumentException(
            "scenarios.txt line " + (n + 1) + ": no owner and verb: " + line);
      }
      String target = null;
      Map<String, String> args = new HashMap<>();
      for (int i = 2; i < words.length; i++) {
        int eq = words[i].indexOf('=');
        if (eq < 0) {
          target = words[i];
        } else {
          args.put(words[i].substring(0, eq), words[i].substring(eq + 1));
        }
      }
      List<String> expected =
          expect.isBlank() ? List.of() : List.of(expect.trim().split("\\s+"));
      if (scenarios.isEmpty()) {
        throw new IllegalArgumentException(
            "scenarios.txt line " + (n + 1) + ": a step before any scenario");
      }
      scenarios
          .get(scenarios.size() - 1)
          .steps()
          .add(new Step(n + 1, line, words[0], words[1], target, args, expected));
    }
    return scenarios;
  }

  @TestFactory
  List<DynamicTest> everyConformanceScenarioReachesItsVerdicts() throws IOException {
    Path file = scenarioFile();
    if (!Files.isRegularFile(file)) {
      fail(
          "the conformance scenario file is missing: "
              + file
              + " (user.dir="
              + System.getProperty("user.dir")
              + "; run the tests from bindings/java)");
    }
    List<Scenario> scenarios = parse(Files.readAllLines(file));
    assertTrue(scenarios.size() >= 10, "the scenario file was not read: " + file);
    List<DynamicTest> tests = new ArrayList<>();
    for (int n = 0; n < scenarios.size(); n++) {
      Scenario scenario = scenarios.get(n);
      int index = n;
      tests.add(
          DynamicTest.dynamicTest(
              scenario.title(),
              () -> assertTimeoutPreemptively(SCENARIO_TIMEOUT, () -> runScenario(index, scenario))));
    }
    return tests;
  }

  private static void runScenario(int index, Scenario scenario) {
    try (Run run = new Run(index)) {
      for (Step step : scenario.steps()) {
        String why = run.step(step);
        if (why != null) {
          fail("scenario '" + scenario.title() + "', line " + step.line() + " `" + step.text()
              + "`: " + why);
        }
      }
    }
  }

  /** The contract's name for an error: an error kind in snake case, or a failure. */
  private static String verdict(Exception e) {
    if (e instanceof InterruptedException) {
      Thread.currentThread().interrupt();
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
    return "unexpected error " + e;
  }

  /** One acquire through the Java API: {@code wait}/{@code lease} in ms, null = forever/watchdog. */
  private static String acquire(DistributedLock lock, Long wait, Long lease) {
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

  /** A background acquire runs on a thread of its own (the owner is the token, not the thread). */
  private static final Executor BACKGROUND =
      task -> {
        Thread thread = new Thread(task, "conformance-acquire");
        thread.setDaemon(true);
        thread.start();
      };

  /** One scenario's state: two clients, a lock name of its own, its owners and fences. */
  private static final class Run implements AutoCloseable {
    private final RedlockClient[] clients = new RedlockClient[2];
    private final String name;
    /** Owner letter -> random token. */
    private final Map<String, String> owners = new HashMap<>();
    private final Map<String, Long> fences = new HashMap<>();
    /**
     * The lock objects, one per client, owner and target, kept for the scenario as an application
     * keeps its lock: fencingToken() and the lost-hold report of unlock() are per object.
     */
    private final Map<String, DistributedLock> locks = new HashMap<>();
    private final Map<String, DistributedReadWriteLock> readWriteLocks = new HashMap<>();
    /** Background acquire per owner spec: its verdict and the lock it went through. */
    private final Map<String, CompletableFuture<String>> background = new HashMap<>();
    private final Map<String, DistributedLock> backgroundLocks = new HashMap<>();

    Run(int index) {
      try {
        clients[0] = RedlockClient.builder(redis.url()).prefix(PREFIX).build();
        clients[1] = RedlockClient.builder(redis.url()).prefix(PREFIX).build();
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
          client.close();
        }
      }
    }

    /** Client 2 as an administrator (no owner of its own). */
    private DistributedReadWriteLock admin() {
      return clients[1].getReadWriteLock(name);
    }

    /** The lock of {@code spec} ({@code A} on client 1, {@code A@2} on client 2) for a target. */
    private DistributedLock view(String spec, String target) {
      int client = 0;
      String letter = spec;
      int at = spec.indexOf('@');
      if (at >= 0) {
        letter = spec.substring(0, at);
        if (!spec.substring(at + 1).equals("2")) {
          throw new IllegalArgumentException("unknown client in owner " + spec);
        }
        client = 1;
      }
      if (target == null) {
        throw new IllegalArgumentException("a target is needed");
      }
      String token = owners.computeIfAbsent(letter, l -> UUID.randomUUID().toString());
      String key = client + ":" + letter;
      RedlockClient c = clients[client];
      switch (target) {
        case "lock":
          return locks.computeIfAbsent(key, k -> c.getLock(name, token));
        case "read":
          return readWriteLocks.computeIfAbsent(key, k -> c.getReadWriteLock(name, token)).readLock();
        case "write":
          return readWriteLocks.computeIfAbsent(key, k -> c.getReadWriteLock(name, token)).writeLock();
        default:
          throw new IllegalArgumentException("unknown target " + target);
      }
    }

    /** Held by anyone, in any mode. */
    private boolean locked() {
      DistributedReadWriteLock admin = admin();
      return admin.readLock().isLocked() || admin.writeLock().isLocked();
    }

    private static String check(List<String> expect, String got) {
      String wanted = String.join(" ", expect);
      return got.equals(wanted) ? null : "expected " + wanted + ", got " + got;
    }

    private static Long ms(Step step, String key) {
      String value = step.args().get(key);
      if (value == null || value.equals("watchdog")) {
        return null;
      }
      return Long.parseLong(value);
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

    /** Runs one step; null when it reached its verdict, else why not. */
    String step(Step step) {
      List<String> expect = step.expect();
      try {
        switch (step.verb()) {
          case "sleep":
            Thread.sleep(ms(step, "ms"));
            return null;
          case "locked":
            return check(expect, String.valueOf(locked()));
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
        DistributedLock lock = view(step.owner(), step.target());
        switch (step.verb()) {
          case "acquire":
            return checkAcquired(lock, acquire(lock, ms(step, "wait"), ms(step, "lease")), expect);
          case "acquire&":
            {
              if (background.containsKey(step.owner())) {
                return "a background acquire of " + step.owner() + " is already running";
              }
              Long wait = ms(step, "wait");
              Long lease = ms(step, "lease");
              background.put(
                  step.owner(), CompletableFuture.supplyAsync(() -> acquire(lock, wait, lease), BACKGROUND));
              backgroundLocks.put(step.owner(), lock);
              return null;
            }
          case "await":
            {
              CompletableFuture<String> task = background.remove(step.owner());
              DistributedLock taken = backgroundLocks.remove(step.owner());
              if (task == null) {
                return "no background acquire of " + step.owner() + " (acquire& first)";
              }
              if (taken != lock) {
                return "await on another target than its acquire&";
              }
              String got = task.get(SCENARIO_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
              return checkAcquired(lock, got, expect);
            }
          case "release":
            {
              String got;
              try {
                lock.unlock();
                // unlock() returns nothing: the remaining count is asked of Redis afterwards.
                got = expect.size() > 1 ? "ok remaining=" + lock.getHoldCount() : "ok";
              } catch (RuntimeException e) {
                got = verdict(e);
              }
              return check(expect, got);
            }
          case "extend":
            {
              String got;
              try {
                lock.extend(ms(step, "lease"), TimeUnit.MILLISECONDS);
                got = "ok";
              } catch (RuntimeException e) {
                got = verdict(e);
              }
              return check(expect, got);
            }
          case "held_by":
            return check(expect, String.valueOf(lock.isHeldByCurrentThread()));
          case "hold_count":
            return check(expect, String.valueOf(lock.getHoldCount()));
          default:
            return "unknown verb " + step.verb();
        }
      } catch (Exception e) {
        return "expected " + String.join(" ", expect) + ", got " + verdict(e);
      }
    }
  }
}
