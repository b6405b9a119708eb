/* Which SIMD paths this CPU (and OS) can run; probed once (x86: cpuid/xgetbv; aarch64: getauxval on Linux,
 * sysctlbyname on macOS). */
#ifndef ONEWELL_CPU_FEATURES_H
#define ONEWELL_CPU_FEATURES_H

#include <stddef.h>

/* ISA levels. Each CPU family has its own ladder above generic (x86: avx2 < avxvnni < avx512; aarch64: neon <
 * dotprod); a CPU only ever reaches levels of its own family and runs the levels of it that it supports (an
 * AVX-512 CPU without AVX-VNNI, Zen 4, has no avxvnni level). Compare levels with ow_isa_allowed, not with <. */
typedef enum {
    OW_ISA_GENERIC = 0,
    OW_ISA_AVX2 = 1,
    OW_ISA_AVX512 = 2,
    OW_ISA_NEON = 3,     /* AdvSIMD (every aarch64 CPU) */
    OW_ISA_DOTPROD = 4,  /* + the dot-product extension (sdot/udot, Armv8.2 FEAT_DotProd) */
    OW_ISA_AVXVNNI = 5,  /* AVX2 + AVX-VNNI's 256-bit vpdpbusd (Intel since Alder Lake, AMD Zen 5) */
} ow_isa;

typedef struct {
    int avx2, fma, f16c, avx_vnni;                   /* AVX2 family */
    int avx512f, avx512bw, avx512vl, avx512_vnni;    /* AVX-512 family */
    int avx512_bf16;                                 /* vdpbf16ps (Zen 4+, Sapphire Rapids+): the BF16 kernels */
    int amx_tile;                                    /* Intel AMX (reported; picks ow_default_wide_tiles) */
    int neon, dotprod, i8mm;                         /* aarch64: AdvSIMD, sdot/udot, smmla (i8mm is reported only) */
    int amd, intel, family, model;                   /* x86: vendor and display family / model (cpuid leaf 1) */
    int l1d_kib;                                     /* x86: level-1 data cache per core, KiB (0: not reported) */
} ow_cpu_features;

const ow_cpu_features *ow_cpu(void);
/* The decode kernels' software prefetch distance (bytes ahead of the weight stream, 0 = off) measured best on CPUs
 * like f: a table of the machines it was measured on (docs/perf-log.md, entries 3, 19, 41 and 46), 8 KiB elsewhere. */
size_t ow_default_prefetch(const ow_cpu_features *f);
/* ... of the F16 decode streams (2 bytes a weight), where measured apart: 16 KiB on Intel Xeons with AMX (1.09-1.15x
 * faster F16 decode there than at 8 KiB, perf-log entry 24); elsewhere ow_default_prefetch. */
size_t ow_default_f16_prefetch(const ow_cpu_features *f);
/* 1 where 512-bit registers run at full width on two ports, so prefill tiles gain from holding two rows per zmm
 * register, and the F16 / BF16 float GEMMs from 512-bit panels (Intel Xeons with AMX; measured on one, perf-log
 * entries 24 and 28); 0 elsewhere: Zen 4 splits 512-bit work into two halves, some earlier Intel CPUs have one
 * 512-bit FMA unit, and Zen 5 was never measured. */
int ow_default_wide_tiles(const ow_cpu_features *f);
/* 1 where prefill is faster as a float GEMM than through the exact tiles: measured on an Intel Xeon with AMX (Q8_0
 * on the AVX2 paths 1.18-1.19x, perf-log entry 25; F16 / BF16 1.33-1.43x, entry 28), where the tiles' conversions
 * share the FMA ports. Not yet measured on AMD, whose conversions run on other pipes than its multiplies (entry
 * 20): 1 until measured. */
int ow_default_float_gemm(const ow_cpu_features *f);
/* 1 where the float GEMM builds its next weight panel between the micro-kernel calls of this one (its shuffles and
 * loads beside the FMAs): needs both 16 KiB panels and the vectors' lines in L1, so CPUs with 48 KiB or more of L1
 * data (within 1 % either way on the Xeon of perf-log entry 28); 32 KiB L1s (Zen 3, Zen 4) build each panel in
 * turn, as before. Same floats either way. */
int ow_default_gemm_overlap(const ow_cpu_features *f);
/* 1 where a Q8_0 GEMM of the AVX2 paths is faster in int8 with 8 rows in the lanes than in floats (2: on the AVX2
 * path, the weights' signs by xor + sub), and the other 32-element types and the K-quants than their tiles.
 * Measured on an Intel Xeon with AMX, whose cores are Alder Lake's P-cores (perf-log entries 29, 30): Q8_0 on
 * AVX-VNNI (vnni 1) 2.1x, AVX2 1.17x (vpsignb; xor + sub 1.07x); Qwen Q4_K_M's K-quants 1.07-1.35x. 3 on the AVX2
 * path of AMD family 0x17 (entry 41): Q8_0 in floats there (1.13-1.17x the int8 GEMM), and since entry 45 IQ4_NL,
 * the other signed type (1.15-1.17x); the other types in int8. */
#define OW_ROWS_GEMM_AVX2 0
#define OW_ROWS_GEMM_AVX2_VNNI 1
#define OW_ROWS_GEMM_AVX512 2
int ow_default_rows_gemm(const ow_cpu_features *f, int path);   /* path: OW_ROWS_GEMM_* */
/* 1 where the AVX2 path repacks Q8_0, Q4_1, Q5_0, Q4_0, IQ4_NL, Q4_K, Q5_K, Q6_K and IQ4_XS matrices to their R8
 * layouts (kernels/q8_0_r8.h, q4_r8.h, qk_r8.h) at load: AMD family 0x17, where they decode 1.3x (Q8_0, perf-log
 * entry 42), 1.45-1.70x (Q4_1, Q5_0, Q4_0: entry 43), 1.16-1.45x (Q4_K, Q5_K, Q6_K kernels: entry 44) and
 * 1.4-1.8x (IQ4_NL, IQ4_XS kernels: entry 45) the file layouts; 0
 * elsewhere (never measured: the layouts' win comes from 256-bit work split into two µops, which later CPUs do
 * not). */
int ow_default_r8(const ow_cpu_features *f);
/* Best ISA the CPU supports, capped by the environment variable ONEWELL_ISA (generic|avx2|avxvnni|avx512|neon|
 * dotprod: the best supported level at or below it; a level of the other CPU family, or an unknown name, does not
 * cap). */
ow_isa ow_isa_best(void);
/* 1 if level isa may run here: generic, or a level of this CPU's family that it supports, not above ow_isa_best(). */
int ow_isa_allowed(ow_isa isa);
const char *ow_isa_name(ow_isa isa);
/* The level named name ("generic", "avx2", ...), -1 for an unknown name. */
int ow_isa_from_name(const char *name);

#endif
