package redlock

// The steps of the conformance scenarios (see conformance_test.go and
// tests/conformance/README.md): one confRun per scenario, two clients, owners, fences,
// background acquires and the contention alerts each client received.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// confVerdict is the contract's name for a result: "ok" or an error kind in snake case.
// ErrLockLost is checked before ErrNotHeld in case one error ever matches both.
func confVerdict(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrInvalidArgument):
		return "invalid_argument"
	case errors.Is(err, ErrTimeout):
		return "timeout"
	case errors.Is(err, ErrUpgradeNotAllowed):
		return "upgrade_not_allowed"
	case errors.Is(err, ErrLockLost):
		return "lock_lost"
	case errors.Is(err, ErrNotHeld):
		return "not_held"
	case errors.Is(err, ErrClosed):
		return "closed"
	case errors.Is(err, ErrRedis):
		return "redis"
	}
	return fmt.Sprintf("unexpected error %v", err)
}

// confAlerts records the waiting owner's token of every contention alert a client received.
type confAlerts struct {
	mu     sync.Mutex
	tokens []string
}

func (a *confAlerts) record(alert ContentionAlert) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokens = append(a.tokens, alert.OwnerToken)
}

func (a *confAlerts) naming(token string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, t := range a.tokens {
		if t == token {
			n++
		}
	}
	return n
}

type confResult struct {
	hold *Hold
	err  error
}

// confBackground is an acquire&: its result, and the cancel of its own context.
type confBackground struct {
	done   chan confResult
	cancel context.CancelFunc
}

