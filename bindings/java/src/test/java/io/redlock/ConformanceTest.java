package io.redlock;

import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.redlock.ConformanceScenarios.Scenario;
import io.redlock.ConformanceScenarios.Step;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The shared conformance scenarios ({@code tests/conformance/scenarios.txt}, format in its
 * README.md), run against a real redis-server through the Java API. Every language runs the same
 * file; the Rust runner ({@code core/tests/conformance.rs}) is the reference for the semantics.
 * {@link ConformanceScenarios} reads the file, {@link ConformanceRun} runs the steps.
 */
class ConformanceTest extends RedisTestBase {
  /** Bounds one scenario, so that a stuck wait fails the scenario instead of hanging the build. */
  private static final Duration SCENARIO_TIMEOUT = Duration.ofSeconds(60);

  @TestFactory
  List<DynamicTest> everyConformanceScenarioReachesItsVerdicts() throws IOException {
    Path file = ConformanceScenarios.file();
    if (!Files.isRegularFile(file)) {
      fail(
          "the conformance scenario file is missing: "
              + file
              + " (user.dir="
              + System.getProperty("user.dir")
              + "; run the tests from bindings/java)");
    }
    List<Scenario> scenarios = ConformanceScenarios.parse(Files.readAllLines(file));
    assertTrue(scenarios.size() >= 10, "the scenario file was not read: " + file);
    List<DynamicTest> tests = new ArrayList<>();
    for (int n = 0; n < scenarios.size(); n++) {
      Scenario scenario = scenarios.get(n);
      int index = n;
      tests.add(
          DynamicTest.dynamicTest(
              scenario.title(),
              () -> {
                String unsupported = scenario.unsupported();
                if (unsupported != null) {
                  System.out.println(
                      "SKIPPED conformance scenario '" + scenario.title() + "': " + unsupported);
                }
                Assumptions.assumeTrue(
                    unsupported == null, "not expressible in Java: " + unsupported);
                assertTimeoutPreemptively(SCENARIO_TIMEOUT, () -> runScenario(index, scenario));
              }));
    }
    return tests;
  }

  private static void runScenario(int index, Scenario scenario) throws Exception {
    try (ConformanceRun run =
        new ConformanceRun(redis, index, scenario.clientsDirective())) {
      for (Step step : scenario.stepsToRun()) {
        String notApplicable = step.notApplicable();
        if (notApplicable != null) {
          System.out.println("n/a line " + step.line() + " `" + step.text() + "`: " + notApplicable);
          continue;
        }
        String why = run.step(step);
        if (why != null) {
          fail("scenario '" + scenario.title() + "' (line " + scenario.line() + "), line "
              + step.line() + " `" + step.text() + "`: " + why);
        }
      }
    }
  }
}
