package torture

// A side of the shared ring torture (kinds_sharedring.go): the producer or
// the consumer process, and the messages they exchange.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/lockword/lockword"
)

// sharedRingMsg appends to buf[:0] message number seq: its number, then
// 0 to sharedRingMaxMsg-8 bytes that depend on it.
func sharedRingMsg(buf []byte, seq uint64) []byte {
	x := seq * 0x9e3779b97f4a7c15
	n := 8 + int(x>>58)%(sharedRingMaxMsg-8+1)
	buf = ne.AppendUint64(buf[:0], seq)
	for j := 8; j < n; j++ {
		buf = append(buf, byte(x>>(j%8*8))+byte(j))
	}
	return buf
}

// sharedRingSpec tells a worker process its side; JSON in sharedRingWorkerEnv.
type sharedRingSpec struct {
	Region   string `json:"region"`
	Producer bool   `json:"producer"`
	Items    int64  `json:"items"` // 0: until srStop
	Broken   bool   `json:"broken"`
}

// sharedRingResult is what a worker prints as its last line of output.
type sharedRingResult struct {
	Sent       int64               `json:"sent"`
	Received   int64               `json:"received"`
	OutOfOrder int64               `json:"out_of_order"`
	Duplicates int64               `json:"duplicates"`
	Lost       int64               `json:"lost"`
	Mangled    int64               `json:"mangled"`
	Reached    int64               `json:"reached"`
	Bytes      int64               `json:"bytes"`
	ElapsedNs  int64               `json:"elapsed_ns"`
	Stats      *lockword.RingStats `json:"stats,omitempty"`
	Err        string              `json:"error,omitempty"`
}

func sharedRingWorkerMain(specJSON string) int {
	var spec sharedRingSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "lockword torture ring worker:", err)
		return exitUsage
	}
	res, err := sharedRingWorker(&spec)
	if err != nil {
		res.Err = err.Error()
	}
	b, _ := json.Marshal(res)
	fmt.Printf("%s\n", b)
	return exitOK
}

func sharedRingWorker(spec *sharedRingSpec) (res sharedRingResult, err error) {
	r, err := openTortureRegion(spec.Region)
	if err != nil {
		return res, err
	}
	defer r.Close()
	st, err := r.Bytes(sharedRingStateName, srSize)
	if err != nil {
		return res, err
	}
	ctx := context.Background()
	if spec.Producer {
		p, err := r.RingProducer(sharedRingName, sharedRingCapacity)
		if err != nil {
			return res, err
		}
		defer p.Close() // end of stream, also after an error
		put(st, srReady, 1)
		for get(st, srGo) == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		buf := make([]byte, 0, sharedRingMaxMsg)
		for seq := uint64(1); spec.Items == 0 || seq <= uint64(spec.Items); seq++ {
			if seq%publishEvery == 0 && get(st, srStop) != 0 {
				break // a timed run's end, or an interrupted run
			}
			msg := sharedRingMsg(buf, seq)
			if spec.Broken && seq%1000 == 0 {
				msg = sharedRingMsg(buf, seq-1-seq%3) // a duplicate, or one out of order
			}
			if err := p.Send(ctx, msg); err != nil {
				return res, err
			}
			res.Sent++
		}
		return res, nil
	}
	c, err := r.RingConsumer(sharedRingName, sharedRingCapacity)
	if err != nil {
		return res, err
	}
	defer c.Detach()
	put(st, srReady+8, 1)
	for get(st, srGo) == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	start := time.Now()
	buf := make([]byte, 0, c.MaxMessage())
	want := make([]byte, 0, sharedRingMaxMsg)
	next := uint64(1)
	defer func() {
		res.Reached = int64(next - 1)
		res.ElapsedNs = int64(time.Since(start))
		s := c.Stats()
		res.Stats = &s
	}()
	for {
		msg, err := c.Receive(ctx, buf)
		if err != nil {
			if errors.Is(err, lockword.ErrRingClosed) {
				return res, nil
			}
			return res, err
		}
		res.Received++
		res.Bytes += int64(len(msg))
		if res.Received%publishEvery == 0 {
			put(st, srReceived, uint64(res.Received))
		}
		if len(msg) < 8 {
			res.Mangled++
			continue
		}
		seq := ne.Uint64(msg)
		if string(sharedRingMsg(want, seq)) != string(msg) {
			res.Mangled++
		}
		next = checkSeq(seq, next, &res.OutOfOrder, &res.Duplicates, &res.Lost)
	}
}
