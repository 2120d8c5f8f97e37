package torture

// Registration of the etcd-election and etcd-rw kinds (etcd_election.go,
// etcd_rw.go), after the etcd kinds (kinds_etcd.go) in -lock's list.

import "errors"

func init() {
	register(
		kind{name: "etcd-election", both: true,
			desc:  "etcdlock.Election: leaders deposed mid-term, fenced writes, observers (-procs, -kill, -pause)",
			usage: electionUsage,
			run:   func(cfg *config) (report, error) { return tortureElection(cfg, "etcd-election", true) }},
		kind{name: "etcd-election-unfenced", both: true,
			desc:  "etcd-election with plain, unguarded writes: must FAIL (a deposed leader's write lands)",
			usage: electionUsage,
			run:   func(cfg *config) (report, error) { return tortureElection(cfg, "etcd-election-unfenced", false) }},
		kind{name: "etcd-rw", both: true,
			desc:  "etcdlock.RWMutex: readers check the counter holds still, writers add under fenced writes (-procs, -kill, -pause)",
			usage: electionUsage,
			run:   func(cfg *config) (report, error) { return tortureEtcdRW(cfg, "etcd-rw", false) }},
		kind{name: "etcd-rw-broken", both: true,
			desc:  "etcd-rw with readers that take no lock: must FAIL (readers see writers inside)",
			usage: electionUsage,
			run:   func(cfg *config) (report, error) { return tortureEtcdRW(cfg, "etcd-rw-broken", true) }},
		kind{name: "etcd-rw-unfenced", both: true,
			desc:  "etcd-rw whose readers write what they read unguarded: must FAIL with -procs and -pause (a paused reader's write lands)",
			usage: unfencedRWUsage,
			run:   func(cfg *config) (report, error) { return tortureEtcdRW(cfg, "etcd-rw-unfenced", false) }},
	)
	kindHelp = append(kindHelp, electionHelp, etcdRWHelp)
}

// electionUsage refuses what these kinds cannot do.
func electionUsage(cfg *config) error {
	if cfg.etcd.chaos {
		return errors.New("-chaos is not supported by this kind")
	}
	return nil
}

// unfencedRWUsage: only a reader paused past its lease writes late, so
// etcd-rw-unfenced has nothing to show without -procs and -pause.
func unfencedRWUsage(cfg *config) error {
	if cfg.procs == 0 || !cfg.etcd.pause {
		return errors.New("etcd-rw-unfenced needs -procs N and -pause: only a paused reader's write lands late")
	}
	return electionUsage(cfg)
}

const electionHelp = `etcd-election kinds (etcd-election, etcd-election-unfenced):
  -workers goroutines campaign, each with its own etcdlock.Election (its
  own lease, -ttl), -iters terms each (default 6); 3 observers watch the
  election (Observe). A leader writes its term record, then 6 data records
  8 ms apart (guarded by its term: Election.Txn), then resigns. Every 3rd
  term the supervisor revokes the leader's lease mid-term (for etcd, what
  a pause past the TTL or a partition does: the leader still believes it
  leads), so the next one is elected with ErrOwnerDead. Checks: one
  leader per term, tokens strictly increasing, no deposed leader's write
  landing after its successor's, every observer seeing every leader
  record once, in order. etcd-election-unfenced writes plain puts and
  must FAIL. Without -etcd an embedded server runs, as for etcd.
  -procs N runs the campaigners in N worker processes (leaders write
  30 ms apart) and deposes leaders for real: -kill SIGKILLs the leader's
  process (-kills, default 6; a replacement takes its place), -pause
  SIGSTOPs it until its lease has expired and a successor leads, then
  SIGCONTs it, mid-term (-pauses, default 3); both may be given. With
  -kill alone every other deposition revokes the lease instead, so that
  etcd-election-unfenced still shows a deposed leader's write landing.
`

const etcdRWHelp = `etcd-rw kinds (etcd-rw, etcd-rw-broken, etcd-rw-unfenced):
  -workers goroutines, each with its own etcdlock.RWMutex (its own lease,
  -ttl), -iters writes each (default 25), and a read before about half of
  them. A reader reads the counter twice, up to 3 ms apart, under the
  read lock: it must not change, then writes what it read to a key of
  its hold, guarded by the read hold (RWMutex.Txn). A writer reads the counter and its total,
  waits up to 3 ms, and writes counter+value and total+1 guarded by its
  hold (RWMutex.Txn). An activity word (+1 per reader, +10000 per writer
  inside) must show readers only or one writer; the counter must equal
  value × the committed totals. etcd-rw-broken reads without the lock and
  must FAIL. Without -etcd an embedded server runs, as for etcd.
  -procs N runs the workers in N processes; the owner slot is a key in
  etcd, set and cleared by each writer under its hold, that a reader must
  never see set. -kill SIGKILLs one at random moments (-kills, default
  20; half the time the writer or a reader inside, read while the victim
  is stopped): each dead writer must be reported (ErrOwnerDead) to one
  next writer, no dead reader to anyone. -pause SIGSTOPs the writer
  inside until another writer holds, then SIGCONTs it: its late guarded
  write must be refused. It alternates with pauses of a process whose
  reader holds with its write still to come, stopped until its read keys
  have expired: that write must be refused too (its reads, whose hold
  ended under them, are counted apart: no lock can stop a paused read).
  etcd-rw-unfenced (with -procs and -pause) writes it unguarded: the
  late write lands and the run must FAIL.
`
