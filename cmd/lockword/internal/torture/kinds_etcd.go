package torture

// The etcd kinds: etcdlock.Mutex between goroutines, or between worker
// processes (-procs N), each worker with its own Mutex and so its own etcd
// lease. The experiment is the classic one with the data in etcd: a
// counter read in one round trip and written back in another, an owner
// slot, and each worker's committed total, written in the same transaction
// as the counter so that a kill can never split them. With no -etcd
// endpoints an embedded single-node server is started on a free loopback
// port with its data in a temporary directory, removed afterwards
// (etcd-cluster: three members, whose leader is stopped mid-run).

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"
)

const (
	etcdWorkerEnv = "LOCKWORD_TORTURE_ETCD_WORKER"
	// Defaults of the etcd kinds where the in-process defaults (100000
	// additions, 200 kills) would take hours at a few hundred
	// acquisitions a second, or a second a kill.
	etcdDefaultIters  = 25
	etcdDefaultKills  = 20
	etcdDefaultPauses = 3
	etcdDefaultTTL    = time.Second
	// etcdPauseWindow: in -pause runs a worker sleeps this long between
	// reading the counter and writing it back, so that a pause usually
	// lands mid-update, where an unfenced write loses its successor's
	// additions.
	etcdPauseWindow = 30 * time.Millisecond
	// etcdKillMaxGap is the most the supervisor waits between kills, and
	// etcdKillWindow the most a worker sleeps mid-update in -kill runs.
	etcdKillMaxGap = 300 * time.Millisecond
	etcdKillWindow = 5 * time.Millisecond
	// etcdOpTimeout bounds one etcd request of a worker; a step that
	// keeps failing for hangTimeout is a worker error.
	etcdOpTimeout = 3 * time.Second
	// EtcdDataRoot is the key prefix under which the etcd kinds keep a
	// run's data (one prefix per run below it), deleted when it ends.
	EtcdDataRoot = "/lockword-torture/"
)

func init() {
	register(
		kind{name: "etcd", both: true, usage: etcdMutexUsage,
			desc: "etcdlock.Mutex on an embedded etcd server (or -etcd): counter in etcd, fenced writes (-procs, -kill, -pause)",
			run:  func(cfg *config) (report, error) { return tortureEtcd(cfg, "etcd", true, false) }},
		kind{name: "etcd-unfenced", both: true, usage: etcdMutexUsage,
			desc: "etcd with plain, unguarded writes: passes, but must FAIL under -pause",
			run:  func(cfg *config) (report, error) { return tortureEtcd(cfg, "etcd-unfenced", false, false) }},
		kind{name: "etcd-cluster", both: true, usage: etcdMutexUsage,
			desc: "etcd on a three-member embedded cluster whose leader is stopped mid-run",
			run:  func(cfg *config) (report, error) { return tortureEtcd(cfg, "etcd-cluster", true, true) }},
	)
	kindHelp = append(kindHelp, etcdHelp)
}

const etcdHelp = `etcd kinds (etcd, etcd-unfenced, etcd-cluster):
  Each worker has its own etcdlock.Mutex (its own lease, -ttl). Holding
  the lock it reads the counter, the owner slot and its committed total in
  one transaction (setting the slot), writes counter+value and total+1 in
  a second (the etcd kind guards it with Mutex.Txn: only while it still
  holds), then clears the slot and unlocks. Without -etcd an embedded
  single-node server runs on a free 127.0.0.1 port with its data in a
  temporary directory, removed afterwards; etcd-cluster starts three
  members and stops the leader a third of the way through. Defaults:
  -iters 25, -kills 20, -ttl 1s. The report adds the TTL, the endpoints,
  pauses and late writes rejected, and the leader stop.
  -procs N runs the workers in N processes. -kill SIGKILLs one at random
  moments (half the time the holder): the next acquirer gets ErrOwnerDead
  after the lease expires (recovery latency about the TTL), checks that
  counter = value × the committed totals, and marks it consistent.
  -pause SIGSTOPs the holder past its TTL, then SIGCONTs it: its late
  writes must be rejected (etcd: PASS, exact); etcd-unfenced must FAIL
  (lost updates, two holders): the proof that the checker sees it.
  -chaos runs on three embedded members, one of them also reached through
  a link 200 ms slower; workers cancel most acquisitions at random points
  (deadlines of 0-5 ms or 0-600 ms, one in four left to complete) while a
  random member is stopped and restarted every few seconds. The report
  adds the cancellations, the member stops, the phantom holders (a hold
  or queue key left when every Mutex is closed) and the false owner-death
  reports (nobody dies): both must be 0, and the total exact.
`

