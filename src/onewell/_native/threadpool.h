/* onewell's thread pool: persistent workers, jobs published by a generation word, chunks claimed with one
 * atomic fetch-add each ("a ticket dispenser"), completion counted in chunks. Design and memory-ordering
 * argument: docs/threadpool.md and the comments in threadpool.c. */
#ifndef ONEWELL_THREADPOOL_H
#define ONEWELL_THREADPOOL_H

#include <stdint.h>

typedef struct ow_pool ow_pool;

/* One piece of a job: items [begin, end). `worker` is the index of the thread running it, 0 = the thread that
 * called parallel_for, 1..n_threads-1 = pool workers; use it for per-thread scratch. Which worker gets which
 * chunk varies from call to call (except in parallel_for_static): results must not depend on it. */
typedef void (*ow_task_fn)(void *ctx, int64_t begin, int64_t end, int worker);

/* n_threads counts the caller, so n_threads-1 workers are started (n_threads < 1 is taken as 1).
 * Returns NULL if threads or memory could not be had. Idle workers spin briefly, then sleep (no CPU). */
ow_pool *ow_pool_create(int n_threads);
void ow_pool_destroy(ow_pool *p);                 /* joins the workers; NULL is allowed */
int ow_pool_threads(const ow_pool *p);

/* How long an idle worker (and a caller waiting for stragglers) spins before sleeping in the kernel.
 * Default 100 us, or the environment variable ONEWELL_POOL_SPIN_US read at create time. 0 = sleep at once. */
void ow_pool_set_spin_ns(ow_pool *p, int64_t ns);
int64_t ow_pool_spin_ns(const ow_pool *p);

/* Runs fn over [0, n) in chunks of `chunk` items (the last may be shorter), each claimed with an atomic
 * fetch-add by whichever thread is free; the caller takes chunks too. Returns when every chunk has finished,
 * and everything the chunks wrote is visible to the caller (a barrier). chunk <= 0 means ceil(n / n_threads):
 * one contiguous range per thread. No allocation, no lock taken by workers. A worker that is asleep or
 * descheduled does not hold the job up: the others (the caller included) take its chunks.
 * Calls from several threads at once are serialized; a call from inside a task of the same pool runs inline. */
void ow_pool_parallel_for(ow_pool *p, int64_t n, int64_t chunk, ow_task_fn fn, void *ctx);

/* Static partition: thread w runs exactly range w of n_threads contiguous ranges (boundaries multiples of
 * `align` items, align <= 0 taken as 1; a range may be empty and is then skipped). The mapping range -> thread
 * is the same on every call (first-touch memory placement), but the job waits for every thread. */
void ow_pool_parallel_for_static(ow_pool *p, int64_t n, int64_t align, ow_task_fn fn, void *ctx);

/* Range w of the static partition (also useful to size per-thread work): [*begin, *end). */
void ow_pool_static_range(int64_t n, int64_t align, int n_parts, int w, int64_t *begin, int64_t *end);

#endif
