/* The thread pool. Protocol (docs/threadpool.md has the long form):
 *
 *  job word  J   even = no job open, odd = a job is open. The caller opens a job by writing the descriptor
 *               (fn, ctx, n, chunk) and resetting the counters, then storing J+1; it closes it with J+2.
 *               Idle workers wait for the word to change: spin with a pause instruction, then futex-sleep.
 *  next          chunk ticket dispenser: fetch_add(1) hands out chunk indices; >= n_units means "no more".
 *  done          chunks finished. The caller returns once done reaches its target: the barrier.
 *  active        workers between "join" and "leave" of a job. The caller may rewrite the descriptor only
 *               after closing the job and seeing active == 0.
 *
 * Memory ordering, in short:
 *  - descriptor -> workers: plain stores, then the seq_cst (so release) store of J+1; a worker reads the
 *    descriptor only after an acquire load saw the odd value. The next job's writes happen after the caller
 *    saw active == 0 (acquire), which every worker reaches by a release decrement after its last read.
 *  - join vs. close is a Dekker handshake: worker {active += 1; read J} vs. caller {J = closed; read active},
 *    all seq_cst. Either the caller sees the worker (and waits for it to leave) or the worker sees the job
 *    closed (and leaves without touching the descriptor). No worker ever reads a descriptor being rewritten.
 *  - task results -> caller: each worker adds its finished chunks to `done` with a release RMW; the caller's
 *    acquire load of the final value synchronizes with all of them (RMWs extend release sequences).
 *  - lost wakeups: a sleeper registers in `sleepers` (seq_cst) and re-reads J before futex_wait(J, seen);
 *    the caller stores J (seq_cst) and then reads `sleepers`. Either the caller sees the sleeper and wakes it,
 *    or the sleeper sees the new J and does not sleep; futex_wait itself refuses to sleep if J != seen.
 *    The caller sleeping on stragglers uses the same pattern with `caller_sleeping` and `done_seq`.
 */
#define _GNU_SOURCE
#include "threadpool.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__linux__) && !defined(OW_POOL_NO_FUTEX)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define OW_HAVE_FUTEX 1
#endif

#define OW_LINE 64
#define DEFAULT_SPIN_NS 100000
#define OW_POOL_STACK_BYTES ((size_t)8 << 20)   /* glibc's default on x86-64 Linux */

struct ow_pool {
    /* Read-mostly: configuration and the job descriptor (written by the caller only when no worker reads). */
    int n_threads;
    int is_static;
    int stop;
    pthread_t *threads;
    ow_task_fn fn;
    void *ctx;
    int64_t n, chunk, n_units, align;
    _Atomic int64_t spin_ns;
    pthread_mutex_t call_lock;  /* serializes concurrent callers; never touched by workers */
#ifndef OW_HAVE_FUTEX
    pthread_mutex_t wait_lock;
    pthread_cond_t wait_cond;
#endif
    /* Hot counters, each on its own cache line so spinning readers of one do not slow writers of another. */
    _Alignas(OW_LINE) _Atomic uint32_t job;
    _Alignas(OW_LINE) _Atomic int64_t next;
    _Alignas(OW_LINE) _Atomic int64_t done;
    _Atomic uint32_t done_seq;
    _Atomic int caller_sleeping;
    _Alignas(OW_LINE) _Atomic int active;
    _Atomic int sleepers;
};

typedef struct {
    ow_pool *pool;
    int index;
} worker_arg;

/* The pool whose task this thread is running (nested calls run inline) and its worker index there. */
static _Thread_local ow_pool *tls_pool;
static _Thread_local int tls_worker;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* After a seq_cst store that a seq_cst load of another word must not pass (the Dekker handshakes below).
 * x86 needs nothing: the seq_cst store is an xchg, a full barrier. aarch64 hardware orders stlr before a later
 * ldar, but qemu-user on an x86 host does not (the pool hung there without this, scripts/test_aarch64.sh);
 * an explicit dmb costs a few cycles per job and makes the order hold wherever the code runs. */
static inline void store_load_fence(void) {
#if defined(__aarch64__)
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- sleeping on a 32-bit word: futex on Linux, mutex + condition variable elsewhere ---- */

static void word_wait(ow_pool *p, _Atomic uint32_t *word, uint32_t expect) {
#ifdef OW_HAVE_FUTEX
    (void)p;
    /* The kernel re-checks *word == expect atomically with going to sleep; EINTR/EAGAIN just return. */
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expect, NULL, NULL, 0);
#else
    pthread_mutex_lock(&p->wait_lock);
    while (atomic_load(word) == expect) pthread_cond_wait(&p->wait_cond, &p->wait_lock);
    pthread_mutex_unlock(&p->wait_lock);
#endif
}

