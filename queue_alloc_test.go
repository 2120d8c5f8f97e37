package lockword

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"unsafe"
)

// allocMixed, allocBig and allocSmall mix pointer and non-pointer fields,
// so that the collector's map of an element has both.
type allocMixed struct {
	a int
	p *int
	s string
	b [5]byte
}

// checkQueueAligned makes a Queue[T] of each capacity and reports (and
// counts) those whose first slot is not queueSlotAlign-aligned.
func checkQueueAligned[T any](t *testing.T, name string, caps []int) (bad int) {
	t.Helper()
	for _, c := range caps {
		q := mustQueue[T](t, c)
		if off := uintptr(q.slots) % queueSlotAlign; off != 0 {
			if bad < 4 {
				t.Errorf("Queue[%s] cap %d stride %d: first slot at %#x, %d past a 128-byte boundary", name, c, q.stride, uintptr(q.slots), off)
			}
			bad++
		}
	}
	return bad
}

// TestQueueSlotsAlignedForPointerItems: the first slot is 128-byte aligned
// for items with and without pointers at every capacity from 2 to 1<<14.
// Small objects that hold pointers carry an 8-byte header in front
// (newQueueSlots); before it added a leading pad when needed, 36 of these
// queues (every pointer type at capacities 4-128) were 8 bytes off.
func TestQueueSlotsAlignedForPointerItems(t *testing.T) {
	caps := []int{}
	for c := 2; c <= 1<<14; c <<= 1 {
		caps = append(caps, c)
	}
	total := 0
	total += checkQueueAligned[*int](t, "*int", caps)
	total += checkQueueAligned[string](t, "string", caps)
	total += checkQueueAligned[[]byte](t, "[]byte", caps)
	total += checkQueueAligned[any](t, "any", caps)
	total += checkQueueAligned[map[int]int](t, "map", caps)
	total += checkQueueAligned[allocMixed](t, "mixed", caps)
	total += checkQueueAligned[[0]*int](t, "[0]*int", caps)
	total += checkQueueAligned[int](t, "int", caps)
	if total > 0 {
		t.Errorf("%d queues with a misaligned first slot", total)
	}
}

type allocBig struct {
	n    int
	pad1 [100]byte
	p    *[16]int
	pad2 [60]byte
	s    string
	m    map[int]int
	f    any
	b    []int
}

type allocSmall struct {
	x int32
	p *[16]int
	y uint16
}

// allocChurn allocates and drops garbage that reuses freed memory.
func allocChurn() {
	junk := make([]*[16]int, 2000)
	for i := range junk {
		junk[i] = new([16]int)
		for j := range junk[i] {
			junk[i][j] = -1
		}
	}
	s := make([]string, 500)
	for i := range s {
		s[i] = strconv.Itoa(-i) + "xxxxxxxxxxxxxxxxxxxx"
	}
	runtime.KeepAlive(junk)
	runtime.KeepAlive(s)
}

// allocFill returns a new array holding i everywhere; allocOK checks one.
func allocFill(i int) *[16]int {
	p := new([16]int)
	for j := range p {
		p[j] = i
	}
	return p
}

func allocOK(p *[16]int, i int) bool {
	if p == nil {
		return false
	}
	for _, v := range p {
		if v != i {
			return false
		}
	}
	return true
}

// queueGCRoundTrip pushes mk(i) for a full queue, churns through several
// GCs, pops and checks every item, then checks every slot was zeroed.
func queueGCRoundTrip[T any](t *testing.T, capacity int, mk func(int) T, ok func(T, int) bool) {
	t.Helper()
	q := mustQueue[T](t, capacity)
	for round := range 3 {
		for i := range capacity {
			if !q.TryPush(mk(i + round*capacity)) {
				t.Fatalf("push %d refused", i)
			}
		}
		for range 4 {
			runtime.GC()
			allocChurn()
		}
		for i := range capacity {
			v, got := q.TryPop()
			if !got || !ok(v, i+round*capacity) {
				t.Fatalf("round %d item %d after GC: ok %v, value wrong", round, i, got)
			}
		}
		// popped slots are cleared
		var zero T
		for i := range uint64(capacity) {
			s := q.slot(i)
			b := unsafe.Slice((*byte)(unsafe.Pointer(&s.v)), unsafe.Sizeof(zero))
			for _, c := range b {
				if c != 0 && q.clear {
					t.Fatalf("slot %d not zeroed after pop", i)
				}
			}
		}
	}
}

