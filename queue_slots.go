package lockword

import (
	"reflect"
	"sync/atomic"
	"unsafe"
)

// queueSlot is one slot: its sequence (see Queue) and the item. Slots lie
// stride bytes apart, each alone in an aligned block of queueSlotAlign
// bytes or more (newQueueSlots aligns them).
type queueSlot[T any] struct {
	seq atomic.Uint64
	v   T
}

// queueSlotAlign is the alignment and the least distance of slots: two
// cache lines. When the queue is full (empty), the producer refilling slot
// i (the consumer waiting on it) and the consumer taking slot i+1 (the
// producer filling it) work one slot apart at the same time; slots that
// share a line, or straddle two, make that line move between the cores for
// every item, and CPUs that fetch lines in aligned pairs (Intel's adjacent
// line prefetch; the EPYC this was measured on behaves alike) make a
// neighbour in the other line of the pair cost nearly as much. Slots of 80
// bytes (a 16-byte item with a 56-byte pad, one line apart) gave 22-35 M
// items/s at 4-64 producers on 2 cores; 128-byte aligned slots 33-55 M
// (BENCHMARKS.md).
const queueSlotAlign = falseSharingRange

// queueSlotStride is the distance between slots of T: a queueSlot[T]
// rounded up to a multiple of queueSlotAlign.
func queueSlotStride[T any]() uintptr {
	return (unsafe.Sizeof(queueSlot[T]{}) + queueSlotAlign - 1) &^ (queueSlotAlign - 1)
}

// queueGuardSlots is how many strides newQueueSlots allocates beyond the
// capacity: one before the first slot and one after the last, so that no
// other object shares their blocks.
const queueGuardSlots = 2

// newQueueSlots allocates capacity slots of T, stride bytes apart, the
// first aligned to queueSlotAlign, and returns a pointer to the first
// (which keeps the allocation alive). Generic code cannot size a pad by
// T, so reflect builds the element: a queueSlot[T] and the pad up to the
// stride, which gives the garbage collector the items' pointers.
//
// The slots must lie where the elements' queueSlots lie, so the first
// cannot be moved inside the allocation; the allocation itself must start
// where the first slot comes out aligned. Go aligns an object to its size
// class only, and puts an 8-byte header before small objects that hold
// pointers (over 512 bytes on 64-bit), so the offset of the first slot
// from an aligned address is known only after allocating. Hence: allocate
// with no lead, and if the first slot is off by m, allocate again with a
// leading pad that moves it by the rest of the block, up to
// queueAlignTries times (the size class, and with it the offset, can
// change with the pad). If none comes out aligned, the queue is slower,
// not wrong.
func newQueueSlots[T any](capacity int) (unsafe.Pointer, uintptr) {
	stride := queueSlotStride[T]()
	fields := []reflect.StructField{{Name: "Slot", Type: reflect.TypeFor[queueSlot[T]]()}}
	if pad := stride - unsafe.Sizeof(queueSlot[T]{}); pad > 0 {
		fields = append(fields, reflect.StructField{Name: "Pad", Type: reflect.ArrayOf(int(pad), reflect.TypeFor[byte]())})
	}
	slots := reflect.ArrayOf(capacity+queueGuardSlots, reflect.StructOf(fields))
	var first unsafe.Pointer
	lead := uintptr(0)
	for range queueAlignTries {
		typ := slots
		if lead > 0 {
			typ = reflect.StructOf([]reflect.StructField{
				{Name: "Lead", Type: reflect.ArrayOf(int(lead), reflect.TypeFor[byte]())},
				{Name: "Slots", Type: slots},
			})
		}
		first = unsafe.Add(reflect.New(typ).UnsafePointer(), lead+stride) // past the leading guard
		miss := uintptr(first) & (queueSlotAlign - 1)
		if miss == 0 {
			break
		}
		lead = (lead + queueSlotAlign - miss) & (queueSlotAlign - 1)
	}
	return first, stride
}

// queueAlignTries bounds newQueueSlots' allocations.
const queueAlignTries = 4

// slot returns the slot of position p.
func (q *Queue[T]) slot(p uint64) *queueSlot[T] {
	return (*queueSlot[T])(unsafe.Add(q.slots, uintptr(p&q.mask)*q.stride))
}