static void word_wake_all(ow_pool *p, _Atomic uint32_t *word) {
#ifdef OW_HAVE_FUTEX
    (void)p;
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)word;
    /* Taking the lock orders this wake after any waiter's check-then-wait (the word was stored before). */
    pthread_mutex_lock(&p->wait_lock);
    pthread_mutex_unlock(&p->wait_lock);
    pthread_cond_broadcast(&p->wait_cond);
#endif
}

/* ---- the partition ---- */

void ow_pool_static_range(int64_t n, int64_t align, int n_parts, int w, int64_t *begin, int64_t *end) {
    if (align < 1) align = 1;
    if (n_parts < 1) n_parts = 1;
    int64_t units = n / align + (n % align != 0);
    int64_t per = units / n_parts, rem = units % n_parts;
    int64_t first = (int64_t)w * per + (w < rem ? w : rem);
    int64_t count = per + (w < rem);
    int64_t b = first * align, e = (first + count) * align;
    if (b > n) b = n;
    if (e > n) e = n;
    *begin = b;
    *end = e;
}

static void run_inline(int64_t n, int64_t chunk, ow_task_fn fn, void *ctx, int worker) {
    for (int64_t b = 0; b < n; b += chunk) fn(ctx, b, (n - b > chunk) ? b + chunk : n, worker);
}

/* ---- one thread's share of the open job ---- */

/* Adds finished units to `done` (release: publishes this thread's task writes) and wakes a sleeping caller. */
static void report_done(ow_pool *p, int64_t count) {
    atomic_fetch_add_explicit(&p->done, count, memory_order_seq_cst);
    if (atomic_load_explicit(&p->caller_sleeping, memory_order_seq_cst)) {
        atomic_fetch_add_explicit(&p->done_seq, 1, memory_order_seq_cst);
        word_wake_all(p, &p->done_seq);
    }
}

/* Claims and runs chunks until the dispenser runs dry; returns how many this thread ran. */
static int64_t run_chunks(ow_pool *p, int worker) {
    int64_t ran = 0;
    for (;;) {
        /* relaxed: the reset of `next` happens-before this RMW (published with the job word). */
        int64_t c = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (c >= p->n_units) break;
        int64_t b = c * p->chunk;
        int64_t e = (p->n - b > p->chunk) ? b + p->chunk : p->n;
        p->fn(p->ctx, b, e, worker);
        ran++;
    }
    return ran;
}

static void run_static_part(ow_pool *p, int worker) {
    int64_t b, e;
    ow_pool_static_range(p->n, p->align, p->n_threads, worker, &b, &e);
    if (b < e) p->fn(p->ctx, b, e, worker);
}

/* ---- workers ---- */

/* Waits until the job word differs from `seen`; returns the new value (acquire). */
static uint32_t wait_for_change(ow_pool *p, uint32_t seen) {
    int64_t budget = atomic_load_explicit(&p->spin_ns, memory_order_relaxed);
    if (budget > 0) {
        int64_t start = now_ns();
        do {
            for (int i = 0; i < 64; i++) {
                uint32_t v = atomic_load_explicit(&p->job, memory_order_acquire);
                if (v != seen) return v;
                cpu_relax();
            }
        } while (now_ns() - start < budget);
    }
    for (;;) {
        atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&p->job, memory_order_seq_cst) == seen) word_wait(p, &p->job, seen);
        atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_relaxed);
        uint32_t v = atomic_load_explicit(&p->job, memory_order_acquire);
        if (v != seen) return v;
    }
}