// TestQueueItemsOfEveryKindSurviveGC: pointers, strings, slices,
// interfaces, maps, structs mixing pointer and plain fields (small and over
// 128 bytes), zero-size items: queued items survive collections with
// memory churned meanwhile, at capacities small and large, and popped
// slots hold no pointers.
func TestQueueItemsOfEveryKindSurviveGC(t *testing.T) {
	for _, c := range []int{2, 4, 64, 256, 1024} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			queueGCRoundTrip(t, c, allocFill, allocOK)
			queueGCRoundTrip(t, c, func(i int) string { return strconv.Itoa(i) + "-abcdefghijklmnopqrstuvwxyz" },
				func(s string, i int) bool { return s == strconv.Itoa(i)+"-abcdefghijklmnopqrstuvwxyz" })
			queueGCRoundTrip(t, c, func(i int) []int { return allocFill(i)[:] },
				func(s []int, i int) bool { return len(s) == 16 && allocOK((*[16]int)(s), i) })
			queueGCRoundTrip(t, c, func(i int) any { return allocFill(i) },
				func(v any, i int) bool { p, _ := v.(*[16]int); return allocOK(p, i) })
			queueGCRoundTrip(t, c, func(i int) map[int]int { return map[int]int{i: i, -i: i} },
				func(m map[int]int, i int) bool { return len(m) == min(2, 1+i) && m[i] == i && m[-i] == i })
			queueGCRoundTrip(t, c, func(i int) allocSmall { return allocSmall{x: int32(i), p: allocFill(i), y: uint16(i)} },
				func(v allocSmall, i int) bool { return v.x == int32(i) && v.y == uint16(i) && allocOK(v.p, i) })
			queueGCRoundTrip(t, c, func(i int) allocBig {
				return allocBig{n: i, p: allocFill(i), s: strconv.Itoa(i) + "zzzzzzzzzzzzzzzzzzzzzzz", m: map[int]int{1: i}, f: allocFill(i), b: allocFill(i)[:]}
			}, func(v allocBig, i int) bool {
				fp, _ := v.f.(*[16]int)
				return v.n == i && allocOK(v.p, i) && v.s == strconv.Itoa(i)+"zzzzzzzzzzzzzzzzzzzzzzz" && v.m[1] == i && allocOK(fp, i) && allocOK((*[16]int)(v.b), i)
			})
			queueGCRoundTrip(t, c, func(i int) [0]*int { return [0]*int{} }, func([0]*int, int) bool { return true })
			queueGCRoundTrip(t, c, func(i int) struct{} { return struct{}{} }, func(struct{}, int) bool { return true })
			queueGCRoundTrip(t, c, func(i int) [3]*[16]int { return [3]*[16]int{allocFill(i), nil, allocFill(i)} },
				func(v [3]*[16]int, i int) bool { return allocOK(v[0], i) && v[1] == nil && allocOK(v[2], i) })
		})
	}
}

// TestQueueItemsSurviveGCUnderLoad: producers and consumers move pointer items
// through small and large queues while another goroutine forces GCs and
// churns memory.
func TestQueueItemsSurviveGCUnderLoad(t *testing.T) {
	for _, c := range []int{2, 8, 128, 512} {
		q := mustQueue[allocBig](t, c)
		const producers, consumers, per = 4, 4, 3000
		stop := make(chan struct{})
		var gcwg sync.WaitGroup
		gcwg.Add(1)
		go func() {
			defer gcwg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				runtime.GC()
				allocChurn()
			}
		}()
		ctx := context.Background()
		var wg sync.WaitGroup
		for p := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range per {
					n := p*per + i
					if err := q.Push(ctx, allocBig{n: n, p: allocFill(n), s: strconv.Itoa(n), f: allocFill(n), b: allocFill(n)[:]}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		var mu sync.Mutex
		seen := make([]bool, producers*per)
		var cwg sync.WaitGroup
		for range consumers {
			cwg.Add(1)
			go func() {
				defer cwg.Done()
				buf := make([]allocBig, 3)
				for {
					n, err := q.PopSlice(ctx, buf)
					if err != nil {
						return
					}
					for _, v := range buf[:n] {
						fp, _ := v.f.(*[16]int)
						if !allocOK(v.p, v.n) || !allocOK(fp, v.n) || v.s != strconv.Itoa(v.n) || !allocOK((*[16]int)(v.b), v.n) {
							t.Errorf("cap %d: item %d corrupted", c, v.n)
							return
						}
						mu.Lock()
						seen[v.n] = true
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		q.Close()
		cwg.Wait()
		close(stop)
		gcwg.Wait()
		for i, s := range seen {
			if !s {
				t.Fatalf("cap %d: item %d lost", c, i)
			}
		}
	}
}
