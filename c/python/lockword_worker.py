#!/usr/bin/env python3
"""A lockword torture worker in Python, through liblockword.so and ctypes.

It takes the same shm.Mutex as the Go and C workers of one
`lockword torture -lock shared-py` run (or TestPythonMixedTorture), and
follows the same critical section on the same shared state (the st*
offsets of cmd/lockword/internal/torture/procs_worker.go): owner slot checked on entry and
exit, a plain read-modify-write of the counter, an intent record.

    python3 lockword_worker.py LIB REGION PROC PROCS WORKERS VALUE WORK KILL BROKEN ITERS IDS
"""
import ctypes
import os
import sys
import threading
import time

LW_EOWNERDEAD = 130

ST_COUNTER, ST_OWNER = 0, 8
ST_INTENT_ACTIVE, ST_INTENT_WORKER, ST_INTENT_COUNTER, ST_INTENT_COMMITTED = 16, 24, 32, 40
ST_VIOLATIONS, ST_RECOVERIES, ST_ROLLED_BACK, ST_LAST_RECOVERY = 48, 56, 64, 72
ST_GO, ST_STOP, ST_RECOVERING, ST_DETECTED, ST_READY = 80, 88, 96, 104, 128
RECOVERY_LOG = 4096


def main(argv):
    lib_path, region, proc, procs, workers, value, _work, _kill, _broken, iters, ids = argv[1:12]
    proc, procs, workers, value, iters = int(proc), int(procs), int(workers), int(value), int(iters)
    ids = [int(i) for i in ids.split(",")]

    lib = ctypes.CDLL(lib_path)
    lib.lw_strerror.restype = ctypes.c_char_p
    lib.lw_region_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.lw_region_mutex.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.lw_region_bytes.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
    lib.lw_mutex_timedlock_pid.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_uint32)]
    lib.lw_mutex_unlock.argtypes = [ctypes.c_void_p]
    lib.lw_mutex_consistent.argtypes = [ctypes.c_void_p]
    lib.lw_region_close.argtypes = [ctypes.c_void_p]

    def check(what, err):
        if err != 0:
            sys.exit(f"python worker {os.getpid()}: {what}: {lib.lw_strerror(err).decode()}")

    r, m, st = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    lib.lw_region_open_fd.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    if region.startswith("memfd:"):  # inherited as fd 3, as by the Go workers
        check("open region", lib.lw_region_open_fd(3, region.encode(), ctypes.byref(r)))
    else:
        check("open region", lib.lw_region_open(region.encode(), ctypes.byref(r)))
    check("mutex", lib.lw_region_mutex(r, b"torture", ctypes.byref(m)))
    size = ST_READY + 8 * procs + 8 * (workers + 1) + 8 * RECOVERY_LOG
    check("state", lib.lw_region_bytes(r, b"torture-state", size, ctypes.byref(st)))
    base = st.value

    def word(off):
        return ctypes.c_uint64.from_address(base + off)

    def committed(i):
        return word(ST_READY + 8 * procs + 8 * i)

    def note(what, pid):
        log = os.environ.get("LOCKWORD_TORTURE_LANG_LOG")
        if log:
            with open(log, "a") as f:
                f.write(f"python {what} {os.getpid()} {pid}\n")

    note("start", 0)
    if proc >= 0:
        word(ST_READY + 8 * proc).value = 1
    while word(ST_GO).value == 0:
        time.sleep(0.0001)

    failures = []

    def recover(dead_pid):
        now = time.time_ns()
        word(ST_DETECTED).value = now
        word(ST_RECOVERING).value = dead_pid
        if word(ST_INTENT_ACTIVE).value == 1:
            w = word(ST_INTENT_WORKER).value
            if 1 <= w <= workers:
                committed(w).value = word(ST_INTENT_COMMITTED).value
            word(ST_COUNTER).value = word(ST_INTENT_COUNTER).value
            word(ST_INTENT_ACTIVE).value = 0
            word(ST_ROLLED_BACK).value += 1
        word(ST_OWNER).value = 0
        check("consistent", lib.lw_mutex_consistent(m))
        note("recovered", dead_pid)
        n = word(ST_RECOVERIES).value
        word(ST_READY + 8 * procs + 8 * (workers + 1) + 8 * (n % RECOVERY_LOG)).value = dead_pid
        word(ST_LAST_RECOVERY).value = time.time_ns()
        word(ST_RECOVERIES).value = n + 1

    def run(wid):
        n = 0
        dead = ctypes.c_uint32()
        while iters == 0 or n < iters:
            n += 1
            err = lib.lw_mutex_timedlock_pid(m, -1, ctypes.byref(dead))
            if err == LW_EOWNERDEAD:
                recover(dead.value)
            elif err != 0:
                failures.append(lib.lw_strerror(err).decode())
                return
            # The critical section: procSection.
            if word(ST_OWNER).value != 0:
                word(ST_VIOLATIONS).value += 1
            word(ST_OWNER).value = wid
            if word(ST_STOP).value != 0:
                word(ST_OWNER).value = 0
                lib.lw_mutex_unlock(m)
                return
            counter, mine = word(ST_COUNTER).value, committed(wid).value
            word(ST_INTENT_WORKER).value = wid
            word(ST_INTENT_COUNTER).value = counter
            word(ST_INTENT_COMMITTED).value = mine
            word(ST_INTENT_ACTIVE).value = 1
            word(ST_COUNTER).value = counter + value
            committed(wid).value = mine + value
            word(ST_INTENT_ACTIVE).value = 0
            if word(ST_OWNER).value != wid:
                word(ST_VIOLATIONS).value += 1
            word(ST_OWNER).value = 0
            err = lib.lw_mutex_unlock(m)
            if err != 0:
                failures.append("unlock: " + lib.lw_strerror(err).decode())
                return

    threads = [threading.Thread(target=run, args=(i,)) for i in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        sys.exit(f"python worker {os.getpid()}: {failures[0]}")
    check("close", lib.lw_region_close(r))


if __name__ == "__main__":
    main(sys.argv)
