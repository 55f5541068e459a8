package redlock

import (
	"os/exec"
	"runtime"
	"syscall"
)

// dieWithTests makes the kernel kill the test redis-server when the thread that started it
// ends, so that a test binary that panics (TestMain never stops the server then) leaves none
// behind. The calling goroutine stays on its thread for the rest of the run: Pdeathsig is
// bound to the thread, not the process.
func dieWithTests(cmd *exec.Cmd) {
	runtime.LockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
