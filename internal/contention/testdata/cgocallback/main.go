// Command cgocallback takes a contended lockword lock, with the contention
// profile sampling every wait, inside a Go function that C code calls
// back, while the C frame's frame pointer register holds garbage (as C
// built without frame pointers may leave it). A stack walk that followed
// frame pointers past the runtime's cgo callback entry would fault; the
// contention profile's must stop there. It prints the functions of the
// waiter's recorded stack, innermost first.
package main

/*
#cgo CFLAGS: -O2 -fomit-frame-pointer
extern void waitInGo(void);
static void callBack(void) {
#if defined(__x86_64__)
	__asm__ volatile("movq $0x10, %%rbp" ::: "rbp");
#elif defined(__aarch64__)
	__asm__ volatile("mov x29, #0x10" ::: "x29");
#endif
	waitInGo();
}
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/lockword/lockword"
)

var m lockword.Mutex

//export waitInGo
func waitInGo() {
	m.Lock() // held by main: sleeps, sampled
	m.Unlock()
}

func main() {
	lockword.SetContentionProfileRate(1)
	m.Lock()
	done := make(chan struct{})
	go func() {
		C.callBack()
		close(done)
	}()
	time.Sleep(50 * time.Millisecond) // let it sleep; if not, the check below says so
	m.Unlock()
	<-done
	records, _ := lockword.ContentionProfile()
	for _, r := range records {
		if r.View != lockword.ContentionWaiter {
			continue
		}
		frames := runtime.CallersFrames(r.Stack)
		for {
			f, more := frames.Next()
			fmt.Println(f.Function)
			if !more {
				break
			}
		}
		return
	}
	fmt.Fprintln(os.Stderr, "cgocallback: no waiter record (the callback did not wait)")
	os.Exit(2)
}
