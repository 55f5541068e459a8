package redlock

import (
	"context"
	"log"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// loggedLine is one line a logRecorder got.
type loggedLine struct {
	level   slog.Level
	message string
	target  string
}

// logRecorder is a slog.Handler that keeps every line it is given (it wants them all: the
// levels are filtered by SetLogger alone); panics makes the handler panic on lines that contain it.
type logRecorder struct {
	mu     sync.Mutex
	lines  []loggedLine
	panics string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }

func (r *logRecorder) Handle(_ context.Context, record slog.Record) error {
	if r.panics != "" && strings.Contains(record.Message, r.panics) {
		panic("a handler that panics")
	}
	line := loggedLine{level: record.Level, message: record.Message}
	record.Attrs(func(a slog.Attr) bool {
		if a.Key == "target" {
			line.target = a.Value.String()
		}
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	return nil
}

func (r *logRecorder) all() []loggedLine {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]loggedLine(nil), r.lines...)
}

// about returns the lines that mention name.
func (r *logRecorder) about(name string) []loggedLine {
	var found []loggedLine
	for _, line := range r.all() {
		if strings.Contains(line.message, name) {
			found = append(found, line)
		}
	}
	return found
}

// keepLogSettings puts back, when the test ends, where the library's lines go and slog's (and
// log's) default.
func keepLogSettings(t *testing.T) {
	state := logTo.Load()
	logger, writer, flags := slog.Default(), log.Writer(), log.Flags()
	t.Cleanup(func() {
		flushLogs(t)
		setLogState(state)
		slog.SetDefault(logger)
		log.SetOutput(writer)
		log.SetFlags(flags)
	})
}

// flushLogs gives the library's log thread a moment to hand over the lines logged so far.
func flushLogs(t *testing.T) {
	t.Helper()
	time.Sleep(50 * time.Millisecond)
}

// loseAHold takes a watched hold of a fresh name and has another client force-unlock it; it
// returns once the holder's client found it lost (its warn line is queued by then).
func loseAHold(t *testing.T) string {
	t.Helper()
	c := connect(t, WithDefaultLease(300*time.Millisecond))
	admin := connect(t)
	name := uniqueName(t)
	hold := mustAcquire(t, mustLock(t, c, name), NewOwner())
	forceUnlockHeld(t, admin, name)
	select {
	case <-hold.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost() was not closed")
	}
	return name
}

// wantLostLine waits for the one warn line about name's lost hold.
func wantLostLine(t *testing.T, rec *logRecorder, name string) {
	t.Helper()
	eventually(3*time.Second, func() bool { return len(rec.about(name)) > 0 })
	flushLogs(t)
	lines := rec.about(name)
	if len(lines) != 1 {
		t.Fatalf("want one line about %s, got %+v", name, lines)
	}
	line := lines[0]
	if line.level != slog.LevelWarn || !strings.HasPrefix(line.message, "lock lost") ||
		!strings.HasPrefix(line.target, "redlock_core") {
		t.Fatalf("want a warn line \"lock lost ...\" from redlock_core, got %+v", line)
	}
}

func TestLogLinesReachTheLoggerAtTheLevelAsked(t *testing.T) {
	keepLogSettings(t)
	rec := &logRecorder{}
	SetLogger(slog.New(rec), slog.LevelWarn)
	name := loseAHold(t)
	wantLostLine(t, rec, name)
	for _, line := range rec.all() {
		if line.level < slog.LevelWarn {
			t.Fatalf("a line below the level asked: %+v", line)
		}
	}
}

func TestLogLinesGoToSlogDefaultLookedUpAtEachLine(t *testing.T) {
	keepLogSettings(t)
	setLogState(&logState{level: slog.LevelWarn}) // the package's default
	rec := &logRecorder{}
	slog.SetDefault(slog.New(rec)) // after the default was set: still followed
	name := loseAHold(t)
	wantLostLine(t, rec, name)
}

func TestSetLoggerNilStopsLogLines(t *testing.T) {
	keepLogSettings(t)
	rec := &logRecorder{}
	SetLogger(slog.New(rec), slog.LevelWarn)
	wantLostLine(t, rec, loseAHold(t))
	before := len(rec.all())

	SetLogger(nil, slog.LevelDebug)
	name := loseAHold(t)
	flushLogs(t)
	time.Sleep(100 * time.Millisecond)
	if lines := rec.all(); len(lines) != before {
		t.Fatalf("lines after SetLogger(nil): %+v", lines[before:])
	}
	if lines := rec.about(name); len(lines) != 0 {
		t.Fatalf("lines about %s: %+v", name, lines)
	}
}

func TestALogLevelOfErrorDropsTheWarnLine(t *testing.T) {
	keepLogSettings(t)
	rec := &logRecorder{}
	SetLogger(slog.New(rec), slog.LevelError)
	name := loseAHold(t)
	flushLogs(t)
	time.Sleep(100 * time.Millisecond)
	if lines := rec.about(name); len(lines) != 0 {
		t.Fatalf("lines about %s at level Error: %+v", name, lines)
	}
	for _, line := range rec.all() {
		if line.level < slog.LevelError {
			t.Fatalf("a line below Error: %+v", line)
		}
	}
}

func TestAPanickingLogHandlerLosesOnlyItsLine(t *testing.T) {
	keepLogSettings(t)
	first := uniqueName(t)
	rec := &logRecorder{panics: first}
	SetLogger(slog.New(rec), slog.LevelWarn)
	deliverLog(logLine{level: slog.LevelWarn, target: "test", message: "about " + first})
	name := loseAHold(t)
	wantLostLine(t, rec, name)
	if lines := rec.about(first); len(lines) != 0 {
		t.Fatalf("the line the handler panicked on: %+v", lines)
	}
}
