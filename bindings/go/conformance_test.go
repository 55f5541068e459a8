package redlock

// The shared conformance scenarios (tests/conformance/scenarios.txt, format in its README.md),
// run against the test redis-server through the Go API. Every language runs the same file; the
// Rust core's runner (core/tests/conformance.rs) is the reference for the semantics. This file
// reads the scenarios and runs them; conformance_steps_test.go runs their steps.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scenarioFile and spendFencesFile are relative to the package directory, where go test runs.
const (
	scenarioFile    = "../../tests/conformance/scenarios.txt"
	spendFencesFile = "../../tests/conformance/spend_fences.lua"
)

type confStep struct {
	line   int
	text   string
	owner  string
	verb   string
	target string
	args   map[string]string
	expect []string
}

type confScenario struct {
	title string
	line  int
	steps []confStep
}

func parseScenarios(t *testing.T, text string) []confScenario {
	t.Helper()
	var scenarios []confScenario
	for n, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if title, ok := strings.CutPrefix(line, "scenario "); ok {
			scenarios = append(scenarios, confScenario{title: strings.TrimSpace(title), line: n + 1})
			continue
		}
		call, expect, _ := strings.Cut(line, "->")
		words := strings.Fields(call)
		if len(words) < 2 {
			t.Fatalf("%s:%d: %q: an owner and a verb are needed", scenarioFile, n+1, line)
		}
		step := confStep{
			line:   n + 1,
			text:   line,
			owner:  words[0],
			verb:   words[1],
			args:   map[string]string{},
			expect: strings.Fields(expect),
		}
		for _, word := range words[2:] {
			if k, v, ok := strings.Cut(word, "="); ok {
				step.args[k] = v
			} else {
				step.target = word
			}
		}
		if len(scenarios) == 0 {
			t.Fatalf("%s:%d: a step before any scenario", scenarioFile, n+1)
		}
		last := &scenarios[len(scenarios)-1]
		last.steps = append(last.steps, step)
	}
	return scenarios
}

// msArg is a duration argument in milliseconds (negative values too); ok is false when absent
// or "watchdog".
func (s *confStep) msArg(key string) (d time.Duration, ok bool, err error) {
	v, present := s.args[key]
	if !present || v == "watchdog" {
		return 0, false, nil
	}
	ms, err := strconv.ParseInt(v, 10, 63)
	if err != nil {
		return 0, false, fmt.Errorf("%s=%s: not milliseconds", key, v)
	}
	return time.Duration(ms) * time.Millisecond, true, nil
}

func (s *confStep) mustMs(key string) (time.Duration, error) {
	d, ok, err := s.msArg(key)
	if err == nil && !ok {
		err = fmt.Errorf("%s=MS is needed", key)
	}
	return d, err
}

// notApplicable says why Go cannot pass a step's invalid argument at all (README: "What a
// language cannot express"), or "" when it can.
func (s *confStep) notApplicable() string {
	if strings.Join(s.expect, " ") != "invalid_argument" || (s.verb != "acquire" && s.verb != "acquire&") {
		return ""
	}
	if lease, fixed, _ := s.msArg("lease"); fixed && lease == 0 {
		return "WithLease(0) means no fixed lease (the watchdog keeps the hold)"
	}
	if wait, waits, _ := s.msArg("wait"); waits && wait < 0 {
		return "the wait is the context's deadline: one in the past is a timeout, not an argument"
	}
	return ""
}

// clientPrefix is the key prefix of both clients of a scenario: the `clients` directive's
// prefix=, or "conformance".
func clientPrefix(scenario *confScenario) string {
	if len(scenario.steps) > 0 && scenario.steps[0].verb == "clients" {
		if prefix, ok := scenario.steps[0].args["prefix"]; ok {
			return prefix
		}
	}
	return "conformance"
}

// clientOptions are the options of both clients of a scenario: its key prefix (clientPrefix),
// the `clients` directive's other settings (its first step, if any), and alerts recorded in
// `alerts`.
func clientOptions(scenario *confScenario, alerts *confAlerts) ([]Option, error) {
	opts := []Option{WithPrefix(clientPrefix(scenario)), OnContention(alerts.record)}
	if len(scenario.steps) == 0 || scenario.steps[0].verb != "clients" {
		return opts, nil
	}
	step := &scenario.steps[0]
	var after time.Duration
	attempts := 0
	for key, value := range step.args {
		switch key {
		case "prefix": // taken by clientPrefix
		case "lease":
			lease, err := step.mustMs(key)
			if err != nil {
				return nil, err
			}
			opts = append(opts, WithDefaultLease(lease))
		case "alert_after":
			d, err := step.mustMs(key)
			if err != nil {
				return nil, err
			}
			after = d
		case "alert_attempts":
			n, err := strconv.Atoi(value)
			if err != nil {
				return nil, fmt.Errorf("alert_attempts=%s: not a number", value)
			}
			attempts = n
		default:
			return nil, fmt.Errorf("unknown client setting %s", key)
		}
	}
	if after != 0 || attempts != 0 {
		opts = append(opts, WithContentionAlert(after, attempts))
	}
	return opts, nil
}

func TestConformanceScenarios(t *testing.T) {
	text, err := os.ReadFile(scenarioFile)
	if err != nil {
		t.Fatalf("reading the scenarios: %v", err)
	}
	scenarios := parseScenarios(t, string(text))
	if len(scenarios) < 10 {
		t.Fatalf("the scenario file was not read: %d scenarios", len(scenarios))
	}
	for n := range scenarios {
		scenario := &scenarios[n]
		t.Run(scenario.title, func(t *testing.T) {
			alerts := [2]*confAlerts{{}, {}}
			var clients [2]*Client
			for i := range clients {
				opts, err := clientOptions(scenario, alerts[i])
				if err != nil {
					t.Fatalf("scenario %q (line %d): %v", scenario.title, scenario.line, err)
				}
				clients[i] = connect(t, opts...)
			}
			// Cleanups run last-in first-out: the background waits end before the clients close.
			run := &confRun{
				prefix:     clientPrefix(scenario),
				clients:    clients,
				alerts:     alerts,
				name:       fmt.Sprintf("conformance:%d:%s", n, NewOwner().Token()),
				owners:     map[string]*Owner{},
				fences:     map[string]uint64{},
				background: map[string]*confBackground{},
			}
			ctx, cancel := context.WithCancel(bg)
			run.ctx = ctx
			t.Cleanup(func() {
				cancel()
				run.wg.Wait()
			})
			steps := scenario.steps
			if len(steps) > 0 && steps[0].verb == "clients" {
				steps = steps[1:] // applied when the clients were made
			}
			for i := range steps {
				step := &steps[i]
				if why := step.notApplicable(); why != "" {
					t.Logf("n/a line %d `%s`: %s", step.line, step.text, why)
					continue
				}
				if err := run.step(step); err != nil {
					t.Fatalf("scenario %q (line %d), line %d: %s: %v",
						scenario.title, scenario.line, step.line, step.text, err)
				}
			}
		})
	}
}
