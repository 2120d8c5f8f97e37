package lockword

import (
	"errors"
	"fmt"
)

// ErrCorrupt is returned (as a *CorruptError) by a lock call that found
// its object's shared words in a state that no valid history of the lock's
// protocol produces: something other than this package wrote them (a stray
// write through the mapping, another program, a file edited on disk).
// Such a lock is left as it is: nothing in it can be trusted to hand it
// on, so a call that reports ErrCorrupt holds nothing, and the region
// should be recreated. It is reported only on proof (a snapshot of words
// that contradicts the protocol's invariants, taken so that no concurrent
// valid change can explain it), never because a wait took long.
//
// What is checked: a ticket queue (shm.TicketMutex, shm.RWMutex's
// writers) whose serving is ahead of next, with more than 64 tickets
// outstanding, whose served ticket has no record, a record in no state of
// the table, a record naming an owner token no region issues or a ticket
// not issued yet; a shm.Mutex word naming an owner token no region
// issues (generation 0 or past the last); an RW state word with the
// abandoned bit but not the writer bit, or a writer bit that no writer
// owns; a word that keeps changing under a CAS
// loop far beyond what its other parties can do (retryLimit). Whatever
// the words hold, every call that takes a context returns when it ends,
// and nothing reads outside the object (FuzzLiveWords).
//
// One limit: Unlock of a shm.Mutex and RUnlock of a shm.RWMutex have
// only the shared word to tell them whether they hold the lock, so one
// whose word was overwritten under its hold cannot be told from an Unlock
// without a Lock, and panics as that misuse does. The ticket kinds
// remember their hold in the handle: their Unlock logs the corruption
// instead. Other calls without a context (Lock, RLock, SeqLock.Store)
// panic with ErrCorrupt, as with ErrNotRecoverable, or wait as long as the
// words name a live holder.
var ErrCorrupt = errors.New("lockword: corrupt shared object")

// A CorruptError names the object whose words are corrupt and why. It
// matches ErrCorrupt with errors.Is.
type CorruptError struct {
	Kind   string // "shm.TicketMutex", "shm.RWMutex", ...
	Object string // the object's name in its region
	Region string // the region's path
	Reason string // the contradiction found, with the word values
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("lockword: %s %q in %s is corrupt: %s", e.Kind, e.Object, e.Region, e.Reason)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }
