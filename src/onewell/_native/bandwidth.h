/* Memory-bandwidth probe: how fast can this machine stream memory, per thread count. The ceiling every
 * decode step is measured against (bytes of weights per token / seconds per token / this number). */
#ifndef ONEWELL_BANDWIDTH_H
#define ONEWELL_BANDWIDTH_H

#include <stdint.h>

#include "threadpool.h"

typedef enum {
    OW_BW_READ = 0,     /* sum-reduce of one array of doubles: traffic = its bytes */
    OW_BW_TRIAD = 1,    /* a = b + s*c with ordinary stores: traffic counted as 3 arrays (the write-allocate
                           read of `a` that ordinary stores cause is real but not counted, as in STREAM) */
    OW_BW_TRIAD_NT = 2, /* the same with non-temporal (streaming) stores: no write-allocate; 3 arrays */
} ow_bw_kind;

/* Allocates arrays (together about `total_bytes`, rounded down to whole cache lines; huge pages asked for),
 * has each pool thread first-touch the range it will later stream (static partition), then times `reps`
 * repetitions of `kind` across the pool. Outputs: seconds[reps] (wall time of each repetition),
 * *traffic_bytes (bytes counted per repetition: divide to get bandwidth), *checksum (read: the sum, which is
 * the element count as every element is 1.0; triad: the sum of `a` after the last repetition, every element
 * 1 + 3*2 = 7, so 7 * element count).
 * Returns 0, or -1 if memory could not be had (nothing is leaked). The best ISA path is ow_isa_best()'s. */
int ow_bandwidth_run(ow_pool *p, ow_bw_kind kind, int64_t total_bytes, int reps, double *seconds,
                     int64_t *traffic_bytes, double *checksum);

/* The READ kernel over a caller's array (across the pool, static partition, partial sums per thread added
 * in thread order): lets a test compare the kernel's sum with an independent one. */
double ow_bandwidth_read_sum(ow_pool *p, const double *x, int64_t n);

/* The ISA path the probe uses: "avx512", "avx2" or "generic". */
const char *ow_bandwidth_isa(void);

#endif