static void *worker_main(void *arg) {
    ow_pool *p = ((worker_arg *)arg)->pool;
    int index = ((worker_arg *)arg)->index;
    free(arg);
    tls_pool = p;
    tls_worker = index;
    uint32_t seen = 0; /* the job word's value at creation, not re-read: a job opened before we ran is not missed */
    for (;;) {
        uint32_t j = wait_for_change(p, seen);
        seen = j;
        if (!(j & 1)) continue; /* a job closed (possibly one we never saw): keep waiting */
        /* Join: announce ourselves, then check a job is still open (Dekker with close_job). Nothing of the
         * descriptor, `stop` included, is read before this check: job j may have closed already. */
        atomic_fetch_add_explicit(&p->active, 1, memory_order_seq_cst);
        uint32_t j2 = atomic_load_explicit(&p->job, memory_order_seq_cst);
        seen = j2;
        if ((j2 & 1) && p->stop) { /* the destroy "job": its descriptor says stop */
            atomic_fetch_sub_explicit(&p->active, 1, memory_order_release);
            break;
        }
        if (j2 & 1) {
            /* j2 may be a newer job than j; its descriptor is complete and stays put until we leave. */
            if (p->is_static) {
                run_static_part(p, index);
                report_done(p, 1);
            } else {
                int64_t ran = run_chunks(p, index);
                if (ran) report_done(p, ran);
            }
        }
        atomic_fetch_sub_explicit(&p->active, 1, memory_order_release); /* leave */
    }
    return NULL;
}

/* ---- the caller's side ---- */

static void open_job(ow_pool *p) {
    uint32_t j = atomic_load_explicit(&p->job, memory_order_relaxed) + 1; /* only a caller holding call_lock writes it */
    atomic_store_explicit(&p->job, j, memory_order_seq_cst);
    store_load_fence();
    if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst) > 0) word_wake_all(p, &p->job);
}

static void wait_done(ow_pool *p, int64_t target) {
    if (atomic_load_explicit(&p->done, memory_order_acquire) >= target) return;
    int64_t budget = atomic_load_explicit(&p->spin_ns, memory_order_relaxed);
    if (budget > 0) {
        int64_t start = now_ns();
        do {
            for (int i = 0; i < 64; i++) {
                if (atomic_load_explicit(&p->done, memory_order_acquire) >= target) return;
                cpu_relax();
            }
        } while (now_ns() - start < budget);
    }
    for (;;) {
        uint32_t s = atomic_load_explicit(&p->done_seq, memory_order_seq_cst);
        atomic_store_explicit(&p->caller_sleeping, 1, memory_order_seq_cst);
        store_load_fence();
        if (atomic_load_explicit(&p->done, memory_order_seq_cst) >= target) break;
        word_wait(p, &p->done_seq, s);
    }
    atomic_store_explicit(&p->caller_sleeping, 0, memory_order_relaxed);
    (void)atomic_load_explicit(&p->done, memory_order_acquire);
}

static void close_job(ow_pool *p) {
    uint32_t j = atomic_load_explicit(&p->job, memory_order_relaxed) + 1;
    atomic_store_explicit(&p->job, j, memory_order_seq_cst);
    store_load_fence();
    /* Workers that joined before the close finish within a few instructions (all chunks are done). */
    for (int spins = 0; atomic_load_explicit(&p->active, memory_order_seq_cst) != 0; spins++) {
        if (spins < 1000) cpu_relax();
        else sched_yield();
    }
}

static void run_job(ow_pool *p, int64_t n, int64_t chunk, int64_t align, int is_static, ow_task_fn fn, void *ctx) {
    pthread_mutex_lock(&p->call_lock);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->chunk = chunk;
    p->align = align;
    p->is_static = is_static;
    p->n_units = is_static ? p->n_threads - 1 : n / chunk + (n % chunk != 0);
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    open_job(p);

    tls_pool = p;
    tls_worker = 0;
    int64_t target;
    if (is_static) {
        run_static_part(p, 0);
        target = p->n_units;
    } else {
        target = p->n_units - run_chunks(p, 0);
    }
    tls_pool = NULL;

    wait_done(p, target);
    close_job(p);
    pthread_mutex_unlock(&p->call_lock);
}

void ow_pool_parallel_for(ow_pool *p, int64_t n, int64_t chunk, ow_task_fn fn, void *ctx) {
    if (n <= 0) return;
    int threads = p ? p->n_threads : 1;
    if (chunk <= 0) chunk = n / threads + (n % threads != 0);
    if (!p || threads == 1 || chunk >= n) { run_inline(n, chunk, fn, ctx, 0); return; }
    if (tls_pool == p) { run_inline(n, chunk, fn, ctx, tls_worker); return; } /* nested: no deadlock */
    run_job(p, n, chunk, 0, 0, fn, ctx);
}

