/* AVX-512 (F, BW, VL, VNNI) dot kernels, translations of vec_dot_generic.c.
 *
 * Q8_0 R16 (q8_0_r16.h), onewell's repacked Q8_0, has the one tile kernel that takes every vector in one call.
 *
 * Types whose blocks fill 512-bit registers naturally get their own kernels here: Q8_0 (two 32-byte blocks per
 * register), the 256-element K-quants (64 elements per register), F32/F16 (masked tails). The 32-element 4/5-bit
 * types run the 256-bit kernels of vec_dot_x86_256.inc, rebuilt below with EVEX VNNI and mask registers
 * (suffix _avx512_256): their 16-byte blocks would need cross-lane shuffles to fill a 512-bit register. Like the
 * AVX2 builds they stream rows one at a time with prefetch (for Q5_0 in its file layout on Zen 4: 1.8-1.9x the
 * 4-row tiles they used to run, docs/perf-log.md entry 19); Q4_0 and Q5_0 have VNNI prefill tiles of their own
 * (vec_dot_tile_avx512.c). */
#include "vec_dot.h"

#if OW_X86_KERNELS
#include <immintrin.h>

#include "tile_avx2.h"   /* TA_ALL_VECTORS */

#define OW_SUFFIX avx512_256
#define OW_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define OW_VNNI 2
#include "vec_dot_x86_256.inc"
#undef OW_SUFFIX
#undef OW_VNNI

#define OW_INLINE static inline __attribute__((always_inline)) OW_TARGET

OW_INLINE float hsum_ps128(__m128 s) {
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

OW_INLINE float half1(uint16_t h) { return _cvtsh_ss(h); }

/* a 256-bit vector in the low half of a 512-bit one, zeros above */
OW_INLINE __m512i zext256(__m256i v) { return _mm512_inserti64x4(_mm512_setzero_si512(), v, 0); }

/* [lo | hi] */
OW_INLINE __m512i join256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

/* Q8_0 x Q8_0: two blocks per register. Signed weights go in as w ^ 0x80 = w + 128 (unsigned for vpdpbusd);
 * the accumulator starts at -128 * (activation sums), computed once per block pair for the whole row tile. ---- */

static const ow_block_q8_0 zero_q8_0;   /* pads an odd block count: zero quants and zero scale add nothing */

OW_INLINE __m512i qs_pair(const ow_block_q8_0 *b0, const ow_block_q8_0 *b1) {
    return join256(_mm256_loadu_si256((const __m256i *)b0->qs), _mm256_loadu_si256((const __m256i *)b1->qs));
}

/* [d0 x8 | d1 x8] as floats */
OW_INLINE __m512 scale_pair(uint16_t d0, uint16_t d1) {
    return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short)d1), _mm_set1_epi16((short)d0)));
}

OW_INLINE void q8_0_pair_step(const ow_block_q8_0 *x0, const ow_block_q8_0 *x1, const ow_block_q8_0 *const w0[],
                              const int second, __m512 acc[], const int R) {
    const __m512i k80 = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
    const __m512i a = qs_pair(x0, x1);
    const __m512i seed = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, k80, a));
    const __m512 dx = scale_pair(x0->d, x1->d);
    for (int r = 0; r < R; r++) {
        const ow_block_q8_0 *w1 = second ? w0[r] + 1 : &zero_q8_0;
        const __m512i p = _mm512_dpbusd_epi32(seed, _mm512_xor_si512(qs_pair(w0[r], w1), k80), a);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(scale_pair(w0[r]->d, w1->d), dx), acc[r]);
    }
}

OW_INLINE void tile_q8_0(int64_t nb, const uint8_t *w, size_t stride, const void *vx, float *s, const int R) {
    const ow_block_q8_0 *x = vx;
    __m512 acc[OW_ROW_TILE];
    const ow_block_q8_0 *wb[OW_ROW_TILE];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        for (int r = 0; r < R; r++) wb[r] = (const ow_block_q8_0 *)(w + (size_t)r * stride) + b;
        q8_0_pair_step(x + b, x + b + 1, wb, 1, acc, R);
    }
    if (b < nb) {
        for (int r = 0; r < R; r++) wb[r] = (const ow_block_q8_0 *)(w + (size_t)r * stride) + b;
        q8_0_pair_step(x + b, &zero_q8_0, wb, 0, acc, R);
    }
    for (int r = 0; r < R; r++) s[r] = _mm512_reduce_add_ps(acc[r]);
}

/* Q8_0 R16 x its activations (q8_0_r16.h): per group of 16 blocks, 8 loads + 8 vpdpbusd per row, then ONE
 * convert and ONE fma with the 16 scales. Every activation vector of the call is applied to a group while its
 * weights are in registers (R16_BATCH vectors at once) or in L1 (the next batches), so the weights are streamed
 * from memory once per call. Each vector's arithmetic is the same for any n_vec: results do not depend on it. */

#define R16_BATCH 4   /* vectors sharing each weight load: 4 x 4 dpbusd accumulators stay in registers */
#define R16_VECS 16   /* vectors per pass over a row tile (their float accumulators live on the stack) */

/* the 64 bytes at p, or the first 4m of them (the mask) in a row's last, partial group */
OW_INLINE __m512i r16_load(const uint8_t *p, __mmask16 mk, const int FULL) {
    return FULL ? _mm512_loadu_si512((const void *)p) : _mm512_maskz_loadu_epi32(mk, p);
}

/* One group (blocks g.., m of them) of R rows x NV vectors: acc[v][r] += block dots * d_w * d_x, lane k holding
 * block g + k. The seeds remove the 128 * (activation sum) that the unsigned q + 128 weights add. */
OW_INLINE void r16_group(const uint8_t *w, size_t stride, const uint8_t *const *x, int64_t n_cols, int64_t g,
                         int m, __mmask16 mk, const __m512 dw[], __m512 (*acc)[OW_ROW_TILE], size_t prefetch,
                         const int R, const int NV, const int FULL, const int PREFETCH) {
    const int group = FULL ? OW_R16_GROUP : m;   /* a constant in full groups: chunk offsets fold */
    __m512i p[R16_BATCH][OW_ROW_TILE];
    for (int v = 0; v < NV; v++) {
        const __m512i seed = r16_load(x[v] + ow_r16_act_seeds(n_cols) + 4 * g, mk, FULL);
        for (int r = 0; r < R; r++) p[v][r] = seed;
    }
    for (int j = 0; j < OW_R16_CHUNKS; j++) {
        const size_t at = ow_r16_chunk(g, group, j);
        __m512i q[OW_ROW_TILE];
        for (int r = 0; r < R; r++) {
            q[r] = r16_load(w + (size_t)r * stride + at, mk, FULL);
            if (PREFETCH) _mm_prefetch((const char *)(w + (size_t)r * stride + at + prefetch), _MM_HINT_T0);
        }
        for (int v = 0; v < NV; v++) {
            const __m512i a = r16_load(x[v] + at, mk, FULL);
            for (int r = 0; r < R; r++) p[v][r] = _mm512_dpbusd_epi32(p[v][r], q[r], a);
        }
    }
    for (int v = 0; v < NV; v++) {
        const __m512 dx = _mm512_castsi512_ps(r16_load(x[v] + ow_r16_act_scales(n_cols) + 4 * g, mk, FULL));
        for (int r = 0; r < R; r++)
            acc[v][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[v][r]), _mm512_mul_ps(dx, dw[r]), acc[v][r]);
    }
}

/* One pass over R rows for the nv <= VECS vectors x[0..nv): y[v * y_stride + r]. */
OW_INLINE void r16_pass(int64_t n_cols, const uint8_t *w, size_t stride, const uint8_t *const *x, int nv, float *y,
                        int64_t y_stride, const int R, const int VECS) {
    const int64_t nb = n_cols / OW_QK;
    const size_t prefetch = ow_r16_tile_prefetch();   /* for the first vectors only: the others find the group in L1 */
    __m512 acc[VECS][OW_ROW_TILE];
    for (int v = 0; v < nv; v++)
        for (int r = 0; r < R; r++) acc[v][r] = _mm512_setzero_ps();
    for (int64_t g = 0; g < nb; g += OW_R16_GROUP) {
        const int m = ow_r16_group_blocks(nb, g);
        const __mmask16 mk = (__mmask16)((1u << m) - 1);
        __m512 dw[OW_ROW_TILE];
        for (int r = 0; r < R; r++) {
            const uint8_t *scales = w + (size_t)r * stride + (size_t)n_cols + 2 * (size_t)g;
            dw[r] = _mm512_cvtph_ps(m == OW_R16_GROUP ? _mm256_loadu_si256((const __m256i *)scales)
                                                      : _mm256_maskz_loadu_epi16(mk, scales));
        }
        /* the first vectors of the call stream the group from memory (and prefetch, when asked): a variant each,
         * so the weight loads carry no branch */
#define R16_GROUP(NV, FULL)                                                                               \
    (v == 0 && prefetch ? r16_group(w, stride, x + v, n_cols, g, m, mk, dw, acc + v, prefetch, R, NV, FULL, 1) \
                        : r16_group(w, stride, x + v, n_cols, g, m, mk, dw, acc + v, 0, R, NV, FULL, 0))
        int v = 0;
        if (m == OW_R16_GROUP) {
            if (VECS > 1)
                for (; v + R16_BATCH <= nv; v += R16_BATCH) R16_GROUP(R16_BATCH, 1);
            for (; v < nv; v++) R16_GROUP(1, 1);
        } else {
            if (VECS > 1)
                for (; v + R16_BATCH <= nv; v += R16_BATCH) R16_GROUP(R16_BATCH, 0);
            for (; v < nv; v++) R16_GROUP(1, 0);
        }
#undef R16_GROUP
    }
    for (int v = 0; v < nv; v++)
        for (int r = 0; r < R; r++) y[(int64_t)v * y_stride + r] = _mm512_reduce_add_ps(acc[v][r]);
}

OW_INLINE void tile_q8_0r16(int64_t n_cols, const uint8_t *w, size_t stride, const uint8_t *xq, size_t x_stride,
                            int n_vec, float *y, int64_t y_stride, const int R) {
    const uint8_t *x[R16_VECS];
    if (n_vec == 1) {   /* decode: accumulators in registers */
        x[0] = xq;
        r16_pass(n_cols, w, stride, x, 1, y, y_stride, R, 1);
        return;
    }
    for (int v0 = 0; v0 < n_vec; v0 += R16_VECS) {
        const int nv = n_vec - v0 < R16_VECS ? n_vec - v0 : R16_VECS;
        for (int v = 0; v < nv; v++) x[v] = xq + (size_t)(v0 + v) * x_stride;
        r16_pass(n_cols, w, stride, x, nv, y + (int64_t)v0 * y_stride, y_stride, R, R16_VECS);
    }
}

/* Software prefetch of the lines of one weight block `distance` bytes ahead (0 = off): the K-quant kernels
 * stream rows like the R16 one and gain from it the same way (docs/perf-log.md, entry 4). */
OW_INLINE void prefetch_block(const uint8_t *block, size_t bytes, size_t distance) {
    if (!distance) return;
    for (size_t off = 0; off < bytes; off += 64) _mm_prefetch((const char *)(block + distance + off), _MM_HINT_T0);
}

/* Q4_K / Q5_K x Q8_K: 64 elements (two sub-blocks) per register; vpdpwssd applies the sub-block scales ------- */

OW_INLINE __m128i k4_scales_mins(const uint8_t *packed) {
    const uint32_t p0 = ow_read_u32(packed), p1 = ow_read_u32(packed + 4), p2 = ow_read_u32(packed + 8);
    const uint32_t sc_lo = p0 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (p2 & 0x0f0f0f0fu) | (((p0 >> 6) & 0x03030303u) << 4);
    const uint32_t mn_lo = p1 & 0x3f3f3f3fu;
    const uint32_t mn_hi = ((p2 >> 4) & 0x0f0f0f0fu) | (((p1 >> 6) & 0x03030303u) << 4);
    return _mm_set_epi32((int)mn_hi, (int)mn_lo, (int)sc_hi, (int)sc_lo);
}

/* word index vector: words 0..15 pick word i0, words 16..31 pick word i1 */
OW_INLINE __m512i pick_two_words(int i0, int i1) {
    return join256(_mm256_set1_epi16((short)i0), _mm256_set1_epi16((short)i1));
}

