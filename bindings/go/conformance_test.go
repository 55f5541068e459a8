package redlock

// The shared conformance scenarios (tests/conformance/scenarios.txt, format in its README.md),
// run against the test redis-server through the Go API. Every language runs the same file; the
// Rust core's runner (core/tests/conformance.rs) is the reference for the semantics.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// scenarioFile is relative to the package directory, where go test runs.
const scenarioFile = "../../tests/conformance/scenarios.txt"

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

// confVerdict is the contract's name for a result: "ok" or an error kind in snake case.
// ErrLockLost is checked before ErrNotHeld in case one error ever matches both.
func confVerdict(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrTimeout):
		return "timeout"
	case errors.Is(err, ErrUpgradeNotAllowed):
		return "upgrade_not_allowed"
	case errors.Is(err, ErrLockLost):
		return "lock_lost"
	case errors.Is(err, ErrNotHeld):
		return "not_held"
	}
	return fmt.Sprintf("unexpected error %v", err)
}

type confResult struct {
	hold *Hold
	err  error
}

// confRun is the state of one scenario.
type confRun struct {
	clients    [2]*Client
	name       string
	owners     map[string]*Owner // by letter, as used on client 1
	fences     map[string]uint64
	background map[string]chan confResult
	ctx        context.Context // ends background waits when the scenario ends
	wg         sync.WaitGroup
}

// owner maps "A" to client 1 and A's owner, "A@2" to client 2 and an owner made from A's token.
func (r *confRun) owner(spec string) (int, *Owner, error) {
	letter, client := spec, 0
	if l, c, ok := strings.Cut(spec, "@"); ok {
		if c != "2" {
			return 0, nil, fmt.Errorf("unknown client in owner %q", spec)
		}
		letter, client = l, 1
	}
	owner, ok := r.owners[letter]
	if !ok {
		owner = NewOwner()
		r.owners[letter] = owner
	}
	if client == 1 {
		handed, err := OwnerFromToken(owner.Token())
		if err != nil {
			return 0, nil, fmt.Errorf("owner from token: %v", err)
		}
		owner = handed
	}
	return client, owner, nil
}

func (r *confRun) view(client int, target string) (*Lock, error) {
	c := r.clients[client]
	switch target {
	case "lock":
		return c.Lock(r.name)
	case "read", "write":
		rw, err := c.ReadWriteLock(r.name)
		if err != nil {
			return nil, err
		}
		if target == "read" {
			return rw.Read(), nil
		}
		return rw.Write(), nil
	}
	return nil, fmt.Errorf("unknown target %q", target)
}

