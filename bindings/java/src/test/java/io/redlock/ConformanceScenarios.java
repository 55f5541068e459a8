package io.redlock;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The format of {@code tests/conformance/scenarios.txt} (described in its README.md): parsing,
 * the {@code clients} directive, and what the Java binding cannot express. Used by {@link
 * ConformanceTest}.
 */
final class ConformanceScenarios {
  private ConformanceScenarios() {}

  /** One step: {@code OWNER VERB [TARGET] [ARG=V]... -> EXPECT [CHECK]...}. */
  record Step(
      int line,
      String text,
      String owner,
      String verb,
      String target,
      Map<String, String> args,
      List<String> expect) {

    /** A duration argument in milliseconds; null when absent or {@code watchdog}. */
    Long ms(String key) {
      String value = args.get(key);
      if (value == null || value.equals("watchdog")) {
        return null;
      }
      try {
        return Long.parseLong(value);
      } catch (NumberFormatException e) {
        // An Error, not an exception: a malformed scenario must never pass for a verdict.
        throw new AssertionError("scenarios.txt line " + line + ": " + key + "=" + value, e);
      }
    }

    /**
     * Why Java cannot pass this step's invalid argument at all (README: "What a language cannot
     * express"), or null when it can.
     */
    String notApplicable() {
      boolean acquire = verb.equals("acquire") || verb.equals("acquire&");
      if (!acquire || !String.join(" ", expect).equals("invalid_argument")) {
        return null;
      }
      Long wait = ms("wait");
      if (wait != null && wait < 0) {
        return "the Lock idiom: tryLock(time <= 0) is one attempt, not an invalid argument";
      }
      return null;
    }
  }

  record Scenario(int line, String title, List<Step> steps) {

    /** The {@code clients} directive (the scenario's first step), or null. */
    Step clientsDirective() {
      return !steps.isEmpty() && steps.get(0).verb().equals("clients") ? steps.get(0) : null;
    }

    /** The steps after the {@code clients} directive (applied when the clients are made). */
    List<Step> stepsToRun() {
      return clientsDirective() == null ? steps : steps.subList(1, steps.size());
    }

    /**
     * Why the Java binding cannot run this scenario at all (README: "What a language cannot
     * express"), or null: the scenario uses a verb of {@link #UNSUPPORTED_VERBS} or an argument of
     * {@link #UNSUPPORTED_ARGS}.
     */
    String unsupported() {
      List<String> why = new ArrayList<>();
      for (Step step : steps) {
        String verb = UNSUPPORTED_VERBS.get(step.verb());
        if (verb != null && !why.contains(verb)) {
          why.add(verb);
        }
        for (String arg : step.args().keySet()) {
          String reason = UNSUPPORTED_ARGS.get(arg);
          if (reason != null && !why.contains(reason)) {
            why.add(reason);
          }
        }
      }
      return why.isEmpty() ? null : String.join("; ", why);
    }
  }

  /**
   * Verbs the Java binding has no API for (verb -> why). Empty: inspect is {@code
   * RedlockClient.inspect} / {@code DistributedLock.inspect}, alerts are the builder's {@code
   * contentionListener}.
   */
  static final Map<String, String> UNSUPPORTED_VERBS = Map.of();

  /**
   * Arguments (of any step, the {@code clients} directive included) the Java binding has no API
   * for (argument -> why). Empty: {@code label=} is {@code DistributedLock.withLabel}, {@code
   * alert_attempts=} is {@code RedlockClient.Builder.contentionAlertAttempts}, {@code prefix=} is
   * {@code RedlockClient.Builder.prefix}.
   */
  static final Map<String, String> UNSUPPORTED_ARGS = Map.of();

  /** The scenario file; Maven runs the tests with user.dir = bindings/java. */
  static Path file() {
    return Path.of(System.getProperty("user.dir"))
        .resolve("../../tests/conformance/scenarios.txt")
        .normalize();
  }

  /** The script of the admin verb {@code spend_fences}, next to the scenario file. */
  static Path spendFencesScript() {
    return file().resolveSibling("spend_fences.lua");
  }

  static List<Scenario> parse(List<String> lines) {
    List<Scenario> scenarios = new ArrayList<>();
    for (int n = 0; n < lines.size(); n++) {
      String line = lines.get(n).trim();
      if (line.isEmpty() || line.startsWith("#")) {
        continue;
      }
      if (line.startsWith("scenario ")) {
        scenarios.add(new Scenario(n + 1, line.substring("scenario ".length()), new ArrayList<>()));
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
}