/* One Q4_K / Q5_K block unpacked into registers: elements 64c..64c+63 in q[c] (0..15, or 0..31 with the fifth bit),
 * the word vector that applies their two sub-block scales, the 8 mins as words, d and dmin. The decode kernel and
 * the prefill tile (below) both start from it, so their arithmetic cannot drift apart. */
typedef struct { __m512i q[4], scale[4]; __m128i mins; float d, dmin; } k45_block;

OW_INLINE k45_block k45_unpack(const uint8_t *wrow, int64_t b, const int HIGH) {
    const ow_block_q4_K *b4 = (const ow_block_q4_K *)wrow + b;
    const ow_block_q5_K *b5 = (const ow_block_q5_K *)wrow + b;
    const __m512i low4 = _mm512_set1_epi8(0x0f), bit4 = _mm512_set1_epi8(0x10);
    k45_block k;
    k.d = half1(HIGH ? b5->d : b4->d);
    k.dmin = half1(HIGH ? b5->dmin : b4->dmin);
    const uint8_t *qs = HIGH ? b5->qs : b4->qs;
    const __m256i sm16 = _mm256_cvtepu8_epi16(k4_scales_mins(HIGH ? b5->scales : b4->scales));
    k.mins = _mm256_extracti128_si256(sm16, 1);
    const __m512i scales = _mm512_castsi256_si512(sm16);   /* only words 0..7 (the scales) are picked */
    __m512i hbits = _mm512_setzero_si512();
    if (HIGH) {   /* lanes 0..31 see qh[l], lanes 32..63 see qh[l] >> 1: bit 2c then serves both halves */
        const __m256i qh = _mm256_loadu_si256((const __m256i *)b5->qh);
        hbits = join256(qh, _mm256_srli_epi16(qh, 1));
    }
    for (int c = 0; c < 4; c++) {
        const __m256i q4 = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        k.q[c] = _mm512_and_si512(join256(q4, _mm256_srli_epi16(q4, 4)), low4);
        if (HIGH) {   /* q <= 15, so adding 16 where the bit is set puts it on top */
            const __mmask64 top = _mm512_test_epi8_mask(hbits, _mm512_set1_epi8((char)(1 << (2 * c))));
            k.q[c] = _mm512_mask_add_epi8(k.q[c], top, k.q[c], bit4);
        }
        k.scale[c] = _mm512_permutexvar_epi16(pick_two_words(2 * c, 2 * c + 1), scales);
    }
    return k;
}

/* One unpacked block times one Q8_K activation block: the scaled sum into acc, the min term into acc_min. */
OW_INLINE void k45_dot(const k45_block *k, const ow_block_q8_K *xb, __m512 *acc, __m128 *acc_min) {
    const __m256i bsums = _mm256_loadu_si256((const __m256i *)xb->bsums);
    const __m128i sub_sums = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
    const __m128i min_dot = _mm_madd_epi16(k->mins, sub_sums);
    *acc_min = _mm_fmadd_ps(_mm_set1_ps(-k->dmin * xb->d), _mm_cvtepi32_ps(min_dot), *acc_min);
    __m512i isum = _mm512_setzero_si512();
    for (int c = 0; c < 4; c++)
        isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(k->q[c], _mm512_loadu_si512((const void *)(xb->qs + 64 * c))),
                                   k->scale[c]);
    *acc = _mm512_fmadd_ps(_mm512_set1_ps(k->d * xb->d), _mm512_cvtepi32_ps(isum), *acc);
}

