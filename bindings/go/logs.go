package redlock

/*
#include "redlock.h"
*/
import "C"

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
)

// The library's log lines (a lost hold, a failed watchdog renewal, a contention alert naming
// the holders, ...) reach Go through rl_set_log_callback: the library calls log_trampoline
// (trampolines.go) on a thread of its own, one line at a time and in order (it queues them, so a
// slow handler holds up none of its threads: see the C header), which calls redlockGoLog below.

// logState is where lines go: logger at level or more severe; logger nil means slog.Default(),
// looked up at each line. A nil *logState means nowhere.
type logState struct {
	logger *slog.Logger
	level  slog.Level
}

var (
	logTo    atomic.Pointer[logState]
	logSetMu sync.Mutex // serialises rl_set_log_callback calls with the state they follow
)

type logLine struct {
	level   slog.Level
	target  string
	message string
}

// The default (Warn and above to slog.Default()) is set when the package is initialised rather
// than at the first Connect: it is one C call without I/O, it leaves no race between a
// SetLogger made before the first Connect and a default set late, and lines the library writes
// outside any client still reach slog.
func init() {
	setLogState(&logState{level: slog.LevelWarn})
}

// SetLogger sends the library's log lines (a lost hold, a failed watchdog renewal, a contention
// alert naming the holders, ...) at level or more severe to logger, in this whole process;
// a nil logger stops them. Each line has the library's text as its message and where it comes
// from (a Rust module path such as "redlock_core::watchdog::lost") as the attribute "target".
// The library's levels map to ERROR: slog.LevelError, WARN: slog.LevelWarn, INFO:
// slog.LevelInfo, DEBUG and TRACE: slog.LevelDebug; the logger's handler may filter further.
//
// By default (until SetLogger is called) lines at slog.LevelWarn and above go to
// slog.Default(), looked up at each line, so that a later slog.SetDefault is followed. Passing
// slog.Default() to SetLogger instead keeps the logger that is the default at the time of the
// call.
//
// Lines reach the logger one at a time, in the order the library wrote them, from a thread the
// library keeps for them: a slow handler holds up none of its work, but lines that pile up past
// a bound (1024) are dropped, and a warning says how many. A line not yet handed over when
// SetLogger returns goes to the new logger (or nowhere). A handler that panics loses that line
// only. SetLogger is safe to call from any goroutine (not from the handler itself).
func SetLogger(logger *slog.Logger, level slog.Level) {
	if logger == nil {
		setLogState(nil)
		return
	}
	setLogState(&logState{logger: logger, level: level})
}

// setLogState makes state the place lines go, and asks the library for the lines it wants.
func setLogState(state *logState) {
	if err := applyLogState(state); err != nil {
		// Only when the library already forwards its lines elsewhere (a Rust host's own tracing
		// subscriber): say so, where the lines would have gone.
		logTarget(state).LogAttrs(context.Background(), slog.LevelWarn,
			"redlock: the library's log lines cannot be forwarded to slog: "+err.Error(),
			slog.String("target", "redlock_go"))
	}
}

func applyLogState(state *logState) error {
	logSetMu.Lock()
	defer logSetMu.Unlock()
	// The Go state first: it also filters, so lines of the previous level that are still on
	// their way are held to the new one.
	logTo.Store(state)
	wanted := C.int(C.RL_LOG_OFF)
	if state != nil {
		wanted = libraryLevelFor(state.level)
	}
	return setLogCallback(wanted)
}

func logTarget(state *logState) *slog.Logger {
	if state == nil || state.logger == nil {
		return slog.Default()
	}
	return state.logger
}

// slogLevel maps the library's levels to slog's.
func slogLevel(level C.rl_log_level) slog.Level {
	switch level {
	case C.RL_LOG_ERROR:
		return slog.LevelError
	case C.RL_LOG_WARN:
		return slog.LevelWarn
	case C.RL_LOG_INFO:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}

// libraryLevelFor is the least severe library level whose lines map to level or above
// (RL_LOG_OFF when even errors are below it).
func libraryLevelFor(level slog.Level) C.int {
	for l := C.rl_log_level(C.RL_LOG_TRACE); l >= C.RL_LOG_ERROR; l-- {
		if slogLevel(l) >= level {
			return C.int(l)
		}
	}
	return C.RL_LOG_OFF
}

// redlockGoLog is called by the library, on its log thread, with strings valid only during the
// call. It never panics into C.
//
//export redlockGoLog
func redlockGoLog(level C.rl_log_level, target, message *C.char) {
	defer func() { _ = recover() }()
	state := logTo.Load()
	lvl := slogLevel(level)
	if state == nil || lvl < state.level {
		return
	}
	deliverLog(logLine{level: lvl, target: C.GoString(target), message: C.GoString(message)})
}

// deliverLog hands one line to the logger set now, if it wants it; a panicking handler loses
// this line only.
func deliverLog(line logLine) {
	defer func() { _ = recover() }()
	state := logTo.Load()
	if state == nil || line.level < state.level {
		return
	}
	logTarget(state).LogAttrs(context.Background(), line.level, line.message,
		slog.String("target", line.target))
}