// etcdMutexUsage refuses what the Mutex kinds cannot do: their -kill and
// -pause runs each stop workers their own way (etcd-election combines
// them).
func etcdMutexUsage(cfg *config) error {
	if cfg.kill && cfg.etcd.pause {
		return errors.New("-pause and -kill cannot be combined")
	}
	return nil
}

// etcdFlagValues are the etcd kinds' flags as defined on a FlagSet.
type etcdFlagValues struct {
	endpoints *string
	pause     *bool
	pauses    *int
	ttl       *time.Duration
	chaos     *bool
}

// etcdConfig is their parsed form, in config.etcd.
type etcdConfig struct {
	endpoints  []string // empty: an embedded server
	pause      bool
	pauses     int
	ttl        time.Duration
	chaos      bool
	itersSet   bool // -iters was given: else the etcd default
	killsSet   bool
	workersSet bool
}

func defineEtcdFlags(fs *flag.FlagSet) etcdFlagValues {
	return etcdFlagValues{
		endpoints: fs.String("etcd", "",
			"etcd kinds: the `host:port,...` of a real etcd cluster. Empty (the\n"+
				"default): an embedded server on a free loopback port."),
		pause: fs.Bool("pause", false,
			"etcd kinds, with -procs: SIGSTOP the lock's holder for longer than its\n"+
				"lease TTL, then SIGCONT it, -pauses times: its late writes must be\n"+
				"rejected (etcd-unfenced must FAIL)."),
		pauses: fs.Int("pauses", etcdDefaultPauses, "with -pause: `N` pauses."),
		chaos: fs.Bool("chaos", false,
			"etcd kinds: cancel acquisitions at random points, send part of the\n"+
				"requests through an endpoint 200 ms slower, and stop and restart\n"+
				"members of a three-member embedded cluster during the run; the\n"+
				"report adds the cancellations, phantom holders and false owner-death\n"+
				"reports (both must be 0)."),
		ttl: fs.Duration("ttl", etcdDefaultTTL,
			"etcd kinds: the lease `TTL` of each worker's Mutex (whole seconds;\n"+
				"the server may raise it to its minimum)."),
	}
}

// parse validates the etcd flags; msg is a usage error.
func (f etcdFlagValues) parse(set map[string]bool, procs int) (c etcdConfig, msg string) {
	c = etcdConfig{pause: *f.pause, pauses: *f.pauses, ttl: *f.ttl, chaos: *f.chaos,
		itersSet: set["iters"], killsSet: set["kills"], workersSet: set["workers"]}
	if *f.endpoints != "" {
		for _, ep := range strings.Split(*f.endpoints, ",") {
			if ep = strings.TrimSpace(ep); ep == "" || !strings.Contains(ep, ":") {
				return c, fmt.Sprintf("-etcd %q: want host:port,...", *f.endpoints)
			}
			c.endpoints = append(c.endpoints, strings.TrimSpace(ep))
		}
	}
	switch {
	case c.chaos && (procs > 0 || c.pause || set["kill"] || len(c.endpoints) > 0):
		return c, "-chaos runs in-process workers on its own embedded cluster: no -procs, -pause, -kill or -etcd"
	case c.pause && procs < 1:
		return c, "-pause needs -procs N: it stops worker processes"
	case set["pauses"] && !c.pause:
		return c, "-pauses needs -pause"
	case c.pauses < 1:
		return c, fmt.Sprintf("-pauses must be at least 1, got %d", c.pauses)
	case c.ttl < time.Second || c.ttl > time.Hour:
		return c, fmt.Sprintf("-ttl must be between 1s and 1h, got %v", c.ttl)
	}
	return c, ""
}

// etcdKeys are the experiment's keys under its data prefix.
type etcdKeys struct{ data string }

func (k etcdKeys) lock() string { return k.data + "/lock" }

func (k etcdKeys) counter() string { return k.data + "/counter" }

func (k etcdKeys) owner() string { return k.data + "/owner" }

func (k etcdKeys) stop() string { return k.data + "/stop" }

func (k etcdKeys) start() string { return k.data + "/go" }

func (k etcdKeys) ready(id int) string { return fmt.Sprintf("%s/ready/%d", k.data, id) }

func (k etcdKeys) committed(id int) string { return fmt.Sprintf("%s/committed/%06d", k.data, id) }

func (k etcdKeys) list(what string) string { return k.data + "/" + what + "/" }