OW_INLINE void tile_q45_K(int64_t nb, const uint8_t *w, size_t stride, const void *vx, float *s, const int R,
                          const int HIGH) {
    const ow_block_q8_K *x = vx;
    __m512 acc[OW_ROW_TILE];
    __m128 acc_min[OW_ROW_TILE];
    const size_t prefetch = ow_r16_prefetch();
    for (int r = 0; r < R; r++) { acc[r] = _mm512_setzero_ps(); acc_min[r] = _mm_setzero_ps(); }
    for (int64_t b = 0; b < nb; b++) {
        for (int r = 0; r < R; r++) {
            const uint8_t *wrow = w + (size_t)r * stride;
            prefetch_block(wrow + b * (HIGH ? sizeof(ow_block_q5_K) : sizeof(ow_block_q4_K)),
                           HIGH ? sizeof(ow_block_q5_K) : sizeof(ow_block_q4_K), prefetch);
            const k45_block k = k45_unpack(wrow, b, HIGH);
            k45_dot(&k, x + b, &acc[r], &acc_min[r]);
        }
    }
    for (int r = 0; r < R; r++) s[r] = _mm512_reduce_add_ps(acc[r]) + hsum_ps128(acc_min[r]);
}

OW_INLINE void tile_q4_K(int64_t nb, const uint8_t *w, size_t stride, const void *vx, float *s, const int R) {
    tile_q45_K(nb, w, stride, vx, s, R, 0);
}
OW_INLINE void tile_q5_K(int64_t nb, const uint8_t *w, size_t stride, const void *vx, float *s, const int R) {
    tile_q45_K(nb, w, stride, vx, s, R, 1);
}

/* Q6_K x Q8_K: 64 elements per register; -32 offset folded in from the activation's 16-element sums ------ */

/* word index vector for 64 elements: words 8j..8j+7 (elements 16j..16j+15) pick scale 4m + j */
OW_INLINE __m512i pick_four_words(int m) {
    return join256(_mm256_set_m128i(_mm_set1_epi16((short)(4 * m + 1)), _mm_set1_epi16((short)(4 * m))),
                   _mm256_set_m128i(_mm_set1_epi16((short)(4 * m + 3)), _mm_set1_epi16((short)(4 * m + 2))));
}

/* One Q6_K block unpacked: elements 64k..64k+63 (half k/2, low nibbles of ql for even k, high for odd) in q[k]
 * with their fifth and sixth bits, the word vectors of their scales, the scales as words, d. */
typedef struct { __m512i q[4], scale[4]; __m256i sc16; float d; } k6_block;

OW_INLINE k6_block k6_unpack(const ow_block_q6_K *wb) {
    const __m512i low4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
    k6_block k;
    k.d = half1(wb->d);
    k.sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)wb->scales));
    const __m512i scales = _mm512_castsi256_si512(k.sc16);
    for (int half = 0; half < 2; half++) {
        const __m512i ql = _mm512_loadu_si512((const void *)(wb->ql + 64 * half));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(wb->qh + 32 * half));
        const __m512i qh2 = join256(qh, _mm256_srli_epi16(qh, 2));   /* [bits 0-1 | 2-3] and [4-5 | 6-7] */
        k.q[2 * half] = _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_and_si512(_mm512_slli_epi16(qh2, 4), bits45));
        k.q[2 * half + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), _mm512_and_si512(qh2, bits45));
        k.scale[2 * half] = _mm512_permutexvar_epi16(pick_four_words(2 * half), scales);
        k.scale[2 * half + 1] = _mm512_permutexvar_epi16(pick_four_words(2 * half + 1), scales);
    }
    return k;
}

/* One unpacked block times one Q8_K activation block into acc; the -32 offset comes in from the 16-element sums. */
OW_INLINE void k6_dot(const k6_block *k, const ow_block_q8_K *xb, __m512 *acc) {
    const __m256i bsums = _mm256_loadu_si256((const __m256i *)xb->bsums);
    const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(k->sc16, bsums), 5);
    __m512i isum = zext256(_mm256_sub_epi32(_mm256_setzero_si256(), offset));
    for (int q = 0; q < 4; q++)
        isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(k->q[q], _mm512_loadu_si512((const void *)(xb->qs + 64 * q))),
                                   k->scale[q]);
    *acc = _mm512_fmadd_ps(_mm512_set1_ps(k->d * xb->d), _mm512_cvtepi32_ps(isum), *acc);
}