void ow_pool_parallel_for_static(ow_pool *p, int64_t n, int64_t align, ow_task_fn fn, void *ctx) {
    if (n <= 0) return;
    if (align < 1) align = 1;
    int threads = p ? p->n_threads : 1;
    if (!p || threads == 1) { fn(ctx, 0, n, 0); return; }
    if (tls_pool == p) { /* nested: every range, inline, in the same order */
        for (int w = 0; w < threads; w++) {
            int64_t b, e;
            ow_pool_static_range(n, align, threads, w, &b, &e);
            if (b < e) fn(ctx, b, e, tls_worker);
        }
        return;
    }
    run_job(p, n, 0, align, 1, fn, ctx);
}

/* ---- life cycle ---- */

int ow_pool_threads(const ow_pool *p) { return p ? p->n_threads : 1; }

void ow_pool_set_spin_ns(ow_pool *p, int64_t ns) {
    if (p) atomic_store_explicit(&p->spin_ns, ns < 0 ? 0 : ns, memory_order_relaxed);
}

int64_t ow_pool_spin_ns(const ow_pool *p) {
    return p ? atomic_load_explicit(&((ow_pool *)p)->spin_ns, memory_order_relaxed) : 0;
}

static void stop_and_join(ow_pool *p, int started) {
    pthread_mutex_lock(&p->call_lock);
    p->stop = 1;
    open_job(p); /* the stop job: workers see an odd word with stop set, and exit */
    pthread_mutex_unlock(&p->call_lock);
    for (int i = 0; i < started; i++) pthread_join(p->threads[i], NULL);
}

static void free_pool(ow_pool *p) {
    pthread_mutex_destroy(&p->call_lock);
#ifndef OW_HAVE_FUTEX
    pthread_mutex_destroy(&p->wait_lock);
    pthread_cond_destroy(&p->wait_cond);
#endif
    free(p->threads);
    free(p);
}

ow_pool *ow_pool_create(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    ow_pool *p = NULL;
    size_t size = (sizeof(ow_pool) + OW_LINE - 1) / OW_LINE * OW_LINE;
    if (posix_memalign((void **)&p, OW_LINE, size) != 0) return NULL;
    memset(p, 0, size);
    p->n_threads = n_threads;
    int64_t spin = DEFAULT_SPIN_NS;
    const char *env = getenv("ONEWELL_POOL_SPIN_US");
    if (env && *env) spin = strtoll(env, NULL, 10) * 1000;
    atomic_init(&p->spin_ns, spin < 0 ? 0 : spin);
    atomic_init(&p->job, 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->done_seq, 0);
    atomic_init(&p->caller_sleeping, 0);
    atomic_init(&p->active, 0);
    atomic_init(&p->sleepers, 0);
    pthread_mutex_init(&p->call_lock, NULL);
#ifndef OW_HAVE_FUTEX
    pthread_mutex_init(&p->wait_lock, NULL);
    pthread_cond_init(&p->wait_cond, NULL);
#endif
    if (n_threads == 1) return p;
    p->threads = calloc((size_t)n_threads - 1, sizeof(pthread_t));
    if (!p->threads) { free_pool(p); return NULL; }

    /* Workers block all signals: they belong to the host thread (Python's handlers, Ctrl-C). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    /* An explicit stack: kernels keep their scratch on it (the Q8_0 float GEMM ~160 KiB), more than some libcs give a
     * thread by default (musl: 128 KiB) */
    pthread_attr_t attr;
    const int have_attr = pthread_attr_init(&attr) == 0;
    if (have_attr) pthread_attr_setstacksize(&attr, OW_POOL_STACK_BYTES);
    int started = 0;
    for (int i = 1; i < n_threads; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (!a) break;
        a->pool = p;
        a->index = i;
        if (pthread_create(&p->threads[i - 1], have_attr ? &attr : NULL, worker_main, a) != 0) { free(a); break; }
#if defined(__linux__) && defined(__GLIBC__)
        char name[32];
        snprintf(name, sizeof name, "onewell-w%d", i);
        name[15] = 0; /* the kernel keeps 15 characters */
        pthread_setname_np(p->threads[i - 1], name);
#endif
        started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (have_attr) pthread_attr_destroy(&attr);
    if (started != n_threads - 1) {
        stop_and_join(p, started);
        free_pool(p);
        return NULL;
    }
    return p;
}

void ow_pool_destroy(ow_pool *p) {
    if (!p) return;
    if (p->n_threads > 1) stop_and_join(p, p->n_threads - 1);
    free_pool(p);
}