// confRun is the state of one scenario.
type confRun struct {
	prefix     string // the clients' key prefix: spend_fences works under it
	clients    [2]*Client
	alerts     [2]*confAlerts
	name       string
	owners     map[string]*Owner // by letter, as used on client 1
	fences     map[string]uint64
	background map[string]*confBackground
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

// view is TARGET's view on a client; a closed client refuses it (ErrClosed).
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

// confAcquire runs one acquire: wait=0 (or none) tries once, wait=N waits under a deadline of N
// ms; lease=N is a fixed lease, lease=watchdog (or none) leaves the hold to the watchdog;
// label=T is stored with the hold.
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
	if label, ok := step.args["label"]; ok {
		opts = append(opts, WithLabel(label))
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

// checkInspect checks `ok [mode=M] [holders=N] [count=N] [label=T]`; owner and mode name
// OWNER's hold (nil for `-`).
func checkInspect(info *LockInfo, err error, owner *Owner, mode Mode, expect []string) error {
	want := strings.Join(expect, " ")
	if err != nil || len(expect) == 0 || expect[0] != "ok" {
		if got := confVerdict(err); got != want {
			return fmt.Errorf("expected %s, got %s", want, got)
		}
		return nil
	}
	var hold *HolderInfo
	for i := range info.Holders {
		if owner != nil && info.Holders[i].OwnerToken == owner.Token() && info.Holders[i].Mode == mode {
			hold = &info.Holders[i]
		}
	}
	for _, check := range expect[1:] {
		key, value, _ := strings.Cut(check, "=")
		var got string
		switch {
		case key == "mode":
			got = info.Mode.String() // "none" when free
		case key == "holders":
			got = strconv.FormatUint(info.HolderCount, 10)
		case (key == "count" || key == "label") && owner == nil:
			return fmt.Errorf("%s needs an owner and a target", check)
		case key == "count" && hold == nil:
			got = "0"
		case key == "count":
			got = strconv.FormatUint(uint64(hold.HoldCount), 10)
		case key == "label" && hold == nil:
			return fmt.Errorf("expected %s, got no such hold in %+v", check, info)
		case key == "label":
			got = hold.Thread
		default:
			return fmt.Errorf("unknown inspect check %q", check)
		}
		if got != value {
			return fmt.Errorf("expected %s, got %s=%s in %+v", check, key, got, info)
		}
	}
	return nil
}

// checkAlerts waits for client's alerts naming owner to reach `N` (then must stay exactly N) or
// `>=N` (README: alerts are delivered asynchronously).
func (r *confRun) checkAlerts(client int, owner *Owner, expect []string) error {
	if len(expect) == 0 {
		return errors.New("no expected alert count")
	}
	word, atLeast := strings.CutPrefix(expect[0], ">=")
	n, err := strconv.Atoi(word)
	if err != nil {
		return fmt.Errorf("bad alert count %q", expect[0])
	}
	alerts := r.alerts[client]
	for deadline := time.Now().Add(2 * time.Second); alerts.naming(owner.Token()) < n && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !atLeast {
		time.Sleep(200 * time.Millisecond)
	}
	got := alerts.naming(owner.Token())
	if (atLeast && got >= n) || (!atLeast && got == n) {
		return nil
	}
	return fmt.Errorf("expected %s alerts, got %d", expect[0], got)
}

// adminStep runs the steps of OWNER `-`; handled is false for any other verb.
func (r *confRun) adminStep(step *confStep, check func(string) error) (handled bool, err error) {
	switch step.verb {
	case "clients":
		return true, errors.New("clients must be a scenario's first step")
	case "close":
		return true, r.clients[0].Close()
	case "sleep":
		d, err := step.mustMs("ms")
		if err != nil {
			return true, err
		}
		time.Sleep(d)
		return true, nil
	case "locked":
		locked := false
		for _, target := range []string{"read", "write"} {
			view, err := r.view(1, target)
			if err != nil {
				return true, err
			}
			held, err := view.IsLocked(bg)
			if err != nil {
				return true, check(confVerdict(err))
			}
			locked = locked || held
		}
		return true, check(strconv.FormatBool(locked))
	case "spend_fences":
		// Read from the repository, so every runner runs the same script.
		script, err := os.ReadFile(spendFencesFile)
		if err != nil {
			return true, err
		}
		reply, err := redisCommand("EVAL", string(script), "0", r.prefix)
		if err != nil {
			return true, fmt.Errorf("spend_fences.lua: %v", err)
		}
		// A RESP integer: how many counters were set; none set means nothing was spent.
		n, err := strconv.Atoi(strings.TrimPrefix(reply, ":"))
		if err != nil || !strings.HasPrefix(reply, ":") || n < 1 {
			return true, check("no fencing counter was set: " + reply)
		}
		return true, check("ok")
	case "force_unlock":
		held, err := r.clients[1].ForceUnlock(bg, r.name)
		if err != nil {
			return true, check(confVerdict(err))
		}
		return true, check(strconv.FormatBool(held))
	case "inspect":
		info, err := r.clients[1].Inspect(bg, r.name)
		return true, checkInspect(info, err, nil, 0, step.expect)
	}
	return false, nil
}

func (r *confRun) step(step *confStep) error {
	want := strings.Join(step.expect, " ")
	check := func(got string) error {
		if got != want {
			return fmt.Errorf("expected %s, got %s", want, got)
		}
		return nil
	}
	if step.owner == "-" {
		if handled, err := r.adminStep(step, check); handled {
			return err
		}
	}
	client, owner, err := r.owner(step.owner)
	if err != nil {
		return err
	}
	switch step.verb {
	case "alerts":
		return r.checkAlerts(client, owner, step.expect)
	case "await", "cancel":
		task, ok := r.background[step.owner]
		if !ok {
			return fmt.Errorf("no background acquire of %s to %s", step.owner, step.verb)
		}
		delete(r.background, step.owner)
		if step.verb == "await" {
			result := <-task.done
			return r.checkAcquired(result.hold, result.err, step.expect)
		}
		task.cancel() // Go's way to cancel a wait: its context
		result := <-task.done
		if errors.Is(result.err, ErrCanceled) {
			return check("ok")
		}
		return check("an acquire that had ended: " + confVerdict(result.err))
	}
	if step.target == "" {
		return errors.New("a target is needed")
	}
	lock, err := r.view(client, step.target)
	if errors.Is(err, ErrClosed) {
		return check(confVerdict(err)) // a closed client refuses the handle
	} else if err != nil {
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
		ctx, cancel := context.WithCancel(r.ctx)
		task := &confBackground{done: make(chan confResult, 1), cancel: cancel}
		r.background[step.owner] = task
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer cancel()
			hold, err := confAcquire(ctx, lock, owner, step)
			task.done <- confResult{hold, err}
		}()
		return nil
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
			return check(confVerdict(err))
		}
		return check(strconv.FormatBool(held))
	case "hold_count":
		count, err := lock.HoldCount(bg, owner)
		if err != nil {
			return check(confVerdict(err))
		}
		return check(strconv.Itoa(count))
	case "inspect":
		info, err := lock.Inspect(bg)
		return checkInspect(info, err, owner, lock.Mode(), step.expect)
	}
	return fmt.Errorf("unknown verb %q", step.verb)
}