OW_INLINE void tile_q6_K(int64_t nb, const uint8_t *w, size_t stride, const void *vx, float *s, const int R) {
    const ow_block_q8_K *x = vx;
    __m512 acc[OW_ROW_TILE];
    const size_t prefetch = ow_r16_prefetch();
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        for (int r = 0; r < R; r++) {
            const ow_block_q6_K *wb = (const ow_block_q6_K *)(w + (size_t)r * stride) + b;
            prefetch_block((const uint8_t *)wb, sizeof *wb, prefetch);
            const k6_block k = k6_unpack(wb);
            k6_dot(&k, x + b, &acc[r]);
        }
    }
    for (int r = 0; r < R; r++) s[r] = _mm512_reduce_add_ps(acc[r]);
}

/* F32 x F32 and F16 x F16: 16 elements per step, masked loads for the tail ------------------------------- */

OW_INLINE void tile_f32(int64_t n, const uint8_t *w, size_t stride, const void *vx, float *s, const int R) {
    const float *x = vx;
    __m512 acc[OW_ROW_TILE];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 a = _mm512_loadu_ps(x + i);
        for (int r = 0; r < R; r++)
            acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(w + (size_t)r * stride + 4 * i), a, acc[r]);
    }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m512 a = _mm512_maskz_loadu_ps(m, x + i);
        for (int r = 0; r < R; r++)
            acc[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + (size_t)r * stride + 4 * i), a, acc[r]);
    }
    for (int r = 0; r < R; r++) s[r] = _mm512_reduce_add_ps(acc[r]);
}

/* --- public entries ------------------------------------------------------------------------------------------ */

/* rows one by one, or (the K-quants) two at a time from the chunk's two halves: two sequential streams whose
 * independent work interleaves (a lone row's kept Q6_K decode near 10 GB/s on one core of the Xeon, perf-log entry
 * 32). The walk of vec_dot_x86_rows.h; no prefetch there, since these tiles prefetch their blocks themselves. */
#define OW_AVX512_ENTRY(name, tile, per_block, STREAMS)                                            \
    OW_TARGET void vec_dot_##name##_avx512(OW_DOT_ARGS) {                                          \
        const int64_t nb = n_cols / (per_block);                                                   \
        OW_X86_ROWS(0, STREAMS, tile, )                                                            \
    }

OW_AVX512_ENTRY(q8_0_q8_0, tile_q8_0, OW_QK, 1)
OW_AVX512_ENTRY(q4_K_q8_K, tile_q4_K, OW_QK_K, 2)
OW_AVX512_ENTRY(q5_K_q8_K, tile_q5_K, OW_QK_K, 2)
OW_AVX512_ENTRY(q6_K_q8_K, tile_q6_K, OW_QK_K, 2)
OW_AVX512_ENTRY(f32_f32, tile_f32, 1, 1)

/* --- K-quant prefill tiles: each block of a row unpacked once for KT_VECS vectors ------------------------------
 * Without them a prefill matmul ran the decode kernel above once per vector, unpacking every block (nibbles, the
 * fifth bits, the scale permutes) again for each. Per (row, vector) the arithmetic is the decode kernel's, block
 * after block in the same order, so batched and token-by-token results are bit-identical
 * (tests/test_native_kernels.py::test_batched_matmul_equals_one_vector_at_a_time). A row (<= 2.8 KB for 4,864
 * columns of Q4_K) comes from memory for the first group of vectors and from L1 for the others. */
#define KT_VECS 4

OW_INLINE void tile_q45_K_vecs(int64_t nb, const uint8_t *wrow, const uint8_t *x, size_t x_stride, float *y,
                               int64_t y_stride, const int NV, const int HIGH) {
    __m512 acc[KT_VECS];
    __m128 acc_min[KT_VECS];
    for (int v = 0; v < NV; v++) { acc[v] = _mm512_setzero_ps(); acc_min[v] = _mm_setzero_ps(); }
    for (int64_t b = 0; b < nb; b++) {
        const k45_block k = k45_unpack(wrow, b, HIGH);
        for (int v = 0; v < NV; v++)
            k45_dot(&k, (const ow_block_q8_K *)(x + (size_t)v * x_stride) + b, &acc[v], &acc_min[v]);
    }
    for (int v = 0; v < NV; v++) y[(int64_t)v * y_stride] = _mm512_reduce_add_ps(acc[v]) + hsum_ps128(acc_min[v]);
}

