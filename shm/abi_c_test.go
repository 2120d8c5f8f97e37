package shm

import (
	"github.com/lockword/lockword/internal/ringindex"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCHeaderConstants compares every layout constant of the C header
// (c/lockword.h) with its Go twin, so that the two implementations cannot
// drift: the C side pins the same numbers to its structs with
// _Static_assert. A constant added to the header's ABI part without a Go
// twin here fails too. Needs no C compiler.
func TestCHeaderConstants(t *testing.T) {
	src, err := os.ReadFile("../c/lockword.h")
	if err != nil {
		t.Fatal(err)
	}
	goConst := map[string]uint64{
		"LW_REGION_MAGIC": regionMagic, "LW_REGION_VERSION": regionVersion,
		"LW_HDR_MAGIC": hdrMagic, "LW_HDR_VERSION": hdrVersion, "LW_HDR_HEADER_SIZE": hdrHeaderSize, "LW_HDR_SIZE": hdrSize,
		"LW_HDR_TABLE_CAP": hdrTableCap, "LW_HDR_PROC_SLOTS": hdrProcSlots, "LW_HDR_FLAGS": hdrFlags,
		"LW_HDR_CREATED_NS": hdrCreatedNs, "LW_HDR_CHECKED": hdrChecked, "LW_HDR_CHECKED_END": hdrCheckedEnd,
		"LW_HDR_OBJECT_COUNT": hdrObjectCount, "LW_HDR_CHECKSUM": hdrChecksum, "LW_HDR_COUNT_CHECKSUM": hdrCountChecksum,
		"LW_HDR_SLOT_HINT": hdrSlotHint, "LW_HDR_PID_NAMESPACE": hdrPIDNamespace,
		"LW_TABLE_OFFSET": regionTableOffset, "LW_TABLE_ENTRY_SIZE": tableEntrySize, "LW_TABLE_CAP": regionTableCap,
		"LW_ENTRY_NAME": entryName, "LW_ENTRY_NAME_MAX": entryNameMax, "LW_ENTRY_KIND": entryKind,
		"LW_ENTRY_SIZE": entrySize, "LW_ENTRY_OFFSET": entryOffset,
		"LW_PROC_OFFSET": regionProcOffset, "LW_PROC_SLOT_SIZE": procSlotSize, "LW_PROC_SLOTS": regionProcSlots,
		"LW_PROC_STATE": procState, "LW_PROC_PID": procPID, "LW_PROC_START": procStart, "LW_PROC_BOOT": procBoot,
		"LW_PROC_LIVE": procLive, "LW_PROC_GEN_MASK": procGenMask,
		"LW_ARENA_OFFSET": regionArenaOffset, "LW_MIN_REGION_SIZE": regionMinSize, "LW_DEFAULT_REGION_SIZE": DefaultRegionSize,
		"LW_KIND_MUTEX": uint64(kindMutex), "LW_KIND_BYTES": uint64(kindBytes), "LW_KIND_TICKET_MUTEX": uint64(kindTicketMutex),
		"LW_KIND_RWMUTEX": uint64(kindRWMutex), "LW_KIND_RWMUTEX_V1": uint64(kindRWMutexV1), "LW_KIND_COND": uint64(kindCond), "LW_KIND_RING": uint64(kindRing),
		"LW_KIND_SEQLOCK": uint64(kindSeqLock), "LW_KIND_VALUE": uint64(kindValue),
		"LW_ENTRY_KIND_MASK": entryKindMask, "LW_ENTRY_KIND_PARAM_SHIFT": entryKindParamShift,
		"LW_OWNER_GEN_BITS": ownerGenBits, "LW_OWNER_SLOT_BITS": ownerSlotBits, "LW_OWNER_MASK": ownerMask,
		"LW_OWNER_NOT_RECOVERABLE": ownerNotRecoverable, "LW_OWNER_GEN_MAX": ownerGenMax,
		"LW_WORD_STATS": sharedStats, "LW_WORD_INCONSISTENT": sharedInconsistent, "LW_WORD_WAITERS": sharedWaiters,
		"LW_WORD_TIMED":     sharedTimed,
		"LW_MUTEX_OBJ_SIZE": mutexObjSize, "LW_MUTEX_WORD": mutexObjWord, "LW_MUTEX_HELD_SINCE": mutexObjHeldSince,
		"LW_MUTEX_ACQUIRED": mutexObjAcquired, "LW_MUTEX_SLOW": mutexObjSlow, "LW_MUTEX_PARKS": mutexObjParks,
		"LW_MUTEX_WAIT_NS": mutexObjWaitNs, "LW_MUTEX_WAIT_MAX_NS": mutexObjWaitMaxNs,
		"LW_MUTEX_HANDOFF": mutexObjHandoff, "LW_HANDOFF_GRANTED": handoffGranted, "LW_HANDOFF_RESERVED": handoffReserved,
		"LW_RING_PRODUCER_ROLE": shringProducerRole, "LW_RING_CONSUMER_ROLE": shringConsumerRole,
		"LW_RING_TAIL": shringTail, "LW_RING_NOT_EMPTY": shringNotEmpty, "LW_RING_PRODUCER_SLEEPS": shringProducerSleeps,
		"LW_RING_PRODUCER_WAKES": shringProducerWakes, "LW_RING_MESSAGES_SENT": shringMessagesSent, "LW_RING_HEAD": shringHead, "LW_RING_NOT_FULL": shringNotFull,
		"LW_RING_CONSUMER_SLEEPS": shringConsumerSleeps, "LW_RING_CONSUMER_WAKES": shringConsumerWakes, "LW_RING_MESSAGES_RECEIVED": shringMessagesRecvd,
		"LW_RING_DATA": shringData, "LW_RING_ALIGN": shringAlign,
		"LW_RING_MIN_CAPACITY": MinSharedRingCapacity, "LW_RING_MAX_CAPACITY": MaxSharedRingCapacity,
		"LW_REC_LENGTH": recLength, "LW_REC_TYPE": recType, "LW_REC_HEADER_SIZE": recHeaderSize,
		"LW_REC_MESSAGE": recMessage, "LW_REC_PADDING": recPadding,
		"LW_RING_SLEEPING": ringindex.Sleeping, "LW_RING_CLOSED": ringindex.Closed,
		"LW_OWNER_CHECK_INTERVAL_NS": uint64(ownerCheckInterval.Nanoseconds()),
		"LW_KIND_SEMAPHORE":          uint64(kindSemaphore), "LW_SEM_OBJ_SIZE": semObjSize, "LW_SEM_PERMITS": semObjPermits,
		"LW_SEM_IN_USE": semObjInUse, "LW_SEM_SEQ": semObjSeq, "LW_SEM_NEXT": semObjNext, "LW_SEM_WAITERS": semObjWaiters,
		"LW_SEM_DEAD_HOLDERS": semObjDeadHolders, "LW_SEM_RECOVERED": semObjRecovered, "LW_SEM_DEAD_PID": semObjDeadPID,
		"LW_SEM_SLOTS": semObjSlots, "LW_SEM_SLOT_SIZE": semSlotSize, "LW_SEM_SLOT_HELD": semSlotHeld,
		"LW_SEM_SLOT_TOKEN": semSlotToken, "LW_SEM_SLOT_TICKET": semSlotTicket, "LW_SEM_SLOT_WANT": semSlotWant,
		"LW_SEM_SLEEPERS": semSleepers, "LW_SEM_SEQ_ONE": semSeqOne,
		"LW_KIND_MPSC": uint64(kindMPSC), "LW_MPSC_ALIGN": mpscAlign, "LW_MPSC_MIN_CAPACITY": MinMPSCCapacity, "LW_MPSC_MAX_CAPACITY": MaxMPSCCapacity,
	}
	define := regexp.MustCompile(`(?m)^#define (LW_[A-Z0-9_]+) (.+?)\s*(?:/\*.*)?$`)
	seen := map[string]bool{}
	parsed := map[string]uint64{}
	for _, m := range define.FindAllStringSubmatch(string(src), -1) {
		name, expr := m[1], m[2]
		v, ok := cValue(expr, parsed)
		if !ok {
			continue // a macro, not a number
		}
		parsed[name] = v
		want, isABI := goConst[name]
		if !isABI {
			if !strings.HasPrefix(name, "LW_E") {
				t.Errorf("%s = %#x in c/lockword.h has no Go twin in this test", name, v)
			}
			continue
		}
		seen[name] = true
		if v != want {
			t.Errorf("%s: c/lockword.h says %#x, Go says %#x", name, v, want)
		}
	}
	for name := range goConst {
		if !seen[name] {
			t.Errorf("%s: missing from c/lockword.h", name)
		}
	}
}

// cValue evaluates the header's constant expressions: a number with an
// optional u/ULL suffix, (1 << n), or (LW_X + n).
func cValue(expr string, known map[string]uint64) (uint64, bool) {
	expr = strings.TrimSpace(expr)
	if strings.HasPrefix(expr, "(") && strings.HasSuffix(expr, ")") {
		inner := expr[1 : len(expr)-1]
		for _, op := range []string{"<<", "+"} {
			if a, b, ok := strings.Cut(inner, op); ok {
				x, okx := cValue(a, known)
				y, oky := cValue(b, known)
				if !okx || !oky {
					return 0, false
				}
				if op == "<<" {
					return x << y, true
				}
				return x + y, true
			}
		}
		return cValue(inner, known)
	}
	if v, ok := known[expr]; ok {
		return v, true
	}
	v, err := strconv.ParseUint(strings.TrimRight(expr, "uUlL"), 0, 64)
	return v, err == nil
}
