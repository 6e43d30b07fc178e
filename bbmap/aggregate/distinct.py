"""A batch's IP samples as distinct keys with weights, so each key is resolved once.

Why: a profile's samples repeat a few addresses (the 2.65 M-sample bench profile has
12-18 k distinct IPs in a batch of 65,536), and all the IP path works out per sample --
the mapping a sample falls in (``ProfileMappings.classify``), its ELF vaddr, its block
(``BlockIndex.lookup``), its function key -- depends only on (pid, ip, kernel or user)
*while no mapping of those pids begins or ends within the batch*
(``ProfileMappings.constant_between``: the mapping layer is monotone in (time, seq), so
one moment of the batch stands for all of them).  Then the batch is reduced to its
distinct keys, each resolved once, and aggregated with weights: the samples and the sum
of the periods of each key.  Every sample still lands in exactly one bucket: a key's
samples all land in its bucket, and the totals are the sums of the weights.

The key (u8), one column so that one sort finds the distinct ones:

* a kernel sample (IP in the kernel half, ``KERNEL_START``, or a kernel ``cpumode``) is
  resolved to the kernel bucket whatever its pid or IP: all of them share one key;
* user samples of one pid and one event: the IP itself (below ``KERNEL_START``, so never
  the kernel key);
* user samples of several pids or events (the IP histogram keeps the events of the
  samples in the binary, so a key has one event): ``group << PID_SHIFT | ip`` with
  ``group = rank of the pid * events + rank of the event``, when every user IP is below
  ``2**PID_SHIFT`` (user space of x86-64 and AArch64: 47-48 bits) and the groups fit the
  bits left; otherwise the batch is not reduced.

Not reduced (``distinct_samples`` returns None, the caller resolves every sample): a
batch of fewer than ``MIN_SAMPLES`` samples, a resolver that cannot say whether its
mappings are constant (hand-made ones in tests), a mapping change inside the batch, keys
that do not fit (above), columns of unexpected lengths.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bbmap.aggregate.resolve import Resolved
from bbmap.mappings import KERNEL_START
from bbmap.perf.records import CPUMODE_GUEST_KERNEL, CPUMODE_KERNEL, SampleBatch

PID_SHIFT = 48  # user addresses below 2**48 (x86-64 4-level paging: 2**47; AArch64: 2**48)
MAX_PIDS = (1 << (64 - PID_SHIFT)) - 1  # ranks 0..MAX_PIDS-1; the all-ones key is the kernel's
KERNEL_KEY = (1 << 64) - 1  # several pids: the key of every kernel sample
_IP_MASK = np.uint64((1 << PID_SHIFT) - 1)
# below this many samples a batch is resolved sample by sample: the reduction's fixed cost
# (~40 us: a sort, constant_between, the moments) is more than it saves.  A profile with a
# side record every few samples (the corpus' c22-list-pie-ip: 2,072 batches of ~6 samples)
# went 0.36 -> 0.44 s in process without this bound.
MIN_SAMPLES = 1024


@dataclass
class Distinct:
    """The distinct keys of a batch (sorted), what to resolve them as, and their weights."""

    key: np.ndarray  # u8, sorted, distinct
    ip: np.ndarray  # u8 runtime address to resolve (KERNEL_START for the kernel key)
    pid: np.ndarray  # i8
    seq: np.ndarray  # i8 one moment of the batch (every key classifies the same at all)
    time: np.ndarray | None  # u8, or None as the batch had none
    count: np.ndarray  # i8 samples per key
    period: np.ndarray  # u8 sum of their periods (mod 2**64, as a u8 sum of the batch is)
    event: np.ndarray  # i2 per key: the batch's one event (empty if the batch has none)
    sample_key: np.ndarray  # u8 per sample, to expand per-key results back to samples

    def __len__(self) -> int:
        return len(self.key)

    def expand(self, r: Resolved) -> Resolved:
        """The per-sample resolution of the batch, in sample order, from the per-key one
        ``r`` -- for what keeps samples in order (the fit evidence's first samples)."""
        inv = np.searchsorted(self.key, self.sample_key)
        return Resolved(where=r.where[inv], vaddr=r.vaddr[inv], block=r.block[inv],
                        func=r.func[inv], dso=r.dso[inv])


def distinct_samples(batch: SampleBatch, resolver) -> Distinct | None:  # noqa: ANN001
    """The batch reduced to distinct keys, or None when it cannot be (module docstring)."""
    n = len(batch)
    check = getattr(resolver, "constant_between", None)
    if n < MIN_SAMPLES or check is None:
        return None
    ip, pid, seq, time = batch.ip, batch.pid, batch.seq, batch.time
    if len(pid) != n or len(seq) != n or len(time) not in (0, n) or len(batch.period) != n:
        return None
    event = batch.event
    if len(event) not in (0, n):
        return None
    ip = np.asarray(ip, np.uint64)
    kern = ip >= np.uint64(KERNEL_START)
    cm = batch.cpumode
    if len(cm) == n:
        kern |= (cm == CPUMODE_KERNEL) | (cm == CPUMODE_GUEST_KERNEL)
    elif len(cm):
        return None
    any_kern = bool(kern.any())
    user_pid = pid[~kern] if any_kern else pid
    if not len(user_pid):  # only kernel samples
        pids = np.zeros(0, np.int64)
    elif user_pid.min() == user_pid.max():
        pids = np.array([user_pid[0]], np.int64)
    else:
        pids = np.unique(user_pid).astype(np.int64)  # a few values: the sort is cheap
    if len(event) and event.min() != event.max():
        evs = np.unique(event)  # a few values
    else:
        evs = event[:1]
    packed = len(pids) > 1 or len(evs) > 1
    if not packed:
        key = ip.copy() if any_kern else ip
        if any_kern:
            key[kern] = np.uint64(KERNEL_START)  # resolves to the kernel bucket as itself
    else:
        ne = max(len(evs), 1)
        if max(len(pids), 1) * ne > MAX_PIDS or \
                (not kern.all() and int(ip[~kern].max()) >> PID_SHIFT):
            return None
        group = np.searchsorted(pids, pid).astype(np.uint64) * np.uint64(ne)
        if len(evs) > 1:
            group += np.searchsorted(evs, event).astype(np.uint64)
        key = (group << np.uint64(PID_SHIFT)) | ip
        key[kern] = np.uint64(KERNEL_KEY)
    tm = time if len(time) else None
    if not check(pids.tolist(), seq, tm):
        return None

    period = np.asarray(batch.period, np.uint64)
    const_period = period.min() == period.max()
    if const_period:
        sk = np.sort(key)
        order = None
    else:
        order = np.argsort(key)
        sk = key[order]
    new = np.empty(n, bool)
    new[0] = True
    np.not_equal(sk[1:], sk[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    uk = sk[starts]
    count = np.diff(np.append(starts, n)).astype(np.int64)
    if order is None:
        per = count.astype(np.uint64) * period[0]
    else:
        per = np.add.reduceat(period[order], starts)
    nu = len(uk)

    if not packed:
        uip = uk
        upid = np.full(nu, pids[0] if len(pids) else 0, np.int64)
        uev = np.full(nu, event[0], event.dtype) if len(event) else event
    else:  # (the kernel key's pid and event are never read: it is not in the binary)
        kk = uk == np.uint64(KERNEL_KEY)
        uip = np.where(kk, np.uint64(KERNEL_START), uk & _IP_MASK)
        g = np.minimum(uk >> np.uint64(PID_SHIFT), np.uint64(max(len(pids), 1) * ne - 1)
                       ).astype(np.int64)
        upid = pids[g // ne] if len(pids) else np.zeros(nu, np.int64)
        uev = evs[g % ne] if len(evs) else event
    # one moment of the batch: its latest (the same rule as the mapping layer's)
    use_time = tm is not None and bool(np.any(tm))
    if use_time:
        hi_t = tm.max()
        hi_s = seq[tm == hi_t].max()
        utime: np.ndarray | None = np.full(nu, hi_t, np.uint64)
    else:
        hi_s = seq.max()
        utime = None if tm is None else np.zeros(nu, np.uint64)
    useq = np.full(nu, hi_s, np.int64)
    return Distinct(key=uk, ip=uip, pid=upid, seq=useq, time=utime, count=count,
                    period=per, event=uev, sample_key=key)