OW_INLINE void tile_q6_K_vecs(int64_t nb, const uint8_t *wrow, const uint8_t *x, size_t x_stride, float *y,
                              int64_t y_stride, const int NV) {
    __m512 acc[KT_VECS];
    for (int v = 0; v < NV; v++) acc[v] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const k6_block k = k6_unpack((const ow_block_q6_K *)wrow + b);
        for (int v = 0; v < NV; v++) k6_dot(&k, (const ow_block_q8_K *)(x + (size_t)v * x_stride) + b, &acc[v]);
    }
    for (int v = 0; v < NV; v++) y[(int64_t)v * y_stride] = _mm512_reduce_add_ps(acc[v]);
}

/* One row against every vector, KT_VECS at a time; KIND (a constant at each call) 0 = Q4_K, 1 = Q5_K, 2 = Q6_K */
#define KT_CALL(NV)                                                                                            \
    (KIND == 2 ? tile_q6_K_vecs(nb, wrow, x + (size_t)v * x_stride, x_stride, y + (int64_t)v * y_stride, y_stride, NV) \
               : tile_q45_K_vecs(nb, wrow, x + (size_t)v * x_stride, x_stride, y + (int64_t)v * y_stride, y_stride, NV, \
                                 KIND))
OW_INLINE void tile_k_row(int64_t nb, const uint8_t *wrow, const uint8_t *x, size_t x_stride, int n_vec, float *y,
                          int64_t y_stride, const int KIND) {
    TA_ALL_VECTORS(KT_CALL, n_vec);
}
#undef KT_CALL

/* The tile entries (any_rows: nr is a whole matmul chunk): one vector streams every row through the decode entry;
 * several go row by row, KT_VECS vectors per pass over the row. */
#define OW_AVX512_K_TILE(name, kind)                                                                           \
    OW_TARGET void vec_dot_##name##_tile_avx512(OW_TILE_ARGS) {                                                \
        if (n_vec < 2) { vec_dot_##name##_avx512(n_cols, w, w_stride, nr, x, y); return; }                     \
        for (int r = 0; r < nr; r++)                                                                           \
            tile_k_row(n_cols / OW_QK_K, w + (size_t)r * w_stride, x, x_stride, n_vec, y + r, y_stride, kind); \
    }
OW_AVX512_K_TILE(q4_K_q8_K, 0)
OW_AVX512_K_TILE(q5_K_q8_K, 1)
OW_AVX512_K_TILE(q6_K_q8_K, 2)
#undef OW_AVX512_K_TILE


/* Decode (one activation vector): rows one after another, so the weights are a single sequential stream, with
 * software prefetch ahead of it and two dpbusd chains per group. On one core this streams faster than 4-row tiles,
 * whose 4 interleaved streams leave fewer misses in flight (docs/perf-log.md, entry 3). */
OW_INLINE void r16_row_stream_group(const uint8_t *wr, const uint8_t *x, int64_t n_cols, int64_t g, int m,
                                    __mmask16 mk, size_t prefetch, __m512 *acc, const int FULL) {
    const int group = FULL ? OW_R16_GROUP : m;
    __m512i p0 = r16_load(x + ow_r16_act_seeds(n_cols) + 4 * g, mk, FULL), p1 = _mm512_setzero_si512();
    for (int j = 0; j < OW_R16_CHUNKS; j += 2) {
        const size_t a0 = ow_r16_chunk(g, group, j), a1 = ow_r16_chunk(g, group, j + 1);
        if (prefetch) {   /* one per 64-byte line: a full group's chunks are one line each */
            _mm_prefetch((const char *)(wr + a0 + prefetch), _MM_HINT_T0);
            _mm_prefetch((const char *)(wr + a1 + prefetch), _MM_HINT_T0);
        }
        p0 = _mm512_dpbusd_epi32(p0, r16_load(wr + a0, mk, FULL), r16_load(x + a0, mk, FULL));
        p1 = _mm512_dpbusd_epi32(p1, r16_load(wr + a1, mk, FULL), r16_load(x + a1, mk, FULL));
    }
    const uint8_t *scales = wr + (size_t)n_cols + 2 * (size_t)g;
    const __m512 dw = _mm512_cvtph_ps(FULL ? _mm256_loadu_si256((const __m256i *)scales) : _mm256_maskz_loadu_epi16(mk, scales));
    const __m512 dx = _mm512_castsi512_ps(r16_load(x + ow_r16_act_scales(n_cols) + 4 * g, mk, FULL));
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(p0, p1)), _mm512_mul_ps(dx, dw), *acc);
}

