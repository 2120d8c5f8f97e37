package ringindex

import (
	"context"
	"sync/atomic"
	"testing"
)

// chanSleeper is a Sleeper whose sleeps block on a channel until Wake, or
// return the sleeper's own error at once (a context that ended), and
// whose word has many sleepers (ManySleepers), as the shared MPSC queue's
// producers share notFull. asleep receives once per sleep that blocks.
type chanSleeper struct {
	giveUp error
	asleep chan struct{}
	woken  chan struct{}
}

func (s *chanSleeper) Sleep(ctx context.Context, word *atomic.Uint32, val uint32) error {
	if s.giveUp != nil {
		return s.giveUp
	}
	s.asleep <- struct{}{}
	select {
	case <-s.woken:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (s *chanSleeper) Wake(*atomic.Uint32) {
	select {
	case s.woken <- struct{}{}:
	default:
	}
}

func (*chanSleeper) ManySleepers(*atomic.Uint32) bool { return true }

// TestAwaitGiveUpKeepsOthersAnnouncement: two waiters sleep on one word
// (many producers on the MPSC queue's notFull); one gives up (its
// context ends). The other's announcement must survive, so that the
// other side's next release wakes it: clearing the bit on giving up made
// that release wake nobody, and the sleeper waited out its slice (10 ms
// on the shared futex). No timing: the sleeps are channels.
func TestAwaitGiveUpKeepsOthersAnnouncement(t *testing.T) {
	var word atomic.Uint32
	var sleeps atomic.Uint64
	var room atomic.Bool
	stayer := &chanSleeper{asleep: make(chan struct{}, 1), woken: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Await(ctx, &word, &sleeps, stayer, true, room.Load) }()
	<-stayer.asleep // announced and asleep
	quitter := &chanSleeper{giveUp: context.DeadlineExceeded}
	if err := Await(context.Background(), &word, &sleeps, quitter, true, room.Load); err != context.DeadlineExceeded {
		t.Fatalf("the waiter that gives up: %v", err)
	}
	if word.Load()&Sleeping == 0 {
		cancel()
		<-done
		t.Fatal("a waiter that gave up cleared the sleep bit while another still slept: the other side's release wakes nobody")
	}
	// The other side frees room and, seeing the bit, wakes the sleeper.
	room.Store(true)
	WakeSide(&word, new(atomic.Uint64), stayer)
	if err := <-done; err != nil {
		t.Fatalf("the waiter that stayed: %v", err)
	}
}

// TestAwaitOneSleeperWithdraws: where a word has one sleeper (the
// rings), giving up still withdraws the announcement, so that a busy
// other side makes no wake call for nobody.
func TestAwaitOneSleeperWithdraws(t *testing.T) {
	var word atomic.Uint32
	s := oneSleeper{}
	if err := Await(context.Background(), &word, new(atomic.Uint64), s, true, func() bool { return false }); err != context.Canceled {
		t.Fatalf("Await: %v", err)
	}
	if word.Load() != 0 {
		t.Fatalf("word %#x after the only sleeper gave up, want 0", word.Load())
	}
}

type oneSleeper struct{}

func (oneSleeper) Sleep(context.Context, *atomic.Uint32, uint32) error { return context.Canceled }
func (oneSleeper) Wake(*atomic.Uint32)                                 {}
