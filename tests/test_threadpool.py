"""The native thread pool: every item of every job runs exactly once, for any thread count (up to 2x the cores),
chunk size and job size; no deadlock (each stress run is a subprocess with a timeout); idle workers sleep."""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from onewell.runtime import native_ops
from onewell.runtime.native_ops import ThreadPool, pool_stress

CORES = os.cpu_count() or 1
THREADS = sorted({1, 2, 3, 4, min(2 * CORES, 8)})
TIMEOUT = 120


def expected(n_jobs: int, n_items: int) -> int:
    return n_jobs * n_items * (n_items + 1) // 2


def run_isolated(code: str, env_extra: dict | None = None) -> str:
    """Runs `code` in a fresh interpreter; a deadlock becomes a timeout failure instead of a hung test run."""
    env = dict(os.environ, **(env_extra or {}))
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"pool stress did not finish in {TIMEOUT} s (deadlock?)")
    assert done.returncode == 0, done.stderr
    return done.stdout


STRESS = """
from onewell.runtime.native_ops import pool_stress
threads, sizes, jobs, static, nested = {threads!r}, {sizes!r}, {jobs}, {static}, {nested}
count = 0
for t in threads:
    for n in sizes:
        for chunk in sorted({{0, 1, 2, 3, max(n - 1, 1), n, n + 1}}):
            work = 0 if n > 64 else 300  # short jobs get some work per item, so workers join before they end
            got = pool_stress(t, jobs, n, chunk, static, nested, work)
            want = jobs * n * (n + 1) // 2
            assert got == want, (t, n, chunk, static, got, want)
            count += 1
print(count)
"""


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_every_item_once_for_all_thread_counts_chunks_and_sizes(static):
    sizes = [0, 1, 2, 7, 64, 1000]
    jobs = 30 if static else 60
    out = run_isolated(STRESS.format(threads=THREADS, sizes=sizes, jobs=jobs, static=static, nested=False))
    assert int(out) >= len(THREADS) * len(sizes) * 4


def test_sleep_immediately_exercises_the_futex_path():
    # spin 0: every wait goes through the sleep/wake protocol, where lost wakeups would show as a hang
    out = run_isolated(STRESS.format(threads=[2, 3], sizes=[1, 5, 33], jobs=300, static=False, nested=False),
                       {"ONEWELL_POOL_SPIN_US": "0"})
    assert int(out) > 0
    out = run_isolated(STRESS.format(threads=[2, 3], sizes=[5, 33], jobs=100, static=True, nested=False),
                       {"ONEWELL_POOL_SPIN_US": "0"})
    assert int(out) > 0


def test_nested_call_from_a_task_runs_inline():
    out = run_isolated(STRESS.format(threads=[1, 2, 3], sizes=[1, 9, 100], jobs=20, static=False, nested=True))
    assert int(out) > 0


def test_repeated_create_destroy():
    code = """
from onewell.runtime.native_ops import ThreadPool, pool_stress
for i in range(300):
    assert pool_stress(1 + i % 4, i % 3, 17, 1 + i % 5, bool(i % 2)) == (i % 3) * 17 * 18 // 2
for i in range(100):
    with ThreadPool(1 + i % 4) as p:
        p.overhead_seconds(n_calls=1 + i % 3, n_items=8, chunk=1)
print("ok")
"""
    assert run_isolated(code).strip() == "ok"


def test_workers_take_chunks():
    """Chunks are claimed by whichever thread is free: in a long enough job the workers take some."""
    with ThreadPool(2) as pool:
        for _ in range(20):
            counts = pool.chunks_by_worker(n_items=64, chunk=1, work=20000)
            assert sum(counts) == 64 and len(counts) == 2
            if counts[1] > 0:
                break
        assert counts[1] > 0, f"worker 1 never took a chunk: {counts}"
        assert sum(pool.chunks_by_worker(n_items=10, chunk=3)) == 4   # ceil(10 / 3) chunks
        assert sum(pool.chunks_by_worker(n_items=10, chunk=0)) == 2   # chunk 0: one range per thread


def test_stress_result_is_checked_in_process():
    assert pool_stress(2, 5, 100, 7) == expected(5, 100)
    assert pool_stress(3, 5, 100, 8, static=True) == expected(5, 100)


def test_idle_pool_sleeps():
    with ThreadPool(2) as pool:
        pool.spin_us = 200
        pool.overhead_seconds(n_calls=200, n_items=64, chunk=1, static=True)  # workers have just been busy
        time.sleep(0.05)                                                        # past the spin window
        cpu0, wall0 = time.process_time(), time.perf_counter()
        time.sleep(0.3)
        cpu = time.process_time() - cpu0
        wall = time.perf_counter() - wall0
    assert wall >= 0.3
    assert cpu < 0.03, f"an idle pool burned {cpu:.3f} s of CPU in {wall:.2f} s"


def test_spin_setting_round_trips_and_is_validated():
    with ThreadPool(2) as pool:
        pool.spin_us = 37
        assert pool.spin_us == pytest.approx(37)
        with pytest.raises(ValueError):
            pool.spin_us = -1


def test_overhead_is_measured():
    with ThreadPool(2) as pool:
        for static in (False, True):
            s = pool.overhead_seconds(n_calls=200, n_items=64, chunk=0, static=static)
            assert 0 < s < 0.05


def test_concurrent_callers_share_one_pool():
    """Python threads calling into the same pool at once (the GIL is released) are serialized, not mixed."""
    rng = np.random.default_rng(1)
    q = rng.standard_normal((8, 32), dtype=np.float32)
    k = rng.standard_normal((50, 2, 32), dtype=np.float32)
    v = rng.standard_normal((50, 2, 32), dtype=np.float32)
    want = native_ops.attention(q, k, v)
    errors = []
    with ThreadPool(3) as pool:
        def worker():
            for _ in range(200):
                got = native_ops.attention(q, k, v, pool=pool)
                if not np.array_equal(got, want):
                    errors.append("mismatch")
                    return
        threads = [threading.Thread(target=worker) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        assert not any(t.is_alive() for t in threads), "concurrent callers deadlocked"
    assert errors == []


def test_bad_arguments():
    with pytest.raises(ValueError):
        ThreadPool(0)
    with pytest.raises(TypeError):
        ThreadPool(2.5)
    with pytest.raises(ValueError):
        pool_stress(0, 1, 1, 1)
    pool = ThreadPool(2)
    pool.close()
    with pytest.raises(ValueError, match="closed"):
        pool.capsule
    from onewell._native import _core
    with pytest.raises(TypeError):
        _core.pool_threads("not a pool")