/* one row's groups into *acc, the same steps whether it runs alone or beside another row */
OW_INLINE void r16_row_groups(const uint8_t *wr, const uint8_t *x, int64_t n_cols, int64_t nb, size_t prefetch,
                              __m512 *acc, const uint8_t *wr2, __m512 *acc2) {
    int64_t g = 0;
    for (; g + OW_R16_GROUP <= nb; g += OW_R16_GROUP) {
        r16_row_stream_group(wr, x, n_cols, g, OW_R16_GROUP, (__mmask16)0xffff, prefetch, acc, 1);
        if (wr2) r16_row_stream_group(wr2, x, n_cols, g, OW_R16_GROUP, (__mmask16)0xffff, prefetch, acc2, 1);
    }
    if (g < nb) {
        const int m = (int)(nb - g);
        r16_row_stream_group(wr, x, n_cols, g, m, (__mmask16)((1u << m) - 1), prefetch, acc, 0);
        if (wr2) r16_row_stream_group(wr2, x, n_cols, g, m, (__mmask16)((1u << m) - 1), prefetch, acc2, 0);
    }
}

/* Decode of a whole chunk (the tile is any_rows): rows r and r + nr/2 go group by group together, two sequential
 * streams far apart, as the 256-bit kernels' STREAMS = 2 (vec_dot_x86_256.inc). One stream left a core's memory
 * reads short of what two keep in flight: Qwen Q8_0 decode 1.045 / 1.031 (1t / 2t) on Zen 4 (docs/perf-log.md,
 * entry 23). Each row's steps are a lone row's, so the same floats. */
OW_INLINE void r16_row_stream(int64_t n_cols, const uint8_t *w, size_t stride, const uint8_t *x, int nr, float *y) {
    const int64_t nb = n_cols / OW_QK;
    const size_t prefetch = ow_r16_prefetch();
    const int half = nr / 2;
    int r = 0;
    for (; r < half; r++) {
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        r16_row_groups(w + (size_t)r * stride, x, n_cols, nb, prefetch, &a0, w + (size_t)(r + half) * stride, &a1);
        y[r] = _mm512_reduce_add_ps(a0);
        y[r + half] = _mm512_reduce_add_ps(a1);
    }
    for (r += half; r < nr; r++) {
        __m512 acc = _mm512_setzero_ps();
        r16_row_groups(w + (size_t)r * stride, x, n_cols, nb, prefetch, &acc, NULL, NULL);
        y[r] = _mm512_reduce_add_ps(acc);
    }
}

/* any_rows: a matmul chunk per call; decode streams it (above), prefill runs 4-row tiles over it */
OW_TARGET void vec_dot_q8_0r16_q8_0r16_avx512(OW_TILE_ARGS) {
    if (n_vec == 1 && ow_r16_row_stream()) {
        r16_row_stream(n_cols, w, w_stride, x, nr, y);
        return;
    }
    /* prefill: vectors in blocks whose activations stay in L1 while the chunk's rows pass (ow_r16_vector_block) */
    const int block = ow_r16_vector_block(x_stride, n_vec, R16_VECS);
    for (int b0 = 0; b0 < n_vec; b0 += block) {
        const int nb = n_vec - b0 < block ? n_vec - b0 : block;
        const uint8_t *xb = (const uint8_t *)x + (size_t)b0 * x_stride;
        float *yb = y + (int64_t)b0 * y_stride;
        int r = 0;
        for (; r + OW_ROW_TILE <= nr; r += OW_ROW_TILE)
            tile_q8_0r16(n_cols, w + (size_t)r * w_stride, w_stride, xb, x_stride, nb, yb + r, y_stride, OW_ROW_TILE);
        for (; r < nr; r++)
            tile_q8_0r16(n_cols, w + (size_t)r * w_stride, w_stride, xb, x_stride, nb, yb + r, y_stride, 1);
    }
}

#endif