// msArg is a duration argument in milliseconds; ok is false when absent or "watchdog".
func (s *confStep) msArg(key string) (d time.Duration, ok bool, err error) {
	v, present := s.args[key]
	if !present || v == "watchdog" {
		return 0, false, nil
	}
	ms, err := strconv.ParseUint(v, 10, 63)
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

// acquire runs one acquire: wait=0 (or none) tries once, wait=N waits under a deadline of N ms;
// lease=N is a fixed lease, lease=watchdog (or none) leaves the hold to the watchdog.
func confAcquire(ctx context.Context, lock *Lock, owner *Owner, step *confStep) (*Hold, error) {
	wait, waits, err := step.msArg("wait")
	if err != nil {
		return nil, err
	}
	lease, fixed, err := step.msArg("lease")
	if err != nil {
		return nil, err
	}
	var opts []AcquireOption
	if fixed {
		opts = append(opts, WithLease(lease))
	}
	if !waits || wait == 0 {
		return lock.TryAcquire(ctx, owner, opts...)
	}
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return lock.Acquire(waitCtx, owner, opts...)
}

// checkAcquired checks `ok [count=N] [fence=T] [fence>T]`, or an error verdict.
func (r *confRun) checkAcquired(hold *Hold, err error, expect []string) error {
	if len(expect) == 0 {
		return errors.New("no expected verdict")
	}
	if got := confVerdict(err); got != expect[0] {
		return fmt.Errorf("expected %s, got %s", expect[0], got)
	}
	if err != nil {
		return nil
	}
	fence := hold.FencingToken()
	for _, check := range expect[1:] {
		if n, ok := strings.CutPrefix(check, "count="); ok {
			if strconv.Itoa(hold.HoldCount()) != n {
				return fmt.Errorf("expected %s, got hold count %d", check, hold.HoldCount())
			}
		} else if name, ok := strings.CutPrefix(check, "fence>"); ok {
			bound, known := r.fences[name]
			if !known {
				return fmt.Errorf("%s: fence %s is not bound yet", check, name)
			}
			if fence <= bound {
				return fmt.Errorf("expected %s, got fencing token %d, not above %s=%d", check, fence, name, bound)
			}
		} else if name, ok := strings.CutPrefix(check, "fence="); ok {
			bound, known := r.fences[name]
			if !known {
				r.fences[name] = fence
				bound = fence
			}
			if fence != bound {
				return fmt.Errorf("expected %s, got fencing token %d, not %s=%d", check, fence, name, bound)
			}
		} else {
			return fmt.Errorf("unknown check %q", check)
		}
	}
	return nil
}

func (r *confRun) step(step *confStep) error {
	want := strings.Join(step.expect, " ")
	check := func(got string) error {
		if got != want {
			return fmt.Errorf("expected %s, got %s", want, got)
		}
		return nil
	}
	switch step.verb {
	case "sleep":
		d, err := step.mustMs("ms")
		if err != nil {
			return err
		}
		time.Sleep(d)
		return nil
	case "locked":
		read, err := r.view(1, "read")
		if err != nil {
			return err
		}
		write, err := r.view(1, "write")
		if err != nil {
			return err
		}
		readLocked, err := read.IsLocked(bg)
		if err != nil {
			return fmt.Errorf("expected %s, got error %v", want, err)
		}
		writeLocked, err := write.IsLocked(bg)
		if err != nil {
			return fmt.Errorf("expected %s, got error %v", want, err)
		}
		return check(strconv.FormatBool(readLocked || writeLocked))
	case "force_unlock":
		held, err := r.clients[1].ForceUnlock(bg, r.name)
		if err != nil {
			return fmt.Errorf("expected %s, got error %v", want, err)
		}
		return check(strconv.FormatBool(held))
	}

	client, owner, err := r.owner(step.owner)
	if err != nil {
		return err
	}
	if step.target == "" {
		return errors.New("a target is needed")
	}
	lock, err := r.view(client, step.target)
	if err != nil {
		return err
	}
	switch step.verb {
	case "acquire":
		hold, err := confAcquire(bg, lock, owner, step)
		return r.checkAcquired(hold, err, step.expect)
	case "acquire&":
		if _, busy := r.background[step.owner]; busy {
			return fmt.Errorf("%s already has a background acquire", step.owner)
		}
		done := make(chan confResult, 1)
		r.background[step.owner] = done
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			hold, err := confAcquire(r.ctx, lock, owner, step)
			done <- confResult{hold, err}
		}()
		return nil
	case "await":
		done, ok := r.background[step.owner]
		if !ok {
			return fmt.Errorf("no background acquire of %s to await", step.owner)
		}
		delete(r.background, step.owner)
		result := <-done
		return r.checkAcquired(result.hold, result.err, step.expect)
	case "release":
		remaining, err := lock.Release(bg, owner)
		if err == nil && len(step.expect) > 1 {
			return check(fmt.Sprintf("ok remaining=%d", remaining))
		}
		return check(confVerdict(err))
	case "extend":
		lease, err := step.mustMs("lease")
		if err != nil {
			return err
		}
		return check(confVerdict(lock.Extend(bg, owner, lease)))
	case "held_by":
		held, err := lock.IsHeldBy(bg, owner)
		if err != nil {
			return fmt.Errorf("expected %s, got error %v", want, err)
		}
		return check(strconv.FormatBool(held))
	case "hold_count":
		count, err := lock.HoldCount(bg, owner)
		if err != nil {
			return fmt.Errorf("expected %s, got error %v", want, err)
		}
		return check(strconv.Itoa(count))
	}
	return fmt.Errorf("unknown verb %q", step.verb)
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
	for n, scenario := range scenarios {
		t.Run(scenario.title, func(t *testing.T) {
			// Cleanups run last-in first-out: the background waits end before the clients close.
			run := &confRun{
				clients: [2]*Client{
					connect(t, WithPrefix("conformance")),
					connect(t, WithPrefix("conformance")),
				},
				name:       fmt.Sprintf("conformance:%d:%s", n, NewOwner().Token()),
				owners:     map[string]*Owner{},
				fences:     map[string]uint64{},
				background: map[string]chan confResult{},
			}
			ctx, cancel := context.WithCancel(bg)
			run.ctx = ctx
			t.Cleanup(func() {
				cancel()
				run.wg.Wait()
			})
			for i := range scenario.steps {
				step := &scenario.steps[i]
				if err := run.step(step); err != nil {
					t.Fatalf("scenario %q (line %d), line %d: %s: %v",
						scenario.title, scenario.line, step.line, step.text, err)
				}
			}
		})
	}
}
