/* How every x86 decode entry walks the rows of its matmul chunk (vec_dot_x86_256.inc, vec_dot_q23k_bf16_x86_256.inc,
 * vec_dot_avx512.c): one loop instead of one per file.
 *
 * Rows go through the type's tile kernel one at a time, each prefetched line by line DISTANCE bytes ahead (0: no
 * software prefetch, for tiles that prefetch their blocks themselves or types measured without it). One sequential
 * stream keeps more misses in flight on one core than the 4 interleaved streams of a row tile (docs/perf-log.md,
 * entry 10). The ow_r16_row_stream() knob (0) brings back the 4-row tiles first.
 *
 * STREAMS = 2: rows r and r + nr/2 go through the tile together, two sequential streams from the chunk's two halves.
 * A lone row's blocks form one FMA chain (4 cycles a block on Zen 4), which bounds a short block loop; two rows are
 * two chains, whose independent work interleaves. Each row's arithmetic is the lone row's, so the same floats. The
 * halves must be far apart: adjacent rows in lockstep (as the 4-row tiles) defeat the hardware prefetcher (2.5x
 * slower decode on Zen 4). Which types take two streams is measured per type (entries 22, 23, 32, 33).
 *
 * The macro is the body of an entry with OW_DOT_ARGS (w, w_stride, x, s, nr) and nb (blocks per row) in scope. TILE
 * is the tile function (R rows from w, `stride` apart, results in s[0..R-1]); the arguments after TILE are the
 * tile's trailing ones, written after an empty one: `OW_X86_ROWS(d, 1, tile, , xs)` passes xs, `(d, 1, tile, )`
 * none. */
#ifndef OW_VEC_DOT_X86_ROWS_H
#define OW_VEC_DOT_X86_ROWS_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

/* the lines of one row, `distance` bytes ahead (prefetch is SSE: any x86-64 target may inline it) */
static inline __attribute__((always_inline)) void ow_prefetch_row(const uint8_t *row, size_t bytes, size_t distance) {
    for (size_t off = 0; off < bytes; off += 64) _mm_prefetch((const char *)(row + distance + off), _MM_HINT_T0);
}

#define OW_X86_ROWS(DISTANCE, STREAMS, TILE, ...)                                                  \
    int r = 0;                                                                                     \
    if (!ow_r16_row_stream())                                                                      \
        for (; r + OW_ROW_TILE <= nr; r += OW_ROW_TILE)                                            \
            TILE(nb, w + (size_t)r * w_stride, w_stride, x, s + r, OW_ROW_TILE __VA_ARGS__);       \
    const size_t distance = (DISTANCE);                                                            \
    if ((STREAMS) == 2) {                                                                          \
        const int half = (nr - r) / 2;                                                             \
        const size_t apart = (size_t)half * w_stride;                                              \
        for (int i = 0; i < half; i++, r++) {                                                      \
            const uint8_t *row = w + (size_t)r * w_stride;                                         \
            float pair[2];                                                                         \
            if (distance) {                                                                        \
                ow_prefetch_row(row, w_stride, distance);                                          \
                ow_prefetch_row(row + apart, w_stride, distance);                                  \
            }                                                                                      \
            TILE(nb, row, apart, x, pair, 2 __VA_ARGS__);                                          \
            s[r] = pair[0];                                                                        \
            s[r + half] = pair[1];                                                                 \
        }                                                                                          \
        r += half;                                                                                 \
    }                                                                                              \
    for (; r < nr; r++) {                                                                          \
        if (distance) ow_prefetch_row(w + (size_t)r * w_stride, w_stride, distance);               \
        TILE(nb, w + (size_t)r * w_stride, w_stride, x, s + r, 1 __VA_ARGS__);                     \
    }

#endif
